//! Serving one HTTP/2 client connection with the h2 crate directly.
//!
//! hyper's HTTP/2 server offers no way to send an interim (1xx) response, which an
//! origin's `103 Early Hints` needs (RFC 9110 §15.2). So HTTP/2 connections are served
//! here, with hyper's settings and habits: the same windows and buffer limits, a
//! `Date` on every response, connection-specific fields removed (RFC 9113 §8.2.2), a
//! `Content-Length` when the body's length is known, a transaction dropped when its
//! client resets the stream, and CONNECT tunnels over a stream (RFC 9113 §8.5).
//!
//! Each stream is a task. While its transaction runs, the task sends the interim
//! responses queued for the stream ([`Interim::for_h2_stream`]) as they arrive, then
//! the final head, then the body as the stream's flow control allows.
//!
//! A connection with no stream open for `[timeouts] client_idle` is closed gracefully
//! (GOAWAY), as an HTTP/1 connection waiting that long for its next request is.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch};

use crate::body::{ClientStream, H2Body, H2Tunnel, H2Upgrade, ProxyBody};
use crate::interim::Interim;
use crate::service::ConnInfo;

/// hyper's defaults for a server: larger windows than the protocol's 64 KiB, which
/// limit a stream's throughput to one window per round trip.
const CONNECTION_WINDOW: u32 = 1 << 20;
const STREAM_WINDOW: u32 = 1 << 20;
const MAX_FRAME_SIZE: u32 = 16 << 10;
const MAX_SEND_BUFFER: usize = 400 << 10;
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// How HTTP/2 connections are served.
pub(crate) struct H2Settings {
    pub max_header_list_size: u32,
    pub max_concurrent_streams: u32,
}

/// Serves an HTTP/2 connection (the client's preface first in `io`) until the client
/// closes it, it fails, it has no stream open for `idle`, or the proxy stops (then
/// gracefully: GOAWAY, and the streams in flight finish).
pub(super) async fn serve<T>(
    io: T,
    conn: Arc<ConnInfo>,
    settings: &H2Settings,
    idle: std::time::Duration,
    mut stop: watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .max_header_list_size(settings.max_header_list_size)
        .max_concurrent_streams(settings.max_concurrent_streams)
        .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
        .max_send_buffer_size(MAX_SEND_BUFFER);
    let mut connection = tokio::select! {
        shaken = tokio::time::timeout(idle, builder.handshake::<_, Bytes>(io)) => match shaken {
            Ok(Ok(connection)) => connection,
            Ok(Err(e)) => {
                tracing::debug!("HTTP/2 handshake failed: {e}");
                return;
            }
            Err(_) => return,
        },
        _ = stop.changed() => return,
    };
    let mut stopping = *stop.borrow();
    if stopping {
        connection.graceful_shutdown();
    }
    let open = Arc::new(Streams {
        since: tokio::time::Instant::now(),
        open: AtomicUsize::new(0),
        last_end_ms: AtomicU64::new(0),
    });
    let mut quiet = pin!(tokio::time::sleep(idle));
    // One wait for the stop for the connection's life (see `connection::serve`).
    let mut stopped = pin!(stop.wait_for(|stop| *stop));
    loop {
        // `accept` keeps its state in the connection: cancelling it loses nothing.
        tokio::select! {
            next = connection.accept() => match next {
                Some(Ok((req, respond))) => {
                    let counted = Open::enter(&open);
                    // Boxed before it is spawned: a stream's future is over a KiB, and
                    // spawning moves it whole several times (about 2,000 instructions
                    // of copying per request, as callgrind counts them).
                    let answered =
                        crate::boxed::in_place(|| stream(conn.clone(), req, respond));
                    tokio::spawn(async move {
                        answered.await;
                        drop(counted);
                    });
                    quiet.as_mut().reset(tokio::time::Instant::now() + idle);
                }
                Some(Err(e)) => {
                    tracing::debug!("client connection ended: {e}");
                    return;
                }
                None => return,
            },
            () = &mut quiet, if !stopping => {
                let now = tokio::time::Instant::now();
                match open.quiet_until(idle) {
                    Some(until) if until > now => quiet.as_mut().reset(until),
                    Some(_) => {
                        tracing::debug!("HTTP/2 connection idle for {idle:?}: closing it");
                        stopping = true;
                        connection.graceful_shutdown();
                    }
                    None => quiet.as_mut().reset(now + idle),
                }
            }
            _ = &mut stopped, if !stopping => {
                stopping = true;
                connection.graceful_shutdown();
            }
        }
    }
}

/// The streams of one connection: how many are open, and when the last one ended.
struct Streams {
    since: tokio::time::Instant,
    open: AtomicUsize,
    /// Milliseconds from `since` to the end of the last stream.
    last_end_ms: AtomicU64,
}

impl Streams {
    /// When the connection will have been `idle` with no stream open; `None` while
    /// one is.
    fn quiet_until(&self, idle: std::time::Duration) -> Option<tokio::time::Instant> {
        if self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last_end = std::time::Duration::from_millis(self.last_end_ms.load(Ordering::Acquire));
        Some(self.since + last_end + idle)
    }
}

/// A stream of the connection still open (its task running), counted until dropped.
struct Open(Arc<Streams>);

