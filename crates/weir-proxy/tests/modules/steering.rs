//! Steering the cache: skip, a variant of the key, a TTL override.

use std::time::Duration;

use crate::support::client::is_hit;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::{Event, Events, Flow, Module, RequestHead, Txn};

/// At request headers: skips the cache for `/skip*`, keeps `/ttl*` for 60 s, and
/// makes the `x-variant` request header a variant of the cache key.
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
