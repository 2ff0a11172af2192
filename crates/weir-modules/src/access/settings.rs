//! The access module's section: read, checked and compiled into rules. Every error
//! names its key (`rule[2].url_regex`), so `weir check` can point at the line.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use regex::{Regex, RegexBuilder};
use weir_api::http::Method;
use weir_api::serde::Deserialize;
use weir_api::{Settings, SettingsError};

use super::rules::{Action, DaySpan, Domain, Rule, Users};
use super::walk::RuleSet;
use crate::icap::settings::{duration_of, parse_duration, Duration_};

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct Raw {
    htpasswd: Option<String>,
    realm: Option<String>,
    credential_ttl: Option<Duration_>,
    failure_delay: Option<Duration_>,
    failure_delay_max: Option<Duration_>,
    #[serde(default)]
    groups: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct RawRule {
    action: String,
    #[serde(default)]
    clients: Vec<String>,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    domains: Vec<String>,
    host_regex: Option<String>,
    url_regex: Option<String>,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(default)]
    ports: Vec<Port>,
    #[serde(default)]
    schemes: Vec<String>,
    #[serde(default)]
    times: Vec<String>,
    #[serde(default)]
    days: Vec<String>,
}

/// A port (`443`) or a range of them (`"8000-8999"`).
#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", untagged)]
enum Port {
    One(u16),
    Range(String),
}

/// The module's configuration, checked.
pub(crate) struct AccessConfig {
    pub rules: RuleSet,
    pub auth: Option<AuthConfig>,
}

/// Authentication against an htpasswd file.
pub(crate) struct AuthConfig {
    pub htpasswd: PathBuf,
    pub realm: String,
    pub credential_ttl: Duration,
    pub failure_delay: Duration,
    pub failure_delay_max: Duration,
}

pub(crate) fn parse(settings: &Settings) -> Result<AccessConfig, SettingsError> {
    let raw: Raw = settings.get()?;
    let duration = |key: &str, value: Option<Duration_>, default: Duration| {
        match value {
            None => Ok(default),
            Some(Duration_::Seconds(s)) => duration_of(s),
            Some(Duration_::Text(t)) => parse_duration(&t),
        }
        .map_err(|m| SettingsError::at(key, m))
    };
    let auth = match raw.htpasswd {
        None => None,
        Some(path) => {
            let realm = raw.realm.unwrap_or_else(|| "Weir".to_string());
            if realm.is_empty()
                || realm
                    .chars()
                    .any(|c| c == '"' || c == '\\' || c.is_control())
            {
                return Err(SettingsError::at(
                    "realm",
                    "a realm is a non-empty name without quotes, backslashes or control characters",
                ));
            }
            Some(AuthConfig {
                htpasswd: PathBuf::from(path),
                realm,
                credential_ttl: duration(
                    "credential_ttl",
                    raw.credential_ttl,
                    Duration::from_secs(60),
                )?,
                failure_delay: duration(
                    "failure_delay",
                    raw.failure_delay,
                    Duration::from_millis(200),
                )?,
                failure_delay_max: duration(
                    "failure_delay_max",
                    raw.failure_delay_max,
                    Duration::from_secs(5),
                )?,
            })
        }
    };
    if auth.is_none() {
        for key in [
            "realm",
            "credential_ttl",
            "failure_delay",
            "failure_delay_max",
        ] {
            if settings_has(settings, key) {
                return Err(SettingsError::at(key, "only applies with `htpasswd`"));
            }
        }
    }
    for (name, members) in &raw.groups {
        if members.iter().any(|m| m.is_empty() || m.contains(':')) {
            return Err(SettingsError::at(
                format!("groups.{name}"),
                "a member is a user name, not empty and without `:`",
            ));
        }
    }
    let mut rules = Vec::with_capacity(raw.rule.len());
    for (i, r) in raw.rule.into_iter().enumerate() {
        rules.push(compile(i, r, &raw.groups, auth.is_some())?);
    }
    if rules.is_empty() && auth.is_none() {
        return Err(SettingsError::at(
            "rule",
            "give at least one `[[module.rule]]`, or `htpasswd` to require authentication",
        ));
    }
    if rules.is_empty() {
        // Authentication alone: every request needs a valid user.
        rules.push(Rule {
            action: Action::Allow,
            clients: Vec::new(),
            users: Users::Authenticated,
            domains: Vec::new(),
            host_regex: None,
            url_regex: None,
            methods: Vec::new(),
            ports: Vec::new(),
            schemes: Vec::new(),
            times: Vec::new(),
            days: 0,
        });
    }
    Ok(AccessConfig {
        rules: RuleSet::new(rules),
        auth,
    })
}

