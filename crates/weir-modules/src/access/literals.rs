//! A URL pattern's literal prefilter: text that every match of the pattern must
//! contain, found when the rules are compiled, so that a URL without it is passed
//! over in a short scan instead of a search by the regex engine, whose set-up alone
//! costs several hundred instructions per request. A prefilter only ever says
//! "cannot match" or "may match" (the pattern then decides): saying "cannot" for a
//! URL the pattern matches would skip a deny rule, so it is built only from what
//! `regex-syntax` guarantees of every match, and tested against the pattern itself.

use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};
use regex_syntax::hir::Look;
use regex_syntax::ParserBuilder;

use super::text;

/// At most this many literals are scanned for; a pattern with more is left to the
/// regex engine.
const MAX_LITERALS: usize = 32;

#[derive(Debug)]
pub(crate) enum Prefilter {
    /// Nothing every match must contain is known: the pattern decides alone.
    None,
    /// Every match starts the haystack with one of these (a pattern anchored at `^`).
    StartsWith(Box<[Box<[u8]>]>),
    /// Every match ends the haystack with one of these (a pattern anchored at `$`).
    EndsWith(Box<[Box<[u8]>]>),
    /// Every match contains one of these. `first`: a bit per byte that starts one;
    /// `starts`: those bytes, when three or fewer (searched for with `memchr`, a few
    /// instructions per 16 bytes rather than a few per byte).
    Contains {
        first: [u64; 4],
        starts: Box<[u8]>,
        literals: Box<[Box<[u8]>]>,
    },
}

impl Prefilter {
    /// The prefilter of `pattern` as the regex crate compiles it by default, with
    /// case-insensitivity as given.
    pub fn new(pattern: &str, case_insensitive: bool) -> Prefilter {
        let Ok(hir) = ParserBuilder::new()
            .case_insensitive(case_insensitive)
            .build()
            .parse(pattern)
        else {
            return Prefilter::None;
        };
        let props = hir.properties();
        let extract = |kind| {
            let mut extractor = Extractor::new();
            extractor.kind(kind);
            literals_of(extractor.extract(&hir))
        };
        if props.look_set_prefix().contains(Look::Start) {
            if let Some(literals) = extract(ExtractKind::Prefix) {
                return Prefilter::StartsWith(literals);
            }
        }
        if props.look_set_suffix().contains(Look::End) {
            if let Some(literals) = extract(ExtractKind::Suffix) {
                return Prefilter::EndsWith(literals);
            }
        }
        // A match starts with one of its prefixes, so the haystack holds one.
        match extract(ExtractKind::Prefix) {
            Some(literals) => {
                let mut first = [0u64; 4];
                for l in literals.iter() {
                    first[usize::from(l[0] / 64)] |= 1 << (l[0] % 64);
                }
                let starts: Vec<u8> = (0..=255u8)
                    .filter(|&b| first[usize::from(b / 64)] & (1 << (b % 64)) != 0)
                    .collect();
                Prefilter::Contains {
                    first,
                    starts: if starts.len() <= 3 {
                        starts.into()
                    } else {
                        Box::default()
                    },
                    literals,
                }
            }
            None => Prefilter::None,
        }
    }

    /// False when the pattern cannot match `haystack`.
    #[inline]
    pub fn may_match(&self, haystack: &[u8]) -> bool {
        match self {
            Prefilter::None => true,
            Prefilter::StartsWith(literals) => {
                literals.iter().any(|l| text::starts_with(haystack, l))
            }
            Prefilter::EndsWith(literals) => literals.iter().any(|l| text::ends_with(haystack, l)),
            Prefilter::Contains {
                first,
                starts,
                literals,
            } => {
                let at = |i: usize| {
                    literals
                        .iter()
                        .any(|l| text::starts_with(&haystack[i..], l))
                };
                match **starts {
                    [a] => memchr::memchr_iter(a, haystack).any(at),
                    [a, b] => memchr::memchr2_iter(a, b, haystack).any(at),
                    [a, b, c] => memchr::memchr3_iter(a, b, c, haystack).any(at),
                    _ => (0..haystack.len()).any(|i| {
                        let b = haystack[i];
                        first[usize::from(b / 64)] & (1 << (b % 64)) != 0 && at(i)
                    }),
                }
            }
        }
    }
}

