//! Checks of the test harness itself (the origin server, the raw client), without the
//! proxy: when these fail, the other integration tests' verdicts mean nothing.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn origin_serves_routes_and_counts_requests() {
    let origin = TestOrigin::start();
    origin.route("/a", Reply::ok("hello").cc("max-age=60"));
    let client = direct_client();
    let r = get(&client, &origin.url("/a"), &[("x-test", "1")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello");
    assert_eq!(r.header("cache-control").as_deref(), Some("max-age=60"));
    let r = get(&client, &origin.url("/missing"), &[]).await;
    assert_eq!(r.status, 404);
    assert_eq!(origin.count("/a"), 1);
    assert_eq!(origin.count("/missing"), 1);
    assert_eq!(origin.total(), 2);
    assert_eq!(
        origin.last("/a").unwrap().header("x-test").as_deref(),
        Some("1")
    );
    // One keep-alive connection for both.
    assert_eq!(origin.connections_accepted(), 1);
}

#[tokio::test]
async fn origin_route_handlers_see_the_request() {
    let origin = TestOrigin::start();
    origin.route_fn("/v/*", |req| {
        if req.header("if-none-match").as_deref() == Some("\"x\"") {
            Reply::status(304).header("etag", "\"x\"")
        } else {
            Reply::ok(req.path.clone()).header("etag", "\"x\"")
        }
    });
    let client = direct_client();
    let r = get(&client, &origin.url("/v/1"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "/v/1"));
    let r = get(&client, &origin.url("/v/1"), &[("if-none-match", "\"x\"")]).await;
    assert_eq!(r.status, 304);
    assert_eq!(origin.count("/v/1"), 2);
}

#[tokio::test]
async fn origin_streams_echoes_and_cuts() {
    let origin = TestOrigin::start();
    origin.route("/big", Reply::stream(1_000_003));
    origin.route("/chunked", Reply::stream(100_000).chunked());
    origin.route("/cut", Reply::stream(1_000_000).cut_after(200_000));
    origin.route("/echo", Reply::echo());
    let client = direct_client();
    let r = get(&client, &origin.url("/big"), &[]).await;
    assert_eq!(r.body.len(), 1_000_003);
    assert_eq!(&r.body[..], &pattern(1_000_003)[..]);
    let r = get(&client, &origin.url("/chunked"), &[]).await;
    assert_eq!(r.header("content-length"), None);
    assert_eq!(&r.body[..], &pattern(100_000)[..]);
    assert!(try_send(&client, "GET", &origin.url("/cut"), &[], None)
        .await
        .is_err());
    let r = send(
        &client,
        "POST",
        &origin.url("/echo"),
        &[("x-up", "yes")],
        Some(b"payload".to_vec()),
    )
    .await;
    assert_eq!(r.text(), "payload");
    assert_eq!(r.header("x-echo-x-up").as_deref(), Some("yes"));
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.completed("/big") == 1)
            .await
    );
}

#[test]
fn origin_notices_a_client_that_goes_away() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::stream(10_000_000).chunk_delay(Duration::from_millis(20)),
    );
    let mut conn = RawConn::connect(origin.addr());
    conn.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = conn.read_head().unwrap();
    assert_eq!(head.status, 200);
    drop(conn);
    assert!(origin.wait_until(Duration::from_secs(5), |o| o.aborted("/slow") == 1));
}

#[test]
fn raw_client_reads_pipelined_responses() {
    let origin = TestOrigin::start();
    origin.route("/1", Reply::ok("one").delay(Duration::from_millis(200)));
    origin.route("/2", Reply::ok("two").chunked());
    let mut conn = RawConn::connect(origin.addr());
    conn.send(b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\nHEAD /1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(conn.read_response(false).unwrap().text(), "one");
    assert_eq!(conn.read_response(false).unwrap().text(), "two");
    let head = conn.read_response(true).unwrap();
    assert_eq!(head.header("content-length"), Some("3"));
    assert!(head.body.is_empty());
}

#[test]
fn echo_server_echoes() {
    use std::io::{Read, Write};
    let echo = EchoServer::start();
    let mut s = std::net::TcpStream::connect(echo.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
}

#[test]
fn metric_parser_reads_prometheus_text() {
    let text = "# HELP x\nweir_requests_total{mode=\"forward\",cache=\"hit\"} 3\n\
                weir_requests_total{mode=\"reverse\",cache=\"hit\"} 2\nweir_cache_bytes 1024\n";
    assert_eq!(
        metric(text, "weir_requests_total", &[("cache", "hit")]),
        Some(5.0)
    );
    assert_eq!(
        metric(text, "weir_requests_total", &[("mode", "forward")]),
        Some(3.0)
    );
    assert_eq!(metric(text, "weir_cache_bytes", &[]), Some(1024.0));
    assert_eq!(metric(text, "weir_cache", &[]), None);
    assert!(is_hit("weir; hit"));
    assert!(cs_has(
        "other; hit, weir; fwd=miss; stored",
        "fwd",
        Some("miss")
    ));
    assert!(cs_has("weir; fwd=miss; stored", "stored", None));
    assert!(!is_hit("weir; fwd=miss"));
}
