//! Caching (memory tier, RFC 9111), request coalescing and `Cache-Status` (RFC 9211).
//! Each test asserts what the client saw and how many requests reached the origin.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// An origin, a forward proxy with the default configuration, and a client using it.
fn setup() -> (TestOrigin, Proxy, reqwest::Client) {
    let origin = TestOrigin::start();
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    (origin, proxy, client)
}

fn assert_hit(r: &Fetched, what: &str) {
    assert!(
        is_hit(&r.cache_status()),
        "{what}: expected `Cache-Status: weir; hit`, got {:?}",
        r.cache_status()
    );
}

fn assert_not_hit(r: &Fetched, what: &str) {
    let cs = r.cache_status();
    assert!(
        weir_cache_status(&cs).is_some() && !is_hit(&cs),
        "{what}: expected a weir Cache-Status that is not a hit, got {cs:?}"
    );
}

fn assert_stored_miss(r: &Fetched, what: &str) {
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("miss")) && cs_has(&cs, "stored", None),
        "{what}: expected `Cache-Status: weir; fwd=miss; stored`, got {cs:?}"
    );
}

fn age(r: &Fetched) -> u64 {
    r.header("age")
        .unwrap_or_else(|| panic!("no Age header; headers: {:?}", r.headers))
        .trim()
        .parse()
        .expect("Age is an integer")
}

#[tokio::test]
async fn fresh_response_is_served_from_cache_with_age() {
    let (origin, _proxy, client) = setup();
    origin.route("/fresh", Reply::ok("fresh body").cc("max-age=60"));
    let url = origin.url("/fresh");

    let first = get(&client, &url, &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "fresh body");
    assert_stored_miss(&first, "first request");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = get(&client, &url, &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.text(), "fresh body");
    assert_hit(&second, "second request");
    assert!(age(&second) >= 1, "Age after 1.1 s: {}", age(&second));
    assert_eq!(
        second.header("cache-control").as_deref(),
        Some("max-age=60")
    );
    assert_eq!(origin.count("/fresh"), 1);
}

#[tokio::test]
async fn no_store_response_is_not_cached() {
    let (origin, _proxy, client) = setup();
    origin.route("/nostore", Reply::ok("secret").cc("no-store, max-age=60"));
    let url = origin.url("/nostore");
    for i in 0..2 {
        let r = get(&client, &url, &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "secret"));
        assert_not_hit(&r, &format!("request {i}"));
        assert!(
            !cs_has(&r.cache_status(), "stored", None),
            "{:?}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count("/nostore"), 2);
}

#[tokio::test]
async fn private_response_is_not_cached() {
    let (origin, _proxy, client) = setup();
    origin.route("/private", Reply::ok("mine").cc("private, max-age=60"));
    let url = origin.url("/private");
    for i in 0..2 {
        let r = get(&client, &url, &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "mine"));
        assert_not_hit(&r, &format!("request {i}"));
    }
    assert_eq!(origin.count("/private"), 2);
}

#[tokio::test]
async fn authorized_request_with_plain_max_age_is_not_stored() {
    let (origin, _proxy, client) = setup();
    origin.route("/auth-plain", Reply::ok("for alice").cc("max-age=60"));
    let url = origin.url("/auth-plain");
    let auth = [("authorization", "Bearer alice-token")];
    for i in 0..2 {
        let r = get(&client, &url, &auth).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "for alice"));
        assert_not_hit(&r, &format!("request {i}"));
    }
    assert_eq!(origin.count("/auth-plain"), 2);
    assert_eq!(
        origin
            .last("/auth-plain")
            .unwrap()
            .header("authorization")
            .as_deref(),
        Some("Bearer alice-token"),
        "Authorization must reach the origin"
    );
}

#[tokio::test]
async fn authorized_request_with_s_maxage_is_stored() {
    let (origin, _proxy, client) = setup();
    origin.route("/auth-shared", Reply::ok("shared").cc("s-maxage=60"));
    let url = origin.url("/auth-shared");
    let auth = [("authorization", "Bearer alice-token")];
    let first = get(&client, &url, &auth).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "shared")
    );
    assert_stored_miss(&first, "first request");
    let second = get(&client, &url, &auth).await;
    assert_eq!(
        (second.status.as_u16(), second.text().as_str()),
        (200, "shared")
    );
    assert_hit(&second, "second request");
    assert_eq!(origin.count("/auth-shared"), 1);
}

