//! The built-in `access` module's rules through the `weir` binary: one test per kind
//! of rule, against the harness's real origin, with a forward and a reverse listener.
//! A denied request never reaches the origin, so the origin's count proves where a
//! request stopped. Authentication is in `access_auth.rs`.

mod common;

use std::time::Duration;

use common::module_config::{check_module_error, forward_and_reverse_with_modules};
use common::*;

/// The origin, answering every path the tests use, and a proxy with `rules` (the
/// module's settings after `name = "access"`).
fn setup(rules: &str) -> (TestOrigin, Proxy) {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("from the origin"));
    let proxy = forward_and_reverse_with_modules(
        &origin.base(),
        &format!("[[module]]\nname = \"access\"\n{rules}\n"),
    );
    (origin, proxy)
}

/// The status of a GET of `url` through the forward listener.
async fn forward_status(proxy: &Proxy, url: &str) -> u16 {
    let client = proxied_client(proxy.forward_addr());
    get(&client, url, &[]).await.status.as_u16()
}

/// The status of a GET of `path` on the reverse listener with this `Host`.
fn reverse_status(proxy: &Proxy, host: &str, path: &str) -> u16 {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    raw_exchange(proxy.reverse_addr(), request.as_bytes()).status
}

#[tokio::test]
async fn forward_listeners_deny_what_no_rule_allows_with_a_plain_page() {
    let (origin, proxy) = setup("[[module.rule]]\naction = \"allow\"\nurl_regex = \"/open/\"");
    let client = proxied_client(proxy.forward_addr());
    assert_eq!(get(&client, &origin.url("/open/a"), &[]).await.status, 200);
    let denied = get(&client, &origin.url("/closed/a"), &[]).await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        origin.count("/closed/a"),
        0,
        "a denied request is not forwarded"
    );
    assert!(denied
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let page = denied.text();
    assert!(page.contains("Access denied"), "{page}");
    for internal in [
        "weir",
        "Weir",
        "rule",
        "127.0.0.1",
        "/closed/a",
        "url_regex",
    ] {
        assert!(
            !page.contains(internal),
            "the page names {internal:?}: {page}"
        );
    }
    // The reverse listener has no rule allowing it either, and allows by default.
    assert_eq!(reverse_status(&proxy, "site.test", "/closed/b"), 200);
}

#[tokio::test]
async fn client_networks() {
    let (origin, proxy) = setup(
        "[[module.rule]]\naction = \"deny\"\nclients = [\"127.0.0.1/32\"]\n\
         [[module.rule]]\naction = \"allow\"",
    );
    assert_eq!(forward_status(&proxy, &origin.url("/a")).await, 403);
    let (origin, proxy) = setup(
        "[[module.rule]]\naction = \"deny\"\nclients = [\"10.0.0.0/8\", \"::1\"]\n\
         [[module.rule]]\naction = \"allow\"\nclients = [\"127.0.0.0/8\"]",
    );
    assert_eq!(forward_status(&proxy, &origin.url("/a")).await, 200);
}

#[tokio::test]
async fn destination_domains_exact_and_with_subdomains() {
    let (_origin, proxy) = setup(
        "[[module.rule]]\naction = \"allow\"\ndomains = [\"exact.test\", \".suffix.test\"]\n\
         [[module.rule]]\naction = \"deny\"",
    );
    assert_eq!(reverse_status(&proxy, "exact.test", "/a"), 200);
    assert_eq!(reverse_status(&proxy, "EXACT.test:80", "/a"), 200);
    assert_eq!(reverse_status(&proxy, "www.exact.test", "/a"), 403);
    assert_eq!(reverse_status(&proxy, "suffix.test", "/a"), 200);
    assert_eq!(reverse_status(&proxy, "a.b.suffix.test", "/a"), 200);
    assert_eq!(reverse_status(&proxy, "notsuffix.test", "/a"), 403);
    // Forward: the host of the absolute URL; a denial needs no name lookup.
    assert_eq!(
        forward_status(&proxy, "http://ads.elsewhere.test/x").await,
        403
    );
}

#[tokio::test]
async fn host_and_url_patterns() {
    let (origin, proxy) = setup(
        "[[module.rule]]\naction = \"deny\"\nhost_regex = '^(www\\.)?bad\\.'\n\
         [[module.rule]]\naction = \"deny\"\nurl_regex = '^http://[^/]+/private/'\n\
         [[module.rule]]\naction = \"allow\"",
    );
    assert_eq!(reverse_status(&proxy, "WWW.Bad.test", "/a"), 403);
    assert_eq!(reverse_status(&proxy, "notbad.test", "/a"), 200);
    assert_eq!(reverse_status(&proxy, "site.test", "/private/a"), 403);
    assert_eq!(
        reverse_status(&proxy, "site.test", "/public/private/a"),
        200
    );
    assert_eq!(forward_status(&proxy, &origin.url("/private/b")).await, 403);
    assert_eq!(forward_status(&proxy, &origin.url("/public/b")).await, 200);
    assert_eq!(origin.count("/private/a") + origin.count("/private/b"), 0);
}

