//! `[[cache.refresh]]`: heuristic freshness by URL, the shape of Squid's
//! `refresh_pattern`. The first rule whose pattern matches a response's URL sets how
//! long it stays fresh when it carries no explicit freshness.

use serde::Deserialize;

use super::units::Seconds;

/// One `[[cache.refresh]]` rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefreshRule {
    /// A regular expression matched against the URL (`http://host/path?query`).
    pub pattern: String,
    /// Match without regard to case (Squid's `-i`). Default: false.
    #[serde(default)]
    pub ignore_case: bool,
    /// The shortest heuristic lifetime; a response without `Last-Modified` gets it.
    /// Default: 0.
    #[serde(default = "no_time")]
    pub min: Seconds,
    /// The percentage of the time since `Last-Modified`, 0 to 100. Default:
    /// `[cache] heuristic_fraction` as a percentage.
    #[serde(default)]
    pub percent: Option<f32>,
    /// The longest heuristic lifetime. Default: `[cache] heuristic_max`.
    #[serde(default)]
    pub max: Option<Seconds>,
}

fn no_time() -> Seconds {
    Seconds::from_secs(0.0)
}
