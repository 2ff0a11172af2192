//! Connections to origins, one set per origin (scheme, host and port), shared by all
//! workers: an HTTP/1.1 keep-alive pool (`h1.rs`, one request per connection at a
//! time) and HTTP/2 connections carrying many requests each (`h2.rs`), over TCP or TLS
//! (`tls.rs`). Each origin's `[[origin]]` section chooses the protocol.

mod h1;
mod h2;
mod owned;
mod tls;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, SizeHint};
use hyper::body::Incoming;

use crate::body::{BoxError, RequestBody};
use crate::config::{OriginConfig, OriginProtocol, OriginUrl, TimeoutsConfig, UpstreamConfig};
use crate::metrics::Metrics;
use tls::TlsConfigs;

/// Where a request goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OriginAddr {
    /// `https://`: TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl OriginAddr {
    /// An `http://` origin.
    pub(crate) fn http(host: impl Into<String>, port: u16) -> OriginAddr {
        OriginAddr {
            tls: false,
            host: host.into(),
            port,
        }
    }

    pub(crate) fn from_url(url: &OriginUrl) -> OriginAddr {
        OriginAddr {
            tls: url.tls,
            host: url.host.clone(),
            port: url.port,
        }
    }
}

impl std::fmt::Display for OriginAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tls {
            f.write_str("https://")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why a request to an origin failed.
#[derive(Debug, Clone)]
pub(crate) enum UpstreamError {
    /// Could not connect (DNS, refused, connect timeout).
    Connect(String),
    /// The TLS handshake failed (certificate not trusted or not for this name, no
    /// common protocol), or TLS could not be set up for this origin.
    Tls(String),
    /// No response header within `[timeouts] origin_response`.
    Timeout,
    /// The client's body went over the limit while it was being forwarded.
    BodyTooLarge,
    /// The client paused too long while its body was being forwarded.
    ClientTimeout(std::time::Duration),
    /// The origin broke the protocol, closed the connection or reset the stream.
    Protocol(String),
}

/// All origins' connections.
pub(crate) struct Upstream {
    origins: Mutex<HashMap<OriginAddr, Arc<Origin>>>,
    /// `[[origin]]` sections, by origin.
    configured: HashMap<OriginAddr, Configured>,
    /// TLS trusting the system's roots, read once, for `https://` origins without a
    /// `ca_file`.
    system_tls: OnceLock<Result<Arc<TlsConfigs>, String>>,
    settings: UpstreamConfig,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// `[timeouts] origin_body_idle`.
    body_idle: Duration,
    metrics: Arc<Metrics>,
}

struct Configured {
    protocol: OriginProtocol,
    /// `None`: the system's roots.
    tls: Option<Arc<TlsConfigs>>,
}

/// One origin: its settings and its connections.
pub(super) struct Origin {
    addr: OriginAddr,
    protocol: OriginProtocol,
    /// `https://` origins: the TLS settings, or why there are none.
    tls: Option<Result<Arc<TlsConfigs>, String>>,
    /// What an `auto` origin over TLS chose by ALPN: [`UNKNOWN`], [`HTTP1`] or [`HTTP2`].
    learned: AtomicU8,
    /// One connection at a time finds out what an `auto` origin speaks.
    probe: tokio::sync::Mutex<()>,
    h1: h1::Pool,
    h2: h2::Pool,
}

const UNKNOWN: u8 = 0;
const HTTP1: u8 = 1;
const HTTP2: u8 = 2;

/// How a request is sent.
enum Dispatch {
    Http1,
    Http2,
    /// An `auto` origin over TLS whose choice is not known yet.
    Probe,
}

impl Origin {
    fn dispatch(&self) -> Dispatch {
        match (self.tls.is_some(), self.protocol) {
            (_, OriginProtocol::Http1) | (false, OriginProtocol::Auto) => Dispatch::Http1,
            (_, OriginProtocol::Http2) => Dispatch::Http2,
            (true, OriginProtocol::Auto) => match self.learned.load(Ordering::Acquire) {
                HTTP1 => Dispatch::Http1,
                HTTP2 => Dispatch::Http2,
                _ => Dispatch::Probe,
            },
        }
    }

