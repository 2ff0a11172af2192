//! The HTTP/2 connections of one origin (the "correlated" dispatcher): many requests
//! share a connection as streams, and hyper matches each response to its request by
//! stream id and handles flow control.
//!
//! A request takes a stream on the first connection with one free (the origin's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`, as hyper last read it), so streams are packed on
//! as few connections as possible. When every connection is full, another is opened,
//! up to `upstream.max_h2_connections_per_origin`; beyond that, requests queue inside
//! hyper on the least busy connection until the origin frees a stream. A connection
//! that received GOAWAY (or closed) takes no new request: the next one opens a new
//! connection.
//!
//! Here: opening connections and taking a stream on one; the pool's own data (and how
//! it picks a connection) is in `h2_pool.rs`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Request;
use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::watch;

use super::connect::{connect, Negotiated};
use super::error::UpstreamError;
use super::h2_pool::{ConnState, Pick, Ready, StreamSlot, INITIAL_MAX_STREAMS};
use super::origins::{Origin, Upstream};
use super::stream::BoxIo;
use super::tls::Alpn;
use crate::body::request::RequestBody;
use crate::metrics::Metrics;

/// How often a connection's task reads the origin's stream limit again: hyper polls
/// the dispatch only when a request is sent, and the SETTINGS frame that carries the
/// limit arrives after the handshake.
const READ_LIMIT_EVERY: Duration = Duration::from_millis(50);

/// A stream on a ready connection, opening one if needed; waits at most until
/// `deadline` for a connection being opened.
pub(super) async fn acquire(
    up: &Upstream,
    origin: &Arc<Origin>,
    deadline: Instant,
) -> Result<(StreamSlot, SendRequest<RequestBody>), UpstreamError> {
    // A connection found closed when its turn comes is dropped and another picked.
    for _ in 0..3 {
        let entry = match origin.h2.pick(up.settings.max_h2_connections_per_origin) {
            Pick::Use(e) => e,
            Pick::Open(e, tx) => {
                // Opened by a task of its own: the requests waiting for it may go away.
                tokio::spawn(open(
                    up.metrics.clone(),
                    up.connect_timeout,
                    origin.clone(),
                    e.state.clone(),
                    tx,
                ));
                e
            }
        };
        let slot = StreamSlot(entry.clone());
        let mut ready = entry.ready.clone();
        let outcome =
            match tokio::time::timeout_at(deadline.into(), ready.wait_for(Option::is_some)).await {
                Err(_) => return Err(UpstreamError::Timeout),
                Ok(Err(_)) => Err(UpstreamError::Connect(format!(
                    "the connection to {} was abandoned",
                    origin.addr
                ))),
                Ok(Ok(r)) => r.clone().expect("waited for a value"),
            };
        let sender = outcome?;
        if sender.is_closed() {
            entry.state.closed.store(true, Ordering::Release);
            continue;
        }
        return Ok((slot, sender));
    }
    Err(UpstreamError::Protocol(format!(
        "{} keeps closing its HTTP/2 connections",
        origin.addr
    )))
}

/// Opens a connection for an entry and publishes the result to those waiting on it.
async fn open(
    metrics: Arc<Metrics>,
    connect_timeout: Duration,
    origin: Arc<Origin>,
    state: Arc<ConnState>,
    tx: watch::Sender<Ready>,
) {
    let opened = tokio::time::timeout(connect_timeout, async {
        let (io, negotiated) = connect(&origin, Alpn::Http2).await?;
        if origin.tls.is_some() && negotiated != Negotiated::Http2 {
            return Err(UpstreamError::Protocol(format!(
                "{} did not agree to HTTP/2 in the TLS handshake (ALPN)",
                origin.addr
            )));
        }
        handshake(&metrics, &origin, io, state.clone()).await
    })
    .await
    .unwrap_or_else(|_| {
        Err(UpstreamError::Connect(format!(
            "connecting to {} timed out",
            origin.addr
        )))
    });
    if let Err(e) = &opened {
        state.closed.store(true, Ordering::Release);
        origin.forget_protocol_after(e);
    }
    let _ = tx.send(Some(opened));
}

/// Takes a connection opened elsewhere (the one that found out that an `auto` origin
/// speaks HTTP/2) into the pool.
pub(super) async fn adopt(
    up: &Upstream,
    origin: &Arc<Origin>,
    io: BoxIo,
) -> Result<(), UpstreamError> {
    let (tx, rx) = watch::channel(None);
    let entry = origin.h2.new_entry(0, rx);
    let sender = handshake(&up.metrics, origin, io, entry.state.clone()).await?;
    let _ = tx.send(Some(Ok(sender)));
    origin
        .h2
        .conns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(entry);
    Ok(())
}

/// The HTTP/2 handshake; the connection's task keeps the origin's stream limit up to
/// date and marks the connection closed when hyper stops taking requests on it (after
/// GOAWAY, or when it fails).
async fn handshake(
    metrics: &Arc<Metrics>,
    origin: &Origin,
    io: BoxIo,
    state: Arc<ConnState>,
) -> Result<SendRequest<RequestBody>, UpstreamError> {
    let (sender, conn) = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| UpstreamError::Connect(format!("{}: {e}", origin.addr)))?;
    metrics.origin_connection_opened();
    let metrics = metrics.clone();
    let known = origin.h2.known_max_streams.clone();
    tokio::spawn(async move {
        let mut conn = std::pin::pin!(conn);
        let mut tick = tokio::time::interval(READ_LIMIT_EVERY);
        // Until the origin's SETTINGS are read, hyper reports its own initial limit,
        // which is no news: publishing it would let a burst of requests pile onto
        // this connection (and every connection opened meanwhile) past the origin's
        // real limit. The pool's assumption (the limit last seen on another
        // connection) stands until a different value comes; an origin whose limit
        // really is hyper's initial value is then held to the one assumed.
        let mut heard = false;
        let _ = std::future::poll_fn(|cx| {
            let polled = conn.as_mut().poll(cx);
            while tick.poll_tick(cx).is_ready() {}
            let max = conn.as_ref().get_ref().current_max_send_streams().max(1);
            heard |= max != INITIAL_MAX_STREAMS;
            if heard && state.max_streams.swap(max, Ordering::AcqRel) != max {
                known.store(max, Ordering::Release);
            }
            polled
        })
        .await;
        // hyper's dispatch has ended; streams already open finish on their own.
        state.closed.store(true, Ordering::Release);
        metrics.origin_connection_closed();
    });
    Ok(sender)
}

/// A copy of a request whose body is in memory, to send again if the origin refuses
/// the stream unprocessed (GOAWAY past it, or REFUSED_STREAM).
pub(super) fn copy_request(req: &Request<RequestBody>) -> Option<Request<RequestBody>> {
    let body = req.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    Some(copy)
}

/// Whether the origin refused the request's stream without processing it, so that
/// sending it again is safe (RFC 9113 §8.7): REFUSED_STREAM, or a GOAWAY from the
/// origin for an idempotent request (a GOAWAY with an error code can also end streams
/// the origin had started on, which only an idempotent request may repeat).
pub(super) fn refused_unprocessed(e: &hyper::Error, method: &http::Method) -> bool {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<::h2::Error>() {
            return h2.reason() == Some(::h2::Reason::REFUSED_STREAM)
                || (h2.is_go_away() && h2.is_remote() && method.is_idempotent());
        }
        source = s.source();
    }
    false
}
