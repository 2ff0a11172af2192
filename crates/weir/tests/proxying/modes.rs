//! Forward proxying (reqwest and curl), CONNECT tunnels and their ports, reverse routes.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::via_values;
use crate::require_curl;

#[tokio::test]
async fn forward_proxy_serves_absolute_form_requests() {
    let origin = TestOrigin::start();
    origin.route("/fwd", Reply::ok("through the proxy"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let r = get(&client, &origin.url("/fwd?q=1"), &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "through the proxy")
    );
    assert!(
        via_values(&r.header_all("via")).contains(&"1.1 weir".to_string()),
        "Via: {:?}",
        r.header_all("via")
    );
    assert_eq!(origin.count("/fwd"), 1);
    let seen = origin.last("/fwd").unwrap();
    assert_eq!(seen.method, "GET");
    assert_eq!(
        seen.uri, "/fwd?q=1",
        "the origin gets the origin-form target"
    );
    assert_eq!(seen.header("host"), Some(origin.addr().to_string()));
}

#[test]
fn forward_proxy_with_curl() {
    require_curl!();
    let origin = TestOrigin::start();
    origin.route("/curl", Reply::ok("hello curl").cc("max-age=60"));
    let proxy = Proxy::forward();
    let proxy_url = proxy.forward_url();
    let url = origin.url("/curl");
    let run = || {
        let out = curl(&["--include", "--proxy", &proxy_url, &url]);
        assert!(
            out.status.success(),
            "curl failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run();
    let first_lc = first.to_ascii_lowercase();
    assert!(first.starts_with("HTTP/1.1 200"), "curl saw:\n{first}");
    assert!(first.ends_with("hello curl"), "curl saw:\n{first}");
    assert!(first_lc.contains("\r\nvia: 1.1 weir"), "curl saw:\n{first}");
    assert!(
        first_lc.contains("\r\ncache-status: weir; fwd=miss; stored"),
        "curl saw:\n{first}"
    );
    let second = run();
    assert!(second.starts_with("HTTP/1.1 200"), "curl saw:\n{second}");
    assert!(second.ends_with("hello curl"), "curl saw:\n{second}");
    assert!(
        second
            .to_ascii_lowercase()
            .contains("\r\ncache-status: weir; hit"),
        "curl saw:\n{second}"
    );
    assert_eq!(origin.count("/curl"), 1);
}

#[test]
fn connect_tunnel_with_curl() {
    require_curl!();
    let origin = TestOrigin::start();
    origin.route("/tunneled", Reply::ok("through the tunnel"));
    let refused = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[origin.port()])
        .start();
    let proxy_url = proxy.forward_url();

    // Allowed port: curl tunnels its request to the origin through CONNECT.
    let out = curl(&[
        "--proxytunnel",
        "--proxy",
        &proxy_url,
        "--write-out",
        "\n%{http_connect} %{http_code}",
        &origin.url("/tunneled"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "through the tunnel\n200 200");
    assert_eq!(origin.count("/tunneled"), 1);
    let seen = origin.last("/tunneled").unwrap();
    assert!(
        seen.header("via").is_none(),
        "a tunnel relays bytes; the proxy does not rewrite the request inside it"
    );

    // A port not in connect_ports: 403, nothing reaches it.
    let out = curl(&[
        "--proxytunnel",
        "--proxy",
        &proxy_url,
        "--write-out",
        "%{http_connect}",
        &format!("http://127.0.0.1:{}/", refused.port()),
    ]);
    assert!(
        !out.status.success(),
        "curl must fail when CONNECT is refused"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "403");
    assert_eq!(refused.accepted(), 0);
    assert_eq!(origin.total(), 1);
}

/// A connection to the forward listener of `proxy` on which a CONNECT to `port` was
/// answered 200.
fn tunnel_to(proxy: &Proxy, port: u16) -> RawConn {
    RawConn::tunnel(proxy.forward_addr(), port)
}

#[test]
fn connect_tunnel_relays_bytes_both_ways() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .start();
    let mut conn = tunnel_to(&proxy, echo.port());
    for msg in [
        &b"hello tunnel"[..],
        &[0u8, 1, 2, 255, 13, 10][..],
        &vec![b'x'; 100_000],
    ] {
        conn.send(msg);
        assert_eq!(conn.read_bytes(msg.len()).expect("echoed bytes"), msg);
    }
    assert_eq!(echo.accepted(), 1);
}

/// A tunnel that carries nothing either way for `[timeouts] tunnel_idle` is closed on
/// both sides; one that keeps carrying bytes is not, however old it is. It is logged
/// and counted when it ends, with its duration and the bytes it carried, as Squid
/// logs a tunnel.
#[test]
fn a_silent_tunnel_is_closed_after_tunnel_idle() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .option("timeouts", "tunnel_idle", "1s")
        .access_log("squid")
        .start();
    let mut conn = tunnel_to(&proxy, echo.port());
    let gauge = |proxy: &Proxy, name| metric(&proxy.metrics(), name, &[]);
    // Bytes every 0.6 s keep it open past the limit.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(600));
        conn.send(b"ping");
        assert_eq!(conn.read_bytes(4).expect("echoed while busy"), b"ping");
    }
    assert_eq!(gauge(&proxy, "weir_tunnels_open"), Some(1.0));
    let status = raw_exchange(
        proxy.admin_addr(),
        b"GET /admin/status HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    );
    assert!(status.text().contains("\"tunnels\":1"), "{}", status.text());
    let silent = Instant::now();
    let end = conn.read_bytes(1).expect_err("the tunnel is closed");
    assert_eq!(end.kind(), std::io::ErrorKind::UnexpectedEof, "{end}");
    let waited = silent.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let line = loop {
        let log = std::fs::read_to_string(proxy.access_log_path()).unwrap_or_default();
        if let Some(line) = log.lines().find(|l| l.contains(" CONNECT ")) {
            break line.to_string();
        }
        assert!(Instant::now() < deadline, "no CONNECT line in {log:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((f[3], f[4]), ("TCP_TUNNEL/200", "12"), "{line}");
    let elapsed: u64 = f[1].parse().unwrap();
    assert!(elapsed >= 2_500, "the tunnel's whole life: {line}");
    // Logged once the relay let go of everything: counted by then.
    assert_eq!(gauge(&proxy, "weir_tunnels_open"), Some(0.0));
    assert_eq!(gauge(&proxy, "weir_tunnels_idle_closed_total"), Some(1.0));
    assert_eq!(gauge(&proxy, "weir_bytes_in_total"), Some(12.0));
    assert_eq!(gauge(&proxy, "weir_bytes_out_total"), Some(12.0));
}

/// A tunnel still open at SIGTERM has the grace period, as Squid's
/// `shutdown_lifetime` gives open connections; then it is closed, and its line is in
/// the access log when the process has exited (written when a tunnel ends, it was
/// lost with the worker threads before).
#[test]
fn a_tunnel_open_at_sigterm_is_closed_after_the_grace_and_logged() {
    let echo = EchoServer::start();
    let mut proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .option("timeouts", "shutdown_grace", "1s")
        .access_log("squid")
        .start();
    let mut conn = tunnel_to(&proxy, echo.port());
    conn.send(b"hello");
    assert_eq!(conn.read_bytes(5).expect("echoed"), b"hello");
    let signalled = Instant::now();
    proxy.terminate();
    let status = proxy
        .wait_exit(Duration::from_secs(8))
        .expect("weir exits after the grace period");
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let end = conn.read_bytes(1).expect_err("the tunnel is closed");
    assert_eq!(end.kind(), std::io::ErrorKind::UnexpectedEof, "{end}");
    let log = std::fs::read_to_string(proxy.access_log_path()).unwrap_or_default();
    let line = log
        .lines()
        .find(|l| l.contains(" CONNECT "))
        .unwrap_or_else(|| panic!("no CONNECT line in {log:?}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((f[3], f[4]), ("TCP_TUNNEL/200", "5"), "{line}");
}

/// The same over HTTP/2 (RFC 9113 §8.5): the tunnel is one stream's DATA frames.
#[tokio::test]
async fn connect_tunnel_over_http2_relays_bytes_both_ways() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .start();
    let tcp = tokio::net::TcpStream::connect(proxy.forward_addr())
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("127.0.0.1:{}", echo.port()))
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(req, false).unwrap();
    let response = response.await.expect("CONNECT response");
    assert_eq!(response.status(), 200, "CONNECT to an allowed port");
    let mut recv = response.into_body();
    for msg in [
        &b"hello tunnel"[..],
        &[0u8, 1, 2, 255, 13, 10][..],
        &vec![b'x'; 100_000],
    ] {
        send.send_data(bytes::Bytes::copy_from_slice(msg), false)
            .unwrap();
        let mut echoed = Vec::new();
        while echoed.len() < msg.len() {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), recv.data())
                .await
                .expect("echoed bytes in time")
                .expect("the tunnel open")
                .unwrap();
            let _ = recv.flow_control().release_capacity(chunk.len());
            echoed.extend_from_slice(&chunk);
        }
        assert_eq!(echoed, msg);
    }
    // The client's end of stream closes the tunnel: the echo server's close comes back.
    send.send_data(bytes::Bytes::new(), true).unwrap();
    let end = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut after = Vec::new();
        while let Some(chunk) = recv.data().await {
            after.extend_from_slice(&chunk.expect("a clean end"));
        }
        after
    })
    .await;
    assert_eq!(end.expect("the tunnel closed in time"), b"");
    assert_eq!(echo.accepted(), 1);
}

