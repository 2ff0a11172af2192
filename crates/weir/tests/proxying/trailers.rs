//! Trailer fields both ways: an origin's response trailers reach the client (HTTP/1.1
//! when it asked with `TE: trailers`, HTTP/2 always) on a pass-through and on a stored
//! miss, whose stored copy has none (RFC 9111 §3); a client's request trailers reach
//! the origin.

use std::time::Duration;

use crate::common::*;

/// A GET over HTTP/1.1 on the reverse listener, taking trailers when `te` is set.
fn get(proxy: &Proxy, path: &str, te: bool) -> RawResponse {
    let extra = if te {
        "TE: trailers\r\nConnection: TE\r\n"
    } else {
        ""
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
        proxy.reverse_addr()
    );
    let mut conn = RawConn::connect(proxy.reverse_addr());
    conn.send(request.as_bytes());
    conn.read_response(false).expect("a response")
}

#[test]
fn response_trailers_reach_an_http1_client_that_takes_them() {
    let origin = TestOrigin::start();
    let reply = Reply::ok("hello")
        .cc("no-store")
        .trailer("x-checksum", "c0ffee");
    origin.route("/pass", reply);
    let proxy = Proxy::reverse(&origin.base());

    let taken = get(&proxy, "/pass", true);
    assert_eq!((taken.status, taken.text().as_str()), (200, "hello"));
    assert_eq!(taken.trailer("x-checksum"), Some("c0ffee"), "{taken:?}");
    assert_eq!(taken.header("trailer"), Some("x-checksum"));
    // Weir took trailers, so it said so to the origin.
    assert_eq!(
        origin.last("/pass").unwrap().header("te").as_deref(),
        Some("trailers")
    );

    // Without `TE: trailers` an HTTP/1.1 client gets the body alone, and the origin is
    // not told trailers are welcome.
    let plain = get(&proxy, "/pass", false);
    assert_eq!((plain.status, plain.text().as_str()), (200, "hello"));
    assert!(plain.trailers.is_empty(), "{plain:?}");
    assert_eq!(origin.last("/pass").unwrap().header("te"), None);
}

#[test]
fn a_stored_miss_sends_its_trailers_and_the_hit_has_none() {
    let origin = TestOrigin::start();
    let reply = Reply::ok("stored body")
        .cc("max-age=60")
        .trailer("x-checksum", "5ca1ab1e");
    origin.route("/stored", reply);
    let proxy = Proxy::reverse(&origin.base());

    let miss = get(&proxy, "/stored", true);
    assert_eq!((miss.status, miss.text().as_str()), (200, "stored body"));
    assert!(!is_hit(miss.header("cache-status").unwrap()), "{miss:?}");
    assert_eq!(miss.trailer("x-checksum"), Some("5ca1ab1e"), "{miss:?}");

    let hit = get(&proxy, "/stored", true);
    assert_eq!((hit.status, hit.text().as_str()), (200, "stored body"));
    assert!(is_hit(hit.header("cache-status").unwrap()), "{hit:?}");
    assert!(
        hit.trailers.is_empty(),
        "a stored copy keeps no trailers: {hit:?}"
    );
    assert_eq!(origin.count("/stored"), 1);
}

#[test]
fn a_client_that_joins_a_stored_fill_gets_its_trailers() {
    let origin = TestOrigin::start();
    let len = 2 * CHUNK;
    let reply = Reply::stream(len as u64)
        .chunk_delay(Duration::from_millis(300))
        .cc("max-age=60")
        .trailer("x-checksum", "0ddba11");
    origin.route("/joined", reply);
    let proxy = Proxy::reverse(&origin.base());

    let (first, joined) = std::thread::scope(|s| {
        let first = s.spawn(|| get(&proxy, "/joined", true));
        // The fill's head is there, its body is not.
        std::thread::sleep(Duration::from_millis(150));
        let joined = get(&proxy, "/joined", true);
        (first.join().expect("the first client"), joined)
    });
    assert_eq!(origin.count("/joined"), 1, "one fetch for both");
    assert!(
        cs_has(joined.header("cache-status").unwrap(), "collapsed", None),
        "the second client joined the first one's fill: {:?}",
        joined.headers
    );
    for r in [&first, &joined] {
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(len), "the body, whole");
        assert_eq!(r.header("trailer"), Some("x-checksum"), "{:?}", r.headers);
        assert_eq!(r.trailer("x-checksum"), Some("0ddba11"), "{:?}", r.trailers);
    }
}

/// A GET over HTTP/2 (prior knowledge): the body and the trailers, if any.
async fn h2_get(proxy: &Proxy, path: &str) -> (String, Option<http::HeaderMap>) {
    let tcp = tokio::net::TcpStream::connect(proxy.reverse_addr())
        .await
        .expect("connect to the proxy");
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    // No `te: trailers`: an HTTP/2 client takes trailers without asking.
    let req = http::Request::get(proxy.reverse_url(path))
        .body(())
        .unwrap();
    let mut client = client.ready().await.expect("stream capacity");
    let (response, _) = client.send_request(req, true).expect("send the request");
    let response = response.await.expect("the response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("body data");
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.expect("the trailers");
    (String::from_utf8_lossy(&text).into_owned(), trailers)
}

#[tokio::test]
async fn response_trailers_reach_an_http2_client() {
    let origin = TestOrigin::start();
    origin.route(
        "/pass",
        Reply::ok("hello")
            .cc("no-store")
            .trailer("grpc-status", "0"),
    );
    origin.route(
        "/stored",
        Reply::ok("kept").cc("max-age=60").trailer("x-sum", "7"),
    );
    let proxy = Proxy::reverse(&origin.base());

    let (body, trailers) = h2_get(&proxy, "/pass").await;
    assert_eq!(body, "hello");
    assert_eq!(trailers.expect("trailers").get("grpc-status").unwrap(), "0");

    let (body, trailers) = h2_get(&proxy, "/stored").await;
    assert_eq!(body, "kept");
    assert_eq!(trailers.expect("trailers").get("x-sum").unwrap(), "7");
    let (body, trailers) = h2_get(&proxy, "/stored").await;
    assert_eq!(body, "kept");
    assert!(trailers.is_none(), "the hit has no trailers: {trailers:?}");
    assert_eq!(origin.count("/stored"), 1);
}

#[test]
fn request_trailers_reach_the_origin() {
    let origin = TestOrigin::start();
    origin.route("/upload", Reply::ok("got it").cc("no-store"));
    let proxy = Proxy::reverse(&origin.base());
    // A small body (read ahead whole before the origin is asked) and one larger than
    // the read-ahead window (streamed on).
    for size in [5usize, 100 << 10] {
        let body = "x".repeat(size);
        let trailers = [("x-digest", "sha-256=abc")];
        let request = chunked_post(
            "/upload",
            proxy.reverse_addr(),
            &body,
            &["x-digest"],
            &trailers,
        );
        let mut conn = RawConn::connect(proxy.reverse_addr());
        conn.send(&request);
        let resp = conn.read_response(false).expect("a response");
        assert_eq!(
            (resp.status, resp.text().as_str()),
            (200, "got it"),
            "{size}"
        );
        let seen = origin.last("/upload").unwrap();
        assert_eq!(seen.body.len(), size);
        assert_eq!(
            seen.trailers,
            [("x-digest".to_string(), "sha-256=abc".to_string())],
            "{size}: {seen:?}"
        );
    }
}
