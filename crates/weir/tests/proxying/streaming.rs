//! Bodies streamed both ways, and client disconnects cancelling fetches no one else needs.

use std::time::{Duration, Instant};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_download_streams_through_without_buffering() {
    // 1 GiB by default (a few seconds, even in a debug build); WEIR_TEST_LARGE_BYTES
    // sets another size.
    let len: u64 = std::env::var("WEIR_TEST_LARGE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    let origin = TestOrigin::start();
    origin.route("/large", Reply::stream(len));
    let proxy = Proxy::forward();
    let client = proxied_builder(proxy.forward_addr())
        .timeout(Duration::from_secs(180))
        .build()
        .unwrap();
    let baseline = proxy.peak_rss_kib();
    let start = Instant::now();
    let mut resp = client
        .get(origin.url("/large"))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    let mut received = 0u64;
    let mut first = true;
    while let Some(chunk) = resp.chunk().await.expect("body") {
        if first && chunk.len() >= 1000 {
            assert_eq!(&chunk[..1000], &pattern(1000)[..]);
            first = false;
        }
        received += chunk.len() as u64;
    }
    let elapsed = start.elapsed();
    assert_eq!(received, len);
    let peak = proxy.peak_rss_kib();
    eprintln!(
        "{len} bytes in {elapsed:?}; proxy peak RSS {} MiB (before: {} MiB)",
        peak / 1024,
        baseline / 1024
    );
    assert!(
        peak * 1024 < len / 4 && peak < 128 * 1024,
        "proxy peak RSS {peak} KiB for a {len}-byte body: it is being held in memory"
    );
    assert_eq!(origin.count("/large"), 1);
}

#[tokio::test]
async fn client_disconnect_cancels_the_upstream_fetch() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow-stream",
        Reply::stream(50_000_000)
            .cc("no-store")
            .chunk_delay(Duration::from_millis(20)),
    );
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let mut resp = client.get(origin.url("/slow-stream")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.chunk().await.unwrap().is_some());
    drop(resp);
    drop(client);
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.aborted("/slow-stream") == 1)
            .await,
        "the origin's connection was not closed after the only client went away"
    );
    assert_eq!(origin.count("/slow-stream"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_does_not_cancel_a_fetch_others_wait_on() {
    let origin = TestOrigin::start();
    const LEN: u64 = 3_000_000; // 46 chunks, 30 ms apart
    origin.route(
        "/shared",
        Reply::stream(LEN)
            .cc("max-age=60")
            .chunk_delay(Duration::from_millis(30)),
    );
    let proxy = Proxy::forward();
    let url = origin.url("/shared");
    let quitter = proxied_client(proxy.forward_addr());
    let mut a = quitter.get(&url).send().await.unwrap();
    assert!(a.chunk().await.unwrap().is_some());

    let stayer = proxied_client(proxy.forward_addr());
    let b = tokio::spawn({
        let url = url.clone();
        async move {
            stayer
                .get(&url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(a);
    drop(quitter);
    let body = b.await.unwrap();
    assert_eq!(body.len() as u64, LEN);
    assert!(
        body == pattern(LEN as usize),
        "the remaining client's body differs"
    );
    assert_eq!(origin.count("/shared"), 1);
    assert_eq!(
        origin.aborted("/shared"),
        0,
        "the shared fetch was cancelled"
    );
}

#[tokio::test]
async fn request_bodies_stream_to_the_origin() {
    let origin = TestOrigin::start();
    origin.route("/up", Reply::echo());
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let body = pattern(8_000_000);
    let r = send(&client, "POST", &origin.url("/up"), &[], Some(body.clone())).await;
    assert_eq!(r.status, 200);
    assert!(
        r.body == body,
        "echoed body differs ({} bytes)",
        r.body.len()
    );
    assert_eq!(origin.count("/up"), 1);
    assert_eq!(origin.last("/up").unwrap().body.len(), 8_000_000);
}

/// A client that closes its connection while the answer is still being made cancels
/// the fetch nobody else waits for (as nginx does, and hyper's server did): the
/// origin's connection is closed long before its slow answer would have come.
#[tokio::test]
async fn a_client_that_closes_before_the_answer_cancels_its_fetch() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow-head",
        Reply::ok("late")
            .cc("no-store")
            .delay(Duration::from_secs(4)),
    );
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&crate::helpers::absolute("GET", &origin, "/slow-head", ""));
    assert!(
        origin
            .eventually(Duration::from_secs(2), |o| o.count("/slow-head") == 1)
            .await,
        "the request did not reach the origin"
    );
    drop(conn);
    assert!(
        origin
            .eventually(Duration::from_secs(2), |o| o.connections_closed() == 1)
            .await,
        "the origin's connection stayed open after the only client went away"
    );
}
