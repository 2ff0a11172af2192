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
                Known::MaxAge => r.max_age = r.seconds(arg),
                Known::SMaxage => r.s_maxage = r.seconds(arg),
                Known::NoStore => r.no_store = true,
                Known::NoCache => r.no_cache = FieldScope::read(arg),
                Known::Private => r.private = FieldScope::read(arg),
                Known::Public => r.public = true,
                Known::MustRevalidate => r.must_revalidate = true,
                Known::ProxyRevalidate => r.proxy_revalidate = true,
                Known::MustUnderstand => r.must_understand = true,
                Known::StaleWhileRevalidate => r.stale_while_revalidate = window(arg),
                Known::StaleIfError => r.stale_if_error = window(arg),
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
                Known::MaxAge => r.max_age = window(arg),
                Known::MinFresh => r.min_fresh = window(arg),
                Known::MaxStale => r.max_stale = Some(window(arg)),
                Known::NoCache => r.no_cache = true,
                Known::NoStore => r.no_store = true,
                Known::OnlyIfCached => r.only_if_cached = true,
                Known::StaleIfError => r.stale_if_error = window(arg),
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

/// The directives Weir reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    MaxAge,
    SMaxage,
    NoStore,
    NoCache,
    Private,
    Public,
    MustRevalidate,
    ProxyRevalidate,
    MustUnderstand,
    StaleWhileRevalidate,
    StaleIfError,
    MinFresh,
    MaxStale,
    OnlyIfCached,
    Immutable,
}

/// Their names, in lower case.
const KNOWN: [(&str, Known); 15] = [
    ("max-age", Known::MaxAge),
    ("s-maxage", Known::SMaxage),
    ("no-store", Known::NoStore),
    ("no-cache", Known::NoCache),
    ("private", Known::Private),
    ("public", Known::Public),
    ("must-revalidate", Known::MustRevalidate),
    ("proxy-revalidate", Known::ProxyRevalidate),
    ("must-understand", Known::MustUnderstand),
    ("stale-while-revalidate", Known::StaleWhileRevalidate),
    ("stale-if-error", Known::StaleIfError),
    ("min-fresh", Known::MinFresh),
    ("max-stale", Known::MaxStale),
    ("only-if-cached", Known::OnlyIfCached),
    ("immutable", Known::Immutable),
];

/// Which known directives were already read: a bit each, so reading allocates nothing.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// The known directive `name` is (in any case) if this is its first occurrence;
    /// `None` for a repeat or a directive Weir does not read. Returned as a `Known`,
    /// so that the caller's `match` compares no text again.
    fn first(&mut self, name: &str) -> Option<Known> {
        let &(_, known) = KNOWN.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))?;
        let bit = 1 << known as u32;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(known)
    }
}

#[cfg(test)]
#[path = "directives_tests.rs"]
mod tests;
