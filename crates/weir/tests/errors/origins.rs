//! Origins unreachable (502), too slow (504) or stalling mid-body.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::assert_plain_error;

#[tokio::test]
async fn unreachable_origin_gets_502() {
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let dead = format!("http://127.0.0.1:{}/nobody-home", free_port());
    let r = get(&client, &dead, &[]).await;
    assert_plain_error(&r, 502);

    // Reverse mode too.
    let reverse = Proxy::reverse(&format!("http://127.0.0.1:{}", free_port()));
    let r = get(&direct_client(), &reverse.reverse_url("/x"), &[]).await;
    assert_plain_error(&r, 502);
}

#[tokio::test]
async fn origin_timeout_gets_504() {
    let origin = TestOrigin::start();
    origin.route(
        "/sleepy",
        Reply::ok("too late").delay(Duration::from_secs(5)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "origin_response", "1s")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let start = Instant::now();
    let r = get(&client, &origin.url("/sleepy"), &[]).await;
    let elapsed = start.elapsed();
    assert_plain_error(&r, 504);
    assert!(
        elapsed < Duration::from_millis(3500),
        "504 after {elapsed:?} with origin_response = 1s"
    );
    assert_eq!(origin.count("/sleepy"), 1);
}

#[tokio::test]
async fn origin_timeout_on_a_cacheable_get_is_not_reported_as_only_if_cached() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow-cacheable",
        Reply::ok("too late")
            .cc("max-age=60")
            .delay(Duration::from_secs(2)),
    );
    origin.route("/never-fetched", Reply::ok("not asked").cc("max-age=60"));
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "origin_response", "300ms")
        .start();
    let client = proxied_client(proxy.forward_addr());

    let r = get(&client, &origin.url("/slow-cacheable"), &[]).await;
    assert_plain_error(&r, 504);
    let cs = r.cache_status();
    assert!(
        !cs.contains("only-if-cached"),
        "an origin timeout reported as only-if-cached: {cs:?}"
    );
    assert!(
        cs_has(&cs, "detail", Some("origin-error")),
        "expected `detail=origin-error`, got {cs:?}"
    );
    assert_eq!(origin.count("/slow-cacheable"), 1);

    // A real only-if-cached miss keeps its own detail, and never reaches the origin.
    let r = get(
        &client,
        &origin.url("/never-fetched"),
        &[("cache-control", "only-if-cached")],
    )
    .await;
    assert_eq!(r.status, 504, "body: {:?}", r.text());
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "detail", Some("only-if-cached")),
        "expected `detail=only-if-cached`, got {cs:?}"
    );
    assert_eq!(origin.count("/never-fetched"), 0);
}

#[tokio::test]
async fn an_origin_that_stalls_mid_body_is_cut_off() {
    let origin = TestOrigin::start();
    // 64 KiB chunks, 3 s apart: the first arrives, then the origin stalls.
    let stalled = || {
        Reply::stream(4 * CHUNK as u64)
            .chunk_delay(Duration::from_secs(3))
            .cc("max-age=60")
    };
    origin.route("/stall/cached", stalled());
    origin.route("/stall/passed", stalled().cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "origin_body_idle", "500ms")
        .start();
    let client = proxied_client(proxy.forward_addr());
    for path in ["/stall/cached", "/stall/passed"] {
        let start = Instant::now();
        let r = try_send(&client, "GET", &origin.url(path), &[], None).await;
        let took = start.elapsed();
        assert!(
            r.is_err(),
            "{path}: the body should be cut, got {:?}",
            r.map(|r| r.body.len())
        );
        // Cut after half a second of silence, not after the origin's 3 s pause.
        assert!(took < Duration::from_millis(2900), "{path}: {took:?}");
    }
    // Nothing cut short was stored.
    origin.route("/stall/cached", Reply::ok("whole").cc("max-age=60"));
    let r = get(&client, &origin.url("/stall/cached"), &[]).await;
    assert_eq!(r.text(), "whole");
}
