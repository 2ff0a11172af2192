//! `TestOrigin`: a small HTTP/1.1 origin server (hyper) with programmable routes that
//! counts the requests and connections it gets.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use super::reply::{pattern_chunk, BodySpec, OriginBody, Recorded, Reply, CHUNK};
type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<String, Handler>>,
    counts: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
    log: Mutex<Vec<Recorded>>,
    aborted: Mutex<HashMap<String, usize>>,
    completed: Mutex<HashMap<String, usize>>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    max_open: AtomicUsize,
    closed: AtomicUsize,
}

impl State {
    fn handler(&self, path: &str) -> Option<Handler> {
        let routes = self.routes.lock().unwrap();
        if let Some(h) = routes.get(path) {
            return Some(h.clone());
        }
        // Prefix routes are registered as "/prefix/*"; the longest wins.
        routes
            .iter()
            .filter_map(|(k, h)| {
                let prefix = k.strip_suffix('*')?;
                path.starts_with(prefix).then_some((prefix.len(), h))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, h)| h.clone())
    }

    fn bump(map: &Mutex<HashMap<String, usize>>, path: &str) {
        *map.lock().unwrap().entry(path.to_string()).or_default() += 1;
    }
}

/// The origin server. Runs on its own thread and tokio runtime; stops on drop.
pub struct TestOrigin {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestOrigin {
    /// Starts an origin on 127.0.0.1 on an ephemeral port. Unknown paths get 404.
    pub fn start() -> TestOrigin {
        TestOrigin::start_on("127.0.0.1:0".parse().unwrap())
    }

