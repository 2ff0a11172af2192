//! Clients refused (403), abusive, or stalling mid-body (408); the process survives.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::{assert_plain_error, assert_still_serving};

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

/// A client that goes away in the middle of a large hit is logged as Squid logs it
/// (`TCP_MEM_HIT_ABORTED`), with the bytes that went out rather than the whole body,
/// and counted in `client_aborted`: the transaction ends when its last byte is
/// written, not when the body (one chunk of many megabytes) is handed over.
#[test]
fn a_client_gone_in_the_middle_of_a_hit_is_logged_aborted() {
    const SIZE: usize = 24 << 20;
    let origin = TestOrigin::start();
    origin.route("/large", Reply::ok(vec![b'w'; SIZE]).cc("max-age=600"));
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "max_memory_object", "32MiB")
        .access_log("squid")
        .start();
    let url = origin.url("/large");
    let get = format!("GET {url} HTTP/1.1\r\nHost: {}\r\n\r\n", origin.addr());
    let mut whole = RawConn::connect(proxy.forward_addr());
    whole.send(get.as_bytes());
    let head = whole.read_head().expect("the miss's head");
    assert_eq!(head.status, 200);
    assert_eq!(whole.read_bytes(SIZE).expect("the whole body").len(), SIZE);

    let mut gone = RawConn::connect(proxy.forward_addr());
    gone.send(get.as_bytes());
    let head = gone.read_head().expect("the hit's head");
    assert!(
        is_hit(head.header("cache-status").unwrap_or("")),
        "{head:?}"
    );
    gone.read_bytes(64 << 10).expect("the hit's first bytes");
    drop(gone);

    let aborted = |text: &str| metric(text, "weir_errors_total", &[("kind", "client_aborted")]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(proxy.access_log_path()).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= 2 || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    let fields = |line: &str| -> (String, u64) {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f[3].to_string(), f[4].parse().unwrap())
    };
    assert_eq!(fields(&lines[0]), ("TCP_MISS/200".into(), SIZE as u64));
    let (code, bytes) = fields(&lines[1]);
    assert_eq!(code, "TCP_MEM_HIT_ABORTED/200", "{}", lines[1]);
    assert!(bytes < SIZE as u64, "{}", lines[1]);
    assert_eq!(aborted(&proxy.metrics()), Some(1.0));
}
