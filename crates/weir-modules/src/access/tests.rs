use std::path::Path;

use weir_api::http::{Method, Uri};
use weir_api::Settings;

use super::htpasswd::Htpasswd;
use super::rules::{format_url, Action, LocalTime, RequestView, Verdict};
use super::settings::{day_span, parse, weekdays};
use super::view::split_host_port;
use super::walk::{decide, RuleSet};

fn rules(toml: &str) -> RuleSet {
    let text = format!("htpasswd = \"/dev/null\"\n[groups]\nstaff = [\"ann\"]\n{toml}");
    parse(&Settings::parse(&text).unwrap()).unwrap().rules
}

fn err(toml: &str) -> String {
    match parse(&Settings::parse(toml).unwrap()) {
        Ok(_) => panic!("accepted: {toml}"),
        Err(e) => e.to_string(),
    }
}

const MONDAY_NOON: fn() -> LocalTime = || LocalTime {
    minute: 12 * 60,
    weekday: 0,
};
const SUNDAY_NIGHT: fn() -> LocalTime = || LocalTime {
    minute: 23 * 60 + 30,
    weekday: 6,
};

fn judge(rules: &RuleSet, url: &str, user: Option<&str>, clock: &dyn Fn() -> LocalTime) -> Verdict {
    let uri: Uri = url.parse().unwrap();
    let method = Method::GET;
    let view = RequestView {
        client: "10.1.2.3".parse().unwrap(),
        method: &method,
        scheme: uri.scheme_str().unwrap(),
        host: uri.host().unwrap(),
        port: uri.port_u16().unwrap_or(80),
        uri: &uri,
        clock,
    };
    decide(rules, &view, user, true, Action::Deny)
}

#[test]
fn time_and_day_rules_follow_the_clock_given() {
    let r = rules(
        "[[rule]]\naction = \"allow\"\ntimes = [\"08:00-18:00\"]\ndays = [\"mon-fri\"]\n\
         [[rule]]\naction = \"allow\"\ntimes = [\"23:00-01:00\"]\ndays = [\"sun\"]",
    );
    assert_eq!(
        judge(&r, "http://a.test/", None, &MONDAY_NOON),
        Verdict::Allow(Some(0))
    );
    assert_eq!(
        judge(&r, "http://a.test/", None, &SUNDAY_NIGHT),
        Verdict::Allow(Some(1))
    );
    let saturday = || LocalTime {
        minute: 12 * 60,
        weekday: 5,
    };
    assert_eq!(
        judge(&r, "http://a.test/", None, &saturday),
        Verdict::Deny(None)
    );
}

#[test]
fn the_clock_is_read_only_for_time_rules() {
    let r = rules("[[rule]]\naction = \"allow\"\ndomains = [\".a.test\"]");
    let never = || -> LocalTime { panic!("no rule needs the time") };
    assert_eq!(
        judge(&r, "http://x.a.test/", None, &never),
        Verdict::Allow(Some(0))
    );
}

#[test]
fn users_and_groups_ask_for_credentials_first() {
    let r =
        rules("[[rule]]\naction = \"allow\"\ngroups = [\"staff\"]\n[[rule]]\naction = \"deny\"");
    assert_eq!(
        judge(&r, "http://a.test/", None, &MONDAY_NOON),
        Verdict::Challenge
    );
    assert_eq!(
        judge(&r, "http://a.test/", Some("ann"), &MONDAY_NOON),
        Verdict::Allow(Some(0))
    );
    assert_eq!(
        judge(&r, "http://a.test/", Some("bob"), &MONDAY_NOON),
        Verdict::Deny(Some(1))
    );
}

#[test]
fn domains_exact_and_with_subdomains() {
    let r = rules("[[rule]]\naction = \"allow\"\ndomains = [\"a.test\", \".b.test\"]");
    let allowed = |url| judge(&r, url, None, &MONDAY_NOON) == Verdict::Allow(Some(0));
    assert!(allowed("http://A.Test/"));
    assert!(!allowed("http://x.a.test/"));
    assert!(allowed("http://b.test/") && allowed("http://x.y.b.test/"));
    assert!(!allowed("http://xb.test/"));
}