    /// Starts an origin on `addr` (bound on the calling thread, so in its network
    /// namespace).
    pub fn start_on(addr: SocketAddr) -> TestOrigin {
        let listener = std::net::TcpListener::bind(addr).expect("bind the test origin");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("test-origin-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("origin runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    loop {
                        tokio::select! {
                            _ = &mut stop_rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                serve_connection(st.clone(), stream);
                            }
                        }
                    }
                });
                rt.shutdown_timeout(Duration::from_millis(200));
            })
            .expect("spawn the origin thread");
        TestOrigin {
            addr,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT{path}`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Serves `reply` for `path` (exact, or a prefix when it ends in `*`), replacing
    /// whatever was there.
    pub fn route(&self, path: &str, reply: Reply) {
        self.route_fn(path, move |_| reply.clone());
    }

    /// Serves whatever `f` returns for each request to `path`.
    pub fn route_fn(&self, path: &str, f: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) {
        self.state
            .routes
            .lock()
            .unwrap()
            .insert(path.to_string(), Arc::new(f));
    }

    /// Requests that reached `path` (any method), counted when their head arrived.
    pub fn count(&self, path: &str) -> usize {
        self.state
            .counts
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// Requests that reached the origin, all paths.
    pub fn total(&self) -> usize {
        self.state.total.load(Ordering::SeqCst)
    }

    /// The last complete request (head and body) to `path`.
    pub fn last(&self, path: &str) -> Option<Recorded> {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|r| r.path == path)
            .cloned()
    }

    /// Every complete request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.log.lock().unwrap().clone()
    }

    /// Generated bodies for `path` whose receiver went away before the end (the
    /// connection was closed under them).
    pub fn aborted(&self, path: &str) -> usize {
        self.state
            .aborted
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// Generated bodies for `path` produced to the end.
    pub fn completed(&self, path: &str) -> usize {
        self.state
            .completed
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// TCP connections accepted so far.
    pub fn connections_accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// TCP connections open now.
    pub fn connections_open(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// The most TCP connections that were open at once.
    pub fn max_connections_open(&self) -> usize {
        self.state.max_open.load(Ordering::SeqCst)
    }

    /// TCP connections closed so far (by either side).
    pub fn connections_closed(&self) -> usize {
        self.state.closed.load(Ordering::SeqCst)
    }

    /// Like [`TestOrigin::wait_until`], for async tests: sleeps without blocking the
    /// runtime (a blocked current-thread runtime cannot close the client's sockets).
    pub async fn eventually(&self, timeout: Duration, cond: impl Fn(&TestOrigin) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls `cond` every 20 ms until it holds or `timeout` passes; returns whether it
    /// held. Blocks the thread: in async tests use [`TestOrigin::eventually`].
    pub fn wait_until(&self, timeout: Duration, cond: impl Fn(&TestOrigin) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve_connection(state: Arc<State>, stream: tokio::net::TcpStream) {
    state.accepted.fetch_add(1, Ordering::SeqCst);
    let open = state.open.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_open.fetch_max(open, Ordering::SeqCst);
    tokio::spawn(async move {
        let st = state.clone();
        let service = hyper::service::service_fn(move |req| handle(st.clone(), req));
        let _ = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service)
            .await;
        state.open.fetch_sub(1, Ordering::SeqCst);
        state.closed.fetch_add(1, Ordering::SeqCst);
    });
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<OriginBody>, Infallible> {
    let path = req.uri().path().to_string();
    state.total.fetch_add(1, Ordering::SeqCst);
    State::bump(&state.counts, &path);

    let (parts, body) = req.into_parts();
    let (body, trailers) = match body.collect().await {
        Ok(collected) => {
            let trailers = collected.trailers().map(pairs).unwrap_or_default();
            (collected.to_bytes(), trailers)
        }
        Err(_) => (Bytes::new(), Vec::new()),
    };
    let recorded = Recorded {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        path: path.clone(),
        version: parts.version,
        headers: pairs(&parts.headers),
        body,
        trailers,
    };
    state.log.lock().unwrap().push(recorded.clone());

    let reply = match state.handler(&path) {
        Some(h) => h(&recorded),
        None => Reply::status(404).body(format!("no route for {path}\n")),
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    Ok(build_response(
        &state,
        &recorded,
        reply,
        parts.method == Method::HEAD,
    ))
}

/// A header map as (lowercase name, value) pairs, in order.
fn pairs(headers: &hyper::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn build_response(
    state: &Arc<State>,
    req: &Recorded,
    reply: Reply,
    head: bool,
) -> Response<OriginBody> {
    let mut resp = Response::new(empty());
    *resp.status_mut() = StatusCode::from_u16(reply.status).expect("valid status");
    let headers = resp.headers_mut();
    for (n, v) in &reply.headers {
        headers.append(
            HeaderName::from_bytes(n.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
    }
    if reply.echo_headers {
        for (n, v) in &req.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(format!("x-echo-{n}").as_bytes()),
                HeaderValue::from_str(v),
            ) {
                headers.append(name, value);
            }
        }
    }
    let (bytes, len, chunk_delay) = match reply.body {
        BodySpec::Bytes(b) => {
            let len = b.len() as u64;
            (Some(b), len, Duration::ZERO)
        }
        BodySpec::Echo => {
            let len = req.body.len() as u64;
            (Some(req.body.clone()), len, Duration::ZERO)
        }
        BodySpec::Stream { len, chunk_delay } => (None, len, chunk_delay),
    };
    let mut trailers = hyper::HeaderMap::new();
    for (n, v) in &reply.trailers {
        let name = HeaderName::from_bytes(n.as_bytes()).expect("trailer name");
        headers.append(
            hyper::header::TRAILER,
            HeaderValue::from_str(n).expect("name"),
        );
        trailers.append(name, HeaderValue::from_str(v).expect("trailer value"));
    }
    let no_body = head || matches!(reply.status, 204 | 304) || reply.status < 200;
    if !reply.chunked
        && !headers.contains_key(hyper::header::CONTENT_LENGTH)
        && reply.status != 204
        && reply.status != 304
    {
        headers.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    if no_body {
        return resp;
    }
    let streamed = bytes.is_none() || reply.chunked || reply.cut_after.is_some();
    if !streamed {
        *resp.body_mut() = Full::new(bytes.unwrap())
            .map_err(|never: Infallible| match never {})
            .boxed();
        return resp;
    }
    let (tx, rx) = mpsc::channel::<io::Result<Frame<Bytes>>>(1);
    *resp.body_mut() = ChannelBody { rx }.boxed();
    let state = state.clone();
    let path = req.path.clone();
    let cut_after = reply.cut_after;
    tokio::spawn(async move {
        let limit = cut_after.map_or(len, |k| k.min(len));
        let mut sent = 0u64;
        while sent < limit {
            let n = (limit - sent).min(CHUNK as u64) as usize;
            let chunk = match &bytes {
                Some(b) => b.slice(sent as usize..sent as usize + n),
                None => pattern_chunk(sent, n),
            };
            if !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            if tx.send(Ok(Frame::data(chunk))).await.is_err() {
                State::bump(&state.aborted, &path);
                return;
            }
            sent += n as u64;
        }
        if cut_after.is_some() {
            // An error from the body makes hyper drop the connection mid-body.
            let _ = tx
                .send(Err(io::Error::other("cut by the test origin")))
                .await;
        } else {
            if !trailers.is_empty() && tx.send(Ok(Frame::trailers(trailers))).await.is_err() {
                State::bump(&state.aborted, &path);
                return;
            }
            State::bump(&state.completed, &path);
        }
    });
    resp
}

fn empty() -> OriginBody {
    Full::new(Bytes::new())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A body fed from a channel, so the producer notices when the receiver goes away.
struct ChannelBody {
    rx: mpsc::Receiver<io::Result<Frame<Bytes>>>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.rx.poll_recv(cx)
    }
}