impl Open {
    fn enter(streams: &Arc<Streams>) -> Open {
        streams.open.fetch_add(1, Ordering::AcqRel);
        Open(streams.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let ended = self.0.since.elapsed().as_millis() as u64;
        self.0.last_end_ms.fetch_max(ended, Ordering::AcqRel);
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One stream: the transaction, its interim responses, its final response.
async fn stream(
    conn: Arc<ConnInfo>,
    req: Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let length = crate::headers::content_length(req.headers());
    let (mut parts, recv) = req.into_parts();
    let interim = Interim::for_h2_stream();
    let (body, mut tunnel) = if parts.method == Method::CONNECT {
        if length.is_some_and(|n| n != 0) {
            respond.send_reset(h2::Reason::PROTOCOL_ERROR);
            return;
        }
        let (accepted, upgrade) = oneshot::channel();
        parts.extensions.insert(H2Upgrade::new(upgrade));
        (ClientStream::Empty, Some((accepted, recv)))
    } else {
        (ClientStream::Http2(H2Body::new(recv, length)), None)
    };
    // Boxed, as on HTTP/1: the transaction's future is several KiB.
    let mut handled = crate::boxed::in_place(|| {
        crate::service::handle(
            conn,
            Request::from_parts(parts, body),
            crate::headers::Credentials::InFields,
            Some(interim.clone()),
        )
    });
    let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
    let waiting = interim.wait_for_final(waker);
    let answered = poll_fn(|cx| {
        let answered = handled.as_mut().poll(cx);
        // After the transaction's turn: what it queued goes out before its answer.
        for response in interim.take_responses() {
            if let Err(e) = respond.send_informational(response) {
                tracing::debug!("interim response not sent: {e}");
            }
        }
        if let Poll::Ready(answer) = answered {
            return Poll::Ready(Some(answer));
        }
        // A client that resets the stream cancels its transaction.
        match respond.poll_reset(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    drop(waiting);
    drop(handled);
    let Some(Ok(response)) = answered else {
        return;
    };
    let (mut head, body) = response.into_parts();
    remove_connection_fields(&mut head.headers);
    if !head.headers.contains_key(header::DATE) {
        head.headers
            .insert(header::DATE, super::date::with_date(HeaderValue::clone));
    }
    if let Some((accepted, recv)) = tunnel.take().filter(|_| head.status.is_success()) {
        head.headers.remove(header::CONTENT_LENGTH);
        match respond.send_response(Response::from_parts(head, ()), false) {
            Ok(send) => {
                let _ = accepted.send(H2Tunnel::new(send, recv));
            }
            Err(e) => tracing::debug!("CONNECT answer not sent: {e}"),
        }
        return;
    }
    if body.is_end_stream() {
        if let Err(e) = respond.send_response(Response::from_parts(head, ()), true) {
            tracing::debug!("response not sent: {e}");
        }
        return;
    }
    if let Some(length) = body.size_hint().exact() {
        head.headers
            .entry(header::CONTENT_LENGTH)
            .or_insert_with(|| HeaderValue::from(length));
    }
    match respond.send_response(Response::from_parts(head, ()), false) {
        Ok(send) => send_body(body, send).await,
        Err(e) => tracing::debug!("response not sent: {e}"),
    }
}

/// Sends `body` as DATA frames, each once the stream has some window for it (h2 keeps
/// a chunk larger than the window until the client opens it further, as hyper does).
/// Ends when the body does, or when the client resets the stream; the body is dropped
/// in any case, which completes the transaction's record.
async fn send_body(body: ProxyBody, mut send: h2::SendStream<Bytes>) {
    let mut body = pin!(body);
    loop {
        let frame = poll_fn(|cx| {
            if send.poll_reset(cx).is_ready() {
                return Poll::Ready(None);
            }
            body.as_mut().poll_frame(cx).map(Some)
        })
        .await;
        let frame = match frame {
            None => return,
            Some(None) => {
                let _ = send.send_data(Bytes::new(), true);
                return;
            }
            Some(Some(Err(e))) => {
                tracing::debug!("response body failed: {e}");
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            Some(Some(Ok(frame))) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    let _ = send.send_trailers(trailers);
                }
                return;
            }
        };
        let end = body.is_end_stream();
        if !data.is_empty() {
            send.reserve_capacity(1);
            let window = poll_fn(|cx| {
                while send.capacity() == 0 {
                    match std::task::ready!(send.poll_capacity(cx)) {
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => return Poll::Ready(false),
                    }
                }
                Poll::Ready(true)
            })
            .await;
            if !window {
                return;
            }
        }
        if send.send_data(data, end).is_err() || end {
            return;
        }
    }
}

/// Fields that HTTP/2 forbids (RFC 9113 §8.2.2), with those a `Connection` field names.
/// `Proxy-Authenticate` stays: unlike HTTP/1's hop-by-hop fields, a 407 needs it.
fn remove_connection_fields(headers: &mut HeaderMap) {
    const FORBIDDEN: [HeaderName; 5] = [
        crate::headers::KEEP_ALIVE,
        HeaderName::from_static("proxy-connection"),
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::TE,
    ];
    // One pass over the names first: a response rarely has any of them, and each
    // removal by name hashes it.
    let any = headers
        .keys()
        .any(|name| *name == header::CONNECTION || FORBIDDEN.contains(name));
    if !any {
        return;
    }
    if let Some(connection) = headers.remove(header::CONNECTION) {
        if let Ok(names) = connection.to_str() {
            for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                headers.remove(name);
            }
        }
    }
    for name in FORBIDDEN {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_fields_go_and_proxy_authenticate_stays() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("x-hop, close"));
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"weir\""),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=1"));
        remove_connection_fields(&mut headers);
        let mut left: Vec<_> = headers.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["cache-control", "proxy-authenticate"]);
    }
}