#[tokio::test]
async fn status_404_is_cacheable_by_default_with_heuristic_freshness() {
    let (origin, _proxy, client) = setup();
    // No Cache-Control, no Expires: only Last-Modified (ten days ago) gives freshness.
    origin.route(
        "/gone",
        Reply::status(404)
            .body("not here")
            .header("last-modified", http_date(10 * 86400)),
    );
    let url = origin.url("/gone");
    let first = get(&client, &url, &[]).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (404, "not here")
    );
    assert_stored_miss(&first, "first request");
    let second = get(&client, &url, &[]).await;
    assert_eq!(
        (second.status.as_u16(), second.text().as_str()),
        (404, "not here")
    );
    assert_hit(&second, "second request");
    assert_eq!(origin.count("/gone"), 1);
}

#[tokio::test]
async fn status_not_cacheable_by_default_needs_explicit_freshness() {
    let (origin, _proxy, client) = setup();
    // 500 and 403 are not heuristically cacheable: Last-Modified alone does not make them
    // reusable.
    origin.route(
        "/err500",
        Reply::status(500)
            .body("boom")
            .header("last-modified", http_date(10 * 86400)),
    );
    origin.route(
        "/err403",
        Reply::status(403)
            .body("no")
            .header("last-modified", http_date(10 * 86400)),
    );
    for path in ["/err500", "/err403"] {
        for _ in 0..2 {
            let r = get(&client, &origin.url(path), &[]).await;
            assert!(r.status == 500 || r.status == 403);
            assert_not_hit(&r, path);
        }
        assert_eq!(origin.count(path), 2, "{path}");
    }
}

#[tokio::test]
async fn heuristic_freshness_from_last_modified() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/heur",
        Reply::ok("heuristic").header("last-modified", http_date(100 * 86400)),
    );
    // No validator, no freshness information at all: never reused as fresh.
    origin.route("/nothing", Reply::ok("no info"));
    let first = get(&client, &origin.url("/heur"), &[]).await;
    assert_eq!(first.text(), "heuristic");
    let second = get(&client, &origin.url("/heur"), &[]).await;
    assert_eq!(second.text(), "heuristic");
    assert_hit(&second, "heuristically fresh response");
    assert_eq!(origin.count("/heur"), 1);

    for _ in 0..2 {
        let r = get(&client, &origin.url("/nothing"), &[]).await;
        assert_eq!(r.text(), "no info");
        assert_not_hit(&r, "response without freshness information");
    }
    assert_eq!(origin.count("/nothing"), 2);
}

#[tokio::test]
async fn s_maxage_overrides_max_age_in_a_shared_cache() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/smax",
        Reply::ok("shared fresh").cc("max-age=0, s-maxage=60"),
    );
    let url = origin.url("/smax");
    get(&client, &url, &[]).await;
    let second = get(&client, &url, &[]).await;
    assert_eq!(second.text(), "shared fresh");
    assert_hit(&second, "s-maxage=60 with max-age=0");
    assert_eq!(origin.count("/smax"), 1);
}

#[tokio::test]
async fn expires_header_gives_freshness() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/expires-future",
        Reply::ok("future").header("expires", http_date(-3600)),
    );
    origin.route(
        "/expires-past",
        Reply::ok("past").header("expires", http_date(3600)),
    );
    for _ in 0..2 {
        get(&client, &origin.url("/expires-future"), &[]).await;
    }
    let r = get(&client, &origin.url("/expires-future"), &[]).await;
    assert_eq!(r.text(), "future");
    assert_hit(&r, "Expires in an hour");
    assert_eq!(origin.count("/expires-future"), 1);

    for _ in 0..2 {
        let r = get(&client, &origin.url("/expires-past"), &[]).await;
        assert_eq!(r.text(), "past");
        assert_not_hit(&r, "Expires an hour ago");
    }
    assert_eq!(origin.count("/expires-past"), 2);
}

