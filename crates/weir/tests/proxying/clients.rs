//! Client-side HTTP/1.1 (keep-alive, chunked bodies, pipelining) and h2c prior knowledge.

use std::time::Duration;

use crate::common::*;
use crate::helpers::absolute;

#[test]
fn http1_keep_alive_serves_several_requests_on_one_connection() {
    let origin = TestOrigin::start();
    origin.route("/ka/*", Reply::ok("kept alive").cc("no-store"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    for i in 0..3 {
        conn.send(&absolute("GET", &origin, &format!("/ka/{i}"), ""));
        let r = conn
            .read_final(false)
            .expect("response on the kept-alive connection");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "kept alive"),
            "request {i}"
        );
    }
    assert_eq!(origin.total(), 3);
}

#[test]
fn chunked_bodies_pass_in_both_directions() {
    let origin = TestOrigin::start();
    origin.route("/echo", Reply::echo());
    origin.route("/chunky", Reply::stream(100_000).chunked().cc("no-store"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());

    let mut req = absolute("POST", &origin, "/echo", "Transfer-Encoding: chunked\r\n");
    req.extend_from_slice(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    conn.send(&req);
    let r = conn
        .read_final(false)
        .expect("response to the chunked upload");
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    assert_eq!(&origin.last("/echo").unwrap().body[..], b"hello world");

    conn.send(&absolute("GET", &origin, "/chunky", ""));
    let r = conn
        .read_final(false)
        .expect("response with a chunked body");
    assert_eq!(r.status, 200);
    assert!(
        r.body == pattern(100_000),
        "chunked body: {} bytes",
        r.body.len()
    );
    // The connection is still in a sane state afterwards.
    conn.send(&absolute("GET", &origin, "/chunky", ""));
    assert_eq!(conn.read_final(false).unwrap().body.len(), 100_000);
    assert_eq!(origin.count("/echo"), 1);
    assert_eq!(origin.count("/chunky"), 2);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let origin = TestOrigin::start();
    origin.route(
        "/p1",
        Reply::ok("first")
            .cc("no-store")
            .delay(Duration::from_millis(300)),
    );
    origin.route("/p2", Reply::ok("second").cc("no-store"));
    origin.route(
        "/p3",
        Reply::ok("third")
            .cc("no-store")
            .delay(Duration::from_millis(100)),
    );
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    let mut all = Vec::new();
    for p in ["/p1", "/p2", "/p3"] {
        all.extend(absolute("GET", &origin, p, ""));
    }
    conn.send(&all);
    for expected in ["first", "second", "third"] {
        let r = conn.read_final(false).expect("pipelined response");
        assert_eq!((r.status, r.text().as_str()), (200, expected));
    }
    assert_eq!(
        (
            origin.count("/p1"),
            origin.count("/p2"),
            origin.count("/p3")
        ),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn h2c_prior_knowledge_from_clients() {
    let origin = TestOrigin::start();
    origin.route("/h2", Reply::ok("over h2c").cc("max-age=60"));
    origin.route("/h2-echo", Reply::echo());
    let proxy = Proxy::reverse(&origin.base());
    let client = direct_builder().http2_prior_knowledge().build().unwrap();
    let r = get(&client, &proxy.reverse_url("/h2"), &[]).await;
    assert_eq!(r.version, reqwest::Version::HTTP_2);
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "over h2c"));
    let r = get(&client, &proxy.reverse_url("/h2"), &[]).await;
    assert_eq!(r.version, reqwest::Version::HTTP_2);
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    assert_eq!(origin.count("/h2"), 1);
    let r = send(
        &client,
        "POST",
        &proxy.reverse_url("/h2-echo"),
        &[],
        Some(b"h2 body".to_vec()),
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "h2 body"));
    assert_eq!(origin.count("/h2-echo"), 1);
    // The origin is spoken to in HTTP/1.1.
    assert_eq!(
        origin.last("/h2-echo").unwrap().version,
        hyper::Version::HTTP_11
    );
}

/// An HTTP/2 connection with no stream open for `client_idle` is closed (GOAWAY), as
/// an idle HTTP/1 one is; not while a stream is open.
#[tokio::test]
async fn an_idle_h2c_connection_is_closed_after_client_idle() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::ok("late").delay(Duration::from_millis(1500)),
    );
    let proxy = Proxy::builder()
        .reverse(&origin.base())
        .option("timeouts", "client_idle", "1s")
        .start();
    let tcp = tokio::net::TcpStream::connect(proxy.reverse_addr())
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let mut connection = tokio::spawn(connection);
    // A stream open longer than the idle time keeps the connection.
    let mut client = client.ready().await.unwrap();
    let req = http::Request::get(proxy.reverse_url("/slow"))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(req, true).unwrap();
    let response = response.await.expect("the slow answer");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.unwrap().len());
    }
    // Then, with nothing open, it is closed about a second later; the client (still
    // holding its end) sees the server's close.
    let idle_since = std::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(5), &mut connection).await;
    assert!(ended.is_ok(), "the idle connection stayed open");
    assert!(
        idle_since.elapsed() >= Duration::from_millis(500),
        "closed {:?} after the last stream",
        idle_since.elapsed()
    );
    drop(client);
}

/// Weir's own HTTP/1.1 server takes requests without a body and leaves the rest to
/// hyper's, which keeps the connection until it is idle: both take turns on one
/// connection, in order, with the framing guard's count of requests kept in step.
#[test]
fn requests_with_and_without_bodies_take_turns_on_one_connection() {
    let origin = TestOrigin::start();
    origin.route("/turn", Reply::ok("plain").cc("no-store"));
    origin.route("/echo", Reply::echo());
    origin.route("/smuggle", Reply::echo());
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    let mut pipelined = absolute("GET", &origin, "/turn", "");
    pipelined.extend(absolute("POST", &origin, "/echo", "Content-Length: 4\r\n"));
    pipelined.extend(b"body");
    pipelined.extend(absolute("GET", &origin, "/turn", ""));
    pipelined.extend(absolute("HEAD", &origin, "/turn", ""));
    conn.send(&pipelined);
    for (expected, head) in [
        ("plain", false),
        ("body", false),
        ("plain", false),
        ("", true),
    ] {
        let r = conn.read_final(head).expect("pipelined response");
        assert_eq!((r.status, r.text().as_str()), (200, expected));
    }
    // Idle long enough for hyper to hand the connection back, then both again.
    std::thread::sleep(Duration::from_millis(100));
    conn.send(&absolute("GET", &origin, "/turn", ""));
    let r = conn.read_final(false).expect("after the wait");
    assert_eq!((r.status, r.text().as_str()), (200, "plain"));
    conn.send(&absolute(
        "POST",
        &origin,
        "/smuggle",
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    ));
    conn.send(b"5\r\nhello\r\n0\r\n\r\n");
    let r = conn
        .read_final(false)
        .expect("the ambiguous request's answer");
    assert_eq!(
        r.status, 400,
        "the sixth request's framing is the guard's sixth"
    );
    assert_eq!(
        (
            origin.count("/turn"),
            origin.count("/echo"),
            origin.count("/smuggle")
        ),
        (4, 1, 0)
    );
}
