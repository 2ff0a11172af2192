//! The HTTP/1.1 keep-alive pool of one origin (the "blocking" dispatcher: one request
//! per connection at a time), bounded in size, with idle timeouts: taking a connection,
//! opening one, giving it back. The pool's own data is in `h1_pool.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::connect::{connect, BoxIo, Negotiated};
use super::error::UpstreamError;
use super::h1_pool::{Idle, Near};
use super::origins::{Origin, Upstream};
use super::tls::Alpn;
use crate::body::request::RequestBody;

/// A connection taken from the pool for one request.
pub(super) struct PooledConn {
    pub(super) sender: http1::SendRequest<RequestBody>,
    origin: Arc<Origin>,
    /// The worker whose event loop runs the connection's task.
    worker: u16,
}

impl PooledConn {
    fn release(self) {
        if self.sender.is_closed() {
            return;
        }
        let pool = &self.origin.h1;
        let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < pool.max_idle {
            idle.push(Idle {
                sender: self.sender,
                since: Instant::now(),
                worker: self.worker,
            });
        }
        drop(idle);
        pool.available.notify_one();
    }

    /// Returns the connection to the pool once it can take another request.
    pub(super) fn release_when_ready(mut self) {
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

/// An idle connection whose task runs on this worker, or a new one if the origin's
/// limit allows, or another worker's idle one, or the first one to become available.
/// The flag tells whether the connection was reused. (With work stealing every
/// connection is the one worker's: the most recently used idle one is taken.)
pub(super) async fn checkout(
    up: &Upstream,
    origin: &Arc<Origin>,
) -> Result<(PooledConn, bool), UpstreamError> {
    let pool = &origin.h1;
    let here = crate::worker::current();
    // The usual case first, with no deadline and no place among the waiters; the loop
    // registers before it looks again, so a connection released meanwhile is not missed.
    if let Some(reused) = reuse(up, origin, here, Near::Only) {
        return Ok((reused, true));
    }
    let deadline = Instant::now() + up.response_timeout;
    loop {
        let notified = pool.available.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(reused) = reuse(up, origin, here, Near::Only) {
            return Ok((reused, true));
        }
        let open = pool.open.load(Ordering::Acquire);
        if open < up.settings.max_connections_per_origin
            && pool
                .open
                .compare_exchange(open, open + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // Boxed: a connect is rare next to a reuse, and its future is large.
            return Ok((Box::pin(connect_reserved(up, origin)).await?, false));
        }
        if let Some(reused) = reuse(up, origin, here, Near::Any) {
            return Ok((reused, true));
        }
        if open >= up.settings.max_connections_per_origin
            && tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
        {
            return Err(UpstreamError::Timeout);
        }
    }
}

/// An idle connection that can take a request now, of worker `here`'s (`Near::Only`)
/// or of any worker's; those found closed, busy or expired on the way are dropped.
fn reuse(up: &Upstream, origin: &Arc<Origin>, here: u16, near: Near) -> Option<PooledConn> {
    while let Some(Idle {
        sender,
        since,
        worker,
    }) = origin.h1.take_idle(here, near)
    {
        if sender.is_closed() || !sender.is_ready() || since.elapsed() >= up.settings.idle_timeout.0
        {
            continue;
        }
        up.metrics.origin_connection_reused();
        return Some(PooledConn {
            sender,
            origin: origin.clone(),
            worker,
        });
    }
    None
}

/// Opens a connection for which a place in the pool's `open` count was already taken.
pub(super) async fn connect_reserved(
    up: &Upstream,
    origin: &Arc<Origin>,
) -> Result<PooledConn, UpstreamError> {
    let opened = tokio::time::timeout(up.connect_timeout, async {
        let (io, negotiated) = connect(origin, Alpn::Http1).await?;
        if negotiated == Negotiated::Http2 {
            return Err(UpstreamError::Protocol(format!(
                "{} chose HTTP/2 although Weir offered HTTP/1.1 only",
                origin.addr
            )));
        }
        handshake(up, origin, io).await
    })
    .await;
    match opened {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => {
            origin.h1.connection_gone();
            origin.forget_protocol_after(&e);
            Err(e)
        }
        Err(_) => {
            origin.h1.connection_gone();
            Err(UpstreamError::Connect(format!(
                "connecting to {} timed out",
                origin.addr
            )))
        }
    }
}

/// The most an origin connection's read buffer grows to.
const UPSTREAM_READ_BUFFER: usize = 64 << 10;

/// The HTTP/1 handshake on a connected (and, for https, TLS) stream whose place in the
/// pool is taken; the connection's task gives the place back when it ends.
pub(super) async fn handshake(
    up: &Upstream,
    origin: &Arc<Origin>,
    io: BoxIo,
) -> Result<PooledConn, UpstreamError> {
    let (sender, conn) = http1::Builder::new()
        // hyper grows a connection's read buffer to about 400 KiB for large bodies and
        // keeps it while the connection idles in the pool, and every body chunk it
        // hands out is a slice of it: a smaller bound keeps pooled connections and
        // fills in flight small (64 KiB reads are as cheap per byte).
        .max_buf_size(UPSTREAM_READ_BUFFER)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| UpstreamError::Connect(format!("{}: {e}", origin.addr)))?;
    up.metrics.origin_connection_opened();
    let metrics = up.metrics.clone();
    let task_origin = origin.clone();
    tokio::spawn(async move {
        let _ = conn.await;
        metrics.origin_connection_closed();
        task_origin.h1.connection_gone();
    });
    Ok(PooledConn {
        sender,
        origin: origin.clone(),
        // Spawned on this thread's runtime: per core, this worker's event loop.
        worker: crate::worker::current(),
    })
}

/// Counts a connection opened outside [`checkout`] (the one that found out which
/// protocol an `auto` origin speaks) so that its handshake can give the place back.
pub(super) fn reserve_one(origin: &Origin) {
    origin.h1.open.fetch_add(1, Ordering::AcqRel);
}

/// Gives back a place taken by [`reserve_one`] whose handshake failed.
pub(super) fn unreserve_one(origin: &Origin) {
    origin.h1.connection_gone();
}
