//! Invalidation against a real origin, in one process: tags from `Surrogate-Key` and
//! `Cache-Tag`, purges by URL, prefix and tag, the PURGE method and who may send it,
//! and no resurrection: a fetch under way when its object is invalidated does not store
//! what it got, so the next request reaches the origin.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::client::{cs_has, is_hit, metric, proxied_client, send, Fetched};
use support::origin::TestOrigin;
use support::reply::Reply;
use weir_proxy::Server;

/// A forward proxy in this process, with its admin listener.
struct Weir {
    server: Server,
    admin: SocketAddr,
    client: reqwest::Client,
    direct: reqwest::Client,
}

/// Starts a forward proxy with `extra` added to its `[cache]` section.
async fn start(cache: &str) -> Weir {
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\n\n\
             [timeouts]\nshutdown_grace = \"1s\"\n\n[cache]\n{cache}\n\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n"
        )
    };
    let (server, admin, _) = support::start_server("inval-test.toml", true, text_for, &[]).await;
    let addr = server.local_addrs()[0];
    Weir {
        server,
        admin: admin.expect("an admin listener"),
        client: proxied_client(addr),
        direct: support::client::direct_client(),
    }
}

impl Weir {
    async fn get(&self, url: &str) -> Fetched {
        send(&self.client, "GET", url, &[], None).await
    }

    async fn request(&self, method: &str, url: &str) -> Fetched {
        send(&self.client, method, url, &[], None).await
    }

    /// `POST /admin/purge` with `body`; the number purged.
    async fn admin_purge(&self, body: &str) -> u64 {
        let url = format!("http://{}/admin/purge", self.admin);
        let r = send(
            &self.direct,
            "POST",
            &url,
            &[],
            Some(body.as_bytes().to_vec()),
        )
        .await;
        assert_eq!(r.status, 200, "{body}: {}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["purged"].as_u64().unwrap()
    }

    async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        send(&self.direct, "GET", &url, &[], None).await.text()
    }

    async fn stop(self) {
        self.server.shutdown().await;
    }
}

