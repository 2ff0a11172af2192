//! Access rules, compiled once when the module is built: what each one matches, and
//! the first-match walk over them. Matching reads the request in place and allocates
//! nothing (a URL pattern formats the URL into a buffer kept per thread).
//!
//! The walk is made cheap for the hit path, with the same outcome as checking every
//! condition of every rule in order: a rule's conditions are checked cheapest first
//! (its user from a per-user bit set, then methods and schemes as bit masks, ports,
//! networks as masked numbers, domains, the clock, and the patterns last); the host
//! and URL patterns of all rules are tried together once per request (one `RegexSet`
//! each), so a request that none of them matches — the usual case — pays one search
//! per field, not one per rule, and the host's outcome is remembered per thread for
//! the next request to the same host; and the local time is worked out once a minute
//! per thread.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::ops::RangeInclusive;

use std::sync::atomic::{AtomicU64, Ordering};

use ipnet::IpNet;
use regex::{Regex, RegexSet, RegexSetBuilder};

use super::sieve::{self, MethodTest, Sieve};
use weir_api::http::{Method, Uri};

/// What a rule does to the requests it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Allow,
    Deny,
}

/// A destination domain: `example.com` names that host only; `.example.com` names it
/// and every host below it (Squid's `dstdomain`). Kept without the dot.
#[derive(Debug)]
pub(crate) enum Domain {
    Exact(Box<str>),
    Suffix(Box<str>),
}

