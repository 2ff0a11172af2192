//! What the cache does not keep: responses cut mid-body or over max_object; evictions.

use std::time::Duration;

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

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
