//! The origin simulator: one loopback listener per virtual server, each serving the
//! model's objects with the model's headers and delays, and counting what it sent per
//! content class so that the report can set the proxy's `Cache-Status` against it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

use super::model::{response_delay, Class, Freshness, Model, Object, Rng, MAX_SIZE};

/// The header with which each origin response is numbered: a client that sees a number
/// twice was served a stored copy, whatever the proxy says about it.
pub const SERIAL_HEADER: &str = "x-polymix-serial";

/// Per-class counters of the origin.
#[derive(Default)]
pub struct ClassCounts {
    pub requests: AtomicU64,
    pub ok: AtomicU64,
    pub not_modified: AtomicU64,
    pub body_bytes: AtomicU64,
}

/// A snapshot of the counters: requests, 200s, 304s and body bytes, per class.
#[derive(Clone, Copy, Default, Debug)]
pub struct Counts {
    pub requests: u64,
    pub ok: u64,
    pub not_modified: u64,
    pub body_bytes: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.ok += o.ok;
        self.not_modified += o.not_modified;
        self.body_bytes += o.body_bytes;
    }

    pub fn minus(&self, o: &Counts) -> Counts {
        Counts {
            requests: self.requests - o.requests,
            ok: self.ok - o.ok,
            not_modified: self.not_modified - o.not_modified,
            body_bytes: self.body_bytes - o.body_bytes,
        }
    }
}

struct State {
    model: Model,
    start: Instant,
    start_unix: f64,
    delay_scale: f64,
    body: Bytes,
    serial: AtomicU64,
    classes: [ClassCounts; 4],
    /// Requests for a path no object has, or sent to the wrong virtual server.
    unknown: AtomicU64,
}

/// The running virtual servers; they stop with the runtime.
pub struct Origin {
    /// Listener address of each virtual server, by server index.
    pub addrs: Vec<SocketAddr>,
    state: Arc<State>,
}

impl Origin {
    /// Starts `model.servers` listeners on 127.0.0.1: on `ports` when given (one per
    /// server, for a reverse proxy configured with fixed backends), else on ephemeral
    /// ports.
    pub async fn start(
        model: Model,
        delay_scale: f64,
        ports: Option<&[u16]>,
    ) -> Result<Origin, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?;
        let state = Arc::new(State {
            start: Instant::now(),
            start_unix: now.as_secs_f64(),
            delay_scale,
            // One buffer, sliced for every body: serving costs the origin no copies.
            body: Bytes::from(vec![b'x'; MAX_SIZE]),
            serial: AtomicU64::new(0),
            classes: Default::default(),
            unknown: AtomicU64::new(0),
            model,
        });
        let mut addrs = Vec::new();
        for server in 0..state.model.servers {
            let port = ports.map_or(0, |p| p[server]);
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| format!("origin server {server} on 127.0.0.1:{port}: {e}"))?;
            addrs.push(listener.local_addr().map_err(|e| e.to_string())?);
            let state = state.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        // Out of descriptors, most likely: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = tcp.set_nodelay(true);
                    let state = state.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let state = state.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(answer(&state, server, req).await)
                            }
                        });
                        let _ = auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tcp), service)
                            .await;
                    });
                }
            });
        }
        Ok(Origin { addrs, state })
    }

    /// The counters so far, per class (indexed by [`Class::index`]).
    pub fn counts(&self) -> [Counts; 4] {
        let mut out = [Counts::default(); 4];
        for (o, c) in out.iter_mut().zip(&self.state.classes) {
            *o = Counts {
                requests: c.requests.load(Ordering::Relaxed),
                ok: c.ok.load(Ordering::Relaxed),
                not_modified: c.not_modified.load(Ordering::Relaxed),
                body_bytes: c.body_bytes.load(Ordering::Relaxed),
            };
        }
        out
    }

    pub fn unknown(&self) -> u64 {
        self.state.unknown.load(Ordering::Relaxed)
    }
}

