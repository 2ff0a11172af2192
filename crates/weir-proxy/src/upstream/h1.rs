//! The HTTP/1.1 keep-alive pool of one origin (one request per connection at a time),
//! bounded in size, with idle timeouts: taking a connection, opening one, giving it
//! back. The pool's own data is in `h1_pool.rs`; sending on a connection is
//! `h1_send.rs`.

use std::sync::Arc;
use std::time::Instant;

use super::connect::{connect, Negotiated};
use super::error::UpstreamError;
use super::h1_conn::{H1Conn, Place};
use super::h1_pool::{Idle, Near};
use super::origins::{Origin, Upstream};
use super::stream::BoxIo;
use super::tls::Alpn;

/// A connection taken from the pool for one request.
pub(super) struct PooledConn {
    pub(super) conn: H1Conn,
    pub(super) origin: Arc<Origin>,
    /// The worker whose request used it last.
    worker: u16,
}

impl PooledConn {
    /// Gives the connection back to the pool, once its response has ended.
    pub(super) fn release(mut self) {
        self.conn.idle();
        let pool = &self.origin.h1;
        pool.give_back(Idle {
            conn: self.conn,
            since: Instant::now(),
            worker: self.worker,
        });
        pool.counts.available.notify_one();
    }
}

/// An idle connection last used by this worker, or a new one if the origin's limit
/// allows, or another worker's idle one, or the first one to become available. The
/// flag tells whether the connection was reused.
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
    let most = up.settings.max_connections_per_origin;
    let deadline = Instant::now() + up.response_timeout;
    loop {
        let notified = pool.counts.available.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(reused) = reuse(up, origin, here, Near::Only) {
            return Ok((reused, true));
        }
        if let Some(place) = pool.try_reserve(most) {
            // Boxed: a connect is rare next to a reuse, and its future is large.
            return Ok((Box::pin(connect_reserved(up, origin, place)).await?, false));
        }
        if let Some(reused) = reuse(up, origin, here, Near::Any) {
            return Ok((reused, true));
        }
        if pool.open() >= most
            && tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
        {
            return Err(UpstreamError::Timeout);
        }
    }
}

/// An idle connection that can take a request now, of worker `here`'s (`Near::Only`)
/// or of any worker's; those found closed or expired on the way are dropped.
fn reuse(up: &Upstream, origin: &Arc<Origin>, here: u16, near: Near) -> Option<PooledConn> {
    while let Some(Idle {
        mut conn, since, ..
    }) = origin.h1.take_idle(here, near)
    {
        if since.elapsed() >= up.settings.idle_timeout.0 || !conn.is_usable() {
            continue;
        }
        up.metrics.origin_connection_reused();
        return Some(PooledConn {
            conn,
            origin: origin.clone(),
            worker: here,
        });
    }
    None
}

/// Opens a connection for which `place` in the pool's count was taken.
pub(super) async fn connect_reserved(
    up: &Upstream,
    origin: &Arc<Origin>,
    place: Place,
) -> Result<PooledConn, UpstreamError> {
    let opened = tokio::time::timeout(up.connect_timeout, async {
        let (io, negotiated) = connect(origin, Alpn::Http1).await?;
        if negotiated == Negotiated::Http2 {
            return Err(UpstreamError::Protocol(format!(
                "{} chose HTTP/2 although Weir offered HTTP/1.1 only",
                origin.addr
            )));
        }
        Ok(io)
    })
    .await;
    match opened {
        Ok(Ok(io)) => Ok(adopt(up, origin, io, place)),
        Ok(Err(e)) => {
            origin.forget_protocol_after(&e);
            Err(e)
        }
        Err(_) => Err(UpstreamError::Connect(format!(
            "connecting to {} timed out",
            origin.addr
        ))),
    }
}

/// A connected (and, for https, TLS) stream as a pooled HTTP/1.1 connection, in the
/// `place` taken for it.
pub(super) fn adopt(up: &Upstream, origin: &Arc<Origin>, io: BoxIo, place: Place) -> PooledConn {
    PooledConn {
        conn: H1Conn::new(io, place, up.metrics.clone()),
        origin: origin.clone(),
        worker: crate::worker::current(),
    }
}