fn settings_has(settings: &Settings, key: &str) -> bool {
    #[derive(Deserialize)]
    #[serde(crate = "weir_api::serde")]
    struct Any(BTreeMap<String, weir_api::serde::de::IgnoredAny>);
    settings
        .get::<Any>()
        .is_ok_and(|Any(keys)| keys.contains_key(key))
}

fn compile(
    i: usize,
    r: RawRule,
    groups: &BTreeMap<String, Vec<String>>,
    auth: bool,
) -> Result<Rule, SettingsError> {
    let at = |key: &str| format!("rule[{i}].{key}");
    let at_n = |key: &str, n: usize| format!("rule[{i}].{key}[{n}]");
    let action = match r.action.as_str() {
        "allow" => Action::Allow,
        "deny" => Action::Deny,
        other => {
            return Err(SettingsError::at(
                at("action"),
                format!("`{other}` is not an action (use \"allow\" or \"deny\")"),
            ))
        }
    };
    let clients = r
        .clients
        .iter()
        .enumerate()
        .map(|(n, c)| {
            c.parse::<IpNet>()
                .or_else(|_| c.parse::<IpAddr>().map(IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| {
                    SettingsError::at(
                        at_n("clients", n),
                        format!("`{c}` is not an address or network (e.g. \"10.0.0.0/8\")"),
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let users = if r.users.is_empty() && r.groups.is_empty() {
        Users::Anyone
    } else if !auth {
        let key = if r.users.is_empty() {
            "groups"
        } else {
            "users"
        };
        return Err(SettingsError::at(
            at(key),
            "a rule about users needs `htpasswd` (authentication)",
        ));
    } else if r.users.iter().any(|u| u == "*") {
        Users::Authenticated
    } else {
        let mut names: HashSet<Box<str>> = r.users.iter().map(|u| u.as_str().into()).collect();
        for (n, group) in r.groups.iter().enumerate() {
            let Some(members) = groups.get(group) else {
                let known: Vec<&str> = groups.keys().map(String::as_str).collect();
                return Err(SettingsError::at(
                    at_n("groups", n),
                    format!(
                        "no group named `{group}` (defined in `groups`: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            };
            names.extend(members.iter().map(|m| m.as_str().into()));
        }
        Users::Named(names)
    };
    let domains = r
        .domains
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let (suffix, name) = match d.strip_prefix('.') {
                Some(rest) => (true, rest),
                None => (false, d.as_str()),
            };
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
            {
                return Err(SettingsError::at(
                    at_n("domains", n),
                    format!("`{d}` is not a domain (`example.com`, or `.example.com` with its subdomains)"),
                ));
            }
            let name: Box<str> = name.to_ascii_lowercase().into();
            Ok(if suffix { Domain::Suffix(name) } else { Domain::Exact(name) })
        })
        .collect::<Result<_, _>>()?;
    let regex = |key: &str, pattern: Option<String>, case_insensitive: bool| {
        pattern
            .map(|p| {
                RegexBuilder::new(&p)
                    .case_insensitive(case_insensitive)
                    .build()
                    .map_err(|e| {
                        SettingsError::at(
                            at(key),
                            format!("not a valid regular expression: {}", first_line(&e)),
                        )
                    })
            })
            .transpose()
    };
    let host_regex: Option<Regex> = regex("host_regex", r.host_regex, true)?;
    let url_regex = regex("url_regex", r.url_regex, false)?;
    let methods = r
        .methods
        .iter()
        .enumerate()
        .map(|(n, m)| {
            Method::from_bytes(m.as_bytes()).map_err(|_| {
                SettingsError::at(at_n("methods", n), format!("`{m}` is not a method"))
            })
        })
        .collect::<Result<_, _>>()?;
    let ports = r
        .ports
        .iter()
        .enumerate()
        .map(|(n, p)| {
            port_range(p).ok_or_else(|| {
                SettingsError::at(
                    at_n("ports", n),
                    "a port is a number from 1 to 65535, or a range such as \"8000-8999\"",
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let schemes = r
        .schemes
        .iter()
        .enumerate()
        .map(|(n, s)| match s.to_ascii_lowercase().as_str() {
            s @ ("http" | "https") => Ok(s.into()),
            _ => Err(SettingsError::at(
                at_n("schemes", n),
                format!("`{s}` is not a scheme Weir serves (http, https)"),
            )),
        })
        .collect::<Result<_, _>>()?;
    let times = r
        .times
        .iter()
        .enumerate()
        .map(|(n, t)| {
            day_span(t).ok_or_else(|| {
                SettingsError::at(
                    at_n("times", n),
                    format!(
                        "`{t}` is not a span of the day (e.g. \"08:00-17:30\", \"22:00-06:00\")"
                    ),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let mut days = 0u8;
    for (n, d) in r.days.iter().enumerate() {
        days |= weekdays(d).ok_or_else(|| {
            SettingsError::at(
                at_n("days", n),
                format!("`{d}` is not a day or span of days (e.g. \"mon-fri\", \"sat\")"),
            )
        })?;
    }
    Ok(Rule {
        action,
        clients,
        users,
        domains,
        host_regex,
        url_regex,
        methods,
        ports,
        schemes,
        times,
        days,
    })
}

fn first_line(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().rfind(|l| !l.trim().is_empty());
    let last = last.unwrap_or("").trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

fn port_range(p: &Port) -> Option<RangeInclusive<u16>> {
    let (lo, hi) = match p {
        Port::One(n) => (*n, *n),
        Port::Range(text) => match text.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let n = text.trim().parse().ok()?;
                (n, n)
            }
        },
    };
    (lo >= 1 && lo <= hi).then_some(lo..=hi)
}

/// `HH:MM-HH:MM`; the end may be `24:00`.
pub(crate) fn day_span(text: &str) -> Option<DaySpan> {
    let (a, b) = text.split_once('-')?;
    let minute = |t: &str| -> Option<u16> {
        let (h, m) = t.trim().split_once(':')?;
        let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
        (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
    };
    let (start, end) = (minute(a)?, minute(b)?);
    (start != end && start < 24 * 60).then_some(DaySpan { start, end })
}

/// `mon`, or a span `mon-fri` (`fri-mon` runs over the weekend): a bit per weekday.
pub(crate) fn weekdays(text: &str) -> Option<u8> {
    const NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let day = |t: &str| {
        let t = t.trim().to_ascii_lowercase();
        NAMES
            .iter()
            .position(|n| t.len() >= 3 && n.starts_with(&t[..3]) && (t.len() == 3 || day_name(&t)))
    };
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (day(a)?, day(b)?),
        None => {
            let d = day(text)?;
            (d, d)
        }
    };
    let mut bits = 0u8;
    let mut d = a;
    loop {
        bits |= 1 << d;
        if d == b {
            return Some(bits);
        }
        d = (d + 1) % 7;
    }
}

fn day_name(t: &str) -> bool {
    [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
    .contains(&t)
}