    /// After a failed connection, an `auto` origin's protocol is found out again: the
    /// origin may have changed what it offers.
    fn forget_protocol_after(&self, e: &UpstreamError) {
        if self.protocol == OriginProtocol::Auto && matches!(e, UpstreamError::Tls(_)) {
            self.learned.store(UNKNOWN, Ordering::Release);
        }
    }
}

impl Upstream {
    /// The pools, with the `[[origin]]` sections' settings. Fails when a `ca_file`
    /// cannot be read (it was readable when the configuration was checked).
    pub fn new(
        settings: &UpstreamConfig,
        timeouts: &TimeoutsConfig,
        origins: &[OriginConfig],
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, String> {
        let mut configured = HashMap::new();
        for o in origins {
            let url = o.origin_url()?;
            let tls = match (&o.ca_file, o.verifies()) {
                _ if !url.tls => None,
                (_, false) => {
                    tracing::warn!(
                        origin = %o.url,
                        "tls_verify = false: any certificate is accepted from this origin"
                    );
                    Some(Arc::new(TlsConfigs::new(tls::Trust::Anyone)?))
                }
                (Some(path), true) => Some(Arc::new(
                    TlsConfigs::from_ca_file(path)
                        .map_err(|e| format!("origin {}: ca_file: {e}", o.url))?,
                )),
                (None, true) => None,
            };
            configured.insert(
                OriginAddr::from_url(&url),
                Configured {
                    protocol: o.protocol,
                    tls,
                },
            );
        }
        let upstream = Arc::new(Upstream {
            origins: Mutex::new(HashMap::new()),
            configured,
            system_tls: OnceLock::new(),
            settings: settings.clone(),
            connect_timeout: timeouts.connect.0,
            response_timeout: timeouts.origin_response.0,
            body_idle: timeouts.origin_body_idle.0,
            metrics,
        });
        let weak = Arc::downgrade(&upstream);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let Some(up) = weak.upgrade() else { return };
                up.close_expired_idle();
            }
        });
        Ok(upstream)
    }

    /// Reads the system's root certificates now, so that the first request to an
    /// `https://` origin does not wait for it; says so when there are none.
    pub fn load_system_roots(&self) {
        if let Err(e) = self.system_tls() {
            tracing::warn!("https:// origins without a ca_file cannot be verified: {e}");
        }
    }

    fn system_tls(&self) -> Result<Arc<TlsConfigs>, String> {
        self.system_tls
            .get_or_init(|| TlsConfigs::system().map(Arc::new))
            .clone()
    }

    fn close_expired_idle(&self) {
        let timeout = self.settings.idle_timeout.0;
        let origins: Vec<Arc<Origin>> = self
            .origins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for origin in origins {
            origin.h1.close_expired_idle(timeout);
            origin.h2.close_expired_idle(timeout);
        }
    }

    fn origin(&self, addr: &OriginAddr) -> Arc<Origin> {
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = origins.get(addr) {
            return o.clone();
        }
        let configured = self.configured.get(addr);
        let tls = addr
            .tls
            .then(|| match configured.and_then(|c| c.tls.clone()) {
                Some(t) => Ok(t),
                None => self.system_tls(),
            });
        let o = Arc::new(Origin {
            addr: addr.clone(),
            protocol: configured.map_or(OriginProtocol::Auto, |c| c.protocol),
            tls,
            learned: AtomicU8::new(UNKNOWN),
            probe: tokio::sync::Mutex::new(()),
            h1: h1::Pool::new(self.settings.max_idle_per_origin),
            h2: h2::Pool::default(),
        });
        origins.insert(addr.clone(), o.clone());
        o
    }

    /// Sends `request` (origin-form URI, headers ready) to `origin` and waits for the
    /// response head.
    pub async fn send(
        &self,
        addr: &OriginAddr,
        request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let origin = self.origin(addr);
        // The future of this call is part of every caller's (a spawned fill's
        // included), and moved whole when that is spawned: the paths that are not a
        // reused HTTP/1.1 connection are boxed so that it stays small.
        match origin.dispatch() {
            Dispatch::Http1 => self.send_h1(&origin, None, request).await,
            Dispatch::Http2 => Box::pin(self.send_h2(&origin, request)).await,
            Dispatch::Probe => Box::pin(self.send_probed(&origin, request)).await,
        }
    }

    async fn send_probed(
        &self,
        origin: &Arc<Origin>,
        request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        loop {
            match origin.dispatch() {
                Dispatch::Http1 => return self.send_h1(origin, None, request).await,
                Dispatch::Http2 => return self.send_h2(origin, request).await,
                Dispatch::Probe => {
                    if let Some(conn) = self.probe(origin).await? {
                        return self.send_h1(origin, Some(conn), request).await;
                    }
                }
            }
        }
    }

    /// Opens one connection to an `auto` origin over TLS offering both protocols. An
    /// HTTP/2 connection goes to the pool; an HTTP/1.1 one is returned for the request
    /// that found out.
    async fn probe(&self, origin: &Arc<Origin>) -> Result<Option<h1::PooledConn>, UpstreamError> {
        let _one = tokio::time::timeout(self.response_timeout, origin.probe.lock())
            .await
            .map_err(|_| UpstreamError::Timeout)?;
        if !matches!(origin.dispatch(), Dispatch::Probe) {
            return Ok(None);
        }
        let found = tokio::time::timeout(self.connect_timeout, async {
            let (io, negotiated) = tls::connect(origin, tls::Alpn::Both).await?;
            if negotiated == tls::Negotiated::Http2 {
                h2::adopt(self, origin, io).await?;
                return Ok((HTTP2, None));
            }
            h1::reserve_one(origin);
            let conn = h1::handshake(self, origin, io).await;
            if conn.is_err() {
                h1::unreserve_one(origin);
            }
            Ok((HTTP1, Some(conn?)))
        })
        .await
        .unwrap_or_else(|_| {
            Err(UpstreamError::Connect(format!(
                "connecting to {} timed out",
                origin.addr
            )))
        })?;
        origin.learned.store(found.0, Ordering::Release);
        Ok(found.1)
    }

    /// HTTP/1.1: a connection from the pool. A request sent on a reused connection
    /// that the origin had already closed is retried once on a new connection.
    async fn send_h1(
        &self,
        origin: &Arc<Origin>,
        fresh: Option<h1::PooledConn>,
        request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let (mut conn, reused) = match fresh {
            Some(conn) => (conn, false),
            None => h1::checkout(self, origin).await?,
        };
        let result =
            tokio::time::timeout(self.response_timeout, conn.sender.try_send_request(request))
                .await;
        let result = match result {
            Err(_) => return Err(UpstreamError::Timeout),
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(mut e)) => match e.take_message() {
                // Never written: the pooled connection was already closing. Try a new one.
                Some(request) if reused => {
                    h1::reserve_one(origin);
                    let mut fresh = Box::pin(h1::connect_reserved(self, origin)).await?;
                    let r = tokio::time::timeout(
                        self.response_timeout,
                        fresh.sender.send_request(request),
                    )
                    .await;
                    conn = fresh;
                    match r {
                        Err(_) => return Err(UpstreamError::Timeout),
                        Ok(r) => r,
                    }
                }
                _ => Err(e.into_error()),
            },
        };
        match result {
            Ok(resp) => {
                // An empty body is never polled, so its end would never return the connection.
                let hold = if resp.body().is_end_stream() {
                    conn.release_when_ready();
                    Hold::None
                } else {
                    Hold::Http1(conn)
                };
                let idle = IdleLimit::new(self.body_idle);
                Ok(resp.map(|inner| UpstreamBody { inner, hold, idle }))
            }
            Err(e) => Err(classify(e)),
        }
    }

    /// HTTP/2: a stream on a shared connection. A request the origin refused unprocessed
    /// (GOAWAY past it, REFUSED_STREAM), or that hyper could not send because the
    /// connection was closing, is sent once more on another connection. A reset of the
    /// stream fails this request only.
    async fn send_h2(
        &self,
        origin: &Arc<Origin>,
        mut request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let deadline = Instant::now() + self.response_timeout;
        let mut retried = false;
        loop {
            let copy = if retried {
                None
            } else {
                h2::copy_request(&request)
            };
            let method = request.method().clone();
            let (slot, mut sender) = h2::acquire(self, origin, deadline).await?;
            let sent =
                tokio::time::timeout_at(deadline.into(), sender.try_send_request(request)).await;
            match sent {
                Err(_) => return Err(UpstreamError::Timeout),
                Ok(Ok(resp)) => {
                    let hold = if resp.body().is_end_stream() {
                        Hold::None
                    } else {
                        Hold::Http2 { _slot: slot }
                    };
                    let idle = IdleLimit::new(self.body_idle);
                    return Ok(resp.map(|inner| UpstreamBody { inner, hold, idle }));
                }
                Ok(Err(mut e)) => {
                    let unsent = e.take_message();
                    let error = e.into_error();
                    if retried {
                        return Err(classify(error));
                    }
                    if let Some(unsent) = unsent {
                        h2::retire(&slot);
                        request = unsent;
                    } else if let Some(copy) =
                        copy.filter(|_| h2::refused_unprocessed(&error, &method))
                    {
                        h2::retire(&slot);
                        request = copy;
                    } else {
                        return Err(classify(error));
                    }
                    retried = true;
                }
            }
        }
    }
}