#[test]
fn url_patterns_see_the_whole_url() {
    let r = rules("[[rule]]\naction = \"deny\"\nurl_regex = '^http://a\\.test:8080/private/'\n[[rule]]\naction = \"allow\"");
    assert_eq!(
        judge(&r, "http://a.test:8080/private/x", None, &MONDAY_NOON),
        Verdict::Deny(Some(0))
    );
    assert_eq!(
        judge(&r, "http://a.test:8080/public/x", None, &MONDAY_NOON),
        Verdict::Allow(Some(1))
    );
}

#[test]
fn spans_and_days_are_parsed() {
    assert_eq!(
        day_span("08:00-17:30").map(|s| (s.start, s.end)),
        Some((480, 1050))
    );
    assert_eq!(day_span("22:00-24:00").map(|s| s.end), Some(1440));
    assert!(day_span("25:00-26:00").is_none() && day_span("08:00").is_none());
    assert_eq!(weekdays("mon-fri"), Some(0b0011111));
    assert_eq!(weekdays("fri-mon"), Some(0b1110001));
    assert_eq!(weekdays("Sunday"), Some(0b1000000));
    assert!(weekdays("funday").is_none());
}

#[test]
fn bad_settings_name_their_key() {
    let e = err("[[rule]]\naction = \"allow\"\nurl_regex = \"(\"");
    assert!(
        e.starts_with("`rule[0].url_regex`: not a valid regular expression"),
        "{e}"
    );
    let e = err("htpasswd = \"/dev/null\"\n[[rule]]\naction = \"allow\"\ngroups = [\"staff\"]");
    assert!(
        e.starts_with("`rule[0].groups[0]`: no group named `staff`"),
        "{e}"
    );
    let e = err("[[rule]]\naction = \"allow\"\nusers = [\"ann\"]");
    assert!(
        e.starts_with("`rule[0].users`: a rule about users needs `htpasswd`"),
        "{e}"
    );
    let e = err("[[rule]]\naction = \"maybe\"");
    assert!(e.starts_with("`rule[0].action`"), "{e}");
    let e = err("[[rule]]\naction = \"allow\"\nclients = [\"10.0.0.0/8\", \"nowhere\"]");
    assert!(e.starts_with("`rule[0].clients[1]`"), "{e}");
    let e = err("[[rule]]\naction = \"allow\"\nports = [\"90-80\"]");
    assert!(e.starts_with("`rule[0].ports[0]`"), "{e}");
    assert!(err("").starts_with("`rule`"));
    assert!(err("realm = \"x\"\n[[rule]]\naction = \"allow\"").starts_with("`realm`"));
}

#[test]
fn htpasswd_takes_bcrypt_and_sha_crypt_only() {
    let bcrypt = bcrypt::hash_with_salt("pw-b", 4, [7; 16])
        .unwrap()
        .to_string();
    let sha = {
        use sha_crypt::PasswordHasher;
        sha_crypt::ShaCrypt::SHA256
            .hash_password_with_salt(b"pw-s", b"0123456789abcdef")
            .unwrap()
            .to_string()
    };
    let path = Path::new("users.htpasswd");
    let file = Htpasswd::parse(path, &format!("# staff\nann:{bcrypt}\n\nbob:{sha}\n")).unwrap();
    assert_eq!(file.verify("ann", b"pw-b").as_deref(), Some("ann"));
    assert!(file.verify("ann", b"pw-s").is_none());
    assert_eq!(file.verify("bob", b"pw-s").as_deref(), Some("bob"));
    assert!(file.verify("carl", b"pw-s").is_none());
    let e = Htpasswd::parse(path, &format!("ann:{bcrypt}\nbob:$apr1$x$y\n")).unwrap_err();
    assert!(
        e.starts_with("users.htpasswd:2: user `bob`: unsupported password hash"),
        "{e}"
    );
    let e = Htpasswd::parse(path, "ann\n").unwrap_err();
    assert!(e.starts_with("users.htpasswd:1:"), "{e}");
}