#[tokio::test]
async fn origin_age_counts_against_freshness_and_is_passed_on() {
    let (origin, _proxy, client) = setup();
    // Already 30 s old with 60 s of freshness: stored, and Age starts at 30.
    origin.route(
        "/aged",
        Reply::ok("aged").cc("max-age=60").header("age", "30"),
    );
    // Already 100 s old with 60 s of freshness: stale on arrival.
    origin.route(
        "/too-old",
        Reply::ok("old").cc("max-age=60").header("age", "100"),
    );

    get(&client, &origin.url("/aged"), &[]).await;
    let r = get(&client, &origin.url("/aged"), &[]).await;
    assert_hit(&r, "/aged");
    assert!(
        age(&r) >= 30,
        "Age must include the origin's Age: {}",
        age(&r)
    );
    assert_eq!(origin.count("/aged"), 1);

    get(&client, &origin.url("/too-old"), &[]).await;
    let r = get(&client, &origin.url("/too-old"), &[]).await;
    assert_eq!(r.text(), "old");
    assert_not_hit(&r, "/too-old (stale on arrival)");
    assert_eq!(origin.count("/too-old"), 2);
}

#[tokio::test]
async fn request_no_cache_goes_to_origin() {
    let (origin, _proxy, client) = setup();
    origin.route("/nc", Reply::ok("nc").cc("max-age=60"));
    let url = origin.url("/nc");
    get(&client, &url, &[]).await;
    assert_hit(&get(&client, &url, &[]).await, "plain request");
    let r = get(&client, &url, &[("cache-control", "no-cache")]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "nc"));
    assert_not_hit(&r, "request with no-cache");
    assert_eq!(origin.count("/nc"), 2);
}

#[tokio::test]
async fn request_max_age_limits_the_age_accepted() {
    let (origin, _proxy, client) = setup();
    origin.route("/rma", Reply::ok("rma").cc("max-age=60"));
    let url = origin.url("/rma");
    get(&client, &url, &[]).await;
    let r = get(&client, &url, &[("cache-control", "max-age=30")]).await;
    assert_hit(&r, "max-age=30 on a young entry");
    assert_eq!(origin.count("/rma"), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = get(&client, &url, &[("cache-control", "max-age=1")]).await;
    assert_eq!(r.text(), "rma");
    assert_not_hit(&r, "max-age=1 on a 2 s old entry");
    assert_eq!(origin.count("/rma"), 2);
}

#[tokio::test]
async fn request_max_stale_accepts_a_stale_entry() {
    let (origin, _proxy, client) = setup();
    origin.route("/stale", Reply::ok("stale ok").cc("max-age=1"));
    let url = origin.url("/stale");
    get(&client, &url, &[]).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = get(&client, &url, &[("cache-control", "max-stale=60")]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "stale ok"));
    assert_hit(&r, "max-stale=60 on an entry 1 s stale");
    assert_eq!(origin.count("/stale"), 1);
    let r = get(&client, &url, &[]).await;
    assert_not_hit(&r, "no max-stale on a stale entry");
    assert_eq!(origin.count("/stale"), 2);
}

#[tokio::test]
async fn request_min_fresh_requires_remaining_freshness() {
    let (origin, _proxy, client) = setup();
    origin.route("/minfresh", Reply::ok("mf").cc("max-age=60"));
    let url = origin.url("/minfresh");
    get(&client, &url, &[]).await;
    let r = get(&client, &url, &[("cache-control", "min-fresh=10")]).await;
    assert_hit(&r, "min-fresh=10 with ~60 s left");
    assert_eq!(origin.count("/minfresh"), 1);
    let r = get(&client, &url, &[("cache-control", "min-fresh=120")]).await;
    assert_eq!(r.text(), "mf");
    assert_not_hit(&r, "min-fresh=120 with ~60 s left");
    assert_eq!(origin.count("/minfresh"), 2);
}

