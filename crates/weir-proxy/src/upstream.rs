//! Connections to origins: an HTTP/1.1 keep-alive pool per origin, bounded in size,
//! with idle timeouts (the "blocking" dispatcher: one request per connection at a time).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::body::{BoxError, RequestBody};
use crate::config::{TimeoutsConfig, UpstreamConfig};
use crate::metrics::Metrics;

/// Where a request goes: host and port (only `http` origins for now).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OriginAddr {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for OriginAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why a request to an origin failed.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// Could not connect (DNS, refused, connect timeout).
    Connect(String),
    /// No response header within `[timeouts] origin_response`.
    Timeout,
    /// The client's body went over the limit while it was being forwarded.
    BodyTooLarge,
    /// The origin broke the protocol or closed the connection.
    Protocol(String),
}

/// All origin pools.
pub(crate) struct Upstream {
    pools: Mutex<HashMap<OriginAddr, Arc<OriginPool>>>,
    settings: UpstreamConfig,
    connect_timeout: Duration,
    response_timeout: Duration,
    metrics: Arc<Metrics>,
}

struct OriginPool {
    idle: Mutex<Vec<(http1::SendRequest<RequestBody>, Instant)>>,
    /// Connections open (busy or idle).
    open: AtomicUsize,
    /// Signalled when a connection goes idle or closes: a waiting request may proceed.
    available: Notify,
}

/// A connection taken from the pool for one request.
struct PooledConn {
    sender: http1::SendRequest<RequestBody>,
    pool: Arc<OriginPool>,
    max_idle: usize,
}

impl PooledConn {
    fn release(self) {
        if self.sender.is_closed() {
            return;
        }
        let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push((self.sender, Instant::now()));
        }
        drop(idle);
        self.pool.available.notify_one();
    }

    /// Returns the connection to the pool once it can take another request.
    fn release_when_ready(mut self) {
        match self
            .sender
            .poll_ready(&mut Context::from_waker(std::task::Waker::noop()))
        {
            Poll::Ready(Ok(())) => self.release(),
            Poll::Ready(Err(_)) => {}
            Poll::Pending => {
                tokio::spawn(async move {
                    let ready =
                        tokio::time::timeout(Duration::from_secs(5), self.sender.ready()).await;
                    if let Ok(Ok(())) = ready {
                        self.release();
                    }
                });
            }
        }
    }
}

impl Upstream {
    pub fn new(
        settings: &UpstreamConfig,
        timeouts: &TimeoutsConfig,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let upstream = Arc::new(Upstream {
            pools: Mutex::new(HashMap::new()),
            settings: settings.clone(),
            connect_timeout: timeouts.connect.0,
            response_timeout: timeouts.origin_response.0,
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
        upstream
    }

    fn close_expired_idle(&self) {
        let timeout = self.settings.idle_timeout.0;
        let pools: Vec<Arc<OriginPool>> = self
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for pool in pools {
            let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(s, since)| !s.is_closed() && since.elapsed() < timeout);
        }
    }

    fn pool(&self, origin: &OriginAddr) -> Arc<OriginPool> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pools.get(origin) {
            return p.clone();
        }
        let p = Arc::new(OriginPool {
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            available: Notify::new(),
        });
        pools.insert(origin.clone(), p.clone());
        p
    }

    /// Sends `request` (origin-form URI, headers ready) to `origin` and waits for the
    /// response head. A request that failed on a reused connection before the origin
    /// could have acted on it is retried once on a new connection.
    pub async fn send(
        &self,
        origin: &OriginAddr,
        request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let pool = self.pool(origin);
        let (mut conn, reused) = self.checkout(origin, &pool).await?;
        let result =
            tokio::time::timeout(self.response_timeout, conn.sender.try_send_request(request))
                .await;
        let result = match result {
            Err(_) => return Err(UpstreamError::Timeout),
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(mut e)) => match e.take_message() {
                // Never written: the pooled connection was already closing. Try a new one.
                Some(request) if reused => {
                    pool.open.fetch_add(1, Ordering::AcqRel);
                    let mut fresh = self.connect_reserved(origin, &pool).await?;
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
                let conn = if resp.body().is_end_stream() {
                    conn.release_when_ready();
                    None
                } else {
                    Some(conn)
                };
                Ok(resp.map(|inner| UpstreamBody { inner, conn }))
            }
            Err(e) => Err(classify(e)),
        }
    }

