//! Steering the cache: skip, a variant of the key, a TTL override.

use std::time::Duration;

use crate::support::client::{is_hit, send};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::{Event, Events, Flow, Module, RequestHead, Txn};

/// At request headers: skips the cache for `/skip*`, keeps `/ttl*` for 60 s, tags
/// `/ttl*` with `steered`, and makes the `x-variant` request header a variant of the
/// cache key.
struct Steer;

impl Module for Steer {
    fn name(&self) -> &str {
        "steer"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if path(r).starts_with("/skip") {
            txn.cache().skip = true;
        }
        if path(r).starts_with("/ttl") {
            txn.cache().ttl = Some(Duration::from_secs(60));
            txn.cache().tags.push("steered".into());
        }
        if let Some(v) = r.headers.get("x-variant").and_then(|v| v.to_str().ok()) {
            txn.cache().variant = Some(v.to_string().into());
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn skip_keeps_a_response_out_of_the_cache() {
    let origin = TestOrigin::start();
    origin.route("/skip", Reply::ok("skipped").cc("max-age=60"));
    origin.route("/kept", Reply::ok("kept").cc("max-age=60"));
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    for n in 1..=2 {
        let r = weir.get("/skip").await;
        assert_eq!(r.text(), "skipped");
        assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(origin.count("/skip"), n);
        weir.get("/kept").await;
    }
    // The same response without the override is stored.
    assert_eq!(origin.count("/kept"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn a_variant_is_stored_apart() {
    let origin = TestOrigin::start();
    origin.route_fn("/variant", |req| {
        let v = req.header("x-variant").unwrap_or_else(|| "none".into());
        Reply::ok(format!("for {v}")).cc("max-age=60")
    });
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    let a = [("x-variant", "a")];
    let b = [("x-variant", "b")];
    assert_eq!(weir.get_with("/variant", &a).await.text(), "for a");
    assert_eq!(weir.get_with("/variant", &b).await.text(), "for b");
    assert_eq!(origin.count("/variant"), 2, "b is not a's stored response");
    for (headers, body) in [(&a, "for a"), (&b, "for b"), (&a, "for a")] {
        let r = weir.get_with("/variant", headers).await;
        assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(r.text(), body);
    }
    assert_eq!(origin.count("/variant"), 2);
    weir.stop().await;
}

#[tokio::test]
async fn a_ttl_override_keeps_a_response_fresh() {
    let origin = TestOrigin::start();
    origin.route("/ttl", Reply::ok("long").cc("max-age=1"));
    origin.route("/control", Reply::ok("short").cc("max-age=1"));
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    weir.get("/ttl").await;
    weir.get("/control").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = weir.get("/ttl").await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "long");
    assert_eq!(origin.count("/ttl"), 1);
    // Without the override, max-age=1 is over.
    let r = weir.get("/control").await;
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/control"), 2);
    weir.stop().await;
}

/// Responses stored in the client's own transaction rather than by a fill, a POST's
/// answer that names its target and the whole object an origin sent for a range
/// miss, are kept as the modules asked: their time to live, their tags, or not at all.
#[tokio::test]
async fn overrides_apply_to_a_post_answer_and_to_a_whole_answer_to_a_range() {
    let origin = TestOrigin::start();
    for path in ["/ttl-form", "/skip-form", "/ttl-whole"] {
        origin.route(
            path,
            Reply::ok(format!("from {path}"))
                .cc("max-age=1")
                .header("content-location", path),
        );
    }
    let weir = Setup::new(&origin)
        .module("steer", Steer)
        .admin()
        .start()
        .await;
    for path in ["/ttl-form", "/skip-form"] {
        let r = weir.post(path, b"x").await;
        assert_eq!(r.text(), format!("from {path}"));
    }
    // The origin ignores the range and sends the whole object.
    let r = weir.get_with("/ttl-whole", &[("range", "bytes=0-3")]).await;
    assert_eq!(r.status, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Past the origin's max-age=1, within the module's 60 s.
    for path in ["/ttl-form", "/ttl-whole"] {
        let r = weir.get(path).await;
        assert!(is_hit(&r.cache_status()), "{path}: {}", r.cache_status());
        assert_eq!(r.text(), format!("from {path}"));
        assert_eq!(origin.count(path), 1, "{path}");
    }
    let r = weir.get("/skip-form").await;
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(
        origin.count("/skip-form"),
        2,
        "the POST's answer was not stored"
    );
    // Both carry the module's tag: one purge of it removes both.
    let admin = weir.admin.unwrap();
    let purge = send(
        &weir.client,
        "POST",
        &format!("http://{admin}/admin/purge"),
        &[("content-type", "application/json")],
        Some(br#"{"tag": "steered"}"#.to_vec()),
    )
    .await;
    assert_eq!(purge.status, 200, "{}", purge.text());
    for path in ["/ttl-form", "/ttl-whole"] {
        let r = weir.get(path).await;
        assert!(!is_hit(&r.cache_status()), "{path}: {}", r.cache_status());
        assert_eq!(origin.count(path), 2, "{path}");
    }
    weir.stop().await;
}

/// A part kept from the origin's 206 (`range_fill = "parts"`) is kept as the modules
/// asked too: here for the module's 60 s rather than the origin's one.
#[tokio::test]
async fn a_ttl_override_applies_to_a_kept_part() {
    let origin = TestOrigin::start();
    origin.route_fn("/ttl-part", |_| {
        Reply::status(206)
            .body("0123")
            .cc("max-age=1")
            .header("content-range", "bytes 0-3/10")
            .header("etag", "\"v1\"")
    });
    let weir = Setup::new(&origin)
        .module("steer", Steer)
        .extra("[cache]\nrange_fill = \"parts\"\n")
        .start()
        .await;
    let range = [("range", "bytes=0-3")];
    let r = weir.get_with("/ttl-part", &range).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (206, "0123"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = weir.get_with("/ttl-part", &range).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (206, "0123"));
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/ttl-part"), 1);
    weir.stop().await;
}
