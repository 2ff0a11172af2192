//! Error responses: each with its status, a short plain-text reason where the proxy
//! generates it, and nothing (or nothing ambiguous) forwarded to the origin. And the
//! process survives all of it.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// A proxy-generated error: the status, and a non-empty plain-text body.
fn assert_plain_error(r: &Fetched, status: u16) {
    assert_eq!(r.status, status, "body: {:?}", r.text());
    assert!(
        !r.text().trim().is_empty(),
        "{status} needs a short reason in the body"
    );
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain"),
        "{status}: Content-Type {ct:?}"
    );
}

fn assert_raw_plain_error(r: &RawResponse, status: u16) {
    assert_eq!(r.status, status, "body: {:?}", r.text());
    assert!(
        !r.text().trim().is_empty(),
        "{status} needs a short reason in the body"
    );
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain"),
        "{status}: Content-Type {ct:?}"
    );
}

/// The proxy still serves a normal request (and its process still runs).
fn assert_still_serving(proxy: &mut Proxy, origin: &TestOrigin) {
    origin.route("/alive", Reply::ok("alive").cc("no-store"));
    let before = origin.count("/alive");
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            origin.url("/alive"),
            origin.addr()
        )
        .as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "alive"));
    assert_eq!(origin.count("/alive"), before + 1);
    assert!(proxy.is_running(), "the proxy process died");
}

#[test]
fn malformed_requests_get_400() {
    let origin = TestOrigin::start();
    let mut proxy = Proxy::forward();
    let garbage: [&[u8]; 3] = [
        b"THIS IS NOT HTTP\r\n\r\n",
        b"GET http://[::1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n",
    ];
    let mut wrong = Vec::new();
    for request in garbage {
        // hyper rejects these before the service sees them; Weir's framing guard turns
        // hyper's bare answer into one with a reason, like every other refusal.
        let shown = String::from_utf8_lossy(request);
        match try_raw_exchange(proxy.forward_addr(), request) {
            Ok(r) if r.status == 400 && r.body.is_empty() => {
                wrong.push(format!("{shown:?}: 400 without a reason in the body"))
            }
            Ok(r) if r.status == 400 => {}
            Ok(r) => wrong.push(format!("{shown:?}: status {}, expected 400", r.status)),
            Err(e) => wrong.push(format!("{shown:?}: no response ({e}), expected 400")),
        }
    }
    assert_eq!(origin.total(), 0);
    assert_still_serving(&mut proxy, &origin);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn origin_form_request_to_a_forward_proxy_gets_400() {
    let origin = TestOrigin::start();
    let mut proxy = Proxy::forward();
    // Not absolute-form, not CONNECT: a forward proxy has nowhere to send it. The
    // proxy itself decides this, so its body carries the reason.
    let r = raw_exchange(
        proxy.forward_addr(),
        format!("GET /x HTTP/1.1\r\nHost: {}\r\n\r\n", origin.addr()).as_bytes(),
    );
    assert_raw_plain_error(&r, 400);
    assert_eq!(origin.total(), 0);
    assert_still_serving(&mut proxy, &origin);
}

#[test]
fn request_header_section_over_the_default_limit_gets_431() {
    let origin = TestOrigin::start();
    origin.route("/h", Reply::ok("fits").cc("no-store"));
    let mut proxy = Proxy::forward();
    let request = |filler: usize| {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nX-Filler: {}\r\n\r\n",
            origin.url("/h"),
            origin.addr(),
            "a".repeat(filler)
        )
    };
    // Default limit: 32 KiB.
    let r = raw_exchange(proxy.forward_addr(), request(24 * 1024).as_bytes());
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "fits"),
        "24 KiB header section"
    );
    let r = try_raw_exchange(proxy.forward_addr(), request(40 * 1024).as_bytes())
        .expect("a response to a 40 KiB header section");
    assert_eq!(r.status, 431, "40 KiB header section");
    assert_eq!(origin.count("/h"), 1);
    assert_still_serving(&mut proxy, &origin);
}