    /// An idle connection, or a new one if the origin's limit allows, or the first one
    /// to become available.
    async fn checkout(
        &self,
        origin: &OriginAddr,
        pool: &Arc<OriginPool>,
    ) -> Result<(PooledConn, bool), UpstreamError> {
        let deadline = Instant::now() + self.response_timeout;
        loop {
            let notified = pool.available.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            loop {
                let next = pool.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let Some((sender, since)) = next else { break };
                if sender.is_closed()
                    || !sender.is_ready()
                    || since.elapsed() >= self.settings.idle_timeout.0
                {
                    continue;
                }
                self.metrics.origin_connection_reused();
                return Ok((
                    PooledConn {
                        sender,
                        pool: pool.clone(),
                        max_idle: self.settings.max_idle_per_origin,
                    },
                    true,
                ));
            }
            let open = pool.open.load(Ordering::Acquire);
            if open < self.settings.max_connections_per_origin
                && pool
                    .open
                    .compare_exchange(open, open + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return Ok((self.connect_reserved(origin, pool).await?, false));
            }
            if open >= self.settings.max_connections_per_origin
                && tokio::time::timeout_at(deadline.into(), notified)
                    .await
                    .is_err()
            {
                return Err(UpstreamError::Timeout);
            }
        }
    }

    /// Opens a connection for which a place in `pool.open` was already counted.
    async fn connect_reserved(
        &self,
        origin: &OriginAddr,
        pool: &Arc<OriginPool>,
    ) -> Result<PooledConn, UpstreamError> {
        match tokio::time::timeout(self.connect_timeout, self.handshake(origin, pool)).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => {
                self.connection_gone(pool);
                Err(e)
            }
            Err(_) => {
                self.connection_gone(pool);
                Err(UpstreamError::Connect(format!(
                    "connecting to {origin} timed out"
                )))
            }
        }
    }

    fn connection_gone(&self, pool: &OriginPool) {
        pool.open.fetch_sub(1, Ordering::AcqRel);
        pool.available.notify_one();
    }

    async fn handshake(
        &self,
        origin: &OriginAddr,
        pool: &Arc<OriginPool>,
    ) -> Result<PooledConn, UpstreamError> {
        let stream = connect_tcp(origin).await?;
        let (sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| UpstreamError::Connect(format!("{origin}: {e}")))?;
        self.metrics.origin_connection_opened();
        let metrics = self.metrics.clone();
        let task_pool = pool.clone();
        tokio::spawn(async move {
            let _ = conn.await;
            metrics.origin_connection_closed();
            task_pool.open.fetch_sub(1, Ordering::AcqRel);
            task_pool.available.notify_one();
        });
        Ok(PooledConn {
            sender,
            pool: pool.clone(),
            max_idle: self.settings.max_idle_per_origin,
        })
    }
}

async fn connect_tcp(origin: &OriginAddr) -> Result<TcpStream, UpstreamError> {
    let addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .map_err(|e| UpstreamError::Connect(format!("cannot resolve {}: {e}", origin.host)))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(UpstreamError::Connect(match last {
        Some(e) => format!("cannot connect to {origin}: {e}"),
        None => format!("{} has no address", origin.host),
    }))
}

fn classify(e: hyper::Error) -> UpstreamError {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(s) = source {
        if s.is::<crate::body::BodyTooLarge>() {
            return UpstreamError::BodyTooLarge;
        }
        source = s.source();
    }
    UpstreamError::Protocol(e.to_string())
}

/// An origin's response body. Its connection goes back to the pool when it ends.
pub(crate) struct UpstreamBody {
    inner: Incoming,
    conn: Option<PooledConn>,
}

impl UpstreamBody {
    pub(crate) fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        // The consumer may stop polling once it has the declared length.
                        if self.inner.is_end_stream() {
                            if let Some(c) = self.conn.take() {
                                c.release_when_ready();
                            }
                        }
                        return Poll::Ready(Some(Ok(data)));
                    }
                    Err(_trailers) => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    self.conn = None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(None) => {
                    if let Some(c) = self.conn.take() {
                        c.release_when_ready();
                    }
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
