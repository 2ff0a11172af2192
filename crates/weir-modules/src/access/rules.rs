//! Access rules as the settings give them: what each one matches, the facts of a
//! request they are matched against, and the URL a URL pattern sees. The walk over
//! them, compiled for the hit path, is in `walk.rs`.

use std::cell::Cell;
use std::collections::HashSet;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use regex::Regex;

pub(crate) use super::domains::Domain;
use weir_api::http::{Method, Uri};

/// What a rule does to the requests it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Allow,
    Deny,
}

/// Which authenticated users a rule names.
#[derive(Debug, Default)]
pub(crate) enum Users {
    /// The rule has no user condition.
    #[default]
    Anyone,
    /// Any authenticated user (`users = ["*"]`).
    Authenticated,
    /// These users, and the members of the rule's groups.
    Named(HashSet<Box<str>>),
}

/// A span of the day, in minutes since midnight: `start` included, `end` excluded. A
/// span whose end comes before its start runs over midnight (`22:00-06:00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DaySpan {
    pub start: u16,
    pub end: u16,
}

impl DaySpan {
    pub fn contains(self, minute: u16) -> bool {
        if self.start <= self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

/// The local time a time rule is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalTime {
    /// Minutes since midnight.
    pub minute: u16,
    /// 0 for Monday to 6 for Sunday.
    pub weekday: u8,
}

thread_local! {
    /// The local time of the last minute a time rule looked at on this thread: (minute
    /// since the epoch + 1, its local time); 0 while none.
    static LOCAL_MINUTE: Cell<(u64, LocalTime)> =
        const { Cell::new((0, LocalTime { minute: 0, weekday: 0 })) };
}

impl LocalTime {
    /// Now, in the proxy's time zone. The conversion to local time (the time zone's
    /// rules) is done once per minute and thread; within a minute only the system
    /// clock is read. Offsets are whole minutes, so the result is the same.
    pub fn now() -> LocalTime {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let key = secs / 60 + 1;
        let (cached, local) = LOCAL_MINUTE.get();
        if cached == key {
            return local;
        }
        let local = Self::at(secs);
        LOCAL_MINUTE.set((key, local));
        local
    }

    /// The local time of `secs` since the epoch.
    fn at(secs: u64) -> LocalTime {
        use chrono::{Datelike, TimeZone, Timelike};
        let now = chrono::Local
            .timestamp_opt(secs as i64, 0)
            .earliest()
            .unwrap_or_else(chrono::Local::now);
        LocalTime {
            minute: (now.hour() * 60 + now.minute()) as u16,
            weekday: now.weekday().num_days_from_monday() as u8,
        }
    }
}

/// One rule: every condition it has must hold; within a condition's list, one entry
/// is enough.
#[derive(Debug)]
pub(crate) struct Rule {
    pub action: Action,
    pub clients: Vec<IpNet>,
    pub users: Users,
    pub domains: Vec<Domain>,
    pub host_regex: Option<Regex>,
    pub url_regex: Option<Regex>,
    pub methods: Vec<Method>,
    pub ports: Vec<RangeInclusive<u16>>,
    /// Lowercase.
    pub schemes: Vec<Box<str>>,
    pub times: Vec<DaySpan>,
    /// Bit `n` set: weekday `n` (Monday is 0). Zero: any day.
    pub days: u8,
}

/// The facts of one request that rules look at, borrowed from it.
pub(crate) struct RequestView<'a> {
    pub client: IpAddr,
    pub method: &'a Method,
    /// `http` or `https`; empty for CONNECT, which names no scheme.
    pub scheme: &'a str,
    pub host: &'a str,
    pub port: u16,
    pub uri: &'a Uri,
    /// Read only when a rule with a time condition is reached; a parameter so that
    /// tests can set the clock.
    pub clock: &'a dyn Fn() -> LocalTime,
}

/// What the rules decided about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Rule `n` (0-based) allowed it, or no rule matched and the default allows.
    Allow(Option<usize>),
    /// Rule `n` denied it, or no rule matched and the default denies.
    Deny(Option<usize>),
    /// The first rule that applies needs a user and the request has none: ask for
    /// credentials.
    Challenge,
}

/// The request's URL: the request target when it is absolute (or CONNECT's
/// authority), as `Uri`'s `Display` writes it; else built from the scheme, host, port
/// (when not the scheme's default) and path. For the latter, returns where the path
/// starts: what comes before it follows from the scheme, host and port alone, and
/// [`push_path`] writes the rest for another request with the same ones.
// Not inlined: written whole only when the start kept per thread does not serve, and
// inlined into the walk, its port's digits were worked out on every request.
#[inline(never)]
pub(crate) fn format_url(url: &mut String, r: &RequestView<'_>) -> Option<usize> {
    url.clear();
    if !origin_form(r) {
        if let Some(scheme) = r.uri.scheme_str() {
            url.push_str(scheme);
            url.push_str("://");
        }
        if let Some(authority) = r.uri.authority() {
            url.push_str(authority.as_str());
        }
        url.push_str(r.uri.path());
        if let Some(query) = r.uri.query() {
            url.push('?');
            url.push_str(query);
        }
        None
    } else {
        url.push_str(r.scheme);
        url.push_str("://");
        url.push_str(r.host);
        let default = if r.scheme == "https" { 443 } else { 80 };
        if r.port != default {
            url.push(':');
            push_number(url, r.port);
        }
        let path_at = url.len();
        push_path(url, r);
        Some(path_at)
    }
}

/// Whether the request's URL is built from its scheme, host, port and path (rather
/// than written as its target is).
pub(crate) fn origin_form(r: &RequestView<'_>) -> bool {
    r.uri.scheme().is_none() && r.method != Method::CONNECT
}

/// The path (and query) of an origin-form request, as [`format_url`] ends its URL.
pub(crate) fn push_path(url: &mut String, r: &RequestView<'_>) {
    url.push_str(r.uri.path_and_query().map_or("/", |p| p.as_str()));
}

fn push_number(out: &mut String, n: u16) {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(d as char);
    }
}