#[test]
fn connect_to_a_port_not_allowed_gets_403() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[free_port()])
        .start();
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            echo.port()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 403);
    assert!(!r.text().trim().is_empty(), "403 needs a plain-text reason");
    assert_eq!(echo.accepted(), 0, "nothing may reach a refused port");
}

#[test]
fn connect_ports_default_to_443_only() {
    let echo = EchoServer::start();
    let proxy = Proxy::forward();
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            echo.port()
        )
        .as_bytes(),
    );
    assert_eq!(
        r.status,
        403,
        "port {} is not in the default list",
        echo.port()
    );
    assert_eq!(echo.accepted(), 0);
    // 443 is allowed: the proxy tries it (and, nothing listening there, does not say 403).
    let r = raw_exchange(
        proxy.forward_addr(),
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
    );
    assert_ne!(r.status, 403, "443 is in the default connect_ports");
}

#[test]
fn reverse_proxy_routes_by_host_and_path_prefix() {
    let (a, b, c) = (
        TestOrigin::start(),
        TestOrigin::start(),
        TestOrigin::start(),
    );
    a.route("/*", Reply::ok("A"));
    b.route("/*", Reply::ok("B"));
    c.route("/*", Reply::ok("C"));
    let proxy = Proxy::builder()
        .reverse(&a.base())
        .route(Some("img.example"), "/", &b.base())
        .route(None, "/api", &c.base())
        .start();
    let cases = [
        ("img.example", "/logo.png", "B"),
        ("Img.Example:8080", "/x", "B"),
        ("www.example", "/api/users", "C"),
        ("img.example", "/api/first-match-wins", "B"),
        ("www.example", "/other", "A"),
        ("www.example", "/", "A"),
    ];
    for (host, path, expected) in cases {
        let r = raw_exchange(
            proxy.reverse_addr(),
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 200, "{host}{path}");
        assert_eq!(r.text(), expected, "{host}{path}");
    }
    assert_eq!(
        b.count("/logo.png") + b.count("/x") + b.count("/api/first-match-wins"),
        3
    );
    assert_eq!(b.total(), 3);
    assert_eq!(c.count("/api/users"), 1);
    assert_eq!(c.total(), 1);
    assert_eq!(a.count("/other") + a.count("/"), 2);
    assert_eq!(a.total(), 2);
}