#[test]
fn request_header_section_over_the_configured_limit_gets_431() {
    let origin = TestOrigin::start();
    origin.route("/h", Reply::ok("fits").cc("no-store"));
    let mut proxy = Proxy::builder()
        .forward()
        .option("limits", "max_request_header", "8KiB")
        .start();
    let request = |filler: usize| {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nX-Filler: {}\r\n\r\n",
            origin.url("/h"),
            origin.addr(),
            "a".repeat(filler)
        )
    };
    let r = raw_exchange(proxy.forward_addr(), request(4 * 1024).as_bytes());
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "fits"),
        "4 KiB header section"
    );
    // 8 KiB spread over many headers, and in a single one.
    let many: String = (0..100)
        .map(|i| format!("X-Many-{i}: {}\r\n", "b".repeat(100)))
        .collect();
    let r = try_raw_exchange(
        proxy.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n{many}\r\n",
            origin.url("/h"),
            origin.addr()
        )
        .as_bytes(),
    )
    .expect("a response to a 10 KiB header section");
    assert_eq!(
        r.status, 431,
        "100 headers of 100 bytes over an 8 KiB limit"
    );
    let r = try_raw_exchange(proxy.forward_addr(), request(12 * 1024).as_bytes())
        .expect("a response to a 12 KiB header section");
    assert_eq!(r.status, 431, "one 12 KiB header over an 8 KiB limit");
    assert_eq!(origin.count("/h"), 1);
    assert_still_serving(&mut proxy, &origin);
}

#[tokio::test]
async fn client_outside_allow_gets_403() {
    let origin = TestOrigin::start();
    origin.route("/allowed", Reply::ok("allowed").cc("no-store"));
    let proxy = Proxy::builder().forward().allow(&["127.0.0.1/32"]).start();
    // 127.0.0.2 is a loopback address too, but not in this listener's allow list.
    let outsider = proxied_builder(proxy.forward_addr())
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let r = get(&outsider, &origin.url("/allowed"), &[]).await;
    assert_plain_error(&r, 403);
    assert_eq!(origin.total(), 0, "a forbidden client reaches nothing");

    let insider = proxied_client(proxy.forward_addr());
    let r = get(&insider, &origin.url("/allowed"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "allowed"));
    assert_eq!(origin.count("/allowed"), 1);
}

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

#[test]
fn request_body_over_the_limit_gets_413() {
    let origin = TestOrigin::start();
    origin.route("/echo", Reply::echo());
    let mut proxy = Proxy::builder()
        .forward()
        .option("limits", "max_request_body", "1KiB")
        .start();
    let post = |len: usize| {
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Length: {len}\r\n\r\n",
            origin.url("/echo"),
            origin.addr()
        )
        .into_bytes();
        req.extend(std::iter::repeat_n(b'z', len));
        req
    };
    let r = raw_exchange(proxy.forward_addr(), &post(512));
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 512);
    assert_eq!(origin.count("/echo"), 1);

    let r = try_raw_exchange(proxy.forward_addr(), &post(4096))
        .expect("a response to a 4 KiB body over a 1 KiB limit");
    assert_raw_plain_error(&r, 413);
    assert_eq!(
        origin.count("/echo"),
        1,
        "a declared oversized body is not forwarded"
    );

    // Chunked: the size is only known while reading; the origin must never get the
    // whole oversized body.
    let mut req = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        origin.url("/echo"),
        origin.addr()
    )
    .into_bytes();
    for _ in 0..4 {
        req.extend_from_slice(b"400\r\n");
        req.extend(std::iter::repeat_n(b'y', 1024));
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = try_raw_exchange(proxy.forward_addr(), &req)
        .expect("a response to a 4 KiB chunked body over a 1 KiB limit");
    assert_eq!(r.status, 413, "chunked body over the limit");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        origin.requests().iter().all(|req| req.body.len() <= 1024),
        "the origin received an oversized body"
    );
    assert_still_serving(&mut proxy, &origin);
}

/// Sends each ambiguous request on its own connection; returns what went wrong.
fn ambiguous_framing(proxy: &Proxy, origin: &TestOrigin, cases: &[(&str, &str)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (headers, body) in cases {
        let before = origin.count("/smuggle");
        let req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\n{headers}\r\n{body}",
            origin.url("/smuggle"),
            origin.addr()
        );
        match try_raw_exchange(proxy.forward_addr(), req.as_bytes()) {
            Ok(r) if r.status == 400 => {}
            Ok(r) => wrong.push(format!("{headers:?}: status {}, expected 400", r.status)),
            Err(e) => wrong.push(format!("{headers:?}: no response ({e}), expected 400")),
        }
        std::thread::sleep(Duration::from_millis(100));
        let forwarded = origin.count("/smuggle") - before;
        if forwarded != 0 {
            wrong.push(format!(
                "{headers:?}: forwarded to the origin ({forwarded} request)"
            ));
        }
    }
    wrong
}

