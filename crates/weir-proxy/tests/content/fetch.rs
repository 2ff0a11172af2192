//! fetch, query and read, and background work (`spawn`) that fills the cache.

use std::time::{Duration, Instant};

use crate::control::{field, with_control};
use crate::support::client::{is_hit, send};
use crate::support::origin::TestOrigin;
use crate::support::reply::{pattern, Reply};
use crate::support::SOON;
use weir_api::http::StatusCode;

#[tokio::test]
async fn fetch_preloads_and_the_next_get_is_a_hit() {
    let origin = TestOrigin::start();
    origin.route("/pre", Reply::ok("preloaded").cc("max-age=60"));
    let big = pattern(100_000);
    origin.route("/big", Reply::ok(big.clone()).cc("max-age=60"));
    let weir = with_control().await;
    let url = origin.url("/pre");

    let info = weir.control("fetch", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "{info}");
    assert_eq!(origin.count("/pre"), 1);

    let r = weir.get(&url).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "preloaded");
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/pre"), 1, "the hit did not ask the origin");

    // A second fetch of a fresh copy leaves it alone.
    let again = weir.control("fetch", &url, &[]).await;
    assert!(again.starts_with("status=200 size=9 "), "{again}");
    assert_eq!(origin.count("/pre"), 1);

    // query and read agree with what is stored.
    let info = weir.control("query", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(info.ends_with(" variants=1"), "{info}");
    let big_url = origin.url("/big");
    weir.control("fetch", &big_url, &[]).await;
    let read = weir.control_response("read", &big_url, &[]).await;
    assert!(read.body == big, "read: {} bytes", read.body.len());
    let info = read.header("x-info").unwrap();
    assert!(info.starts_with("status=200 size=100000 "), "{info}");
    assert_eq!(origin.count("/big"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn query_shows_size_ttl_and_variants() {
    let origin = TestOrigin::start();
    origin.route_fn("/vary", |req| {
        let v = req.header("x-v").unwrap_or_else(|| "none".into());
        Reply::ok(format!("for {v}"))
            .cc("max-age=100")
            .header("vary", "x-v")
    });
    let weir = with_control().await;
    let url = origin.url("/vary");
    for v in ["a", "b"] {
        let r = send(&weir.client, "GET", &url, &[("x-v", v)], None).await;
        assert_eq!(r.text(), format!("for {v}"));
    }
    assert_eq!(origin.count("/vary"), 2);
    let info = weir.control("query", &url, &[]).await;
    assert!(info.starts_with("status=200 size=5 "), "{info}");
    let ttl = field(&info, "ttl");
    assert!((95..=100).contains(&ttl), "{info}");
    assert_eq!(field(&info, "variants"), 2, "{info}");
    weir.stop().await;
}

#[tokio::test]
async fn spawned_background_work_fetches_into_the_cache() {
    let origin = TestOrigin::start();
    origin.route(
        "/later",
        Reply::ok("later")
            .cc("max-age=60")
            .delay(Duration::from_millis(200)),
    );
    let weir = with_control().await;
    let url = origin.url("/later");
    let started = Instant::now();
    let answer = weir.control("spawn-fetch", &url, &[]).await;
    assert_eq!(answer, "spawned=true");
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "answered before the fetch ended: {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + SOON;
    while weir.control("query", &url, &[]).await.starts_with("error=") {
        assert!(
            Instant::now() < deadline,
            "the spawned fetch stored nothing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = weir.get(&url).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "later");
    assert_eq!(origin.count("/later"), 1);
    weir.stop().await;
}