#[test]
fn host_and_port_of_a_host_header() {
    assert_eq!(split_host_port("a.test:8080"), ("a.test", Some(8080)));
    assert_eq!(split_host_port("a.test"), ("a.test", None));
    assert_eq!(split_host_port("[::1]:81"), ("[::1]", Some(81)));
    assert_eq!(split_host_port("[::1]"), ("[::1]", None));
    // The one-pass split says what the first version (searches with `str`) said.
    fn by_searches(value: &str) -> (&str, Option<u16>) {
        let value = value.trim();
        let port_at = match value.rfind(':') {
            Some(i) if !value[i..].contains(']') => i,
            _ => return (value, None),
        };
        if value.starts_with('[') || !value[..port_at].contains(':') {
            if let Ok(port) = value[port_at + 1..].parse() {
                return (&value[..port_at], Some(port));
            }
        }
        (value, None)
    }
    for value in [
        "",
        ":",
        ":80",
        "a:",
        "a:+80",
        "a:99999",
        " a.test:81 ",
        "::1",
        "[::1]:",
        "[::1]:x",
        "a]:80",
        "a:]80",
        "[a:b]:1:2",
        "1.2.3.4:0",
        "[fe80::1%eth0]:8080",
        "é.test:80",
    ] {
        assert_eq!(split_host_port(value), by_searches(value), "{value:?}");
    }
}

#[test]
fn failures_slow_down_one_client_up_to_the_bound() {
    use std::time::Duration;
    let config = super::settings::AuthConfig {
        htpasswd: "/dev/null".into(),
        realm: "r".into(),
        credential_ttl: Duration::from_secs(60),
        failure_delay: Duration::from_millis(100),
        failure_delay_max: Duration::from_millis(350),
    };
    let auth = super::auth::Authenticator::new(config).unwrap();
    let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let delays: Vec<u128> = (0..4).map(|_| auth.failed(a).as_millis()).collect();
    assert_eq!(delays, [100, 200, 350, 350]);
    assert_eq!(
        auth.failed(b).as_millis(),
        100,
        "another client starts over"
    );
    auth.succeeded(a);
    assert_eq!(
        auth.failed(a).as_millis(),
        100,
        "a success forgets the failures"
    );
}

#[test]
fn url_patterns_of_one_request_see_its_url_and_only_its() {
    let r = rules(
        "[[rule]]\naction = \"deny\"\nurl_regex = \"/a$\"\n\
         [[rule]]\naction = \"allow\"\nurl_regex = \"/b$\"",
    );
    // The second pattern matches the URL the first one formatted.
    assert_eq!(
        judge(&r, "http://a.test/b", None, &MONDAY_NOON),
        Verdict::Allow(Some(1))
    );
    // The next request on the thread is formatted anew.
    assert_eq!(
        judge(&r, "http://a.test/a", None, &MONDAY_NOON),
        Verdict::Deny(Some(0))
    );
    assert_eq!(
        judge(&r, "http://a.test/c", None, &MONDAY_NOON),
        Verdict::Deny(None)
    );
}

#[test]
fn host_patterns_tried_together_decide_as_one_by_one() {
    let r = rules(
        "[[rule]]\naction = \"deny\"\nhost_regex = '^ads\\.'\n\
         [[rule]]\naction = \"allow\"\nhost_regex = '^www\\.'\n\
         [[rule]]\naction = \"deny\"\nurl_regex = '\\.exe$'\n\
         [[rule]]\naction = \"allow\"\nurl_regex = '/ok$'",
    );
    let verdict = |url| judge(&r, url, None, &MONDAY_NOON);
    assert_eq!(verdict("http://ads.test/"), Verdict::Deny(Some(0)));
    // Another rule's pattern matching does not make this one match.
    assert_eq!(verdict("http://www.test/"), Verdict::Allow(Some(1)));
    assert_eq!(verdict("http://WWW.test/"), Verdict::Allow(Some(1)));
    assert_eq!(verdict("http://x.test/a.exe"), Verdict::Deny(Some(2)));
    assert_eq!(verdict("http://x.test/ok"), Verdict::Allow(Some(3)));
    assert_eq!(verdict("http://x.test/no"), Verdict::Deny(None));
}

