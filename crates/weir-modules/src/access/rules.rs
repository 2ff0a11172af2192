//! Access rules, compiled once when the module is built: what each one matches, and
//! the first-match walk over them. Matching reads the request in place and allocates
//! nothing (a URL pattern formats the URL into a buffer kept per thread).

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use regex::Regex;
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

impl LocalTime {
    /// Now, in the proxy's time zone.
    pub fn now() -> LocalTime {
        use chrono::{Datelike, Timelike};
        let now = chrono::Local::now();
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
    pub now: OnceCell<LocalTime>,
    /// The thread's URL buffer holds this request's URL: formatted by the first URL
    /// pattern that looks, matched as it is by the others.
    pub url_ready: Cell<bool>,
}

impl RequestView<'_> {
    fn now(&self) -> LocalTime {
        *self.now.get_or_init(self.clock)
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
}

impl Rule {
    /// Whether the rule holds for the request, its user condition aside.
    fn matches_request(&self, r: &RequestView<'_>) -> bool {
        (self.clients.is_empty() || self.clients.iter().any(|n| n.contains(&r.client)))
            && (self.methods.is_empty() || self.methods.contains(r.method))
            && (self.schemes.is_empty()
                || self
                    .schemes
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(r.scheme)))
            && (self.ports.is_empty() || self.ports.iter().any(|p| p.contains(&r.port)))
            && (self.domains.is_empty() || self.domains.iter().any(|d| d.matches(r.host)))
            && self
                .host_regex
                .as_ref()
                .is_none_or(|re| re.is_match(r.host))
            && (self.days == 0 || self.days & (1 << r.now().weekday) != 0)
            && (self.times.is_empty() || self.times.iter().any(|t| t.contains(r.now().minute)))
            && self.url_regex.as_ref().is_none_or(|re| url_matches(re, r))
    }

    pub fn needs_user(&self) -> bool {
        !matches!(self.users, Users::Anyone)
    }

    fn user_matches(&self, user: &str) -> bool {
        match &self.users {
            Users::Anyone | Users::Authenticated => true,
            Users::Named(names) => names.contains(user),
        }
    }
}

fn url_matches(re: &Regex, r: &RequestView<'_>) -> bool {
    URL.with_borrow_mut(|url| {
        if r.url_ready.replace(true) {
            return re.is_match(url);
        }
        url.clear();
        if r.uri.scheme().is_some() || r.method == Method::CONNECT {
            let _ = write!(url, "{}", r.uri);
        } else {
            let path = r.uri.path_and_query().map_or("/", |p| p.as_str());
            let _ = write!(url, "{}://{}", r.scheme, r.host);
            let default = if r.scheme == "https" { 443 } else { 80 };
            if r.port != default {
                let _ = write!(url, ":{}", r.port);
            }
            url.push_str(path);
        }
        re.is_match(url)
    })
}

/// The first rule that holds decides. `user` is the authenticated user; `can_ask` says
/// whether the client may be asked for credentials (not on transparent listeners,
/// whose clients do not know of the proxy: a rule that needs a user is skipped there).
pub(crate) fn decide(
    rules: &[Rule],
    request: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    default: Action,
) -> Verdict {
    for (i, rule) in rules.iter().enumerate() {
        if !rule.matches_request(request) {
            continue;
        }
        if rule.needs_user() {
            match user {
                Some(user) if rule.user_matches(user) => {}
                Some(_) => continue,
                None if can_ask => return Verdict::Challenge,
                None => continue,
            }
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
