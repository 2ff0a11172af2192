//! The listener side: TLS termination (SNI, ALPN, certificate errors, reload) with
//! real clients (curl, h2load), and the PROXY protocol (v1, v2, garbage, timeouts).
//!
//! Certificates are made at test time with rcgen. Everything runs on 127.0.0.1.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tls::{make_cert, tls_line, TestCert};
use common::*;

const SOON: Duration = Duration::from_secs(5);

/// `curl --resolve NAME:PORT:127.0.0.1 https://NAME:PORT{path}` trusting `ca`, with
/// `extra` arguments; prints `%{http_version}` after the body.
fn curl_tls(name: &str, port: u16, path: &str, ca: &Path, extra: &[&str]) -> Output {
    let resolve = format!("{name}:{port}:127.0.0.1");
    let url = format!("https://{name}:{port}{path}");
    let ca = ca.display().to_string();
    let mut args = vec![
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "-w",
        "\n%{http_version}",
    ];
    args.extend_from_slice(extra);
    args.push(&url);
    curl(&args)
}

/// The body and the HTTP version curl printed, asserting success.
fn ok_body(out: &Output) -> (String, String) {
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, version) = text.rsplit_once('\n').expect("curl -w output");
    (body.to_string(), version.to_string())
}

/// Runs a command to its end, killing it after `timeout`.
fn run_bounded(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn have(tool: &str, version_arg: &str) -> bool {
    Command::new(tool)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A reverse TLS listener in front of `origin` with these certificates.
fn tls_proxy(origin: &TestOrigin, certs: &[&TestCert], extra: &[&str]) -> Proxy {
    let mut b = Proxy::builder()
        .reverse(&origin.base())
        .listener_line(&tls_line(certs));
    for line in extra {
        b = b.listener_line(line);
    }
    b.access_log("squid").start()
}

fn metric_value(proxy: &Proxy, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(&proxy.metrics(), name, labels).unwrap_or(0.0)
}

/// Access-log lines, waiting (bounded) until there are at least `n`.
fn log_lines(proxy: &Proxy, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    wait_until(SOON, || {
        lines = std::fs::read_to_string(proxy.access_log_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        lines.len() >= n
    });
    lines
}

#[test]
fn sni_picks_the_certificate_and_alpn_picks_h2_or_http11() {
    require_curl!();
    let origin = TestOrigin::start();
    origin.route("/x", Reply::ok("hello").cc("max-age=60"));
    let dir = temp_dir("tls-certs");
    // The first certificate is the default; it also covers 127.0.0.1 so that a client
    // without SNI (curl sends none for an IP address) can verify it.
    let a = make_cert(&dir, "a", &["a.test", "127.0.0.1"]);
    let b = make_cert(&dir, "b", &["*.b.test"]);
    let proxy = tls_proxy(&origin, &[&a, &b], &[]);
    let port = proxy.reverse_addr().port();

    // a.test: certificate a (b's CA alone would not verify it), HTTP/2 by ALPN.
    let (body, version) = ok_body(&curl_tls("a.test", port, "/x", &a.cert, &["--http2"]));
    assert_eq!((body.as_str(), version.as_str()), ("hello", "2"));
    let refused = curl_tls("a.test", port, "/x", &b.cert, &["--http2"]);
    assert!(!refused.status.success(), "a.test verified against b's CA");

    // www.b.test: the wildcard certificate b, HTTP/1.1 when the client offers only it.
    let (body, version) = ok_body(&curl_tls("www.b.test", port, "/x", &b.cert, &["--http1.1"]));
    assert_eq!((body.as_str(), version.as_str()), ("hello", "1.1"));
    // a.test over HTTP/1.1: served from what the h2 request stored.
    let (body, version) = ok_body(&curl_tls("a.test", port, "/x", &a.cert, &["--http1.1"]));
    assert_eq!((body.as_str(), version.as_str()), ("hello", "1.1"));

    // A name no certificate covers gets the default, which the client then refuses.
    let other = curl_tls("c.test", port, "/x", &a.cert, &[]);
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("SSL"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );

    // No SNI: the default certificate.
    let url = format!("https://127.0.0.1:{port}/x");
    let ca = a.cert.display().to_string();
    let out = curl(&["--cacert", &ca, "--http2", "-w", "\n%{http_version}", &url]);
    let (body, version) = ok_body(&out);
    assert_eq!((body.as_str(), version.as_str()), ("hello", "2"));

    // Two h2 handshakes succeeded, and two HTTP/1.1. (A client that rejects the
    // certificate may do so after the server finished its side of a TLS 1.3
    // handshake, which then counts too: hence "at least".)
    assert!(metric_value(&proxy, "weir_tls_handshakes_total", &[("alpn", "h2")]) >= 2.0);
    assert_eq!(
        metric_value(&proxy, "weir_tls_handshakes_total", &[("alpn", "http/1.1")]),
        2.0
    );
    // One origin fetch per host (a.test, www.b.test, 127.0.0.1): h2 and HTTP/1.1
    // clients of a.test shared one cache entry.
    assert_eq!(origin.count("/x"), 3);
    let lines = log_lines(&proxy, 3);
    assert!(
        lines.iter().any(|l| l.contains("https://a.test:")),
        "{lines:?}"
    );
}

#[test]
fn h2load_runs_a_short_h2_load_over_tls() {
    if !have("h2load", "--version") {
        eprintln!("SKIPPED: `h2load` is not on PATH (./test.sh installs nghttp2-client)");
        return;
    }
    let origin = TestOrigin::start();
    origin.route("/h", Reply::ok(vec![b'h'; 2048]).cc("max-age=60"));
    let dir = temp_dir("tls-h2load");
    let a = make_cert(&dir, "a", &["a.test", "127.0.0.1"]);
    let proxy = tls_proxy(&origin, &[&a], &[]);
    let url = format!("https://127.0.0.1:{}/h", proxy.reverse_addr().port());
    let out = run_bounded(
        Command::new("h2load").args(["-n", "400", "-c", "4", "-m", "8", "-T", "10", &url]),
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "h2load: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Application protocol: h2"), "{text}");
    assert!(
        text.contains("400 total, 400 started, 400 done, 400 succeeded, 0 failed"),
        "{text}"
    );
    assert_eq!(
        metric_value(&proxy, "weir_tls_handshakes_total", &[("alpn", "h2")]),
        4.0
    );
    assert_eq!(origin.count("/h"), 1);
}

/// `weir check` on a file whose listener has `tls_text`; the first line of stderr.
fn check_error(dir: &Path, tls_text: &str) -> String {
    let config = dir.join("weir.toml");
    let text = format!(
        "[admin]\nlisten = \"off\"\n\n[[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
         origin = \"http://127.0.0.1:1\"\n{tls_text}\n"
    );
    std::fs::write(&config, text).unwrap();
    let out = run_weir(
        &["check", "--config", &config.display().to_string()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn bad_certificates_are_refused_with_file_line_and_key() {
    let dir = temp_dir("tls-bad");
    let a = make_cert(&dir, "a", &["a.test"]);
    let b = make_cert(&dir, "b", &["b.test"]);
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let bad_der = dir.join("bad-der.pem");
    std::fs::write(
        &bad_der,
        "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let file = dir.join("weir.toml").display().to_string();
    let p = |path: &Path| format!("{:?}", path.display().to_string());
    let cases = [
        (
            format!(
                "tls = {{ certs = [\n  {},\n  {{ cert = {}, key = {} }} ] }}",
                a.toml(),
                p(&b.cert),
                p(&a.key)
            ),
            10,
            "listen[0].tls.certs[1].key",
            "does not belong to the certificate",
        ),
        (
            format!(
                "[[listen.tls.certs]]\ncert = {}\nkey = {}",
                p(&dir.join("missing.pem")),
                p(&a.key)
            ),
            9,
            "listen[0].tls.certs[0].cert",
            "cannot read",
        ),
        (
            format!(
                "tls = {{ certs = [ {{ cert = {}, key = {} }} ] }}",
                p(&garbage),
                p(&a.key)
            ),
            8,
            "listen[0].tls.certs[0].cert",
            "holds no PEM certificate",
        ),
        (
            format!(
                "tls = {{ certs = [ {{ cert = {}, key = {} }} ] }}",
                p(&bad_der),
                p(&a.key)
            ),
            8,
            "listen[0].tls.certs[0].cert",
            "not valid X.509",
        ),
        (
            format!(
                "tls = {{ certs = [ {{ cert = {}, key = {} }} ] }}",
                p(&a.cert),
                p(&a.cert)
            ),
            8,
            "listen[0].tls.certs[0].key",
            "holds no PEM private key",
        ),
        (
            "tls = { certs = [] }".to_string(),
            8,
            "listen[0].tls.certs",
            "at least one certificate",
        ),
        (
            format!(
                "tls = {{ certs = [ {{ cert = {}, kee = \"x\" }} ] }}",
                p(&a.cert)
            ),
            8,
            "listen[0].tls.certs[0].kee",
            "unknown field",
        ),
    ];
    for (tls, line, key, message) in cases {
        let err = check_error(&dir, &tls);
        let want = format!("weir: {file}:{line}: key `{key}`: ");
        assert!(
            err.starts_with(&want),
            "want `{want}…{message}…`, got: {err}\n{tls}"
        );
        assert!(err.contains(message), "want `{message}` in: {err}");
    }
    // Startup refuses the same file, with the same message.
    let config = dir.join("weir.toml");
    let out = run_weir(
        &["run", "--config", &config.display().to_string()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listen[0].tls.certs[0].kee"));
}

#[test]
fn reload_swaps_the_certificate_without_dropping_a_download() {
    require_curl!();
    let origin = TestOrigin::start();
    // 40 chunks of 64 KiB, 50 ms apart: about two seconds in flight.
    let len = 40 * CHUNK as u64;
    origin.route(
        "/slow",
        Reply::stream(len).chunk_delay(Duration::from_millis(50)),
    );
    origin.route("/x", Reply::ok("fresh"));
    let dir = temp_dir("tls-reload");
    let old = make_cert(&dir, "old", &["a.test"]);
    let live = TestCert {
        cert: dir.join("live.pem"),
        key: dir.join("live.key"),
    };
    std::fs::copy(&old.cert, &live.cert).unwrap();
    std::fs::copy(&old.key, &live.key).unwrap();
    let proxy = tls_proxy(&origin, &[&live], &[]);
    let port = proxy.reverse_addr().port();

    // A download over TLS (HTTP/1.1) with the old certificate, still running during
    // the reload.
    let resolve = format!("a.test:{port}:127.0.0.1");
    let out_file = dir.join("download.bin");
    let mut download = Command::new("curl")
        .args([
            "--silent",
            "--show-error",
            "--max-time",
            "20",
            "--noproxy",
            "",
        ])
        .args(["--http1.1", "--cacert", &old.cert.display().to_string()])
        .args(["--resolve", &resolve, "-o", &out_file.display().to_string()])
        .arg(format!("https://a.test:{port}/slow"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn curl");
    assert!(
        wait_until(SOON, || std::fs::metadata(&out_file)
            .is_ok_and(|m| m.len() > 0)),
        "the download did not start"
    );

    // Renew the certificate in place (as certbot does) and reload.
    let new = make_cert(&dir, "new", &["a.test"]);
    std::fs::copy(&new.cert, &live.cert).unwrap();
    std::fs::copy(&new.key, &live.key).unwrap();
    let url = format!("http://{}/admin/reload", proxy.admin_addr());
    let out = curl(&["-X", "POST", &url]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("reloaded certificates on 1 listener"),
        "reload said: {said}"
    );

    // New handshakes get the new certificate: its CA verifies, the old one no longer.
    let (body, _) = ok_body(&curl_tls("a.test", port, "/x", &new.cert, &[]));
    assert_eq!(body, "fresh");
    assert!(!curl_tls("a.test", port, "/x", &old.cert, &[])
        .status
        .success());

    // The download in flight finished whole.
    let deadline = Instant::now() + Duration::from_secs(25);
    let status = loop {
        if let Some(s) = download.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the download did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "download failed: {status}");
    assert_eq!(std::fs::read(&out_file).unwrap(), pattern(len as usize));

    // A reload with a broken key changes nothing.
    std::fs::write(&live.key, "broken").unwrap();
    let out = curl(&["-X", "POST", "-w", "\n%{http_code}", &url]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.ends_with("422"), "{said}");
    assert!(said.contains("listen[0].tls.certs[0].key"), "{said}");
    let (body, _) = ok_body(&curl_tls("a.test", port, "/x", &new.cert, &[]));
    assert_eq!(body, "fresh");
}

#[test]
fn failed_and_slow_handshakes_are_counted_and_harm_nothing() {
    require_curl!();
    let origin = TestOrigin::start();
    origin.route("/x", Reply::ok("fine"));
    let dir = temp_dir("tls-fail");
    let a = make_cert(&dir, "a", &["a.test"]);
    let proxy = Proxy::builder()
        .option("timeouts", "client_handshake", "300ms")
        .reverse(&origin.base())
        .listener_line(&tls_line(&[&a]))
        .start();
    let addr = proxy.reverse_addr();
    // Plain HTTP on a TLS port: not a ClientHello.
    let mut conn = RawConn::connect(addr);
    conn.send(b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let started = Instant::now();
    let got = conn.read_until_close(SOON);
    assert!(started.elapsed() < SOON, "not closed");
    // Nothing, or a TLS alert record: never an HTTP answer.
    assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    // A client that says nothing is closed at the handshake timeout.
    let mut idle = RawConn::connect(addr);
    let started = Instant::now();
    // (A connection closed without a byte, like the harness's port probe, is not
    // counted at all.)
    assert!(idle.closed_within(SOON));
    assert!(started.elapsed() >= Duration::from_millis(250));
    let m = proxy.metrics();
    assert_eq!(
        metric(
            &m,
            "weir_connections_refused_total",
            &[("reason", "tls_handshake")]
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &m,
            "weir_connections_refused_total",
            &[("reason", "tls_timeout")]
        ),
        Some(1.0)
    );
    let (body, _) = ok_body(&curl_tls("a.test", addr.port(), "/x", &a.cert, &[]));
    assert_eq!(body, "fine");
}

// ---------------------------------------------------------------------------------
// PROXY protocol.

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

    let lines = log_lines(&proxy, 4);
    let clients: Vec<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().nth(2).unwrap_or(""))
        .collect();
    assert_eq!(
        clients,
        ["203.0.113.9", "198.51.100.7", "203.0.113.20", "127.0.0.1"],
        "{lines:#?}"
    );
    assert!(lines[1].contains("/403 "), "{}", lines[1]);
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