async fn answer(
    state: &State,
    server: usize,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let object = Object::id_from_path(req.uri().path())
        .map(|id| state.model.object(id))
        .filter(|o| o.server == server);
    let Some(object) = object else {
        state.unknown.fetch_add(1, Ordering::Relaxed);
        let mut r = Response::new(Full::new(Bytes::from_static(b"no such object\n")));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    };
    let counts = &state.classes[object.class.index()];
    counts.requests.fetch_add(1, Ordering::Relaxed);
    let serial = state.serial.fetch_add(1, Ordering::Relaxed) + 1;
    let mut rng = Rng::new(serial ^ state.model.seed.rotate_left(29));
    tokio::time::sleep(response_delay(&mut rng, state.delay_scale)).await;

    let t = state.start.elapsed().as_secs_f64();
    let (version, made) = object.version_at(state.start_unix, t);
    let etag = format!("\"{}-{version}\"", object.id);
    let last_modified = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(made));
    let unchanged = object.freshness.cacheable() && not_modified(&req, &object, &etag, made);

    let mut resp = if unchanged {
        counts.not_modified.fetch_add(1, Ordering::Relaxed);
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        counts.ok.fetch_add(1, Ordering::Relaxed);
        counts
            .body_bytes
            .fetch_add(object.size as u64, Ordering::Relaxed);
        Response::new(Full::new(state.body.slice(..object.size)))
    };
    let h = resp.headers_mut();
    let cache_control = match object.freshness {
        Freshness::NoStore => Some("no-store".to_string()),
        Freshness::Private => Some("private, max-age=60".to_string()),
        Freshness::MaxAge(s) => Some(format!("max-age={s}")),
        Freshness::Heuristic => None,
    };
    if let Some(cc) = cache_control {
        h.insert(header::CACHE_CONTROL, value(&cc));
    }
    if object.freshness.cacheable() {
        h.insert(header::LAST_MODIFIED, value(&last_modified));
        if object.etag {
            h.insert(header::ETAG, value(&etag));
        }
    }
    if !unchanged {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(object.content_type()),
        );
    }
    h.insert(SERIAL_HEADER, HeaderValue::from(serial));
    resp
}

/// RFC 9110 §13.1: If-None-Match wins over If-Modified-Since when both are present.
fn not_modified(
    req: &Request<hyper::body::Incoming>,
    object: &Object,
    etag: &str,
    made: u64,
) -> bool {
    if let Some(inm) = req.headers().get(header::IF_NONE_MATCH) {
        let inm = inm.to_str().unwrap_or("");
        return object.etag
            && inm
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*");
    }
    req.headers()
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| httpdate::parse_http_date(v.to_str().ok()?).ok())
        .and_then(|since| since.duration_since(UNIX_EPOCH).ok())
        .is_some_and(|since| since.as_secs() >= made)
}

fn value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).expect("generated header values are visible ASCII")
}

/// The ports of `servers` virtual servers from `base` on, one each; an error when the
/// range does not fit in the port numbers.
pub fn origin_ports(base: u16, servers: usize) -> Result<Vec<u16>, String> {
    let last = base as usize + servers.saturating_sub(1);
    if base == 0 || last > u16::MAX as usize {
        return Err(format!(
            "--origin-base-port {base}: {servers} servers need ports {base}..={last}, \
             within 1..=65535"
        ));
    }
    Ok((0..servers).map(|i| base + i as u16).collect())
}

/// The classes in report order, with their counters.
pub fn by_class(counts: &[Counts; 4]) -> impl Iterator<Item = (Class, Counts)> + '_ {
    Class::ALL.iter().map(|c| (*c, counts[c.index()]))
}

#[cfg(test)]
mod tests {
    use super::origin_ports;

    #[test]
    fn origin_ports_follow_the_base_and_must_fit() {
        assert_eq!(origin_ports(20000, 3).unwrap(), vec![20000, 20001, 20002]);
        assert_eq!(origin_ports(65534, 2).unwrap(), vec![65534, 65535]);
        assert!(origin_ports(65535, 2).unwrap_err().contains("65535"));
        assert!(origin_ports(0, 4).is_err());
    }
}
