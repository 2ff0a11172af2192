//! The side load of `weir-bench modules`: real content that a module adapts, from an
//! origin of its own, sent through the proxy at a fixed rate or at full demand.
//!
//! Every side request asks for a URL never asked before, so each one is a miss that
//! the module adapts afresh: the side load measures adaptations per second, not the
//! cache.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::content::ORIGIN_HEADER;
use crate::stats::Latencies;

/// A kind of content that a module adapts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Ad images and scripts at paths EasyList blocks, between ordinary pages.
    Adblock,
    /// Compressible text (C-like source) asked for with `Accept-Encoding: gzip`.
    Compress,
    /// JPEG images (a file given on the command line) for an image transcoder.
    Transcode,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Adblock, Kind::Compress, Kind::Transcode];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Adblock => "adblock",
            Kind::Compress => "compress",
            Kind::Transcode => "transcode",
        }
    }
}

/// Parses a comma-separated list of kinds (`adblock,compress`), each at most once.
pub fn parse_kinds(list: &str) -> Result<Vec<Kind>, String> {
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = match name {
            "adblock" => Kind::Adblock,
            "compress" => Kind::Compress,
            "transcode" => Kind::Transcode,
            other => {
                return Err(format!(
                    "unknown side-load kind `{other}` (adblock, compress, transcode)"
                ))
            }
        };
        if kinds.contains(&kind) {
            return Err(format!("side-load kind `{name}` given twice"));
        }
        kinds.push(kind);
    }
    if kinds.is_empty() {
        return Err("no side-load kind given".into());
    }
    Ok(kinds)
}

/// The n-th side request of `kind`: its URL on the side origin and its request headers.
pub fn request(
    kind: Kind,
    origin: SocketAddr,
    n: u64,
) -> (String, Vec<(&'static str, &'static str)>) {
    match kind {
        // Half ad images (EasyList: `/ad/image/*$image`, answered with a blank image),
        // half pages the lists let through to the origin.
        Kind::Adblock if n.is_multiple_of(2) => (
            format!("http://{origin}/ad/image/{n}.gif"),
            vec![("accept", "image/avif,image/webp,*/*")],
        ),
        Kind::Adblock => (
            format!("http://{origin}/page/{n}.html"),
            vec![("accept", "text/html")],
        ),
        Kind::Compress => (
            format!("http://{origin}/text/{n}.c"),
            vec![("accept-encoding", "gzip")],
        ),
        Kind::Transcode => (
            format!("http://{origin}/image/{n}.jpg"),
            vec![("accept", "image/jpeg,image/*")],
        ),
    }
}

/// What the side load did in one phase.
pub struct SideStats {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    /// Answers the module changed: blocked, compressed, transcoded.
    pub adapted: AtomicU64,
    /// Answered and adapted, per kind (indexed by [`Kind::index`]).
    pub by_kind: [(AtomicU64, AtomicU64); 3],
    pub errors: AtomicU64,
    pub latencies: Mutex<Latencies>,
    pub first_error: Mutex<Option<String>>,
}

/// Connections to the proxy, reused: one request in flight on each.
pub struct SideClient {
    proxy: SocketAddr,
    origin: SocketAddr,
    kinds: Vec<Kind>,
    jpeg_len: usize,
    next: AtomicU64,
    idle: Mutex<Vec<SendRequest<Empty<Bytes>>>>,
    pub stop: AtomicBool,
}

impl SideClient {
    pub fn new(proxy: SocketAddr, origin: SocketAddr, kinds: Vec<Kind>, jpeg_len: usize) -> Self {
        SideClient {
            proxy,
            origin,
            kinds,
            jpeg_len,
            next: AtomicU64::new(0),
            idle: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        }
    }

    /// Open loop at `rate` requests per second, evenly spaced, until `end`; at most
    /// 256 in flight (more are counted as errors: the proxy is not keeping up).
    pub async fn fixed_rate(self: &Arc<Self>, rate: f64, end: Instant, stats: &Arc<SideStats>) {
        let limit = Arc::new(tokio::sync::Semaphore::new(256));
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0u64.. {
            let at = start + Duration::from_secs_f64(i as f64 / rate);
            if at >= end || self.stop.load(Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep_until(at.into()).await;
            while tasks.try_join_next().is_some() {}
            let Ok(permit) = limit.clone().try_acquire_owned() else {
                stats.fail("more than 256 side requests in flight".into());
                continue;
            };
            let (client, stats) = (self.clone(), stats.clone());
            tasks.spawn(async move {
                client.one(&stats).await;
                drop(permit);
            });
        }
        self.drain(tasks).await;
    }

    /// Closed loop: `connections` clients, each sending its next request as soon as
    /// the last is answered, until `end`.
    pub async fn full_demand(
        self: &Arc<Self>,
        connections: usize,
        end: Instant,
        stats: &Arc<SideStats>,
    ) {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let (client, stats) = (self.clone(), stats.clone());
            tasks.spawn(async move {
                while Instant::now() < end && !client.stop.load(Ordering::Relaxed) {
                    client.one(&stats).await;
                }
            });
        }
        self.drain(tasks).await;
    }