fn classify(e: hyper::Error) -> UpstreamError {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(s) = source {
        if s.is::<crate::body::BodyTooLarge>() {
            return UpstreamError::BodyTooLarge;
        }
        if let Some(t) = s.downcast_ref::<crate::body::ClientBodyTimeout>() {
            return UpstreamError::ClientTimeout(t.0);
        }
        source = s.source();
    }
    UpstreamError::Protocol(e.to_string())
}

/// What an origin's response body holds on to until it ends.
enum Hold {
    None,
    /// The HTTP/1.1 connection, back to the pool at the end.
    Http1(h1::PooledConn),
    /// The HTTP/2 stream's place on its connection, given back when dropped.
    Http2 {
        _slot: h2::StreamSlot,
    },
}

/// An origin's response body. Its connection (HTTP/1.1) goes back to the pool, or its
/// stream (HTTP/2) is counted as done, when it ends.
pub(crate) struct UpstreamBody {
    inner: Incoming,
    hold: Hold,
    idle: IdleLimit,
}

/// The longest an origin may leave a body without new data. The timer is made the
/// first time the body has nothing ready, so a body that arrives at once costs none.
struct IdleLimit {
    limit: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl IdleLimit {
    fn new(limit: Duration) -> IdleLimit {
        IdleLimit { limit, timer: None }
    }

    /// Data arrived: the limit starts again.
    fn data(&mut self) {
        if let Some(t) = self.timer.as_mut() {
            t.as_mut().reset(tokio::time::Instant::now() + self.limit);
        }
    }

    /// Nothing is ready: whether the limit has passed (registering `cx` if not).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let limit = self.limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        std::future::Future::poll(timer.as_mut(), cx).is_ready()
    }
}

impl UpstreamBody {
    fn release(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::None) {
            Hold::Http1(c) => c.release_when_ready(),
            Hold::Http2 { .. } | Hold::None => {}
        }
    }

    pub(crate) fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => {
                    if !self.idle.expired(cx) {
                        return Poll::Pending;
                    }
                    // A connection in the middle of a body is not reused.
                    self.hold = Hold::None;
                    return Poll::Ready(Some(Err(format!(
                        "the origin sent no body data for {:?} ([timeouts] origin_body_idle)",
                        self.idle.limit
                    )
                    .into())));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        self.idle.data();
                        // The consumer may stop polling once it has the declared length.
                        if self.inner.is_end_stream() {
                            self.release();
                        }
                        return Poll::Ready(Some(Ok(owned::chunk(data))));
                    }
                    Err(_trailers) => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    // An HTTP/1.1 connection in an unknown state is not reused.
                    self.hold = Hold::None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(None) => {
                    self.release();
                    return Poll::Ready(None);
                }
            }
        }
    }

    /// The next chunk; `None` at the end.
    pub(crate) async fn next_chunk(&mut self) -> Option<Result<Bytes, BoxError>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