#[tokio::test]
async fn only_if_cached_on_a_miss_gets_504() {
    let (origin, _proxy, client) = setup();
    origin.route("/oic", Reply::ok("cached later").cc("max-age=60"));
    let url = origin.url("/oic");
    let r = get(&client, &url, &[("cache-control", "only-if-cached")]).await;
    assert_eq!(r.status, 504);
    assert_eq!(origin.count("/oic"), 0);
    get(&client, &url, &[]).await;
    let r = get(&client, &url, &[("cache-control", "only-if-cached")]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "cached later")
    );
    assert_hit(&r, "only-if-cached on a stored entry");
    assert_eq!(origin.count("/oic"), 1);
}

#[tokio::test]
async fn stale_entry_is_validated_with_if_none_match_and_updated_on_304() {
    let (origin, _proxy, client) = setup();
    origin.route_fn("/etag", |req| {
        if req.header("if-none-match").as_deref() == Some("\"v1\"") {
            Reply::status(304)
                .header("etag", "\"v1\"")
                .cc("max-age=60")
                .header("x-version", "2")
        } else {
            Reply::ok("etag body")
                .header("etag", "\"v1\"")
                .cc("max-age=1")
                .header("x-version", "1")
        }
    });
    let url = origin.url("/etag");
    let first = get(&client, &url, &[]).await;
    assert_eq!(first.header("x-version").as_deref(), Some("1"));

    tokio::time::sleep(Duration::from_millis(1300)).await;
    let second = get(&client, &url, &[]).await;
    assert_eq!(
        second.status, 200,
        "the client did not ask a conditional question"
    );
    assert_eq!(second.text(), "etag body");
    assert_eq!(
        second.header("x-version").as_deref(),
        Some("2"),
        "headers updated from the 304"
    );
    assert_eq!(
        second.header("cache-control").as_deref(),
        Some("max-age=60")
    );
    let cs = second.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected `weir; fwd=stale; fwd-status=304`, got {cs:?}"
    );
    assert_eq!(origin.count("/etag"), 2);
    let validation = origin.last("/etag").unwrap();
    assert_eq!(
        validation.header("if-none-match").as_deref(),
        Some("\"v1\"")
    );

    // The refreshed entry is fresh for 60 s now.
    let third = get(&client, &url, &[]).await;
    assert_hit(&third, "after the 304 refresh");
    assert_eq!(third.text(), "etag body");
    assert_eq!(third.header("x-version").as_deref(), Some("2"));
    assert_eq!(origin.count("/etag"), 2);
}

#[tokio::test]
async fn stale_entry_is_validated_with_if_modified_since() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(3600);
    let lm = last_modified.clone();
    origin.route_fn("/ims", move |req| {
        if req.header("if-modified-since").as_deref() == Some(lm.as_str()) {
            Reply::status(304)
                .cc("max-age=60")
                .header("last-modified", lm.clone())
        } else {
            Reply::ok("ims body")
                .cc("max-age=1")
                .header("last-modified", lm.clone())
        }
    });
    let url = origin.url("/ims");
    get(&client, &url, &[]).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "ims body"));
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected `weir; fwd=stale; fwd-status=304`, got {cs:?}"
    );
    assert_eq!(origin.count("/ims"), 2);
    assert_eq!(
        origin
            .last("/ims")
            .unwrap()
            .header("if-modified-since")
            .as_deref(),
        Some(last_modified.as_str())
    );
    assert_hit(&get(&client, &url, &[]).await, "after the 304 refresh");
    assert_eq!(origin.count("/ims"), 2);
}

#[tokio::test]
async fn stale_entry_replaced_when_origin_sends_a_new_response() {
    let (origin, _proxy, client) = setup();
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    origin.route_fn("/changing", move |_| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("version {n}"))
            .cc("max-age=1")
            .header("etag", format!("\"v{n}\""))
    });
    let url = origin.url("/changing");
    assert_eq!(get(&client, &url, &[]).await.text(), "version 1");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "version 2"));
    assert_eq!(
        origin
            .last("/changing")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"v1\""),
        "the stale entry's validator is sent"
    );
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.text(), "version 2");
    assert_hit(&r, "the new response is stored");
    assert_eq!(origin.count("/changing"), 2);
}