#[tokio::test]
async fn methods() {
    let (origin, proxy) =
        setup("[[module.rule]]\naction = \"allow\"\nmethods = [\"GET\", \"HEAD\"]");
    let client = proxied_client(proxy.forward_addr());
    assert_eq!(get(&client, &origin.url("/m"), &[]).await.status, 200);
    let post = send(&client, "POST", &origin.url("/m"), &[], Some(b"x".to_vec())).await;
    assert_eq!(post.status, 403);
    assert_eq!(origin.count("/m"), 1);
}

#[tokio::test]
async fn ports() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("from the origin"));
    let (_o, proxy) = setup(&format!(
        "[[module.rule]]\naction = \"allow\"\nports = [\"1-1023\", {}]",
        origin.port()
    ));
    assert_eq!(forward_status(&proxy, &origin.url("/p")).await, 200);
    // Nothing listens there: a 403 rather than a 502 shows the rule stopped it.
    let closed = format!("http://127.0.0.1:{}/p", free_port());
    assert_eq!(forward_status(&proxy, &closed).await, 403);
}

#[tokio::test]
async fn schemes() {
    let (origin, proxy) = setup("[[module.rule]]\naction = \"allow\"\nschemes = [\"https\"]");
    assert_eq!(forward_status(&proxy, &origin.url("/s")).await, 403);
    let (origin, proxy) = setup("[[module.rule]]\naction = \"allow\"\nschemes = [\"HTTP\"]");
    assert_eq!(forward_status(&proxy, &origin.url("/s")).await, 200);
}

/// `HH:MM` of the local time `minutes` from now.
fn local_time_in(minutes: i64) -> String {
    (chrono::Local::now() + chrono::Duration::minutes(minutes))
        .format("%H:%M")
        .to_string()
}

#[tokio::test]
async fn time_of_day() {
    let around_now = format!("{}-{}", local_time_in(-10), local_time_in(10));
    let (origin, proxy) = setup(&format!(
        "[[module.rule]]\naction = \"allow\"\ntimes = [\"{around_now}\"]"
    ));
    assert_eq!(forward_status(&proxy, &origin.url("/t")).await, 200);
    // The rest of the day (running over midnight).
    let rest = format!("{}-{}", local_time_in(10), local_time_in(-10));
    let (origin, proxy) = setup(&format!(
        "[[module.rule]]\naction = \"allow\"\ntimes = [\"{rest}\"]"
    ));
    assert_eq!(forward_status(&proxy, &origin.url("/t")).await, 403);
}

#[tokio::test]
async fn weekdays() {
    use chrono::Datelike;
    let today = chrono::Local::now().weekday();
    let name = |d: chrono::Weekday| d.to_string().to_lowercase();
    let (origin, proxy) = setup(&format!(
        "[[module.rule]]\naction = \"allow\"\ndays = [\"{}\"]",
        name(today)
    ));
    assert_eq!(forward_status(&proxy, &origin.url("/d")).await, 200);
    let others = format!("{}-{}", name(today.succ()), name(today.pred()));
    let (origin, proxy) = setup(&format!(
        "[[module.rule]]\naction = \"allow\"\ndays = [\"{others}\"]"
    ));
    assert_eq!(forward_status(&proxy, &origin.url("/d")).await, 403);
}

#[tokio::test]
async fn rules_reload_with_the_configuration() {
    let (origin, proxy) = setup("[[module.rule]]\naction = \"allow\"");
    assert_eq!(forward_status(&proxy, &origin.url("/r")).await, 200);
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let denying = text.replace("action = \"allow\"", "action = \"deny\"");
    std::fs::write(proxy.config_path(), denying).unwrap();
    proxy.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while forward_status(&proxy, &origin.url("/r")).await != 403 {
        assert!(
            std::time::Instant::now() < deadline,
            "still allowed after the reload; log:\n{}",
            proxy.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn check_names_file_line_and_key_of_a_bad_pattern() {
    let message = check_module_error(
        "[[module]]\nname = \"access\"\n\n\
         [[module.rule]]\naction = \"allow\"\ndomains = [\"a.test\"]\n\n\
         [[module.rule]]\naction = \"deny\"\nurl_regex = \"/(unclosed\"\n",
        14,
        "module[0].rule[1].url_regex",
    );
    assert_eq!(message, "not a valid regular expression: unclosed group");
}

#[test]
fn check_names_file_line_and_key_of_an_unknown_group() {
    let tmp = TempDir::new("access-check-htpasswd");
    let dir = tmp.path();
    let htpasswd = dir.join("users");
    std::fs::write(&htpasswd, "").unwrap();
    let message = check_module_error(
        &format!(
            "[[module]]\nname = \"access\"\nhtpasswd = {:?}\n\n[module.groups]\nstaff = [\"ann\"]\n\n\
             [[module.rule]]\naction = \"allow\"\ngroups = [\"staff\",\n  \"teachers\"]\n",
            htpasswd.display().to_string()
        ),
        15,
        "module[0].rule[0].groups[1]",
    );
    assert!(message.contains("no group named `teachers`"), "{message}");
    assert!(
        message.contains("staff"),
        "the defined groups are listed: {message}"
    );
}
