//! Intermediary headers (RFC 9110): hop-by-hop, Via, Host and Max-Forwards.

use crate::common::*;
use crate::helpers::{absolute, via_values};

#[test]
fn hop_by_hop_headers_are_removed_both_ways() {
    let origin = TestOrigin::start();
    origin.route(
        "/hop",
        Reply::ok("hop")
            .cc("no-store")
            .header("connection", "X-Resp-Hop")
            .header("x-resp-hop", "origin-only")
            .header("keep-alive", "timeout=5")
            .header("x-resp-e2e", "kept"),
    );
    let proxy = Proxy::forward();
    let r = raw_exchange(
        proxy.forward_addr(),
        &absolute(
            "GET",
            &origin,
            "/hop",
            "Connection: keep-alive, X-Hop-Custom\r\nX-Hop-Custom: client-only\r\n\
             Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-End-To-End: kept\r\n",
        ),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "hop"));
    assert_eq!(
        r.header("x-resp-hop"),
        None,
        "named in the origin's Connection"
    );
    assert_eq!(r.header("keep-alive"), None);
    assert_eq!(r.header("x-resp-e2e"), Some("kept"));
    for c in r.header_all("connection") {
        assert!(
            !c.to_ascii_lowercase().contains("x-resp-hop"),
            "Connection: {c}"
        );
    }

    assert_eq!(origin.count("/hop"), 1);
    let seen = origin.last("/hop").unwrap();
    assert_eq!(
        seen.header("x-hop-custom"),
        None,
        "named in the client's Connection"
    );
    assert_eq!(seen.header("keep-alive"), None);
    assert_eq!(seen.header("proxy-connection"), None);
    for c in seen.header_all("connection") {
        assert!(
            !c.to_ascii_lowercase().contains("x-hop-custom"),
            "Connection: {c}"
        );
    }
    assert_eq!(seen.header("x-end-to-end").as_deref(), Some("kept"));
}

#[tokio::test]
async fn via_is_added_in_both_directions() {
    let origin = TestOrigin::start();
    origin.route(
        "/via",
        Reply::ok("via")
            .cc("no-store")
            .header("via", "1.0 upstream-cache"),
    );
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let r = get(&client, &origin.url("/via"), &[("via", "1.1 client-side")]).await;
    assert_eq!(r.status, 200);
    let resp_via = via_values(&r.header_all("via"));
    assert_eq!(resp_via, ["1.0 upstream-cache", "1.1 weir"], "response Via");
    assert_eq!(origin.count("/via"), 1);
    let req_via = via_values(&origin.last("/via").unwrap().header_all("via"));
    assert_eq!(req_via.len(), 2, "request Via at the origin: {req_via:?}");
    assert_eq!(req_via[0], "1.1 client-side");
    // Toward the origin, a comment marks this process (forwarding loops, `via.rs`).
    let ours = &req_via[1];
    assert!(
        ours.starts_with("1.1 weir (") && ours.ends_with(')'),
        "request Via at the origin: {req_via:?}"
    );
}

#[test]
fn host_header_follows_the_request_target() {
    let origin = TestOrigin::start();
    origin.route("/host", Reply::ok("host").cc("no-store"));
    let proxy = Proxy::forward();
    // Absolute form: the target's authority wins over a different Host header.
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: wrong.example\r\n\r\n",
            origin.url("/host")
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(origin.count("/host"), 1);
    assert_eq!(
        origin.last("/host").unwrap().header("host"),
        Some(origin.addr().to_string())
    );
    // An HTTP/1.1 request without Host is malformed (RFC 9112, 3.2).
    let r = raw_exchange(
        proxy.forward_addr(),
        format!("GET {} HTTP/1.1\r\n\r\n", origin.url("/host")).as_bytes(),
    );
    assert_eq!(r.status, 400, "HTTP/1.1 request without Host");
    assert_eq!(origin.count("/host"), 1);
}

#[test]
fn max_forwards_zero_is_answered_by_the_proxy() {
    let origin = TestOrigin::start();
    origin.route("/mf", Reply::ok("from origin"));
    let proxy = Proxy::forward();
    for method in ["TRACE", "OPTIONS"] {
        let r = raw_exchange(
            proxy.forward_addr(),
            &absolute(method, &origin, "/mf", "Max-Forwards: 0\r\n"),
        );
        assert_eq!(r.status, 200, "{method} with Max-Forwards: 0");
        assert_ne!(
            r.text(),
            "from origin",
            "{method}: the proxy answers itself"
        );
        if method == "TRACE" {
            assert!(
                r.text().contains("TRACE"),
                "TRACE echoes the request: {:?}",
                r.text()
            );
        }
    }
    assert_eq!(origin.count("/mf"), 0);
}

#[test]
fn max_forwards_is_decremented() {
    let origin = TestOrigin::start();
    origin.route("/mf", Reply::ok("from origin"));
    let proxy = Proxy::forward();
    for (method, sent, expected) in [("TRACE", "5", "4"), ("OPTIONS", "1", "0")] {
        let r = raw_exchange(
            proxy.forward_addr(),
            &absolute(method, &origin, "/mf", &format!("Max-Forwards: {sent}\r\n")),
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "from origin"),
            "{method}"
        );
        let seen = origin.last("/mf").unwrap();
        assert_eq!(seen.method, method);
        assert_eq!(
            seen.header("max-forwards").as_deref(),
            Some(expected),
            "{method}"
        );
    }
    assert_eq!(origin.count("/mf"), 2);
}
