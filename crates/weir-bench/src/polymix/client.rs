//! The client: open-loop load through a forward proxy. Requests are put on a timeline
//! (Poisson arrivals at the given rate) before anything is sent, and each one's
//! response time counts from its scheduled instant: a slow answer delays no later
//! request, and time spent waiting for a free connection counts as response time.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, Semaphore};

use super::model::{Class, Model, Rng};
use super::origin::SERIAL_HEADER;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Fill,
    Plateau,
}

/// What the proxy says it did (its `Cache-Status`, or Squid's and nginx's `X-Cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    /// Served from another client's fetch of the same object.
    Collapsed,
    /// A stale copy revalidated with the origin.
    Validation,
    Miss,
    /// The response says nothing about the cache.
    Unlabelled,
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Hit,
        Outcome::Collapsed,
        Outcome::Validation,
        Outcome::Miss,
        Outcome::Unlabelled,
        Outcome::Error,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Collapsed => "collapsed",
            Outcome::Validation => "validation",
            Outcome::Miss => "miss",
            Outcome::Unlabelled => "unlabelled",
            Outcome::Error => "error",
        }
    }
}

/// One request's record.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Scheduled instant, in seconds since the load started.
    pub at: f64,
    pub latency: Duration,
    pub phase: Phase,
    pub class: Class,
    pub outcome: Outcome,
    pub bytes: u64,
    /// The origin's serial number of the response had been seen before: a stored copy.
    pub stored_copy: bool,
}

/// The load to offer.
#[derive(Clone)]
pub struct Plan {
    pub proxy: SocketAddr,
    /// More proxies: connections go to `proxy` and these in turn.
    pub also: Vec<SocketAddr>,
    pub origins: Vec<SocketAddr>,
    pub rate: f64,
    pub fill: Duration,
    pub plateau: Duration,
    pub max_connections: usize,
    pub request_timeout: Duration,
    /// Reverse mode: origin-form requests whose Host names the virtual server
    /// ([`virtual_host`]), for a reverse proxy that routes each host to its backend.
    pub reverse: bool,
}

/// The host name of virtual server `server` in reverse mode. Only the proxy's
/// configuration maps it to the server's port; nothing resolves it.
pub fn virtual_host(server: usize) -> String {
    format!("s{server}.polymix.test")
}

/// What the client saw, shared with the progress line while running.
#[derive(Default)]
pub struct Live {
    pub sent: AtomicU64,
    pub done: AtomicU64,
    pub ok: AtomicU64,
    pub hits: AtomicU64,
    pub errors: AtomicU64,
    pub connections: AtomicU64,
    pub samples: Mutex<Vec<Sample>>,
    /// Error messages, counted (the first words of each).
    pub error_kinds: Mutex<BTreeMap<String, u64>>,
    seen_serials: Mutex<HashSet<u64>>,
    /// Set to stop scheduling (Ctrl-C, the deadline, a proxy that answers nothing).
    pub stop: AtomicBool,
    pub stopped: Notify,
}

impl Live {
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stopped.notify_waiters();
    }
}

struct Pool {
    proxies: Vec<SocketAddr>,
    /// The proxy the next new connection goes to.
    next: AtomicUsize,
    idle: Mutex<Vec<SendRequest<Empty<Bytes>>>>,
    // One request in flight per connection: the permits bound the connections.
    permits: Semaphore,
}

/// Offers the load until the plan's end or a stop; then waits up to one request
/// timeout for the answers in flight, and abandons (counts as errors) the rest.
pub async fn run(model: &Model, plan: &Plan, live: Arc<Live>, start: Instant) {
    let pool = Arc::new(Pool {
        proxies: std::iter::once(plan.proxy)
            .chain(plan.also.iter().copied())
            .collect(),
        next: AtomicUsize::new(0),
        idle: Mutex::new(Vec::new()),
        permits: Semaphore::new(plan.max_connections),
    });
    let mut stream = model.requests();
    let mut arrivals = Rng::new(model.seed ^ 0xA11);
    let total = plan.fill + plan.plateau;
    let mut tasks = tokio::task::JoinSet::new();
    let mut t = 0.0;
    loop {
        t += arrivals.exponential(1.0 / plan.rate);
        if t >= total.as_secs_f64() {
            break;
        }
        let at = start + Duration::from_secs_f64(t);
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = live.stopped.notified() => {}
        }
        if live.stop.load(Ordering::SeqCst) {
            break;
        }
        let (id, _) = stream.next_request();
        let object = model.object(id);
        let (target, host) = if plan.reverse {
            (object.path(), virtual_host(object.server))
        } else {
            let authority = plan.origins[object.server].to_string();
            (format!("http://{authority}{}", object.path()), authority)
        };
        let phase = if t < plan.fill.as_secs_f64() {
            Phase::Fill
        } else {
            Phase::Plateau
        };
        let (pool, live, timeout) = (pool.clone(), live.clone(), plan.request_timeout);
        live.sent.fetch_add(1, Ordering::Relaxed);
        // Reap finished tasks as we go so that the set stays small.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let result = tokio::time::timeout(timeout, fetch(&pool, &live, &target, &host))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")));
            let latency = at.elapsed();
            let mut sample = Sample {
                at: t,
                latency,
                phase,
                class: object.class,
                outcome: Outcome::Error,
                bytes: 0,
                stored_copy: false,
            };
            match result {
                Ok(r) if r.bytes != object.size as u64 => live.error(format!(
                    "body of {} bytes, expected {}",
                    r.bytes, object.size
                )),
                Ok(r) => {
                    sample.outcome = r.outcome;
                    sample.bytes = r.bytes;
                    sample.stored_copy = r.stored_copy;
                    live.ok.fetch_add(1, Ordering::Relaxed);
                    if matches!(r.outcome, Outcome::Hit | Outcome::Collapsed) {
                        live.hits.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => live.error(e),
            }
            live.done.fetch_add(1, Ordering::Relaxed);
            live.samples.lock().unwrap().push(sample);
        });
    }
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(plan.request_timeout, drain)
        .await
        .is_err()
    {
        tasks.abort_all();
    }
}