#[tokio::test]
async fn origin_304_without_validators_refreshes_and_one_with_another_etag_is_refused() {
    let (origin, _proxy, client) = setup();
    // A 304 without ETag/Last-Modified confirms the copy Weir asked about.
    origin.route_fn("/bare-304", |req| {
        if req.has_header("if-none-match") {
            Reply::status(304)
                .cc("max-age=60")
                .header("x-refreshed", "yes")
        } else {
            Reply::ok("original body")
                .header("etag", "\"v1\"")
                .cc("max-age=1")
        }
    });
    // A 304 naming another strong ETag is about a representation Weir does not hold.
    origin.route_fn("/other-etag-304", |req| {
        if req.has_header("if-none-match") {
            Reply::status(304).header("etag", "\"v2\"").cc("max-age=60")
        } else {
            Reply::ok("v1 body")
                .header("etag", "\"v1\"")
                .cc("max-age=1")
        }
    });
    let bare = origin.url("/bare-304");
    let other = origin.url("/other-etag-304");
    let first = get(&client, &bare, &[]).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "original body")
    );
    assert_stored_miss(&first, "first request (bare 304 case)");
    let first = get(&client, &other, &[]).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "v1 body")
    );
    assert_stored_miss(&first, "first request (other ETag case)");

    tokio::time::sleep(Duration::from_millis(1300)).await;

    // The client's GET is unconditional: it must get the stored body, updated.
    let r = get(&client, &bare, &[]).await;
    assert_eq!(
        r.status, 200,
        "an unconditional GET answered with the origin's bare 304; headers {:?}",
        r.headers
    );
    assert_eq!(r.text(), "original body");
    assert_eq!(
        r.header("x-refreshed").as_deref(),
        Some("yes"),
        "headers updated from the 304"
    );
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected `weir; fwd=stale; fwd-status=304`, got {cs:?}"
    );
    assert_eq!(origin.count("/bare-304"), 2);
    assert_eq!(
        origin
            .last("/bare-304")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"v1\""),
        "the validation carries the stored ETag"
    );
    let r = get(&client, &bare, &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "original body")
    );
    assert_hit(&r, "after the refresh by a bare 304");
    assert_eq!(r.header("x-refreshed").as_deref(), Some("yes"));
    assert_eq!(origin.count("/bare-304"), 2);

    // Another strong ETag: no 304 to a client that asked no question, and no reuse.
    let r = get(&client, &other, &[]).await;
    assert_ne!(
        r.status, 304,
        "an unconditional GET answered with a 304 for ETag \"v2\""
    );
    assert_eq!(r.status, 502, "body: {:?}", r.text());
    assert!(
        !r.text().trim().is_empty(),
        "the 502 needs a short reason in the body"
    );
    let ct = r.header("content-type").unwrap_or_default();
    assert!(ct.starts_with("text/plain"), "502: Content-Type {ct:?}");
    assert_eq!(origin.count("/other-etag-304"), 2);
    assert_eq!(
        origin
            .last("/other-etag-304")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"v1\"")
    );
    let r = get(&client, &other, &[]).await;
    assert_eq!(
        origin.count("/other-etag-304"),
        3,
        "the entry refused by the origin's 304 was still served"
    );
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "v1 body"));
    assert_not_hit(&r, "after the refused 304");
}

#[tokio::test]
async fn clients_own_conditional_requests_get_304_from_the_cache() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(7200);
    origin.route(
        "/cond",
        Reply::ok("conditional body")
            .cc("max-age=60")
            .header("etag", "\"abc\"")
            .header("last-modified", last_modified.clone()),
    );
    let url = origin.url("/cond");
    get(&client, &url, &[]).await;

    let r = get(&client, &url, &[("if-none-match", "\"abc\"")]).await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag").as_deref(), Some("\"abc\""));

    let r = get(&client, &url, &[("if-none-match", "\"other\"")]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "conditional body")
    );

    let r = get(
        &client,
        &url,
        &[("if-modified-since", last_modified.as_str())],
    )
    .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());

    assert_eq!(origin.count("/cond"), 1, "all answered from the cache");
}

