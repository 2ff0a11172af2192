//! The origin's 304 to Weir's validation (RFC 9111 §3.2, §4.3.3, §4.3.4): it freshens
//! the stored response, updates only the fields it may, and one about a representation
//! Weir does not hold is never turned into a 502.

use crate::common::*;
use crate::helpers::{age, assert_hit, setup};

/// An origin whose representation is `"v2"` now, while Weir may hold `"v1"` (stale
/// from the start): an unconditional request gets the full `v2` (fresh for a minute)
/// the first time, or `v1` when `first_is_v1`; a conditional one gets a 304 for `v2`.
fn changed_representation(origin: &TestOrigin, path: &str) {
    let served = std::sync::atomic::AtomicUsize::new(0);
    origin.route_fn(path, move |req| {
        if req.has_header("if-none-match") {
            return Reply::status(304).header("etag", "\"v2\"").cc("max-age=60");
        }
        if served.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Reply::ok("v1 body")
                .header("etag", "\"v1\"")
                .cc("max-age=0")
        } else {
            Reply::ok("v2 body")
                .header("etag", "\"v2\"")
                .cc("max-age=60")
        }
    });
}

#[tokio::test]
async fn a_304_freshens_a_response_that_arrived_old() {
    let (origin, _proxy, client) = setup();
    // Stale on arrival (an Age over its max-age), kept for its validator.
    origin.route_fn("/aged", |req| {
        if req.has_header("if-none-match") {
            Reply::status(304).header("etag", "\"a\"").cc("max-age=60")
        } else {
            Reply::ok("aged body")
                .header("etag", "\"a\"")
                .header("age", "100")
                .cc("max-age=1")
        }
    });
    let url = origin.url("/aged");
    assert_eq!(get(&client, &url, &[]).await.text(), "aged body");
    let refreshed = get(&client, &url, &[]).await;
    assert_eq!(
        (refreshed.status.as_u16(), refreshed.text().as_str()),
        (200, "aged body")
    );
    let cs = refreshed.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected a validation answered 304, got {cs:?}"
    );
    let after = get(&client, &url, &[]).await;
    assert_hit(
        &after,
        "fresh for the 304's max-age=60, whatever Age it first had",
    );
    assert!(age(&after) < 60, "Age {}", age(&after));
    assert_eq!(origin.count("/aged"), 2);
}

#[tokio::test]
async fn a_304_for_another_representation_repeats_the_request_without_conditions() {
    let (origin, _proxy, client) = setup();
    changed_representation(&origin, "/changed");
    let url = origin.url("/changed");
    assert_eq!(get(&client, &url, &[]).await.text(), "v1 body");

    let r = get(&client, &url, &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "v2 body"),
        "headers {:?}",
        r.headers
    );
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale"))
            && cs_has(&cs, "fwd-status", Some("200"))
            && cs_has(&cs, "stored", None),
        "expected `weir; fwd=stale; fwd-status=200; stored`, got {cs:?}"
    );
    let sent = origin.requests();
    let last_two: Vec<_> = sent[sent.len() - 2..]
        .iter()
        .map(|r| r.header("if-none-match"))
        .collect();
    assert_eq!(
        last_two,
        [Some("\"v1\"".to_string()), None],
        "the validation, then the same request without its condition"
    );

    let r = get(&client, &url, &[]).await;
    assert_hit(&r, "the full response that replaced the outdated copy");
    assert_eq!(r.text(), "v2 body");
    assert_eq!(origin.count("/changed"), 3);
}

#[tokio::test]
async fn a_304_for_another_representation_answers_a_client_that_holds_it() {
    let (origin, _proxy, client) = setup();
    changed_representation(&origin, "/held");
    let url = origin.url("/held");
    assert_eq!(get(&client, &url, &[]).await.text(), "v1 body");

    // The client holds v2 itself: the origin's 304 for v2 is its answer.
    let r = get(&client, &url, &[("if-none-match", "\"v2\"")]).await;
    assert_eq!(r.status, 304, "body {:?}", r.text());
    assert_eq!(r.header("etag").as_deref(), Some("\"v2\""));
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "got {cs:?}"
    );
    assert_eq!(origin.count("/held"), 2, "passed on, not repeated");

    // The outdated v1 is no longer served or validated; the next request fetches v2.
    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "v2 body"));
    assert_eq!(origin.last("/held").unwrap().header("if-none-match"), None);

    // A client holding neither gets the full response.
    changed_representation(&origin, "/other");
    let other = origin.url("/other");
    get(&client, &other, &[]).await;
    let r = get(&client, &other, &[("if-none-match", "\"v9\"")]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "v2 body"));
}

#[tokio::test]
async fn a_304_leaves_the_stored_body_description_alone() {
    let (origin, _proxy, client) = setup();
    origin.route_fn("/described", |req| {
        if req.has_header("if-none-match") {
            Reply::status(304)
                .header("etag", "\"d\"")
                .cc("max-age=60")
                .header("content-encoding", "gzip")
                .header("content-range", "bytes 0-3/10")
                .header("connection", "x-hop")
                .header("x-hop", "per connection")
                .header("x-version", "2")
        } else {
            Reply::ok("plain text")
                .header("etag", "\"d\"")
                .cc("max-age=0")
                .header("x-version", "1")
        }
    });
    let url = origin.url("/described");
    get(&client, &url, &[]).await;
    let refreshed = get(&client, &url, &[]).await;
    let hit = get(&client, &url, &[]).await;
    assert_hit(&hit, "after the 304");
    for r in [&refreshed, &hit] {
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "plain text"));
        assert_eq!(r.header("x-version").as_deref(), Some("2"), "updated");
        assert_eq!(r.header("content-encoding"), None, "the body is not gzip");
        assert_eq!(r.header("content-range"), None, "the body is whole");
        assert_eq!(r.header("content-length").as_deref(), Some("10"));
        assert_eq!(
            r.header("x-hop"),
            None,
            "a field of the origin's connection"
        );
    }
    assert_eq!(origin.count("/described"), 2);
}
