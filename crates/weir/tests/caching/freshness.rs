//! Freshness (max-age, s-maxage, Expires, heuristics, Age) and request cache directives.

use std::time::Duration;

use crate::common::*;
use crate::helpers::{age, assert_forwarded, assert_hit, assert_not_hit, setup};

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
    // The copy was fresh: the request, not its age, sent it to the origin (RFC 9211).
    assert_forwarded(&r, "request", "200", "request with no-cache");
}

#[tokio::test]
async fn a_validation_the_request_asked_for_says_so_and_a_stale_one_too() {
    let (origin, _proxy, client) = setup();
    for path in ["/asked", "/aged"] {
        let max_age = if path == "/asked" {
            "max-age=60"
        } else {
            "max-age=1"
        };
        origin.route_fn(path, move |req| {
            if req.header("if-none-match").as_deref() == Some("\"v\"") {
                Reply::status(304).header("etag", "\"v\"").cc(max_age)
            } else {
                Reply::ok("v").header("etag", "\"v\"").cc(max_age)
            }
        });
        get(&client, &origin.url(path), &[]).await;
    }
    for directive in ["no-cache", "max-age=0"] {
        let r = get(
            &client,
            &origin.url("/asked"),
            &[("cache-control", directive)],
        )
        .await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "v"));
        assert_forwarded(&r, "request", "304", directive);
    }
    assert_eq!(origin.count("/asked"), 3);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let r = get(&client, &origin.url("/aged"), &[]).await;
    assert_forwarded(&r, "stale", "304", "an entry past its max-age");
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
    // A range of something not stored says the same, and asks the origin nothing.
    origin.route("/oic-range", Reply::ok("0123456789").cc("max-age=60"));
    let only_range = [("cache-control", "only-if-cached"), ("range", "bytes=0-3")];
    let r = get(&client, &origin.url("/oic-range"), &only_range).await;
    assert_eq!(r.status, 504);
    assert_eq!(origin.count("/oic-range"), 0);
}
