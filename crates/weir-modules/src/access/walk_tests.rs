//! The compiled walk against the rules' definition: every condition of every rule
//! checked in order, over many requests and rule sets. A difference is a request the
//! walk lets through that a deny rule names, or one it refuses that should pass.

use weir_api::http::{Method, Uri};
use weir_api::Settings;

use super::rules::{format_url, Action, LocalTime, RequestView, Rule, Users, Verdict};
use super::settings::parse;
use super::walk::{decide, RuleSet};

/// The bench's rules (`bench/ladder-instructions.sh`, rung h), with a rule ahead of
/// them that names two domains and a host pattern together.
const BENCH: &str = r#"
[groups]
staff = ["ann", "bob"]
pupils = ["carl", "dora"]
[[rule]]
action = "deny"
domains = [".mixed.test"]
host_regex = '^www\.'
[[rule]]
action = "deny"
clients = ["10.66.0.0/16", "192.168.77.0/24", "fd00::/8"]
[[rule]]
action = "deny"
domains = [".ads.example", "tracker.example", ".doubleclick.example"]
[[rule]]
action = "deny"
host_regex = '^(www\.)?(ad|track|pixel)s?\.'
[[rule]]
action = "deny"
url_regex = '\.(exe|msi|scr|bat)$'
[[rule]]
action = "deny"
methods = ["TRACE", "TRACK", "DEBUG"]
[[rule]]
action = "deny"
ports = ["1-79", "81-442", "444-1023"]
[[rule]]
action = "deny"
schemes = ["https"]
ports = [80]
[[rule]]
action = "allow"
groups = ["pupils"]
methods = ["GET", "HEAD", "POST"]
ports = ["1024-65535"]
times = ["00:00-24:00"]
days = ["mon-sun"]
[[rule]]
action = "deny"
domains = ["social.example", ".video.example"]
times = ["09:00-12:00"]
[[rule]]
action = "allow"
users = ["ann", "bob"]
[[rule]]
action = "allow"
groups = ["staff"]
[[rule]]
action = "deny"
clients = ["169.254.0.0/16"]
[[rule]]
action = "deny"
host_regex = '(^|\.)(casino|bet)[a-z]*\.'
[[rule]]
action = "deny"
url_regex = '[?&](utm_source|fbclid)='
[[rule]]
action = "deny"
methods = ["PUT", "DELETE", "PATCH"]
[[rule]]
action = "allow"
clients = ["10.0.0.0/8"]
domains = [".school.example"]
[[rule]]
action = "deny"
ports = [25, 465, 587]
[[rule]]
action = "deny"
domains = [".onion"]
[[rule]]
action = "deny"
clients = ["172.16.0.0/12"]
days = ["mon-fri"]
times = ["22:00-06:00"]
[[rule]]
action = "allow"
users = ["*"]
methods = ["PROPFIND"]
url_regex = '^https?://[^/]*/dav/'
[[rule]]
action = "allow"
users = ["bench"]
methods = ["GET", "HEAD"]
"#;

fn rule_set(toml: &str) -> RuleSet {
    let text = format!("htpasswd = \"/dev/null\"\n{toml}");
    parse(&Settings::parse(&text).unwrap()).unwrap().rules
}

/// The definition: each rule in order, every condition checked.
fn by_definition(
    rules: &[Rule],
    r: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    default: Action,
) -> Verdict {
    let mut url = String::new();
    format_url(&mut url, r);
    let now = (r.clock)();
    let holds = |rule: &Rule| {
        (rule.methods.is_empty() || rule.methods.contains(r.method))
            && (rule.schemes.is_empty()
                || rule
                    .schemes
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(r.scheme)))
            && (rule.ports.is_empty() || rule.ports.iter().any(|p| p.contains(&r.port)))
            && (rule.clients.is_empty() || rule.clients.iter().any(|n| n.contains(&r.client)))
            && (rule.domains.is_empty() || rule.domains.iter().any(|d| d.matches(r.host)))
            && (rule.days == 0 || rule.days & (1 << now.weekday) != 0)
            && (rule.times.is_empty() || rule.times.iter().any(|t| t.contains(now.minute)))
            && rule
                .host_regex
                .as_ref()
                .is_none_or(|re| re.is_match(r.host))
            && rule.url_regex.as_ref().is_none_or(|re| re.is_match(&url))
    };
    for (i, rule) in rules.iter().enumerate() {
        match (&rule.users, user) {
            (Users::Anyone, _) | (Users::Authenticated, Some(_)) => {}
            (Users::Named(names), Some(user)) => {
                if !names.contains(user) {
                    continue;
                }
            }
            (_, None) if !can_ask => continue,
            (_, None) => {
                if holds(rule) {
                    return Verdict::Challenge;
                }
                continue;
            }
        }
        if holds(rule) {
            return match rule.action {
                Action::Allow => Verdict::Allow(Some(i)),
                Action::Deny => Verdict::Deny(Some(i)),
            };
        }
    }
    match default {
        Action::Allow => Verdict::Allow(None),
        Action::Deny => Verdict::Deny(None),
    }
}