#[test]
fn content_length_with_transfer_encoding_is_rejected() {
    let origin = TestOrigin::start();
    origin.route("/smuggle", Reply::echo());
    let mut proxy = Proxy::forward();
    let wrong = ambiguous_framing(
        &proxy,
        &origin,
        &[
            (
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                "5\r\nhello\r\n0\r\n\r\n",
            ),
            (
                "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                "5\r\nhello\r\n0\r\n\r\n",
            ),
        ],
    );
    assert_still_serving(&mut proxy, &origin);
    assert!(
        wrong.is_empty() && origin.count("/smuggle") == 0,
        "{} (origin got {} request(s))",
        wrong.join("\n"),
        origin.count("/smuggle")
    );
}

#[test]
fn conflicting_content_lengths_are_rejected() {
    let origin = TestOrigin::start();
    origin.route("/smuggle", Reply::echo());
    let mut proxy = Proxy::forward();
    let wrong = ambiguous_framing(
        &proxy,
        &origin,
        &[
            ("Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"),
            ("Content-Length: 5, 6\r\n", "hello!"),
        ],
    );
    assert_still_serving(&mut proxy, &origin);
    assert!(
        wrong.is_empty() && origin.count("/smuggle") == 0,
        "{} (origin got {} request(s))",
        wrong.join("\n"),
        origin.count("/smuggle")
    );
}

#[test]
fn abusive_clients_do_not_crash_the_process() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::stream(5_000_000)
            .cc("no-store")
            .chunk_delay(Duration::from_millis(5)),
    );
    let mut proxy = Proxy::builder()
        .forward()
        .connect_ports(&[free_port()])
        .start();
    let addr = proxy.forward_addr();
    let target = origin.url("/slow");
    let host = origin.addr();
    let nasty: Vec<Vec<u8>> = vec![
        b"\x00\x01\x02\xff\xfe\r\n\r\n".to_vec(),
        b"GET ".to_vec(),                                       // cut in the request line
        format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n").into_bytes(), // cut in headers
        format!("POST {target} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n").into_bytes(),
        format!("POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\nshort").into_bytes(),
        format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes(), // then vanish mid-body
        b"CONNECT nonsense HTTP/1.1\r\n\r\n".to_vec(),
        b"CONNECT 127.0.0.1:0 HTTP/1.1\r\nHost: 127.0.0.1:0\r\n\r\n".to_vec(),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x09\x00\x00\x00\x00\x00".to_vec(),
        vec![b'A'; 200_000],
    ];
    for bytes in &nasty {
        let mut conn = RawConn::connect(addr);
        let _ = conn.try_send(bytes);
        let _ = conn.read_until_close(Duration::from_millis(300));
        drop(conn);
        assert!(
            proxy.is_running(),
            "the proxy died after {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        );
    }
    assert_still_serving(&mut proxy, &origin);
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

/// A client that stops sending its request body part-way is answered 408 once it has
/// been silent for `[timeouts] client_body_idle`, and its connection is closed; the
/// origin's request is abandoned. Both ways of reading a body: with a Content-Length
/// (streamed to the origin) and chunked (read ahead first).
#[test]
fn a_client_that_stalls_mid_body_gets_408() {
    let origin = TestOrigin::start();
    origin.route("/upload", Reply::echo());
    let mut proxy = Proxy::builder()
        .reverse(&origin.base())
        .option("timeouts", "client_body_idle", "700ms")
        .start();
    let addr = proxy.reverse_addr();
    let requests: [&[u8]; 2] = [
        b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nten bytes.",
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\nten bytes.\r\n",
    ];
    for request in requests {
        let mut conn = RawConn::connect(addr);
        let start = Instant::now();
        conn.send(request);
        let response = conn.read_response(false).expect("an answer");
        let took = start.elapsed();
        assert_eq!(response.status, 408, "{}", response.text());
        assert!(
            response.text().contains("request body"),
            "{}",
            response.text()
        );
        assert!(
            took >= Duration::from_millis(600) && took < Duration::from_secs(10),
            "{took:?}"
        );
        assert!(
            conn.closed_within(Duration::from_secs(5)),
            "the connection is closed"
        );
    }
    let timeouts = metric(
        &proxy.metrics(),
        "weir_errors_total",
        &[("kind", "client_timeout")],
    );
    assert_eq!(timeouts, Some(2.0));
    // A body that keeps coming, however slowly, is not cut.
    let mut conn = RawConn::connect(addr);
    conn.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n");
    for piece in [b"slow ", b"but  ", b"still", b" here"] {
        std::thread::sleep(Duration::from_millis(400));
        conn.send(piece);
    }
    let response = conn.read_response(false).expect("an answer");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.body, b"slow but  still here");
    assert!(proxy.is_running());
}
