//! Clients: reqwest (forward proxy or direct), curl, and helpers to read what they saw.

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode, Version};

/// Per-request bound for the reqwest clients.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client that talks to servers directly (reverse-proxy tests), ignoring any proxy
/// set in the environment.
pub fn direct_client() -> reqwest::Client {
    direct_builder().build().expect("build a reqwest client")
}

/// The builder behind [`direct_client`], for further settings.
pub fn direct_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(CLIENT_TIMEOUT)
}

/// A client that sends every `http://` request through the forward proxy at `proxy`.
pub fn proxied_client(proxy: SocketAddr) -> reqwest::Client {
    proxied_builder(proxy)
        .build()
        .expect("build a reqwest client")
}

/// The builder behind [`proxied_client`], for further settings.
pub fn proxied_builder(proxy: SocketAddr) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .proxy(reqwest::Proxy::http(format!("http://{proxy}")).expect("proxy URL"))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(CLIENT_TIMEOUT)
}

/// A response read whole.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Fetched {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }

    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `Cache-Status` header ("" when absent).
    pub fn cache_status(&self) -> String {
        self.header_all("cache-status").join(", ")
    }
}

/// Sends a request and reads the whole response; panics on transport errors.
pub async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Fetched {
    try_send(client, method, url, headers, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e:?}"))
}

/// Like [`send`], returning transport errors.
pub async fn try_send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> reqwest::Result<Fetched> {
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = client.request(method, url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    if let Some(body) = body {
        req = req.body(body);
    }
    let resp = req.send().await?;
    let status = resp.status();
    let version = resp.version();
    let headers = resp.headers().clone();
    let body = resp.bytes().await?;
    Ok(Fetched {
        status,
        version,
        headers,
        body,
    })
}

/// `GET url` with extra headers.
pub async fn get(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Fetched {
    send(client, "GET", url, headers, None).await
}

/// A parsed `Cache-Status` entry for cache `weir`: its parameters in order, e.g.
/// `weir; fwd=miss; stored` -> [("fwd", Some("miss")), ("stored", None)].
pub fn weir_cache_status(header: &str) -> Option<Vec<(String, Option<String>)>> {
    header
        .split(',')
        .map(str::trim)
        .find(|entry| entry.split(';').next().map(str::trim) == Some("weir"))
        .map(|entry| {
            entry
                .split(';')
                .skip(1)
                .map(|p| {
                    let p = p.trim();
                    match p.split_once('=') {
                        Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
                        None => (p.to_string(), None),
                    }
                })
                .collect()
        })
}

/// Whether `weir`'s `Cache-Status` entry has a parameter `key` (with `value`, if given).
pub fn cs_has(header: &str, key: &str, value: Option<&str>) -> bool {
    weir_cache_status(header).is_some_and(|params| {
        params
            .iter()
            .any(|(k, v)| k == key && (value.is_none() || v.as_deref() == value))
    })
}

/// `weir; hit`
pub fn is_hit(header: &str) -> bool {
    cs_has(header, "hit", None)
}

/// Whether `curl` can be run.
pub fn curl_available() -> bool {
    Command::new("curl")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Returns early from a test, saying so, when curl is not installed.
#[macro_export]
macro_rules! require_curl {
    () => {
        if !$crate::common::curl_available() {
            eprintln!("SKIPPED: `curl` is not on PATH");
            return;
        }
    };
}

/// Runs curl with `args` (silent, errors shown, bounded in time, no proxy from the
/// environment).
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args([
            "--silent",
            "--show-error",
            "--max-time",
            "20",
            "--noproxy",
            "",
        ])
        .args(args)
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .stdin(Stdio::null())
        .output()
        .expect("run curl")
}

/// The value of a sample in a Prometheus text exposition: the sum over every series
/// named `name` whose labels include all of `labels`. None when no such series exists.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (label_text, value) = if let Some(rest) = rest.strip_prefix('{') {
            let Some((l, v)) = rest.split_once('}') else {
                continue;
            };
            (l, v)
        } else if rest.starts_with(' ') {
            ("", rest)
        } else {
            continue;
        };
        let series: Vec<(&str, &str)> = label_text
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
            .collect();
        if !labels.iter().all(|l| series.contains(l)) {
            continue;
        }
        let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        *found.get_or_insert(0.0) += v;
    }
    found
}
