//! Forward and reverse proxying, CONNECT, HTTP/1.1 and h2c from clients, the origin
//! connection pool, intermediary header handling (RFC 9110) and streaming bodies.
//! Each test asserts what the client saw and how many requests reached the origin.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// An absolute-form request for `path` on `origin`, for the forward listener.
fn absolute(method: &str, origin: &TestOrigin, path: &str, extra: &str) -> Vec<u8> {
    format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
        origin.url(path),
        origin.addr()
    )
    .into_bytes()
}

fn via_values(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

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

#[test]
fn connect_tunnel_relays_bytes_both_ways() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .start();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(
        format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            echo.port()
        )
        .as_bytes(),
    );
    let head = conn.read_head().expect("CONNECT response");
    assert_eq!(head.status, 200, "CONNECT to an allowed port");
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

#[tokio::test]
async fn origin_connections_are_kept_alive_and_reused() {
    let origin = TestOrigin::start();
    origin.route("/reuse/*", Reply::ok("again").cc("no-store"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    for i in 0..10 {
        let r = get(&client, &origin.url(&format!("/reuse/{i}")), &[]).await;
        assert_eq!(r.text(), "again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.total(), 10);
    assert!(
        origin.connections_accepted() <= 2,
        "10 sequential requests opened {} origin connections",
        origin.connections_accepted()
    );
}

#[test]
fn pass_through_requests_reuse_origin_connections() {
    let origin = TestOrigin::start();
    origin.route("/post/*", Reply::ok("posted"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    for i in 0..5 {
        let mut req = absolute(
            "POST",
            &origin,
            &format!("/post/{i}"),
            "Content-Length: 5\r\n",
        );
        req.extend_from_slice(b"hello");
        conn.send(&req);
        let r = conn
            .read_final(false)
            .expect("response on the kept-alive client connection");
        assert_eq!((r.status, r.text().as_str()), (200, "posted"), "POST {i}");
        assert_eq!(r.header("content-length"), Some("6"), "POST {i}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(origin.total(), 5);
    assert!(
        origin
            .requests()
            .iter()
            .all(|r| r.method == "POST" && &r.body[..] == b"hello"),
        "the origin got {:?}",
        origin.requests()
    );
    assert!(
        origin.connections_accepted() <= 2,
        "5 sequential POSTs opened {} origin connections",
        origin.connections_accepted()
    );
    let reused = metric(
        &proxy.metrics(),
        "weir_origin_connections_reused_total",
        &[],
    )
    .unwrap_or(0.0);
    assert!(
        reused >= 3.0,
        "weir_origin_connections_reused_total = {reused} after 5 sequential POSTs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_connections_are_limited_per_origin() {
    let origin = TestOrigin::start();
    origin.route(
        "/limited/*",
        Reply::ok("limited")
            .cc("no-store")
            .delay(Duration::from_millis(400)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "max_connections_per_origin", "2")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..6 {
        let (client, url) = (client.clone(), origin.url(&format!("/limited/{i}")));
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    while let Some(r) = set.join_next().await {
        let r = r.unwrap();
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "limited"));
    }
    assert_eq!(origin.total(), 6);
    assert!(
        origin.max_connections_open() <= 2,
        "{} origin connections open at once with max_connections_per_origin = 2",
        origin.max_connections_open()
    );
}

#[tokio::test]
async fn idle_origin_connections_are_closed_after_idle_timeout() {
    let origin = TestOrigin::start();
    origin.route("/idle/*", Reply::ok("idle").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "idle_timeout", "500ms")
        .start();
    let client = proxied_client(proxy.forward_addr());
    get(&client, &origin.url("/idle/1"), &[]).await;
    assert_eq!(origin.connections_accepted(), 1);
    assert!(
        origin
            .eventually(Duration::from_secs(4), |o| o.connections_closed() == 1)
            .await,
        "the idle pooled connection was not closed after idle_timeout"
    );
    get(&client, &origin.url("/idle/2"), &[]).await;
    assert_eq!(origin.connections_accepted(), 2);
    assert_eq!(origin.total(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_origin_connections_are_capped_per_origin() {
    let origin = TestOrigin::start();
    origin.route(
        "/burst/*",
        Reply::ok("burst")
            .cc("no-store")
            .delay(Duration::from_millis(300)),
    );
    let proxy = Proxy::builder()
        .forward()
        .option("upstream", "max_idle_per_origin", "1")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..4 {
        let (client, url) = (client.clone(), origin.url(&format!("/burst/{i}")));
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    while let Some(r) = set.join_next().await {
        assert_eq!(r.unwrap().text(), "burst");
    }
    assert_eq!(origin.total(), 4);
    assert_eq!(
        origin.connections_accepted(),
        4,
        "4 concurrent requests, 4 connections"
    );
    // The default idle_timeout is 60 s: only the idle cap closes connections this soon.
    assert!(
        origin
            .eventually(Duration::from_secs(3), |o| o.connections_open() <= 1)
            .await,
        "{} idle origin connections kept with max_idle_per_origin = 1",
        origin.connections_open()
    );
}

#[test]
fn idle_client_connections_are_closed_after_client_idle() {
    let origin = TestOrigin::start();
    origin.route("/ci", Reply::ok("ci").cc("no-store"));
    let proxy = Proxy::builder()
        .forward()
        .option("timeouts", "client_idle", "500ms")
        .start();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute("GET", &origin, "/ci", ""));
    assert_eq!(conn.read_final(false).unwrap().text(), "ci");
    let start = Instant::now();
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "an idle client connection was kept past client_idle = 500ms"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "closed after {:?}, before client_idle",
        start.elapsed()
    );
    assert_eq!(origin.count("/ci"), 1);
}

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
    assert_eq!(
        req_via,
        ["1.1 client-side", "1.1 weir"],
        "request Via at the origin"
    );
}

/// A bare HTTP/1.0 origin: reads each request (head and Content-Length body), answers
/// `HTTP/1.0 200 OK` with "ok" and closes. Stops on drop.
struct Http10Origin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Http10Origin {
    fn start() -> Http10Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the HTTP/1.0 origin");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (st, sv) = (stop.clone(), served.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                if Http10Origin::read_request(&mut conn) {
                    sv.fetch_add(1, Ordering::SeqCst);
                    let _ = conn.write_all(
                        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok",
                    );
                    let _ = conn.flush();
                }
            }
        });
        Http10Origin {
            addr,
            stop,
            served,
            thread: Some(thread),
        }
    }

    /// Reads one request whole; false if the connection ended first.
    fn read_request(conn: &mut std::net::TcpStream) -> bool {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break pos + 4;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let body_len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + body_len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        true
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for Http10Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn http10_origin_responses_reach_the_client_as_http11() {
    let origin = Http10Origin::start();
    let proxy = Proxy::forward();
    let addr = origin.addr;
    // GET goes through the cache's fetch, POST through plain forwarding.
    for (method, extra, body) in [("GET", "", ""), ("POST", "Content-Length: 4\r\n", "data")] {
        let req = format!(
            "{method} http://{addr}/old HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n{body}"
        );
        let r = raw_exchange(proxy.forward_addr(), req.as_bytes());
        assert_eq!(
            format!("{} {}", r.version, r.status),
            "HTTP/1.1 200",
            "{method}: status line of the response to an HTTP/1.1 client"
        );
        assert_eq!(r.text(), "ok", "{method}");
        let via = via_values(
            &r.header_all("via")
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
        );
        assert!(
            via.iter().any(|v| v == "1.0 weir"),
            "{method}: Via {via:?} should record the origin's HTTP/1.0 as `1.0 weir`"
        );
    }
    assert_eq!(origin.served(), 2);
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

#[test]
fn expect_100_continue() {
    let origin = TestOrigin::start();
    origin.route("/upload", Reply::echo());
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute(
        "POST",
        &origin,
        "/upload",
        "Content-Length: 11\r\nExpect: 100-continue\r\n",
    ));
    assert!(
        conn.has_data_within(Duration::from_secs(5)),
        "no 100 Continue within 5 s"
    );
    let interim = conn.read_head().expect("interim response");
    assert_eq!(interim.status, 100, "expected 100 Continue before the body");
    conn.send(b"hello world");
    let r = conn.read_final(false).expect("final response");
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    assert_eq!(origin.count("/upload"), 1);
    assert_eq!(&origin.last("/upload").unwrap().body[..], b"hello world");
}

#[test]
fn head_requests_get_headers_and_no_body() {
    let origin = TestOrigin::start();
    origin.route("/head", Reply::ok("hello world").cc("no-store"));
    origin.route("/after", Reply::ok("after").cc("no-store"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute("HEAD", &origin, "/head", ""));
    let r = conn.read_final(true).expect("HEAD response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("11"));
    // A following response on the same connection parses cleanly: no body bytes were
    // sent after the HEAD response.
    conn.send(&absolute("GET", &origin, "/after", ""));
    let r = conn.read_final(false).expect("response after HEAD");
    assert_eq!((r.status, r.text().as_str()), (200, "after"));
    assert_eq!(origin.count("/head"), 1);
    assert_eq!(origin.count("/after"), 1);
}

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
