//! Requests refused for their form, size or framing: 400, 431, 413, ambiguous framing.

use std::time::Duration;

use crate::common::*;
use crate::helpers::{assert_raw_plain_error, assert_still_serving};

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
fn two_host_headers_get_400() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("served"));
    let mut proxy = Proxy::forward();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        origin.url("/x")
    );
    let r = raw_exchange(proxy.forward_addr(), request.as_bytes());
    assert_raw_plain_error(&r, 400);
    assert!(r.text().contains("more than one Host"), "{}", r.text());
    assert_eq!(origin.total(), 0);
    assert_still_serving(&mut proxy, &origin);
}

#[test]
fn a_port_outside_the_range_gets_400() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("served"));
    let mut proxy = Proxy::forward();
    // 73617 - 65536 = 8081: a port that wrapped must not reach any server, nor port 80.
    for port in ["73617", "0", "65536"] {
        let request = format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let r = raw_exchange(proxy.forward_addr(), request.as_bytes());
        assert_raw_plain_error(&r, 400);
        assert!(
            r.text().contains("not between 1 and 65535"),
            "{port}: {}",
            r.text()
        );
    }
    // A reverse listener refuses an absolute target with such a port too.
    let reverse = Proxy::reverse(&origin.base());
    let r = raw_exchange(
        reverse.reverse_addr(),
        b"GET http://a.example:99999/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
    );
    assert_raw_plain_error(&r, 400);
    assert_eq!(origin.total(), 0);
    assert_still_serving(&mut proxy, &origin);
}

#[test]
fn forward_requests_to_unsafe_ports_get_403() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("served"));
    let mut proxy = Proxy::forward();
    // Squid's Safe_ports by default: ssh and smtp are not among them.
    for port in [22, 25] {
        let request = format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let r = raw_exchange(proxy.forward_addr(), request.as_bytes());
        assert_raw_plain_error(&r, 403);
        assert!(r.text().contains(&format!("port {port}")), "{}", r.text());
    }
    assert_still_serving(&mut proxy, &origin);
    // An operator's own list: the origin's port left out, then let in.
    let port = origin.addr().port();
    let narrow = Proxy::builder()
        .forward()
        .listener_line("safe_ports = [80, 443]")
        .start();
    let r = raw_exchange(
        narrow.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            origin.url("/x"),
            origin.addr()
        )
        .as_bytes(),
    );
    assert_raw_plain_error(&r, 403);
    let before = origin.total();
    let wide = Proxy::builder()
        .forward()
        .listener_line(&format!("safe_ports = [80, \"{port}-{port}\"]"))
        .start();
    let r = raw_exchange(
        wide.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            origin.url("/x"),
            origin.addr()
        )
        .as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "served"));
    assert_eq!(origin.total(), before + 1);
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