/// Fetches `url` twice and asserts the second was a hit.
async fn cached(weir: &Weir, url: &str) {
    weir.get(url).await;
    let r = weir.get(url).await;
    assert!(is_hit(&r.cache_status()), "{url}: {}", r.cache_status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_bans_and_prefix_purges_reach_the_origin_again() {
    let origin = TestOrigin::start();
    let ok = |body: &'static str| Reply::ok(body).cc("max-age=300");
    origin.route("/a", ok("a").header("surrogate-key", "k1 k2"));
    origin.route("/b", ok("b").header("cache-tag", "k2, x"));
    origin.route("/c", ok("c").header("surrogate-key", "k1"));
    origin.route("/p/1", ok("p1"));
    origin.route("/p/2", ok("p2"));
    origin.route("/q", ok("q"));
    let weir = start("").await;
    for path in ["/a", "/b", "/c", "/p/1", "/p/2", "/q"] {
        cached(&weir, &origin.url(path)).await;
    }

    assert_eq!(weir.admin_purge(r#"{"tag": "k2"}"#).await, 2);
    for (path, count) in [("/a", 2), ("/b", 2), ("/c", 1)] {
        let r = weir.get(&origin.url(path)).await;
        assert_eq!(origin.count(path), count, "{path}: {}", r.cache_status());
    }

    let prefix = format!(r#"{{"prefix": "{}"}}"#, origin.url("/p/"));
    assert_eq!(weir.admin_purge(&prefix).await, 2);
    for (path, count) in [("/p/1", 2), ("/p/2", 2), ("/q", 1)] {
        weir.get(&origin.url(path)).await;
        assert_eq!(origin.count(path), count, "{path}");
    }

    let m = weir.metrics().await;
    let purged = |by| metric(&m, "weir_cache_purged_objects_total", &[("by", by)]);
    assert_eq!(purged("tag"), Some(2.0), "{m}");
    assert_eq!(purged("prefix"), Some(2.0), "{m}");
    weir.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_headers_are_configurable() {
    let origin = TestOrigin::start();
    origin.route(
        "/a",
        Reply::ok("a")
            .cc("max-age=300")
            .header("surrogate-key", "k")
            .header("x-tags", "t"),
    );
    let weir = start("tag_headers = [\"X-Tags\"]").await;
    cached(&weir, &origin.url("/a")).await;
    assert_eq!(weir.admin_purge(r#"{"tag": "k"}"#).await, 0);
    assert_eq!(weir.admin_purge(r#"{"tag": "t"}"#).await, 1);
    weir.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_method_from_allowed_clients_only() {
    let origin = TestOrigin::start();
    origin.route("/x", Reply::ok("x").cc("max-age=300"));
    let weir = start("").await;
    let url = origin.url("/x");
    cached(&weir, &url).await;
    let r = weir.request("PURGE", &url).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        cs_has(&r.cache_status(), "detail", Some("purge")),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count("/x"), 1, "PURGE is never forwarded");
    let r = weir.request("PURGE", &url).await;
    assert_eq!(r.status, 404, "nothing stored any more: {}", r.text());
    let r = weir.get(&url).await;
    assert!(
        cs_has(&r.cache_status(), "fwd", Some("miss")),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count("/x"), 2);
    weir.stop().await;

    let weir = start("purge_from = [\"192.0.2.0/24\"]").await;
    cached(&weir, &url).await;
    let r = weir.request("PURGE", &url).await;
    assert_eq!(r.status, 403);
    assert!(
        r.text().contains("PURGE is not allowed from 127.0.0.1"),
        "{}",
        r.text()
    );
    assert!(is_hit(&weir.get(&url).await.cache_status()), "still stored");
    weir.stop().await;
}

/// A 256 KiB body sent in four chunks 150 ms apart: a fetch that lasts about 0.6 s.
fn slow(tags: &str) -> Reply {
    Reply::stream(256 * 1024)
        .chunk_delay(Duration::from_millis(150))
        .cc("max-age=300")
        .header("surrogate-key", tags)
}

/// Starts a GET of `url` through the proxy, waits until the origin is sending its
/// body, runs `invalidate`, and checks that the fetch's response was not stored: the
/// next GET reaches the origin.
async fn invalidated_mid_fetch<F: std::future::Future<Output = ()>>(
    weir: &Weir,
    origin: &TestOrigin,
    path: &str,
    invalidate: impl FnOnce() -> F,
) {
    let url = origin.url(path);
    let before = origin.count(path);
    let client = weir.client.clone();
    let fetch = tokio::spawn({
        let url = url.clone();
        async move { send(&client, "GET", &url, &[], None).await }
    });
    assert!(
        origin
            .eventually(support::SOON, |o| o.count(path) == before + 1)
            .await
    );
    invalidate().await;
    let first = fetch.await.unwrap();
    assert_eq!(
        first.body.len(),
        256 * 1024,
        "the client in flight is served"
    );
    let next = weir.get(&url).await;
    assert!(
        cs_has(&next.cache_status(), "fwd", Some("miss")),
        "{path}: {}",
        next.cache_status()
    );
    let gets = origin
        .requests()
        .iter()
        .filter(|r| r.path == path && r.method == "GET")
        .count();
    assert_eq!(gets, before + 2, "{path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_resurrection_after_an_invalidation_during_the_fetch() {
    let origin = TestOrigin::start();
    origin.route("/s/*", slow("slow"));
    let weir = start("").await;

    invalidated_mid_fetch(&weir, &origin, "/s/purge", || async {
        let r = weir.request("PURGE", &origin.url("/s/purge")).await;
        assert_eq!(r.status, 404, "nothing was stored yet");
    })
    .await;
    invalidated_mid_fetch(&weir, &origin, "/s/tag", || async {
        weir.admin_purge(r#"{"tag": "slow"}"#).await;
    })
    .await;
    invalidated_mid_fetch(&weir, &origin, "/s/prefix", || async {
        let body = format!(r#"{{"prefix": "{}"}}"#, origin.url("/s/"));
        weir.admin_purge(&body).await;
    })
    .await;
    invalidated_mid_fetch(&weir, &origin, "/s/admin", || async {
        let body = format!(r#"{{"url": "{}"}}"#, origin.url("/s/admin"));
        weir.admin_purge(&body).await;
    })
    .await;
    origin.route_fn("/s/write", |r| match r.method.as_str() {
        "POST" => Reply::ok("written"),
        _ => slow("w"),
    });
    invalidated_mid_fetch(&weir, &origin, "/s/write", || async {
        let r = weir.request("POST", &origin.url("/s/write")).await;
        assert_eq!(r.status, 200);
    })
    .await;

    let m = weir.metrics().await;
    assert_eq!(
        metric(&m, "weir_cache_stores_refused_total", &[]),
        Some(5.0),
        "{m}"
    );
    // Without an invalidation the same slow fetch is stored.
    weir.get(&origin.url("/s/kept")).await;
    assert!(is_hit(
        &weir.get(&origin.url("/s/kept")).await.cache_status()
    ));
    weir.stop().await;
}