#[test]
fn the_url_is_written_as_the_request_names_it() {
    let url_of = |method: Method, target: &str, scheme, host, port| {
        let uri: Uri = target.parse().unwrap();
        let view = RequestView {
            client: "10.1.2.3".parse().unwrap(),
            method: &method,
            scheme,
            host,
            port,
            uri: &uri,
            clock: &MONDAY_NOON,
        };
        let mut url = String::from("left over");
        format_url(&mut url, &view);
        (url, uri.to_string())
    };
    for target in [
        "http://a.test/",
        "http://a.test:8080/p/q?x=1&y",
        "https://[::1]:8443/",
        "http://a.test",
    ] {
        let (url, shown) = url_of(Method::GET, target, "http", "a.test", 80);
        assert_eq!(url, shown, "{target}");
    }
    let (url, _) = url_of(Method::CONNECT, "a.test:443", "", "a.test", 443);
    assert_eq!(url, "a.test:443");
    let (url, _) = url_of(Method::GET, "/p?q=1", "http", "a.test", 8080);
    assert_eq!(url, "http://a.test:8080/p?q=1");
    let (url, _) = url_of(Method::GET, "/p", "https", "a.test", 443);
    assert_eq!(url, "https://a.test/p");
}

#[test]
fn users_are_found_in_rules_past_the_sixty_fourth() {
    let mut toml = String::new();
    for _ in 0..69 {
        toml.push_str("[[rule]]\naction = \"deny\"\nusers = [\"nobody\"]\n");
    }
    toml.push_str("[[rule]]\naction = \"allow\"\ngroups = [\"staff\"]\n");
    let r = rules(&toml);
    let verdict = |user| judge(&r, "http://a.test/", Some(user), &MONDAY_NOON);
    assert_eq!(verdict("ann"), Verdict::Allow(Some(69)));
    assert_eq!(verdict("nobody"), Verdict::Deny(Some(0)));
    assert_eq!(verdict("carl"), Verdict::Deny(None));
}

#[test]
fn a_rule_about_users_challenges_only_when_the_rest_of_it_holds() {
    let r = rules(
        "[[rule]]\naction = \"allow\"\nusers = [\"ann\"]\ndomains = [\".a.test\"]\n\
         [[rule]]\naction = \"deny\"\ndomains = [\".a.test\"]\n\
         [[rule]]\naction = \"allow\"",
    );
    assert_eq!(
        judge(&r, "http://b.test/", None, &MONDAY_NOON),
        Verdict::Allow(Some(2))
    );
    assert_eq!(
        judge(&r, "http://x.a.test/", None, &MONDAY_NOON),
        Verdict::Challenge
    );
    // Where the client cannot be asked, the rule is passed over.
    let uri: Uri = "http://x.a.test/".parse().unwrap();
    let view = RequestView {
        client: "10.1.2.3".parse().unwrap(),
        method: &Method::GET,
        scheme: "http",
        host: "x.a.test",
        port: 80,
        uri: &uri,
        clock: &MONDAY_NOON,
    };
    assert_eq!(
        decide(&r, &view, None, false, Action::Allow),
        Verdict::Deny(Some(1))
    );
}