#[test]
fn a_reverse_listener_follows_an_absolute_target_not_host() {
    let a = TestOrigin::start();
    let b = TestOrigin::start();
    a.route("/*", Reply::ok("A").cc("max-age=60"));
    b.route("/*", Reply::ok("B").cc("max-age=60"));
    let proxy = Proxy::builder()
        .reverse(&a.base())
        .route(Some("b.example"), "/", &b.base())
        .start();
    // RFC 9112 §3.2.2: the target's authority wins over the Host field.
    let r = raw_exchange(
        proxy.reverse_addr(),
        b"GET http://b.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "B"), "absolute form");
    assert_eq!(b.count("/x"), 1);
    // It was keyed under b.example: an origin-form request for b.example is a hit,
    // one for a.example is not.
    let r = raw_exchange(
        proxy.reverse_addr(),
        b"GET /x HTTP/1.1\r\nHost: b.example\r\n\r\n",
    );
    assert_eq!(r.text(), "B");
    assert!(is_hit(r.header("cache-status").unwrap_or_default()));
    let r = raw_exchange(
        proxy.reverse_addr(),
        b"GET /x HTTP/1.1\r\nHost: a.example\r\n\r\n",
    );
    assert_eq!(r.text(), "A");
    assert_eq!((a.count("/x"), b.count("/x")), (1, 1));
}
