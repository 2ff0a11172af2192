//! What the listener tests share: curl over TLS, a TLS reverse proxy, metrics, access log.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::common::tls::{tls_line, TestCert};
use crate::common::*;

pub const SOON: Duration = Duration::from_secs(5);

/// `curl --resolve NAME:PORT:127.0.0.1 https://NAME:PORT{path}` trusting `ca`, with
/// `extra` arguments; prints `%{http_version}` after the body.
pub fn curl_tls(name: &str, port: u16, path: &str, ca: &Path, extra: &[&str]) -> Output {
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
pub fn ok_body(out: &Output) -> (String, String) {
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, version) = text.rsplit_once('\n').expect("curl -w output");
    (body.to_string(), version.to_string())
}

/// A reverse TLS listener in front of `origin` with these certificates.
pub fn tls_proxy(origin: &TestOrigin, certs: &[&TestCert], extra: &[&str]) -> Proxy {
    let mut b = Proxy::builder()
        .reverse(&origin.base())
        .listener_line(&tls_line(certs));
    for line in extra {
        b = b.listener_line(line);
    }
    b.access_log("squid").start()
}

pub fn metric_value(proxy: &Proxy, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(&proxy.metrics(), name, labels).unwrap_or(0.0)
}

/// Access-log lines, waiting (bounded) until there are at least `n`.
pub fn log_lines(proxy: &Proxy, n: usize) -> Vec<String> {
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