#[tokio::test]
async fn vary_keeps_one_entry_per_variant() {
    let (origin, _proxy, client) = setup();
    origin.route_fn("/vary", |req| {
        let enc = req.header("accept-encoding").unwrap_or_default();
        Reply::ok(format!("encoded for {enc}"))
            .cc("max-age=60")
            .header("vary", "Accept-Encoding")
    });
    let url = origin.url("/vary");
    let gzip = [("accept-encoding", "gzip")];
    let br = [("accept-encoding", "br")];
    assert_eq!(get(&client, &url, &gzip).await.text(), "encoded for gzip");
    assert_eq!(get(&client, &url, &br).await.text(), "encoded for br");
    assert_eq!(origin.count("/vary"), 2);
    let r = get(&client, &url, &gzip).await;
    assert_eq!(r.text(), "encoded for gzip");
    assert_hit(&r, "gzip variant");
    let r = get(&client, &url, &br).await;
    assert_eq!(r.text(), "encoded for br");
    assert_hit(&r, "br variant");
    assert_eq!(origin.count("/vary"), 2);
}

#[tokio::test]
async fn unsafe_methods_invalidate_the_target_uri() {
    let (origin, _proxy, client) = setup();
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let path = format!("/inv-{}", method.to_lowercase());
        origin.route_fn(&path, |req| {
            if req.method == "GET" {
                Reply::ok("cached representation").cc("max-age=60")
            } else {
                Reply::ok("changed")
            }
        });
        let url = origin.url(&path);
        get(&client, &url, &[]).await;
        assert_hit(
            &get(&client, &url, &[]).await,
            &format!("{path} before {method}"),
        );
        assert_eq!(origin.count(&path), 1);

        let r = send(&client, method, &url, &[], Some(b"new".to_vec())).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "changed"),
            "{method}"
        );
        assert_eq!(origin.count(&path), 2, "{method} reaches the origin");

        let r = get(&client, &url, &[]).await;
        assert_eq!(r.text(), "cached representation");
        assert_not_hit(&r, &format!("GET {path} after {method}"));
        assert_eq!(
            origin.count(&path),
            3,
            "GET after {method} reaches the origin"
        );
    }
}

