//! The `[[cache.refresh]]` rules, compiled: which heuristic lifetime a response gets by
//! its URL (Squid's `refresh_pattern`). Vocabulary: configuration below it, the cache's
//! `Heuristic` the result; used by the fill when it builds a storage policy.

use regex::{Regex, RegexBuilder};
use weir_cache::Heuristic;

use crate::config::{CacheConfig, RefreshRule};

/// The compiled rules, in order.
#[derive(Debug, Default)]
pub(crate) struct RefreshRules {
    rules: Vec<(Regex, Heuristic)>,
}

/// Compiles a rule's pattern; the error says why it is not a pattern.
pub(crate) fn compile(rule: &RefreshRule) -> Result<Regex, String> {
    RegexBuilder::new(&rule.pattern)
        .case_insensitive(rule.ignore_case)
        .build()
        .map_err(|e| format!("`{}` is not a regular expression: {e}", rule.pattern))
}

impl RefreshRules {
    /// The rules of a checked configuration (`weir check` refused bad patterns).
    pub(crate) fn new(cache: &CacheConfig) -> RefreshRules {
        let rules = cache
            .refresh
            .iter()
            .filter_map(|rule| {
                let regex = compile(rule).ok()?;
                let heuristic = Heuristic {
                    fraction: rule.percent.map_or(cache.heuristic_fraction, |p| p / 100.0),
                    min: rule.min.0,
                    max: rule.max.unwrap_or(cache.heuristic_max).0,
                };
                Some((regex, heuristic))
            })
            .collect();
        RefreshRules { rules }
    }

    /// The heuristic of the first rule matching `url`, if any.
    pub(crate) fn matching(&self, url: &str) -> Option<Heuristic> {
        self.rules
            .iter()
            .find(|(regex, _)| regex.is_match(url))
            .map(|(_, h)| *h)
    }

    /// Whether there are none (the common case: no regex runs on a fill).
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Seconds;

    fn rule(
        pattern: &str,
        ignore_case: bool,
        percent: Option<f32>,
        max: Option<f64>,
    ) -> RefreshRule {
        RefreshRule {
            pattern: pattern.into(),
            ignore_case,
            min: Seconds::from_secs(60.0),
            percent,
            max: max.map(Seconds::from_secs),
        }
    }

    #[test]
    fn the_first_matching_rule_wins_and_defaults_come_from_the_cache() {
        let cache = CacheConfig {
            refresh: vec![
                rule(r"\.jpg$", true, Some(50.0), Some(600.0)),
                rule("^http://a\\.example/", false, None, None),
            ],
            ..CacheConfig::default()
        };
        let rules = RefreshRules::new(&cache);
        let jpg = rules.matching("http://a.example/x.JPG").unwrap();
        assert_eq!((jpg.fraction, jpg.max), (0.5, Duration::from_secs(600)));
        let a = rules.matching("http://a.example/page").unwrap();
        assert_eq!(a.fraction, cache.heuristic_fraction);
        assert_eq!(a.max, cache.heuristic_max.0);
        assert_eq!(a.min, Duration::from_secs(60));
        assert!(rules.matching("http://b.example/page").is_none());
        assert!(!rules.is_empty());
    }

    #[test]
    fn a_bad_pattern_says_why() {
        let e = compile(&rule("(", false, None, None)).unwrap_err();
        assert!(e.contains("is not a regular expression"), "{e}");
    }
}