impl Live {
    fn error(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        // Keep the kind, not the instance: drop numbers so that similar errors group.
        let kind: String = message
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .take(120)
            .collect();
        *self.error_kinds.lock().unwrap().entry(kind).or_default() += 1;
    }
}

struct Fetched {
    outcome: Outcome,
    bytes: u64,
    stored_copy: bool,
}

/// Sends GET `target` (an absolute URL in forward mode, a path in reverse mode) with
/// `Host: host`.
async fn fetch(pool: &Pool, live: &Live, target: &str, host: &str) -> Result<Fetched, String> {
    let _permit = pool.permits.acquire().await.map_err(|e| e.to_string())?;
    let mut idle = pool.idle.lock().unwrap().pop();
    let (resp, sender) = loop {
        let reused = idle.is_some();
        let mut sender = match idle.take() {
            Some(s) => s,
            None => connect(pool, live).await?,
        };
        // Forward mode routes by the absolute URL, reverse mode by the Host header.
        let req = http::Request::get(target)
            .header(http::header::HOST, host)
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        match sender.send_request(req).await {
            Ok(resp) => break (resp, sender),
            // A kept-alive connection that the proxy closed as it was reused: nothing was
            // answered, and a GET may be sent again on a new one, as browsers do.
            Err(_) if reused => continue,
            Err(e) => return Err(format!("proxy connection: {e}")),
        }
    };
    // The proxy's last response on a connection says so (nginx: every 1000 requests).
    let closing = resp
        .headers()
        .get(http::header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("close"));
    let status = resp.status();
    let outcome = outcome(resp.headers());
    let serial = resp
        .headers()
        .get(SERIAL_HEADER)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("response body: {e}"))?
        .to_bytes();
    if status != http::StatusCode::OK {
        let text = String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned();
        return Err(format!("status {status}: {}", text.trim()));
    }
    if !closing && sender.is_ready() {
        pool.idle.lock().unwrap().push(sender);
    }
    let stored_copy = match serial {
        Some(s) => !live.seen_serials.lock().unwrap().insert(s),
        None => return Err("response without the origin's serial header".into()),
    };
    Ok(Fetched {
        outcome,
        bytes: body.len() as u64,
        stored_copy,
    })
}

async fn connect(pool: &Pool, live: &Live) -> Result<SendRequest<Empty<Bytes>>, String> {
    let proxy = pool.proxies[pool.next.fetch_add(1, Ordering::Relaxed) % pool.proxies.len()];
    let tcp = tokio::net::TcpStream::connect(proxy)
        .await
        .map_err(|e| format!("cannot connect to the proxy at {proxy}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("HTTP handshake with the proxy: {e}"))?;
    tokio::spawn(conn);
    live.connections.fetch_add(1, Ordering::Relaxed);
    Ok(sender)
}

/// Reads the proxy's verdict: RFC 9211 `Cache-Status` (the last member is the proxy
/// nearest the client), or `X-Cache` / `X-Cache-Status` (Squid, nginx, Varnish setups).
pub fn outcome(headers: &http::HeaderMap) -> Outcome {
    if let Some(cs) = headers
        .get_all("cache-status")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .next_back()
    {
        let member = cs.rsplit(',').next().unwrap_or("");
        let params: Vec<&str> = member.split(';').skip(1).map(str::trim).collect();
        return if params.contains(&"hit") {
            Outcome::Hit
        } else if params.contains(&"fwd=stale") {
            Outcome::Validation
        } else if params.contains(&"collapsed") {
            Outcome::Collapsed
        } else if params.iter().any(|p| p.starts_with("fwd=")) {
            Outcome::Miss
        } else {
            Outcome::Unlabelled
        };
    }
    let x = headers
        .get("x-cache-status")
        .or_else(|| headers.get("x-cache"))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_uppercase());
    match x.as_deref() {
        Some(v) if v.starts_with("HIT") => Outcome::Hit,
        Some(v) if v.starts_with("REVALIDATED") || v.starts_with("EXPIRED") => Outcome::Validation,
        Some(v) if v.starts_with("MISS") || v.starts_with("BYPASS") => Outcome::Miss,
        _ => Outcome::Unlabelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &str, value: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn cache_status_members_are_classified() {
        let cases = [
            ("weir; hit", Outcome::Hit),
            ("weir; hit; detail=stale-while-revalidate", Outcome::Hit),
            ("weir; fwd=miss; stored", Outcome::Miss),
            ("weir; fwd=miss", Outcome::Miss),
            ("weir; fwd=miss; collapsed", Outcome::Collapsed),
            ("weir; fwd=stale; fwd-status=304", Outcome::Validation),
            ("upstream; hit, weir; fwd=miss; stored", Outcome::Miss),
            ("weir; detail=refused", Outcome::Unlabelled),
        ];
        for (v, want) in cases {
            assert_eq!(outcome(&with("cache-status", v)), want, "{v}");
        }
        assert_eq!(outcome(&with("x-cache", "HIT from squid")), Outcome::Hit);
        assert_eq!(outcome(&http::HeaderMap::new()), Outcome::Unlabelled);
    }
}