    async fn drain(&self, mut tasks: tokio::task::JoinSet<()>) {
        let all = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(REQUEST_TIMEOUT, all).await.is_err() {
            tasks.abort_all();
        }
    }

    async fn one(&self, stats: &SideStats) {
        // The kinds take turns; each numbers its own requests, so that every URL is new
        // and adblock's ads and pages alternate whatever the other kinds.
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let turns = self.kinds.len() as u64;
        let (kind, n) = (self.kinds[(n % turns) as usize], n / turns);
        stats.sent.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let result = tokio::time::timeout(REQUEST_TIMEOUT, self.fetch(kind, n))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {REQUEST_TIMEOUT:?}")));
        match result {
            Ok(adapted) => {
                let (ok, adapted_of_kind) = &stats.by_kind[kind.index()];
                stats.ok.fetch_add(1, Ordering::Relaxed);
                ok.fetch_add(1, Ordering::Relaxed);
                if adapted {
                    stats.adapted.fetch_add(1, Ordering::Relaxed);
                    adapted_of_kind.fetch_add(1, Ordering::Relaxed);
                }
                stats.latencies.lock().unwrap().record(start.elapsed());
            }
            Err(e) => stats.fail(format!("{}: {e}", kind.name())),
        }
    }

    /// One request; whether the module adapted the answer.
    async fn fetch(&self, kind: Kind, n: u64) -> Result<bool, String> {
        let (url, headers) = request(kind, self.origin, n);
        let idle = self.idle.lock().unwrap().pop();
        let mut sender = match idle {
            Some(s) => s,
            None => self.connect().await?,
        };
        let mut req = Request::get(&url).header(header::HOST, self.origin.to_string());
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let req = req.body(Empty::new()).map_err(|e| e.to_string())?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("proxy connection: {e}"))?;
        let status = resp.status();
        let from_origin = resp.headers().contains_key(ORIGIN_HEADER);
        let encoded = resp.headers().contains_key(header::CONTENT_ENCODING);
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("response body: {e}"))?
            .to_bytes();
        if sender.is_ready() {
            self.idle.lock().unwrap().push(sender);
        }
        if !(status.is_success() || status == StatusCode::FORBIDDEN) {
            return Err(format!("status {status}"));
        }
        Ok(match kind {
            Kind::Adblock => !from_origin,
            Kind::Compress => encoded,
            Kind::Transcode => body.len() != self.jpeg_len,
        })
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, String> {
        let tcp = tokio::net::TcpStream::connect(self.proxy)
            .await
            .map_err(|e| format!("cannot connect to the proxy at {}: {e}", self.proxy))?;
        let _ = tcp.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("HTTP handshake with the proxy: {e}"))?;
        tokio::spawn(conn);
        Ok(sender)
    }
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for SideStats {
    fn default() -> Self {
        SideStats {
            sent: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            adapted: AtomicU64::new(0),
            by_kind: Default::default(),
            errors: AtomicU64::new(0),
            latencies: Mutex::new(Latencies::new()),
            first_error: Mutex::new(None),
        }
    }
}

impl SideStats {
    fn fail(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.first_error.lock().unwrap().get_or_insert(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_reject_unknown_or_repeated_names() {
        assert_eq!(
            parse_kinds("adblock, compress").unwrap(),
            vec![Kind::Adblock, Kind::Compress]
        );
        assert_eq!(parse_kinds("transcode").unwrap(), vec![Kind::Transcode]);
        assert!(parse_kinds("adblock,jpeg").unwrap_err().contains("`jpeg`"));
        assert!(parse_kinds("compress,compress")
            .unwrap_err()
            .contains("twice"));
        assert!(parse_kinds(" , ").is_err());
    }

    #[test]
    fn every_side_request_has_a_new_url() {
        let origin: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (a, _) = request(Kind::Adblock, origin, 0);
        let (b, _) = request(Kind::Adblock, origin, 1);
        let (c, h) = request(Kind::Compress, origin, 2);
        assert!(a.contains("/ad/image/0.gif") && b.contains("/page/1.html"));
        assert!(c.ends_with("/text/2.c") && h.contains(&("accept-encoding", "gzip")));
    }
}
