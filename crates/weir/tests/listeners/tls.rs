//! TLS termination: SNI and ALPN, h2load, certificate errors, reload, failed handshakes.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::tls::{make_cert, tls_line, TestCert};
use crate::common::*;
use crate::helpers::{curl_tls, log_lines, metric_value, ok_body, tls_proxy, SOON};
use crate::require_curl;

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
