//! Squid's controls over sharing and heuristic freshness: a `no-cache` request is never
//! answered by a fetch begun before it; `cache.collapse` off; `[[cache.refresh]]` rules
//! and `heuristic_max`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit};

/// A route answering "fetch N" (N counting from 1) after `delay`, fresh for a minute.
fn counting(origin: &TestOrigin, path: &str, delay: Duration) {
    let n = Arc::new(AtomicUsize::new(0));
    origin.route_fn(path, move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("fetch {i}"))
            .cc("max-age=60")
            .delay(delay)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_cache_request_is_not_answered_by_an_earlier_fetch() {
    let origin = TestOrigin::start();
    counting(&origin, "/reload", Duration::from_millis(600));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/reload");
    let first = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { get(&client, &url, &[]).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The user pressed reload while the first fetch was in flight.
    let reload = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { get(&client, &url, &[("cache-control", "no-cache")]).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A plain request after the reload may share the reload's fetch.
    let later = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { get(&client, &url, &[]).await }
    });
    let (first, reload, later) = (
        first.await.unwrap(),
        reload.await.unwrap(),
        later.await.unwrap(),
    );
    assert_eq!(first.text(), "fetch 1");
    assert_eq!(reload.text(), "fetch 2", "{:?}", reload.cache_status());
    assert!(!cs_has(&reload.cache_status(), "collapsed", None));
    assert_eq!(later.text(), "fetch 2", "{:?}", later.cache_status());
    assert_eq!(origin.count("/reload"), 2);
    // Pragma: no-cache (without Cache-Control) counts the same.
    let r = get(&client, &url, &[("pragma", "no-cache")]).await;
    assert_eq!(r.text(), "fetch 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collapsed_forwarding_can_be_turned_off() {
    let origin = TestOrigin::start();
    counting(&origin, "/each", Duration::from_millis(300));
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "collapse", "false")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/each");
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (client, url) = (client.clone(), url.clone());
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    while let Some(r) = set.join_next().await {
        let r = r.unwrap();
        assert!(
            !cs_has(&r.cache_status(), "collapsed", None),
            "{:?}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count("/each"), 3, "one fetch per concurrent miss");
    // What they fetched was stored all the same.
    assert_hit(&get(&client, &url, &[]).await, "after the misses");
}

#[tokio::test]
async fn refresh_rules_shape_heuristic_freshness() {
    let origin = TestOrigin::start();
    let old = http_date(10 * 86400);
    // No explicit freshness; Last-Modified ten days ago: a tenth is one day.
    origin.route(
        "/page.html",
        Reply::ok("p").header("last-modified", old.as_str()),
    );
    origin.route(
        "/feed.xml",
        Reply::ok("f").header("last-modified", old.as_str()),
    );
    // Neither freshness nor a validator: stored only when a rule gives a minimum.
    origin.route("/a.txt", Reply::ok("t"));
    origin.route("/a.bin", Reply::ok("b"));
    let proxy = Proxy::builder()
        .forward()
        .option(
            "cache",
            "refresh",
            r#"[{ pattern = "\\.XML$", ignore_case = true, percent = 0, max = "0s" }, { pattern = "\\.txt$", min = "1h" }]"#,
        )
        .start();
    let client = proxied_client(proxy.forward_addr());
    let twice = |path: &'static str| {
        let (client, url) = (client.clone(), origin.url(path));
        async move {
            get(&client, &url, &[]).await;
            get(&client, &url, &[]).await
        }
    };
    assert_hit(&twice("/page.html").await, "default heuristic");
    assert_not_hit(&twice("/feed.xml").await, "rule: never fresh by heuristic");
    assert_hit(&twice("/a.txt").await, "rule: min 1h");
    assert_not_hit(&twice("/a.bin").await, "no rule, nothing to go by");
}

#[tokio::test]
async fn heuristic_max_caps_the_default_heuristic() {
    let origin = TestOrigin::start();
    // A tenth of a hundred days is ten days; capped at one second it is stale soon.
    let old = http_date(100 * 86400);
    origin.route(
        "/old",
        Reply::ok("o")
            .header("last-modified", old.as_str())
            .header("etag", "\"o\""),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "heuristic_max", "1s")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/old");
    get(&client, &url, &[]).await;
    assert_hit(&get(&client, &url, &[]).await, "within the second");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_not_hit(&get(&client, &url, &[]).await, "after heuristic_max");
}
