//! RFC 9111 and RFC 9213 to the letter, through a real origin: directive case, several
//! `Age` values, invalid and obsolete dates, explicit freshness on any status,
//! `must-understand`, qualified `no-cache`, cookies, and targeted fields.

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

/// Fetches `url` twice through `client`: the second answer shows what was stored.
async fn twice(client: &reqwest::Client, url: &str) -> (Fetched, Fetched) {
    let first = get(client, url, &[]).await;
    let second = get(client, url, &[]).await;
    (first, second)
}

#[tokio::test]
async fn directive_names_are_case_insensitive() {
    let (origin, _proxy, client) = setup();
    origin.route("/upper", Reply::ok("u").cc("MaX-aGe=3600"));
    origin.route("/nocache", Reply::ok("n").cc("No-CaChE, max-age=3600"));
    origin.route("/nostore", Reply::ok("s").cc("No-StOrE, max-age=3600"));
    let (_, second) = twice(&client, &origin.url("/upper")).await;
    assert_hit(&second, "MaX-aGe=3600");
    let (_, second) = twice(&client, &origin.url("/nocache")).await;
    assert_not_hit(&second, "No-CaChE");
    let (_, second) = twice(&client, &origin.url("/nostore")).await;
    assert_not_hit(&second, "No-StOrE");
    assert_eq!(origin.count("/upper"), 1);
    assert_eq!(origin.count("/nocache"), 2);
    assert_eq!(origin.count("/nostore"), 2);
}

#[tokio::test]
async fn the_first_age_value_counts() {
    let (origin, _proxy, client) = setup();
    let stale = Reply::ok("old").cc("max-age=3600");
    origin.route("/one-line", stale.clone().header("age", "7200, 0"));
    origin.route("/two-lines", stale.header("age", "7200").header("age", "0"));
    origin.route(
        "/young",
        Reply::ok("y").cc("max-age=3600").header("age", "0, 7200"),
    );
    for path in ["/one-line", "/two-lines"] {
        let (_, second) = twice(&client, &origin.url(path)).await;
        assert_not_hit(&second, path);
        assert_eq!(origin.count(path), 2, "{path} arrived stale");
    }
    let (_, second) = twice(&client, &origin.url("/young")).await;
    assert_hit(&second, "Age: 0, 7200");
}

#[tokio::test]
async fn an_invalid_expires_is_already_expired() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/spaces",
        Reply::ok("s").header("expires", "Thu, 18  Aug  2050 02:01:18 GMT"),
    );
    origin.route("/zero", Reply::ok("z").header("expires", "0"));
    for path in ["/spaces", "/zero"] {
        let (_, second) = twice(&client, &origin.url(path)).await;
        assert_not_hit(&second, path);
        assert_eq!(origin.count(path), 2, "{path}");
    }
}

#[tokio::test]
async fn obsolete_date_formats_are_read() {
    let (origin, _proxy, client) = setup();
    // An hour after the test origin's own Date, in RFC 850 and asctime formats.
    let in_an_hour = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let imf = httpdate::fmt_http_date(in_an_hour);
    // "Sun, 06 Nov 2094 08:49:37 GMT" -> "Sunday, 06-Nov-94 08:49:37 GMT" needs the
    // weekday's full name; asctime is "Sun Nov  6 08:49:37 2094".
    let parts: Vec<&str> = imf.split([' ', ',']).filter(|s| !s.is_empty()).collect();
    let (wd, day, mon, year, time) = (parts[0], parts[1], parts[2], parts[3], parts[4]);
    let long = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
    .into_iter()
    .find(|l| l.starts_with(wd))
    .unwrap();
    let rfc850 = format!("{long}, {day}-{mon}-{} {time} GMT", &year[2..]);
    let asctime = format!(
        "{wd} {mon} {:>2} {time} {year}",
        day.trim_start_matches('0')
    );
    origin.route("/rfc850", Reply::ok("a").header("expires", rfc850.as_str()));
    origin.route(
        "/asctime",
        Reply::ok("b").header("expires", asctime.as_str()),
    );
    for path in ["/rfc850", "/asctime"] {
        let (_, second) = twice(&client, &origin.url(path)).await;
        assert_hit(&second, path);
    }
}

#[tokio::test]
async fn any_final_status_with_explicit_freshness_is_stored() {
    let (origin, _proxy, client) = setup();
    for status in [299, 400, 499, 500, 502, 503, 504, 599] {
        let path = format!("/status-{status}");
        origin.route(&path, Reply::status(status).body("x").cc("max-age=60"));
        let (first, second) = twice(&client, &origin.url(&path)).await;
        assert_eq!(first.status.as_u16(), status);
        assert_eq!(second.status.as_u16(), status);
        assert_hit(&second, &path);
    }
    // Without explicit freshness, a 500 is not stored.
    origin.route("/plain-500", Reply::status(500).body("x"));
    let (_, second) = twice(&client, &origin.url("/plain-500")).await;
    assert_not_hit(&second, "500 without max-age");
}

