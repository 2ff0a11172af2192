//! What a message's cache directives say, read once into plain fields: a response's
//! (from `Cache-Control` or a targeted field) and a request's. When a directive comes
//! twice, the first occurrence counts (RFC 9111 §4.2.1 allows it); a delta-seconds
//! argument that is not one makes the response's freshness invalid, so it is stale.

use std::time::Duration;

use crate::cache_control::{delta_seconds, field_names, Directive};

/// An unqualified or qualified `no-cache` / `private`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FieldScope {
    /// Absent.
    #[default]
    Absent,
    /// The whole response.
    Whole,
    /// Only these fields (lower case).
    Fields(Vec<String>),
}

impl FieldScope {
    fn read(argument: Option<&str>) -> FieldScope {
        match argument.map(field_names) {
            Some(names) if !names.is_empty() => FieldScope::Fields(names),
            _ => FieldScope::Whole,
        }
    }

    /// Whether it covers the whole response.
    pub fn is_whole(&self) -> bool {
        matches!(self, FieldScope::Whole)
    }
}

/// A response's cache directives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseDirectives {
    /// `max-age`.
    pub max_age: Option<Duration>,
    /// `s-maxage` (a shared cache's own max-age; implies `proxy-revalidate`).
    pub s_maxage: Option<Duration>,
    /// `no-store`.
    pub no_store: bool,
    /// `no-cache`, whole or qualified.
    pub no_cache: FieldScope,
    /// `private`, whole or qualified.
    pub private: FieldScope,
    /// `public`.
    pub public: bool,
    /// `must-revalidate`.
    pub must_revalidate: bool,
    /// `proxy-revalidate`.
    pub proxy_revalidate: bool,
    /// `must-understand`.
    pub must_understand: bool,
    /// `stale-while-revalidate` (RFC 5861).
    pub stale_while_revalidate: Option<Duration>,
    /// `stale-if-error` (RFC 5861).
    pub stale_if_error: Option<Duration>,
    /// A freshness directive had an argument that is not delta-seconds.
    pub invalid_freshness: bool,
}

impl ResponseDirectives {
    /// Reads a response's directives.
    pub fn read<'a>(directives: impl IntoIterator<Item = Directive<'a>>) -> ResponseDirectives {
        let mut r = ResponseDirectives::default();
        let mut seen = Seen::default();
        for d in directives {
            let Some(name) = seen.first(d.name()) else {
                continue;
            };
            let arg = d.argument();
            match name {
                "max-age" => r.max_age = r.seconds(arg),
                "s-maxage" => r.s_maxage = r.seconds(arg),
                "no-store" => r.no_store = true,
                "no-cache" => r.no_cache = FieldScope::read(arg),
                "private" => r.private = FieldScope::read(arg),
                "public" => r.public = true,
                "must-revalidate" => r.must_revalidate = true,
                "proxy-revalidate" => r.proxy_revalidate = true,
                "must-understand" => r.must_understand = true,
                "stale-while-revalidate" => r.stale_while_revalidate = window(arg),
                "stale-if-error" => r.stale_if_error = window(arg),
                _ => {}
            }
        }
        r
    }

    fn seconds(&mut self, argument: Option<&str>) -> Option<Duration> {
        let s = argument.and_then(delta_seconds);
        if s.is_none() {
            self.invalid_freshness = true;
        }
        s.map(Duration::from_secs)
    }

    /// Whether a shared cache must validate a stale copy before using it (no serving
    /// stale): `must-revalidate`, `proxy-revalidate`, or `s-maxage` (RFC 9111 §5.2.2.10).
    pub fn forbids_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

/// A request's cache directives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `max-age`: the oldest copy the client accepts.
    pub max_age: Option<Duration>,
    /// `min-fresh`: how long the copy must stay fresh.
    pub min_fresh: Option<Duration>,
    /// `max-stale`: `Some(None)` for any staleness, `Some(Some(d))` for at most `d`.
    pub max_stale: Option<Option<Duration>>,
    /// `no-cache` (or `Pragma: no-cache` without `Cache-Control`).
    pub no_cache: bool,
    /// `no-store`.
    pub no_store: bool,
    /// `only-if-cached`.
    pub only_if_cached: bool,
    /// `stale-if-error` (RFC 5861).
    pub stale_if_error: Option<Duration>,
}

impl RequestDirectives {
    /// Reads a request's directives. Arguments that are not delta-seconds are ignored.
    pub fn read<'a>(directives: impl IntoIterator<Item = Directive<'a>>) -> RequestDirectives {
        let mut r = RequestDirectives::default();
        let mut seen = Seen::default();
        for d in directives {
            let Some(name) = seen.first(d.name()) else {
                continue;
            };
            let arg = d.argument();
            match name {
                "max-age" => r.max_age = window(arg),
                "min-fresh" => r.min_fresh = window(arg),
                "max-stale" => r.max_stale = Some(window(arg)),
                "no-cache" => r.no_cache = true,
                "no-store" => r.no_store = true,
                "only-if-cached" => r.only_if_cached = true,
                "stale-if-error" => r.stale_if_error = window(arg),
                _ => {}
            }
        }
        r
    }

    /// Whether it asks anything of freshness (the common request asks nothing).
    pub fn constrains_freshness(&self) -> bool {
        self.max_age.is_some()
            || self.min_fresh.is_some()
            || self.max_stale.is_some()
            || self.no_cache
    }
}

fn window(argument: Option<&str>) -> Option<Duration> {
    argument.and_then(delta_seconds).map(Duration::from_secs)
}

/// The directives Weir reads, in lower case.
const KNOWN: [&str; 15] = [
    "max-age",
    "s-maxage",
    "no-store",
    "no-cache",
    "private",
    "public",
    "must-revalidate",
    "proxy-revalidate",
    "must-understand",
    "stale-while-revalidate",
    "stale-if-error",
    "min-fresh",
    "max-stale",
    "only-if-cached",
    "immutable",
];

/// Which known directives were already read: a bit each, so reading allocates nothing.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// The known name `name` stands for (in any case) if this is its first occurrence;
    /// `None` for a repeat or a directive Weir does not read.
    fn first(&mut self, name: &str) -> Option<&'static str> {
        let i = KNOWN.iter().position(|k| k.eq_ignore_ascii_case(name))?;
        let bit = 1 << i;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(KNOWN[i])
    }
}

#[cfg(test)]
#[path = "directives_tests.rs"]
mod tests;
