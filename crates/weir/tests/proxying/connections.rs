//! Connections kept alive and reused, limited and closed when idle (origin and client).

use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::absolute;

#[tokio::test]
async fn origin_connections_are_kept_alive_and_reused() {
    let origin = TestOrigin::start();
    origin.route("/reuse/*", Reply::ok("again").cc("no-store"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    for i in 0..10 {
        let r = get(&client, &origin.url(&format!("/reuse/{i}")), &[]).await;
        assert_eq!(r.text(), "again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.total(), 10);
    assert!(
        origin.connections_accepted() <= 2,
        "10 sequential requests opened {} origin connections",
        origin.connections_accepted()
    );
}

#[test]
fn pass_through_requests_reuse_origin_connections() {
    let origin = TestOrigin::start();
    origin.route("/post/*", Reply::ok("posted"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    for i in 0..5 {
        let mut req = absolute(
            "POST",
            &origin,
            &format!("/post/{i}"),
            "Content-Length: 5\r\n",
        );
        req.extend_from_slice(b"hello");
        conn.send(&req);
        let r = conn
            .read_final(false)
            .expect("response on the kept-alive client connection");
        assert_eq!((r.status, r.text().as_str()), (200, "posted"), "POST {i}");
        assert_eq!(r.header("content-length"), Some("6"), "POST {i}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(origin.total(), 5);
    assert!(
        origin
            .requests()
            .iter()
            .all(|r| r.method == "POST" && &r.body[..] == b"hello"),
        "the origin got {:?}",
        origin.requests()
    );
    assert!(
        origin.connections_accepted() <= 2,
        "5 sequential POSTs opened {} origin connections",
        origin.connections_accepted()
    );
    let reused = metric(
        &proxy.metrics(),
        "weir_origin_connections_reused_total",
        &[],
    )
    .unwrap_or(0.0);
    assert!(
        reused >= 3.0,
        "weir_origin_connections_reused_total = {reused} after 5 sequential POSTs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_connections_are_limited_per_origin() {
    let origin = TestOrigin::start();
    origin.route(
        "/limited/*",
        Reply::ok("limited")
            .cc("no-store")
            .delay(Duration::from_millis(400)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "max_connections_per_origin", "2")
        .start();
    get_at_once(&origin, proxy.forward_addr(), "limited", 6).await;
    assert_within_limit(&origin, 2);
}

/// Asks for `/{name}/0` to `/{name}/{count - 1}` all at once through the forward proxy
/// at `proxy`; each must answer 200 with `name` as its body, and reach the origin.
async fn get_at_once(origin: &TestOrigin, proxy: std::net::SocketAddr, name: &str, count: usize) {
    let client = proxied_client(proxy);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..count {
        let (client, url) = (client.clone(), origin.url(&format!("/{name}/{i}")));
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    while let Some(r) = set.join_next().await {
        let r = r.unwrap();
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, name));
    }
    assert_eq!(origin.total(), count);
}

fn assert_within_limit(origin: &TestOrigin, limit: usize) {
    assert!(
        origin.max_connections_open() <= limit,
        "{} origin connections open at once with max_connections_per_origin = {limit}",
        origin.max_connections_open()
    );
}

#[tokio::test]
async fn idle_origin_connections_are_closed_after_idle_timeout() {
    let origin = TestOrigin::start();
    origin.route("/idle/*", Reply::ok("idle").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "idle_timeout", "500ms")
        .start();
    let client = proxied_client(proxy.forward_addr());
    get(&client, &origin.url("/idle/1"), &[]).await;
    assert_eq!(origin.connections_accepted(), 1);
    assert!(
        origin
            .eventually(Duration::from_secs(4), |o| o.connections_closed() == 1)
            .await,
        "the idle pooled connection was not closed after idle_timeout"
    );
    get(&client, &origin.url("/idle/2"), &[]).await;
    assert_eq!(origin.connections_accepted(), 2);
    assert_eq!(origin.total(), 2);
}

/// A forward proxy meets new hosts without end: what it keeps per origin (its pools)
/// must go once the origin's connections have closed, and come back when needed.
#[tokio::test]
async fn origins_no_longer_used_are_forgotten() {
    let origins: Vec<TestOrigin> = (0..5).map(|_| TestOrigin::start()).collect();
    for o in &origins {
        o.route("/host", Reply::ok("host").cc("no-store"));
    }
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "idle_timeout", "500ms")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let kept = || metric(&proxy.metrics(), "weir_origins", &[]);
    for o in &origins {
        assert_eq!(get(&client, &o.url("/host"), &[]).await.text(), "host");
    }
    assert_eq!(kept(), Some(5.0), "one origin kept per host asked for");
    let deadline = Instant::now() + Duration::from_secs(8);
    while kept() != Some(0.0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        kept(),
        Some(0.0),
        "origins kept after their idle connections closed"
    );
    for o in &origins {
        assert_eq!(o.connections_closed(), 1, "the idle connection was closed");
    }
    // A forgotten origin is made again when asked for, with a new connection.
    assert_eq!(
        get(&client, &origins[0].url("/host"), &[]).await.text(),
        "host"
    );
    assert_eq!(origins[0].connections_accepted(), 2);
    assert_eq!(kept(), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_origin_connections_are_capped_per_origin() {
    let origin = TestOrigin::start();
    origin.route(
        "/burst/*",
        Reply::ok("burst")
            .cc("no-store")
            .delay(Duration::from_millis(300)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "max_idle_per_origin", "1")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..4 {
        let (client, url) = (client.clone(), origin.url(&format!("/burst/{i}")));
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    while let Some(r) = set.join_next().await {
        assert_eq!(r.unwrap().text(), "burst");
    }
    assert_eq!(origin.total(), 4);
    assert_eq!(
        origin.connections_accepted(),
        4,
        "4 concurrent requests, 4 connections"
    );
    // The default idle_timeout is 60 s: only the idle cap closes connections this soon.
    assert!(
        origin
            .eventually(Duration::from_secs(3), |o| o.connections_open() <= 1)
            .await,
        "{} idle origin connections kept with max_idle_per_origin = 1",
        origin.connections_open()
    );
}

#[test]
fn idle_client_connections_are_closed_after_client_idle() {
    let origin = TestOrigin::start();
    origin.route("/ci", Reply::ok("ci").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "client_idle", "500ms")
        .start();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute("GET", &origin, "/ci", ""));
    assert_eq!(conn.read_final(false).unwrap().text(), "ci");
    let start = Instant::now();
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "an idle client connection was kept past client_idle = 500ms"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "closed after {:?}, before client_idle",
        start.elapsed()
    );
    assert_eq!(origin.count("/ci"), 1);
}

/// Slowloris: a client that sends part of a request head and stalls, or sends it a
/// byte at a time, is closed once `client_idle` has passed since the head began.
#[test]
fn request_heads_that_never_complete_are_closed_after_client_idle() {
    let origin = TestOrigin::start();
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "client_idle", "500ms")
        .start();
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nX-Slow: ",
        origin.url("/slow"),
        origin.addr()
    );
    let mut stalled = RawConn::connect(proxy.forward_addr());
    let start = Instant::now();
    stalled.send(head.as_bytes());
    assert!(
        stalled.closed_within(Duration::from_secs(3)),
        "a stalled request head was kept past client_idle = 500ms"
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "closed after {waited:?}"
    );

    let mut trickle = RawConn::connect(proxy.forward_addr());
    let start = Instant::now();
    trickle.send(head.as_bytes());
    let mut closed = false;
    while !closed && start.elapsed() < Duration::from_secs(3) {
        closed =
            trickle.try_send(b"a").is_err() || trickle.closed_within(Duration::from_millis(100));
    }
    let waited = start.elapsed();
    assert!(
        closed,
        "a request head sent a byte every 100 ms was kept for {waited:?} (client_idle = 500ms)"
    );
    assert!(
        waited >= Duration::from_millis(400),
        "closed after {waited:?}"
    );
    assert_eq!(origin.count("/slow"), 0);
}

/// `client_idle` bounds requests, not answers: a response that takes longer than it to
/// send is sent whole, and the connection then takes the next request.
#[test]
fn a_response_longer_than_client_idle_is_not_cut() {
    let origin = TestOrigin::start();
    // Four chunks 300 ms apart: 1.2 s, over client_idle = 500ms.
    origin.route(
        "/long",
        Reply::stream(4 * 65536)
            .chunk_delay(Duration::from_millis(300))
            .cc("no-store"),
    );
    origin.route("/next", Reply::ok("next").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "client_idle", "500ms")
        .start();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute("GET", &origin, "/long", ""));
    let long = conn.read_final(false).expect("the whole slow response");
    assert_eq!(long.body.len(), 4 * 65536);
    conn.send(&absolute("GET", &origin, "/next", ""));
    assert_eq!(conn.read_final(false).unwrap().text(), "next");
}

/// An HTTP/1.0 request for `path` asking to keep the connection with `field`.
fn http10(origin: &TestOrigin, path: &str, field: &str) -> Vec<u8> {
    format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\n{field}\r\n",
        origin.url(path),
        origin.addr()
    )
    .into_bytes()
}

#[test]
fn http10_clients_that_ask_keep_their_connection() {
    let origin = TestOrigin::start();
    origin.route("/ten/*", Reply::ok("ten").cc("max-age=60"));
    let proxy = Proxy::forward();
    for field in [
        "Proxy-Connection: keep-alive\r\n",
        "Connection: keep-alive\r\n",
    ] {
        let mut conn = RawConn::connect(proxy.forward_addr());
        // A miss, then a hit, then another miss, all on one connection.
        for (i, path) in ["/ten/a", "/ten/a", "/ten/b"].iter().enumerate() {
            conn.send(&http10(&origin, path, field));
            let r = conn
                .read_final(false)
                .unwrap_or_else(|e| panic!("{field:?}: response {i} on one connection: {e}"));
            assert_eq!((r.status, r.text().as_str()), (200, "ten"), "{field:?} {i}");
            assert_eq!(r.header("connection"), Some("keep-alive"), "{field:?} {i}");
        }
        // The proxy's own field never reaches the origin.
        assert!(origin
            .requests()
            .iter()
            .all(|r| r.header("proxy-connection").is_none()));
    }
    // Without asking, an HTTP/1.0 connection closes after the response.
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&http10(&origin, "/ten/a", ""));
    assert_eq!(conn.read_final(false).unwrap().status, 200);
    assert!(conn.closed_within(Duration::from_secs(2)));
}

/// Per core, a worker keeps the origin connections it opened: two client connections,
/// which the two workers serve one each, use an origin connection each, rather than
/// taking turns on one whose task runs on the other worker (which would wake that
/// worker's thread for every exchange).
#[test]
fn per_core_workers_keep_their_own_origin_connections() {
    let origin = TestOrigin::start();
    origin.route("/own/*", Reply::ok("own").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("server", "workers", "2")
        .option("server", "scheduler", "per-core")
        .start();
    let ask = |conn: &mut RawConn, path: String| {
        conn.send(&absolute("GET", &origin, &path, ""));
        let r = conn
            .read_final(false)
            .expect("a response on the kept-alive connection");
        assert_eq!((r.status, r.text().as_str()), (200, "own"), "{path}");
        // Time for the origin connection to go back to the pool.
        std::thread::sleep(Duration::from_millis(30));
    };
    // One after the other, so that the second goes to the less busy worker.
    let mut a = RawConn::connect(proxy.forward_addr());
    ask(&mut a, "/own/a0".into());
    let mut b = RawConn::connect(proxy.forward_addr());
    for i in 1..6 {
        ask(&mut b, format!("/own/b{i}"));
        ask(&mut a, format!("/own/a{i}"));
    }
    assert_eq!(origin.total(), 11);
    assert_eq!(
        origin.connections_accepted(),
        2,
        "two workers, each with its own origin connection"
    );
}

/// The other scheduler, `work-stealing` (one runtime whose threads share every
/// connection): many clients at once are each answered, by one fetch per URL, and
/// asked again they are answered from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_stealing_workers_serve_misses_and_hits() {
    let origin = TestOrigin::start();
    origin.route("/stolen/*", Reply::ok("stolen").cc("max-age=60"));
    let proxy = Proxy::builder()
        .forward()
        .option("server", "workers", "2")
        .option("server", "scheduler", "work-stealing")
        .start();
    get_at_once(&origin, proxy.forward_addr(), "stolen", 12).await;
    // The same URLs again: hits, the origin asked nothing more.
    let client = proxied_client(proxy.forward_addr());
    for i in 0..12 {
        let r = get(&client, &origin.url(&format!("/stolen/{i}")), &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "stolen"));
        assert!(
            r.header("cache-status").is_some_and(|s| s.contains("hit")),
            "{i}"
        );
    }
    assert_eq!(origin.total(), 12);
}

/// Per core, at the origin's connection limit, a request whose worker has no idle
/// connection of its own waits and then takes another worker's: every request is
/// answered, and the limit holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_core_workers_share_connections_at_the_limit() {
    let origin = TestOrigin::start();
    origin.route(
        "/shared/*",
        Reply::ok("shared")
            .cc("no-store")
            .delay(Duration::from_millis(100)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("server", "workers", "2")
        .option("server", "scheduler", "per-core")
        .option("upstream", "max_connections_per_origin", "3")
        .start();
    get_at_once(&origin, proxy.forward_addr(), "shared", 12).await;
    assert_within_limit(&origin, 3);
}