impl Domain {
    fn matches(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        match self {
            Domain::Exact(name) => host.eq_ignore_ascii_case(name),
            Domain::Suffix(name) => {
                if host.len() == name.len() {
                    return host.eq_ignore_ascii_case(name);
                }
                host.len() > name.len()
                    && host.as_bytes()[host.len() - name.len() - 1] == b'.'
                    && host[host.len() - name.len()..].eq_ignore_ascii_case(name)
            }
        }
    }
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
    fn contains(self, minute: u16) -> bool {
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

/// The rules in order, with what is compiled over all of them.
#[derive(Debug)]
pub(crate) struct RuleSet {
    rules: Vec<Rule>,
    /// Each rule's cheap conditions, as masks.
    sieves: Vec<Sieve>,
    /// Unique per set: names it in the thread's memo of host patterns.
    id: u64,
    /// Every rule's host pattern (case-insensitive), when any has one.
    host_patterns: Option<RegexSet>,
    /// Every rule's URL pattern, when any has one.
    url_patterns: Option<RegexSet>,
    /// Per user named by a rule (directly or by a group): the rules that name it, a
    /// bit per rule.
    users: HashMap<Box<str>, Box<[u64]>, foldhash::fast::RandomState>,
}

impl RuleSet {
    /// Compiles `rules`. The patterns were each compiled already; a set of them that
    /// is too large to compile leaves the rules to try them one by one.
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        let set = |patterns: Vec<&str>, case_insensitive: bool| {
            (!patterns.is_empty())
                .then(|| {
                    RegexSetBuilder::new(patterns)
                        .case_insensitive(case_insensitive)
                        .build()
                        .ok()
                })
                .flatten()
        };
        let host_patterns = set(
            rules
                .iter()
                .filter_map(|r| r.host_regex.as_ref().map(Regex::as_str))
                .collect(),
            true,
        );
        let url_patterns = set(
            rules
                .iter()
                .filter_map(|r| r.url_regex.as_ref().map(Regex::as_str))
                .collect(),
            false,
        );
        let words = rules.len().div_ceil(64);
        let mut users: HashMap<Box<str>, Box<[u64]>, _> = HashMap::default();
        for (i, rule) in rules.iter().enumerate() {
            if let Users::Named(names) = &rule.users {
                for name in names {
                    let bits = users
                        .entry(name.clone())
                        .or_insert_with(|| vec![0; words].into_boxed_slice());
                    bits[i / 64] |= 1 << (i % 64);
                }
            }
        }
        static IDS: AtomicU64 = AtomicU64::new(1);
        RuleSet {
            sieves: rules
                .iter()
                .map(|r| Sieve::new(&r.methods, &r.schemes, &r.clients))
                .collect(),
            id: IDS.fetch_add(1, Ordering::Relaxed),
            rules,
            host_patterns,
            url_patterns,
            users,
        }
    }
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

/// What the walk over one request worked out once, when first needed.
struct Found<'a, 'r> {
    view: &'a RequestView<'r>,
    method: u16,
    scheme: u8,
    client: (bool, u128),
    now: OnceCell<LocalTime>,
    /// Whether any host pattern matches the host (`true` without a set).
    host_any: OnceCell<bool>,
    /// Whether any URL pattern matches the URL (`true` without a set).
    url_any: OnceCell<bool>,
    /// The thread's URL buffer holds this request's URL: formatted by the first URL
    /// pattern that looks, matched as it is by the others.
    url_ready: Cell<bool>,
}

impl Found<'_, '_> {
    fn now(&self) -> LocalTime {
        *self.now.get_or_init(self.view.clock)
    }
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

thread_local! {
    /// The URL a URL pattern matches, formatted here so matching allocates nothing
    /// once the thread's buffer has grown.
    static URL: RefCell<String> = const { RefCell::new(String::new()) };
    /// The last host this thread tried a set's host patterns on: (the set's id, the
    /// host, whether any matched). Requests to one host follow one another, and a
    /// short comparison is cheaper than the search.
    static HOST_TRIED: RefCell<(u64, String, bool)> = const { RefCell::new((0, String::new(), false)) };
}

/// Whether any of the set's host patterns matches `host` (`true` without a set).
fn any_host_pattern(set: &RuleSet, host: &str) -> bool {
    let Some(patterns) = &set.host_patterns else {
        return true;
    };
    HOST_TRIED.with_borrow_mut(|(id, tried, matched)| {
        if *id != set.id || tried != host {
            *matched = patterns.is_match(host);
            *id = set.id;
            tried.clear();
            tried.push_str(host);
        }
        *matched
    })
}

impl Rule {
    /// Whether the rule holds for the request, its user condition aside. Cheapest
    /// conditions first; the patterns last, and only when the request's host or URL
    /// matches some rule's pattern.
    #[inline(always)]
    fn matches_request(&self, sieve: &Sieve, set: &RuleSet, f: &Found<'_, '_>) -> bool {
        let r = f.view;
        (match sieve.method(f.method) {
            MethodTest::Yes => true,
            MethodTest::No => false,
            MethodTest::AskList => self.methods.contains(r.method),
        }) && sieve.scheme(f.scheme)
            && (self.ports.is_empty() || self.ports.iter().any(|p| p.contains(&r.port)))
            && sieve.client(f.client)
            && (self.domains.is_empty() || self.domains.iter().any(|d| d.matches(r.host)))
            && (self.days == 0 || self.days & (1 << f.now().weekday) != 0)
            && (self.times.is_empty() || self.times.iter().any(|t| t.contains(f.now().minute)))
            && self.host_regex.as_ref().is_none_or(|re| {
                *f.host_any.get_or_init(|| any_host_pattern(set, r.host)) && re.is_match(r.host)
            })
            && self.url_regex.as_ref().is_none_or(|re| {
                url_matches(f, |url| {
                    *f.url_any
                        .get_or_init(|| set.url_patterns.as_ref().is_none_or(|s| s.is_match(url)))
                        && re.is_match(url)
                })
            })
    }
}

/// Runs `test` on the request's URL, formatted into the thread's buffer the first
/// time a rule needs it.
fn url_matches(f: &Found<'_, '_>, test: impl FnOnce(&str) -> bool) -> bool {
    URL.with_borrow_mut(|url| {
        if !f.url_ready.replace(true) {
            format_url(url, f.view);
        }
        test(url)
    })
}

/// The request's URL: the request target when it is absolute (or CONNECT's
/// authority), as `Uri`'s `Display` writes it; else built from the scheme, host, port
/// (when not the scheme's default) and path.
pub(crate) fn format_url(url: &mut String, r: &RequestView<'_>) {
    url.clear();
    if r.uri.scheme().is_some() || r.method == Method::CONNECT {
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
    } else {
        let path = r.uri.path_and_query().map_or("/", |p| p.as_str());
        url.push_str(r.scheme);
        url.push_str("://");
        url.push_str(r.host);
        let default = if r.scheme == "https" { 443 } else { 80 };
        if r.port != default {
            url.push(':');
            push_number(url, r.port);
        }
        url.push_str(path);
    }
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

/// The first rule that holds decides. `user` is the authenticated user; `can_ask` says
/// whether the client may be asked for credentials (not on transparent listeners,
/// whose clients do not know of the proxy: a rule that needs a user is skipped there).
pub(crate) fn decide(
    set: &RuleSet,
    request: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    default: Action,
) -> Verdict {
    let found = Found {
        view: request,
        method: sieve::method_bit(request.method),
        scheme: sieve::scheme_bit(request.scheme),
        client: sieve::address(request.client),
        now: OnceCell::new(),
        host_any: OnceCell::new(),
        url_any: OnceCell::new(),
        url_ready: Cell::new(false),
    };
    // The rules that name this user (a bit each); looked up once, when some rule
    // names users.
    let named: Option<&[u64]> = match user {
        Some(user) if !set.users.is_empty() => set.users.get(user).map(|b| &b[..]),
        _ => None,
    };
    for (i, (rule, sieve)) in set.rules.iter().zip(&set.sieves).enumerate() {
        // A rule that needs a user the request cannot give is skipped whatever else
        // it says: tried first, since it costs least.
        match (&rule.users, user) {
            (Users::Anyone, _) | (Users::Authenticated, Some(_)) => {}
            (Users::Named(_), Some(_)) => {
                if named.is_none_or(|bits| bits[i / 64] & (1 << (i % 64)) == 0) {
                    continue;
                }
            }
            (_, None) if !can_ask => continue,
            (_, None) => {
                // A challenge, if the rest of the rule holds.
                if rule.matches_request(sieve, set, &found) {
                    return Verdict::Challenge;
                }
                continue;
            }
        }
        if !rule.matches_request(sieve, set, &found) {
            continue;
        }
        return match rule.action {
            Action::Allow => Verdict::Allow(Some(i)),
            Action::Deny => Verdict::Deny(Some(i)),
        };
    }
    match default {
        Action::Allow => Verdict::Allow(None),
        Action::Deny => Verdict::Deny(None),
    }
}