#[test]
fn the_local_time_kept_for_a_minute_is_the_clock_s() {
    use chrono::{Datelike, Timelike};
    for _ in 0..3 {
        let before = chrono::Local::now();
        let kept = LocalTime::now();
        let again = LocalTime::now();
        let after = chrono::Local::now();
        if before.minute() != after.minute() {
            continue; // a minute turned meanwhile: try again
        }
        let expected = LocalTime {
            minute: (after.hour() * 60 + after.minute()) as u16,
            weekday: after.weekday().num_days_from_monday() as u8,
        };
        assert_eq!((kept, again), (expected, expected));
        return;
    }
    panic!("the minute kept turning");
}

#[test]
fn the_host_remembered_is_the_host_of_this_rule_set_only() {
    let ads =
        rules("[[rule]]\naction = \"deny\"\nhost_regex = '^ads\\.'\n[[rule]]\naction = \"allow\"");
    let www =
        rules("[[rule]]\naction = \"deny\"\nhost_regex = '^www\\.'\n[[rule]]\naction = \"allow\"");
    for _ in 0..2 {
        for (set, url, verdict) in [
            (&ads, "http://ads.test/", Verdict::Deny(Some(0))),
            (&www, "http://ads.test/", Verdict::Allow(Some(1))),
            (&www, "http://www.test/", Verdict::Deny(Some(0))),
            (&ads, "http://www.test/", Verdict::Allow(Some(1))),
            (&ads, "http://ads.test/", Verdict::Deny(Some(0))),
            (&ads, "http://ads.test/", Verdict::Deny(Some(0))),
        ] {
            assert_eq!(judge(set, url, None, &MONDAY_NOON), verdict, "{url}");
        }
    }
}

#[test]
fn a_kept_url_start_serves_only_origin_form_requests_with_the_same_facts() {
    let r = rules("[[rule]]\naction = \"deny\"\nurl_regex = '^http://a\\.test/secret'\n");
    let decide_at = |target: &str| {
        let uri: Uri = target.parse().unwrap();
        let view = RequestView {
            client: "10.1.2.3".parse().unwrap(),
            method: &Method::GET,
            scheme: "http",
            host: "a.test",
            port: 80,
            uri: &uri,
            clock: &MONDAY_NOON,
        };
        decide(&r, &view, None, true, Action::Allow)
    };
    // The same scheme, host and port each time: the second request reuses the URL's
    // start; the absolute one, whose target names the port, must not.
    assert_eq!(decide_at("/open"), Verdict::Allow(None));
    assert_eq!(decide_at("/secret"), Verdict::Deny(Some(0)));
    assert_eq!(decide_at("http://a.test:80/secret"), Verdict::Allow(None));
    assert_eq!(decide_at("/secret/2"), Verdict::Deny(Some(0)));
    assert_eq!(decide_at("http://a.test/secret"), Verdict::Deny(Some(0)));
    assert_eq!(decide_at("/"), Verdict::Allow(None));
}

#[test]
fn a_kept_host_field_is_used_only_for_the_same_bytes() {
    use weir_api::engine::new_txn;
    let txn = new_txn("10.1.2.3:5000".parse().unwrap(), 1);
    let seen = |host: Option<&str>| {
        let mut request = weir_api::http::Request::get("/x").body(()).unwrap();
        if let Some(host) = host {
            let value = weir_api::http::HeaderValue::from_bytes(host.as_bytes()).unwrap();
            request.headers_mut().insert("host", value);
        }
        let (head, ()) = request.into_parts();
        super::view::with_view(&txn, &head, &MONDAY_NOON, |v| (v.host.to_string(), v.port))
    };
    for _ in 0..2 {
        assert_eq!(seen(Some("a.test:8080")), ("a.test".into(), 8080));
        assert_eq!(seen(Some("a.test:8081")), ("a.test".into(), 8081));
        assert_eq!(seen(Some("b.test")), ("b.test".into(), 80));
        assert_eq!(seen(None), ("".into(), 80));
        assert_eq!(seen(Some("b.test\u{e9}")), ("".into(), 80));
        assert_eq!(seen(Some("[::1]:81")), ("[::1]".into(), 81));
    }
}