#[tokio::test]
async fn unsafe_methods_invalidate_same_origin_location_and_content_location() {
    let (origin, _proxy, client) = setup();
    origin.route("/loc-target", Reply::ok("loc").cc("max-age=60"));
    origin.route("/cl-target", Reply::ok("cl").cc("max-age=60"));
    let cl_url = origin.url("/cl-target");
    origin.route(
        "/form",
        Reply::status(201)
            .body("created")
            .header("location", "/loc-target")
            .header("content-location", cl_url.clone()),
    );
    for path in ["/loc-target", "/cl-target"] {
        get(&client, &origin.url(path), &[]).await;
        assert_hit(&get(&client, &origin.url(path), &[]).await, path);
    }
    let r = send(
        &client,
        "POST",
        &origin.url("/form"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(r.status, 201);
    for path in ["/loc-target", "/cl-target"] {
        let r = get(&client, &origin.url(path), &[]).await;
        assert_not_hit(&r, &format!("{path} after the POST"));
        assert_eq!(origin.count(path), 2, "{path} fetched again after the POST");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_are_coalesced_into_one_origin_fetch() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/popular",
        Reply::ok("the one and only fetch")
            .cc("max-age=60")
            .delay(Duration::from_millis(300)),
    );
    let url = origin.url("/popular");
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (client, url) = (client.clone(), url.clone());
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    let mut results = Vec::new();
    while let Some(r) = set.join_next().await {
        results.push(r.expect("request task"));
    }
    assert_eq!(
        origin.count("/popular"),
        1,
        "20 concurrent misses, one origin fetch"
    );
    let statuses: Vec<String> = results.iter().map(|r| r.cache_status()).collect();
    for r in &results {
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "the one and only fetch")
        );
    }
    let collapsed = statuses
        .iter()
        .filter(|cs| cs_has(cs, "collapsed", None))
        .count();
    assert!(
        collapsed >= 1,
        "at least one waiter is marked `weir; fwd=miss; collapsed`: {statuses:?}"
    );
    for cs in &statuses {
        assert!(
            cs_has(cs, "collapsed", None) || is_hit(cs) || cs_has(cs, "stored", None),
            "unexpected Cache-Status {cs:?} among {statuses:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_waiters_are_served_while_the_fetch_streams() {
    let (origin, proxy, _client) = setup();
    const LEN: u64 = 2_000_000; // 31 chunks, 50 ms apart: about 1.5 s
    origin.route(
        "/streaming",
        Reply::stream(LEN)
            .cc("max-age=60")
            .chunk_delay(Duration::from_millis(50)),
    );
    let url = origin.url("/streaming");
    let start = Instant::now();
    let a_client = proxied_client(proxy.forward_addr());
    let mut a = a_client.get(&url).send().await.expect("first request");
    let first = a.chunk().await.expect("first chunk").expect("some body");
    let a_task = tokio::spawn(async move {
        let mut len = first.len() as u64;
        while let Some(c) = a.chunk().await.expect("first client's body") {
            len += c.len() as u64;
        }
        (len, start.elapsed())
    });

    let b_client = proxied_client(proxy.forward_addr());
    let mut b = b_client.get(&url).send().await.expect("second request");
    let b_cs = b
        .headers()
        .get("cache-status")
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let mut b_body = Vec::new();
    let b_first = b
        .chunk()
        .await
        .expect("second client's body")
        .expect("some body");
    let b_first_at = start.elapsed();
    b_body.extend_from_slice(&b_first);
    while let Some(c) = b.chunk().await.expect("second client's body") {
        b_body.extend_from_slice(&c);
    }
    let (a_len, a_done) = a_task.await.unwrap();
    assert_eq!(a_len, LEN);
    assert_eq!(b_body.len() as u64, LEN);
    assert!(
        b_body == pattern(LEN as usize),
        "second client's body differs"
    );
    assert_eq!(origin.count("/streaming"), 1, "one origin fetch for both");
    assert!(
        b_first_at < a_done,
        "the waiter's first bytes ({b_first_at:?}) came only after the fetch ended ({a_done:?})"
    );
    assert!(
        cs_has(&b_cs, "collapsed", None),
        "second client's Cache-Status: {b_cs:?}"
    );
}

#[tokio::test]
async fn response_cut_mid_body_is_never_stored() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/cut",
        Reply::stream(1_000_000).cc("max-age=60").cut_after(300_000),
    );
    let url = origin.url("/cut");
    let r = try_send(&client, "GET", &url, &[], None).await;
    match r {
        Err(_) => {}
        Ok(r) => assert!(
            r.body.len() < 1_000_000,
            "a cut response cannot arrive whole ({} bytes, status {})",
            r.body.len(),
            r.status
        ),
    }
    assert_eq!(origin.count("/cut"), 1);

    origin.route("/cut", Reply::stream(1_000_000).cc("max-age=60"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(1_000_000), "whole body after the cut one");
    assert_not_hit(&r, "request after a cut response");
    assert_eq!(origin.count("/cut"), 2, "the cut response was not stored");
}

#[tokio::test]
async fn objects_above_max_object_pass_through_uncached() {
    let origin = TestOrigin::start();
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "max_object", "16KiB")
        .start();
    let client = proxied_client(proxy.forward_addr());
    origin.route("/big", Reply::stream(64 * 1024).cc("max-age=60"));
    origin.route("/small", Reply::stream(1024).cc("max-age=60"));
    for i in 0..2 {
        let r = get(&client, &origin.url("/big"), &[]).await;
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(64 * 1024), "request {i}: body intact");
        assert_not_hit(&r, "object above max_object");
    }
    assert_eq!(origin.count("/big"), 2);
    // Objects below the limit are still cached with this configuration.
    get(&client, &origin.url("/small"), &[]).await;
    assert_hit(
        &get(&client, &origin.url("/small"), &[]).await,
        "small object",
    );
    assert_eq!(origin.count("/small"), 1);
}