#[tokio::test]
async fn must_understand_stores_despite_no_store() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/mu",
        Reply::ok("m").cc("max-age=3600, no-store, must-understand"),
    );
    let (_, second) = twice(&client, &origin.url("/mu")).await;
    assert_hit(&second, "must-understand");
    assert_eq!(origin.count("/mu"), 1);
}

#[tokio::test]
async fn qualified_no_cache_and_private_fields_are_not_reused() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/q",
        Reply::ok("q")
            .cc(r#"max-age=3600, no-cache="x-secret, x-other", private="x-mine""#)
            .header("x-secret", "s")
            .header("x-mine", "m")
            .header("x-kept", "k"),
    );
    let (first, second) = twice(&client, &origin.url("/q")).await;
    assert_eq!(first.header("x-secret").as_deref(), Some("s"));
    assert_hit(&second, "qualified no-cache");
    assert_eq!(second.header("x-secret"), None);
    assert_eq!(second.header("x-mine"), None);
    assert_eq!(second.header("x-kept").as_deref(), Some("k"));
}

/// A cookie is one client's: by default a response that sets one is not stored, even
/// `public`, unless the origin keeps `Set-Cookie` out of the stored copy; an operator
/// may store it as RFC 9111 allows.
#[tokio::test]
async fn set_cookie_is_not_stored_unless_kept_out_or_allowed() {
    let origin = TestOrigin::start();
    for (path, cc) in [
        ("/cookie", "max-age=3600"),
        ("/public", "public, max-age=3600"),
    ] {
        origin.route(path, Reply::ok("c").cc(cc).header("set-cookie", "a=1"));
    }
    origin.route(
        "/kept-out",
        Reply::ok("k")
            .cc(r#"max-age=3600, private="Set-Cookie""#)
            .header("set-cookie", "a=1"),
    );
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    for path in ["/cookie", "/public"] {
        let (first, second) = twice(&client, &origin.url(path)).await;
        assert_eq!(first.header("set-cookie").as_deref(), Some("a=1"));
        assert_not_hit(&second, path);
        assert_eq!(second.header("set-cookie").as_deref(), Some("a=1"));
    }
    assert_eq!(origin.count("/cookie"), 2);
    let (first, second) = twice(&client, &origin.url("/kept-out")).await;
    assert_eq!(first.header("set-cookie").as_deref(), Some("a=1"));
    assert_hit(&second, "private=\"Set-Cookie\"");
    assert_eq!(second.header("set-cookie"), None);

    let storing = Proxy::builder()
        .forward()
        .option("cache", "refuse_set_cookie", "false")
        .start();
    let client = proxied_client(storing.forward_addr());
    let (_, second) = twice(&client, &origin.url("/cookie")).await;
    assert_hit(&second, "refuse_set_cookie = false");
    assert_eq!(second.header("set-cookie").as_deref(), Some("a=1"));
}

#[tokio::test]
async fn cdn_cache_control_rules_reverse_listeners() {
    let origin = TestOrigin::start();
    origin.route(
        "/cdn-fresh",
        Reply::ok("f")
            .cc("no-store")
            .header("cdn-cache-control", "max-age=600"),
    );
    origin.route(
        "/cdn-nostore",
        Reply::ok("n")
            .cc("max-age=600")
            .header("cdn-cache-control", "no-store"),
    );
    origin.route(
        "/own-field",
        Reply::ok("o")
            .cc("max-age=600")
            .header("cdn-cache-control", "max-age=600")
            .header("weir-cache-control", "no-store"),
    );
    let proxy = Proxy::builder()
        .reverse(&origin.base())
        .forward()
        .option("cache", "targeted_field", "Weir-Cache-Control")
        .start();
    let client = direct_client();
    let reverse = |p: &str| proxy.reverse_url(p);
    let (_, second) = twice(&client, &reverse("/cdn-fresh")).await;
    assert_hit(
        &second,
        "CDN-Cache-Control: max-age over Cache-Control: no-store",
    );
    let (_, second) = twice(&client, &reverse("/cdn-nostore")).await;
    assert_not_hit(&second, "CDN-Cache-Control: no-store");
    let (_, second) = twice(&client, &reverse("/own-field")).await;
    assert_not_hit(&second, "the operator's field comes first");

    // A forward listener ignores targeted fields unless configured: Cache-Control rules.
    let forward = proxied_client(proxy.forward_addr());
    origin.route(
        "/fwd",
        Reply::ok("w")
            .cc("max-age=600")
            .header("cdn-cache-control", "no-store"),
    );
    let (_, second) = twice(&forward, &origin.url("/fwd")).await;
    assert_hit(&second, "forward listener, CDN-Cache-Control ignored");
}

#[tokio::test]
async fn a_forward_listener_can_obey_targeted_fields() {
    let origin = TestOrigin::start();
    origin.route(
        "/fwd-cdn",
        Reply::ok("w")
            .cc("max-age=600")
            .header("cdn-cache-control", "no-store"),
    );
    let proxy = Proxy::builder()
        .forward()
        .listener_line("targeted_cache_control = true")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let (_, second) = twice(&client, &origin.url("/fwd-cdn")).await;
    assert_not_hit(&second, "forward listener told to obey CDN-Cache-Control");
}
