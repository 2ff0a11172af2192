//! The PROXY protocol (v1, v2, garbage, timeouts), and PROXY then TLS.

use crate::common::tls::make_cert;
use crate::common::*;
use crate::helpers::{curl_tls, log_lines, metric_value, ok_body, tls_proxy, SOON};
use crate::require_curl;

/// A PROXY v2 header for a TCP/IPv4 connection from `src`.
fn proxy_v2(src: std::net::SocketAddrV4, dst: std::net::SocketAddrV4) -> Vec<u8> {
    ppp::v2::Builder::with_addresses(
        ppp::v2::Version::Two | ppp::v2::Command::Proxy,
        ppp::v2::Protocol::Stream,
        (std::net::SocketAddr::V4(src), std::net::SocketAddr::V4(dst)),
    )
    .build()
    .expect("build a PROXY v2 header")
}

fn get_after(header: &[u8], addr: std::net::SocketAddr, path: &str) -> RawResponse {
    let mut conn = RawConn::connect(addr);
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(
        format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    conn.send(&bytes);
    conn.read_response(false).expect("a response")
}

#[test]
fn proxy_headers_set_the_client_for_allow_and_the_access_log() {
    let origin = TestOrigin::start();
    origin.route("/p", Reply::ok("proxied").cc("max-age=60"));
    let proxy = Proxy::builder()
        .reverse(&origin.base())
        .allow(&["203.0.113.0/24"])
        .listener_line("proxy_protocol = true")
        .access_log("squid")
        .start();
    let addr = proxy.reverse_addr();
    let port = addr.port();

    // v1 from an allowed client.
    let v1 = format!("PROXY TCP4 203.0.113.9 127.0.0.1 40001 {port}\r\n");
    let r = get_after(v1.as_bytes(), addr, "/p");
    assert_eq!((r.status, r.text().as_str()), (200, "proxied"));
    // v2 from a client outside `allow`: 403, although the balancer (127.0.0.1) is
    // not the one asking.
    let v2 = proxy_v2(
        "198.51.100.7:40002".parse().unwrap(),
        format!("127.0.0.1:{port}").parse().unwrap(),
    );
    let r = get_after(&v2, addr, "/p");
    assert_eq!(r.status, 403);
    // v2 from an allowed client.
    let v2 = proxy_v2(
        "203.0.113.20:40003".parse().unwrap(),
        format!("127.0.0.1:{port}").parse().unwrap(),
    );
    assert_eq!(get_after(&v2, addr, "/p").status, 200);
    // v2 LOCAL (a balancer's health check): the peer itself, 127.0.0.1, not allowed.
    let local = ppp::v2::Builder::with_addresses(
        ppp::v2::Version::Two | ppp::v2::Command::Local,
        ppp::v2::Protocol::Unspecified,
        ppp::v2::Addresses::Unspecified,
    )
    .build()
    .unwrap();
    assert_eq!(get_after(&local, addr, "/p").status, 403);

    // Each worker writes its lines as its requests end: in the order of the clients
    // above only within a worker.
    let lines = log_lines(&proxy, 4);
    let mut logged: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[2], fields[3].rsplit('/').next().unwrap_or(""))
        })
        .collect();
    logged.sort();
    assert_eq!(
        logged,
        [
            ("127.0.0.1", "403"),
            ("198.51.100.7", "403"),
            ("203.0.113.20", "200"),
            ("203.0.113.9", "200")
        ],
        "{lines:#?}"
    );
}

#[test]
fn connections_without_a_valid_proxy_header_are_closed_and_counted() {
    let origin = TestOrigin::start();
    origin.route("/p", Reply::ok("proxied"));
    let proxy = Proxy::builder()
        .option("timeouts", "client_handshake", "300ms")
        .reverse(&origin.base())
        .listener_line("proxy_protocol = true")
        .start();
    let addr = proxy.reverse_addr();
    let garbage: [&[u8]; 4] = [
        b"GET /p HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\nGET /p HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n\r\nGET /p HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xff",
    ];
    for bytes in garbage {
        let mut conn = RawConn::connect(addr);
        let _ = conn.try_send(bytes);
        let answer = conn.read_until_close(SOON);
        assert!(
            answer.is_empty(),
            "{:?} got an answer: {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&answer)
        );
    }
    // A header that never completes is cut at the handshake timeout.
    let mut slow = RawConn::connect(addr);
    slow.send(b"PROXY TCP4 203.0.113.9");
    assert!(slow.closed_within(SOON));
    let m = proxy.metrics();
    assert_eq!(
        metric(
            &m,
            "weir_connections_refused_total",
            &[("reason", "proxy_header")]
        ),
        Some(4.0)
    );
    assert_eq!(
        metric(
            &m,
            "weir_connections_refused_total",
            &[("reason", "proxy_timeout")]
        ),
        Some(1.0)
    );
    assert_eq!(origin.count("/p"), 0);
    // A good header still works after all that.
    let v1 = format!("PROXY TCP4 127.0.0.9 127.0.0.1 40001 {}\r\n", addr.port());
    assert_eq!(get_after(v1.as_bytes(), addr, "/p").status, 200);
}

#[test]
fn proxy_protocol_then_tls_with_curl() {
    require_curl!();
    let origin = TestOrigin::start();
    origin.route("/x", Reply::ok("both"));
    let dir = temp_dir("tls-ppp");
    let a = make_cert(&dir, "a", &["a.test"]);
    let proxy = tls_proxy(&origin, &[&a], &["proxy_protocol = true"]);
    let port = proxy.reverse_addr().port();
    // curl writes a PROXY v1 header naming its own address, then speaks TLS.
    let (body, version) = ok_body(&curl_tls(
        "a.test",
        port,
        "/x",
        &a.cert,
        &["--haproxy-protocol", "--http2"],
    ));
    assert_eq!((body.as_str(), version.as_str()), ("both", "2"));
    // Without the header, the ClientHello is not a PROXY header: refused.
    assert!(!curl_tls("a.test", port, "/x", &a.cert, &[])
        .status
        .success());
    assert_eq!(
        metric_value(
            &proxy,
            "weir_connections_refused_total",
            &[("reason", "proxy_header")]
        ),
        1.0
    );
}