#[tokio::test]
async fn eviction_keeps_the_memory_tier_within_its_size() {
    let origin = TestOrigin::start();
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "memory", "1MiB")
        .option("cache", "max_object", "256KiB")
        .start();
    let client = proxied_client(proxy.forward_addr());
    origin.route("/obj/*", Reply::stream(100_000).cc("max-age=600"));
    for i in 0..20 {
        let r = get(&client, &origin.url(&format!("/obj/{i}")), &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 100_000);
    }
    assert_eq!(origin.total(), 20);
    let limit = 1024.0 * 1024.0;
    let mut last = String::new();
    let within = wait_until(Duration::from_secs(5), || {
        last = proxy.metrics();
        metric(&last, "weir_cache_bytes", &[]).is_some_and(|b| b <= limit)
    });
    let bytes = metric(&last, "weir_cache_bytes", &[]);
    let objects = metric(&last, "weir_cache_objects", &[]);
    assert!(
        within,
        "weir_cache_bytes = {bytes:?} > 1 MiB after 20 x 100 KB"
    );
    let objects = objects.expect("weir_cache_objects");
    assert!(
        (1.0..20.0).contains(&objects),
        "weir_cache_objects = {objects}: some kept, some evicted"
    );
}

#[tokio::test]
async fn cache_status_is_on_every_response() {
    let (origin, proxy, client) = setup();
    origin.route("/cs", Reply::ok("cs").cc("max-age=60"));
    origin.route("/cs-post", Reply::ok("posted"));
    let url = origin.url("/cs");
    // Every mismatch is collected, so that one failure shows them all.
    let mut wrong = Vec::new();

    let r = get(&client, &url, &[]).await;
    if r.cache_status() != "weir; fwd=miss; stored" {
        wrong.push(format!(
            "first GET: {:?}, expected \"weir; fwd=miss; stored\"",
            r.cache_status()
        ));
    }
    let r = get(&client, &url, &[]).await;
    if r.cache_status() != "weir; hit" {
        wrong.push(format!(
            "second GET: {:?}, expected \"weir; hit\"",
            r.cache_status()
        ));
    }

    // A request whose method must be forwarded (RFC 9211 §2.2: fwd=method).
    let r = send(
        &client,
        "POST",
        &origin.url("/cs-post"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(r.status, 200);
    if !cs_has(&r.cache_status(), "fwd", Some("method")) {
        wrong.push(format!(
            "POST: {:?}, expected \"weir; fwd=method\"",
            r.cache_status()
        ));
    }

    // Errors carry it too.
    let dead = format!("http://127.0.0.1:{}/nothing-listens", free_port());
    let r = get(&client, &dead, &[]).await;
    assert_eq!(r.status, 502);
    if weir_cache_status(&r.cache_status()).is_none() {
        wrong.push(format!(
            "502: no weir Cache-Status ({:?})",
            r.cache_status()
        ));
    }
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            free_port()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 403);
    if r.header("cache-status")
        .and_then(weir_cache_status)
        .is_none()
    {
        wrong.push(format!("403: no weir Cache-Status ({:?})", r.headers));
    }
    assert_eq!(origin.count("/cs"), 1);
    assert_eq!(origin.count("/cs-post"), 1);
    assert!(
        wrong.is_empty(),
        "Cache-Status problems:\n{}",
        wrong.join("\n")
    );
}

/// Where `entry` starts in a `Cache-Status` value (panics, showing it, when absent).
fn position(cs: &str, entry: &str) -> usize {
    cs.find(entry)
        .unwrap_or_else(|| panic!("Cache-Status {cs:?} has no {entry:?}"))
}

#[tokio::test]
async fn cache_status_from_a_cache_nearer_the_origin_is_kept_before_ours() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/chain",
        Reply::ok("chained")
            .cc("max-age=60")
            .header("cache-status", "upstream; hit"),
    );
    let url = origin.url("/chain");

    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "chained"));
    let cs = r.cache_status();
    assert!(
        position(&cs, "upstream; hit") < position(&cs, "weir; fwd=miss; stored"),
        "ours must follow the origin's entry: {cs:?}"
    );
    assert_eq!(cs, "upstream; hit, weir; fwd=miss; stored");

    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "chained"));
    let cs = r.cache_status();
    assert!(
        position(&cs, "upstream; hit") < position(&cs, "weir; hit"),
        "ours must follow the stored entry: {cs:?}"
    );
    assert_eq!(cs, "upstream; hit, weir; hit");
    assert_eq!(origin.count("/chain"), 1);
}