/// The literals of a sequence that can serve: finite, not too many, none empty (a
/// pattern that may match the empty string has no text it must contain), and at least
/// one (an empty sequence would say the pattern never matches: left to the pattern).
fn literals_of(seq: Seq) -> Option<Box<[Box<[u8]>]>> {
    let literals = seq.literals()?;
    if literals.is_empty() || literals.len() > MAX_LITERALS || seq.min_literal_len()? == 0 {
        return None;
    }
    Some(literals.iter().map(|l| l.as_bytes().into()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::RegexBuilder;

    const PATTERNS: &[&str] = &[
        r"\.(exe|msi|scr|bat)$",
        r"[?&](utm_source|fbclid)=",
        r"^http://a\.test:8080/private/",
        r"^https?://[^/]*/admin",
        r"(?i)\.EXE$",
        r"\.exe$|/download/",
        r"(?m)\.exe$",
        r"\.exe\b",
        r"^$",
        r"",
        r"a*",
        r"(foo)?bar",
        r".*\.zip",
        r"[a-z]+\.example/",
        r"x{3}",
        r"é+/",
        r"/(ads|track)(/|\?)",
        r"^[^?]*\?.*session=",
        r"\d{3}\.jpg$",
        r"(?i)/WP-ADMIN",
        r"^(http|https)://(www\.)?video\.",
        r"[^a]",
        r"\bads\b",
        r"(a|)b",
        r"/$",
        r"\Ahttp",
        r"z\z",
        r"(ab|cd|ef|gh)x",
        r"(?i)tracker",
    ];

    const URLS: &[&str] = &[
        "http://127.0.0.1:8080/1k",
        "http://a.test/setup.exe",
        "http://a.test/setup.EXE",
        "http://a.test/setup.exe?x=1",
        "http://a.test/setup.exe\n",
        "http://a.test/p?utm_source=x",
        "http://a.test/p?a=1&fbclid=2",
        "http://a.test:8080/private/x",
        "https://a.test/admin/",
        "http://b.test/download/x",
        "",
        "bar",
        "http://a.test/file.zip",
        "http://www.example/",
        "xxx",
        "http://a.test/éé/",
        "http://a.test/ads/x",
        "http://a.test/track?x",
        "http://a.test/p?q&session=1",
        "http://a.test/123.jpg",
        "http://a.test/wp-admin/",
        "https://www.video.example/",
        "aaaa",
        "http://ads.test/",
        "b",
        "http://a.test/",
        "xyz",
        "http://a.test/ghx",
        "http://a.test/TRACKER",
    ];

    /// The one property that matters: whatever the pattern matches, its prefilter
    /// lets through; and the prefilter does turn away URLs for the common patterns.
    #[test]
    fn a_prefilter_never_turns_away_a_url_its_pattern_matches() {
        for case_insensitive in [false, true] {
            for pattern in PATTERNS {
                let re = RegexBuilder::new(pattern)
                    .case_insensitive(case_insensitive)
                    .build()
                    .unwrap();
                let pre = Prefilter::new(pattern, case_insensitive);
                for url in URLS {
                    if re.is_match(url) {
                        assert!(
                            pre.may_match(url.as_bytes()),
                            "{pattern:?} (case-insensitive: {case_insensitive}) matches {url:?}, {pre:?}"
                        );
                    }
                }
            }
        }
        let bench = "http://127.0.0.1:8080/1k".as_bytes();
        for pattern in &PATTERNS[..3] {
            let pre = Prefilter::new(pattern, false);
            assert!(!matches!(pre, Prefilter::None), "{pattern}");
            assert!(!pre.may_match(bench), "{pattern}");
        }
        assert!(matches!(
            Prefilter::new(PATTERNS[3], false),
            Prefilter::StartsWith(_)
        ));
        assert!(matches!(
            Prefilter::new(r"\.(exe|msi)$", false),
            Prefilter::EndsWith(_)
        ));
        assert!(matches!(
            Prefilter::new(r"(?m)\.exe$", false),
            Prefilter::Contains { .. }
        ));
        // Patterns that may match anywhere, or anything: nothing to scan for.
        for pattern in [r"a*", r"", r".*", r"[^a]", r"(a|)"] {
            assert!(
                matches!(Prefilter::new(pattern, false), Prefilter::None),
                "{pattern}"
            );
        }
    }

    /// Many generated URLs against the patterns: the same property, where the
    /// hand-written list may miss a case.
    #[test]
    fn generated_urls_agree_with_the_patterns() {
        let parts = [
            "http://",
            "https://",
            "a.test",
            ":8080",
            "/",
            "private/",
            "admin",
            ".exe",
            ".EXE",
            "?",
            "&",
            "utm_source=",
            "fbclid=",
            "x",
            "é",
            "\n",
            "download/",
            "ads",
            "bar",
            "session=",
            "123.jpg",
            "www.",
            "video.",
            ".zip",
        ];
        let filters: Vec<_> = PATTERNS
            .iter()
            .flat_map(|p| {
                [false, true].map(|ci| {
                    let re = RegexBuilder::new(p).case_insensitive(ci).build().unwrap();
                    (p, ci, re, Prefilter::new(p, ci))
                })
            })
            .collect();
        let mut url = String::new();
        // Every sequence of up to three parts, and some of four.
        let n = parts.len();
        for i in 0..n * n * n + n * n + n + 1 {
            url.clear();
            let mut k = i;
            while k > 0 {
                url.push_str(parts[k % n]);
                k /= n;
            }
            for (p, ci, re, pre) in &filters {
                if re.is_match(&url) {
                    assert!(pre.may_match(url.as_bytes()), "{p:?} ({ci}) {url:?}");
                }
            }
        }
    }
}