/// Every combination of the requests below against `set`; returns how many verdicts
/// were compared, and how many of them were a rule's deny.
fn compare(set: &RuleSet) -> (usize, usize) {
    let methods = [
        "GET", "HEAD", "POST", "TRACE", "PUT", "PROPFIND", "TRACK", "MKCOL",
    ];
    let targets = [
        "http://127.0.0.1:8080/1k",
        "http://www.mixed.test/",
        "http://mixed.test/",
        "http://x.ads.example/a",
        "http://tracker.example:8080/",
        "http://ads.test/",
        "http://WWW.Pixels.test/",
        "http://a.test/setup.exe",
        "https://a.test/p?utm_source=x",
        "http://a.test:25/",
        "http://a.test:443/",
        "https://a.test:80/",
        "http://social.example/",
        "http://v.video.example:1024/",
        "http://bigcasino.test/",
        "http://x.school.example/",
        "http://hidden.onion./",
        "https://a.test/dav/x",
        "http://a.test:65535/dav/",
        "/origin/form",
    ];
    let clients = [
        "127.0.0.1",
        "10.66.1.1",
        "10.1.2.3",
        "172.16.3.3",
        "169.254.1.1",
        "fd00::1",
        "::1",
    ];
    let users = [None, Some("ann"), Some("carl"), Some("bench"), Some("zed")];
    let clocks: [fn() -> LocalTime; 3] = [
        || LocalTime {
            minute: 10 * 60,
            weekday: 0,
        },
        || LocalTime {
            minute: 23 * 60,
            weekday: 2,
        },
        || LocalTime {
            minute: 3 * 60,
            weekday: 6,
        },
    ];
    let (mut compared, mut denied) = (0, 0);
    for method in methods {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        for target in targets {
            let uri: Uri = target.parse().unwrap();
            let scheme = uri.scheme_str().unwrap_or("http");
            let host = uri.host().unwrap_or("origin.test");
            let default_port = if scheme == "https" { 443 } else { 80 };
            let port = uri.port_u16().unwrap_or(default_port);
            for client in clients {
                for clock in &clocks {
                    let view = RequestView {
                        client: client.parse().unwrap(),
                        method: &method,
                        scheme,
                        host,
                        port,
                        uri: &uri,
                        clock,
                    };
                    for user in users {
                        for can_ask in [true, false] {
                            for default in [Action::Allow, Action::Deny] {
                                if default == Action::Allow {
                                    after_neighbours(set, &view, user, can_ask);
                                }
                                let walked = decide(set, &view, user, can_ask, default);
                                let defined =
                                    by_definition(set.rules(), &view, user, can_ask, default);
                                assert_eq!(
                                    walked,
                                    defined,
                                    "{method} {target} from {client} as {user:?}, \
                                     can ask {can_ask}, at {:?}",
                                    clock()
                                );
                                compared += 1;
                                denied += usize::from(matches!(walked, Verdict::Deny(Some(_))));
                            }
                        }
                    }
                }
            }
        }
    }
    (compared, denied)
}

/// Decides each request that differs from `view` in one fact the walk remembers per
/// thread (method, scheme, port, host, client, user, whether it may ask), each right
/// before `view` itself: what was kept for the one must not decide the other.
fn after_neighbours(set: &RuleSet, view: &RequestView<'_>, user: Option<&str>, can_ask: bool) {
    let other_method = if view.method == Method::GET {
        Method::POST
    } else {
        Method::GET
    };
    let other_scheme = if view.scheme == "https" {
        "http"
    } else {
        "https"
    };
    let other_host = if view.host == "x.ads.example" {
        "a.test"
    } else {
        "x.ads.example"
    };
    let other_client = if view.client == "10.66.1.1".parse::<std::net::IpAddr>().unwrap() {
        "127.0.0.1".parse().unwrap()
    } else {
        "10.66.1.1".parse().unwrap()
    };
    let other_user = if user == Some("bench") {
        Some("ann")
    } else {
        Some("bench")
    };
    let neighbours = [
        (
            RequestView {
                method: &other_method,
                ..*view
            },
            user,
            can_ask,
        ),
        (
            RequestView {
                scheme: other_scheme,
                ..*view
            },
            user,
            can_ask,
        ),
        (
            RequestView {
                port: view.port.wrapping_add(1),
                ..*view
            },
            user,
            can_ask,
        ),
        (
            RequestView {
                host: other_host,
                ..*view
            },
            user,
            can_ask,
        ),
        (
            RequestView {
                client: other_client,
                ..*view
            },
            user,
            can_ask,
        ),
        (RequestView { ..*view }, other_user, can_ask),
        (RequestView { ..*view }, None, can_ask),
        (RequestView { ..*view }, user, !can_ask),
    ];
    for (neighbour, n_user, n_can_ask) in &neighbours {
        for (v, u, c) in [(neighbour, *n_user, *n_can_ask), (view, user, can_ask)] {
            assert_eq!(
                decide(set, v, u, c, Action::Allow),
                by_definition(set.rules(), v, u, c, Action::Allow),
                "{} {}://{}:{} from {} as {u:?}, can ask {c}",
                v.method,
                v.scheme,
                v.host,
                v.port,
                v.client
            );
        }
    }
}

#[test]
fn the_walk_decides_as_the_rules_read_in_order() {
    let (compared, denied) = compare(&rule_set(BENCH));
    assert!(denied > compared / 10, "{denied} of {compared}");
}

#[test]
fn the_walk_decides_as_the_rules_read_in_order_past_sixty_four_rules() {
    // The bench's rules three times over, the later copies behind 70 rules that
    // never match, so the sets span several words.
    let (groups, rules) = BENCH.split_at(BENCH.find("[[rule]]").unwrap());
    let mut toml = groups.to_string();
    toml.push_str(rules);
    for _ in 0..70 {
        toml.push_str("[[rule]]\naction = \"deny\"\nusers = [\"nobody\"]\nports = [9]\n");
    }
    toml.push_str(&rules.replace("bench", "carl"));
    toml.push_str(&rules.replace("\"deny\"", "\"allow\""));
    let set = rule_set(&toml);
    assert!(set.rules().len() > 128);
    compare(&set);
}
