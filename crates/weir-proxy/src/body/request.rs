//! The bodies of requests: the client's as its connection reads it (with its idle limit), and
//! what is sent to an origin (with the size limit). The vocabulary of the layers
//! above, the upstream pools included; it uses nothing of the engine.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Body, Frame, SizeHint};

pub(crate) use super::client::BoxError;
use super::client::ClientStream;

/// A streamed body, boxed once per response (not per chunk).
pub(crate) type ChunkStream = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>> + Send>>;

/// A streamed body whose end may carry trailer fields: data frames, then at most one
/// trailers frame.
pub(crate) type FrameStream = Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, BoxError>> + Send>>;

/// A body held in memory that ended with trailers, as frames: its chunks (empty ones
/// left out), then the trailers. Sent chunked, which trailers need over HTTP/1.1.
pub(crate) fn data_then_trailers(
    chunks: impl IntoIterator<Item = Bytes>,
    trailers: http::HeaderMap,
) -> FrameStream {
    let data = chunks
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(Frame::data);
    let frames: Vec<_> = data.chain([Frame::trailers(trailers)]).map(Ok).collect();
    Box::pin(futures_util::stream::iter(frames))
}

/// The body of a request sent to an origin: nothing, a body read in full, or the
/// client's body (after what was read ahead), checked against the limit as it streams.
pub(crate) enum RequestBody {
    Empty,
    Buffered(Option<Bytes>),
    Client {
        read_ahead: std::collections::VecDeque<Bytes>,
        inner: ClientIncoming,
        remaining: u64,
    },
    /// A body that modules transform on its way (the request-body event), or one
    /// read ahead whole that ended with trailers.
    Streamed(FrameStream),
}

/// A body of unknown length is read ahead up to this much (or the limit, if smaller)
/// before the origin is contacted, so that most bodies over a limit are refused with
/// a 413 before anything is forwarded, and small ones are sent with a Content-Length.
const READ_AHEAD: u64 = 64 << 10;

/// Why reading ahead failed.
pub(crate) enum ReadAheadError {
    TooLarge,
    Client(BoxError),
}

impl RequestBody {
    /// A copy, when the body is in memory (to send a request again).
    pub(crate) fn try_clone(&self) -> Option<RequestBody> {
        match self {
            RequestBody::Empty => Some(RequestBody::Empty),
            RequestBody::Buffered(b) => Some(RequestBody::Buffered(b.clone())),
            RequestBody::Client { .. } | RequestBody::Streamed(_) => None,
        }
    }

    /// The client's body of unknown length, read ahead as far as [`READ_AHEAD`].
    pub(crate) async fn read_ahead(
        mut inner: ClientIncoming,
        limit: u64,
    ) -> Result<RequestBody, ReadAheadError> {
        let mut chunks: std::collections::VecDeque<Bytes> = std::collections::VecDeque::new();
        let mut total: u64 = 0;
        let mut trailers = None;
        let window = READ_AHEAD.min(limit);
        while total <= window {
            match std::future::poll_fn(|cx| Pin::new(&mut inner).poll_frame(cx)).await {
                None => {
                    if let Some(trailers) = trailers {
                        return Ok(RequestBody::Streamed(data_then_trailers(chunks, trailers)));
                    }
                    let mut all = bytes::BytesMut::with_capacity(total as usize);
                    for c in chunks {
                        all.extend_from_slice(&c);
                    }
                    return Ok(RequestBody::Buffered(Some(all.freeze())));
                }
                Some(Err(e)) => return Err(ReadAheadError::Client(e)),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        total += data.len() as u64;
                        chunks.push_back(data);
                    }
                    Err(frame) => trailers = frame.into_trailers().ok(),
                },
            }
        }
        if total > limit {
            return Err(ReadAheadError::TooLarge);
        }
        Ok(RequestBody::Client {
            read_ahead: chunks,
            inner,
            remaining: limit - total,
        })
    }
}

/// The client's request body as its connection reads it, with a limit on how long the client
/// may pause in the middle of it (`[timeouts] client_body_idle`, as nginx's
/// `client_body_timeout`): after that, the body ends in [`ClientBodyTimeout`], so a
/// client cannot hold a transaction and an origin connection open by sending nothing.
pub(crate) struct ClientIncoming {
    inner: ClientStream,
    idle: Duration,
    /// Armed while the body waits for the client; made once, reset on each wait.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Data came since the timer was last set.
    moved: bool,
}

impl ClientIncoming {
    /// `inner`, ending in an error after `idle` without data.
    pub(crate) fn new(inner: ClientStream, idle: Duration) -> ClientIncoming {
        ClientIncoming {
            inner,
            idle,
            timer: None,
            moved: false,
        }
    }
}

impl Body for ClientIncoming {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.moved = true;
                Poll::Ready(frame)
            }
            Poll::Pending => {
                // The clock is read only when the wait starts anew.
                let timer = match &mut this.timer {
                    Some(t) => {
                        if std::mem::take(&mut this.moved) {
                            t.as_mut().reset(tokio::time::Instant::now() + this.idle);
                        }
                        t
                    }
                    None => {
                        this.moved = false;
                        this.timer.insert(Box::pin(tokio::time::sleep(this.idle)))
                    }
                };
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        Poll::Ready(Some(Err(Box::new(ClientBodyTimeout(this.idle)))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The client sent no request body data for `[timeouts] client_body_idle`.
#[derive(Debug)]
pub(crate) struct ClientBodyTimeout(pub(crate) Duration);

impl std::fmt::Display for ClientBodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the client sent no request body data for {:.1} s",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for ClientBodyTimeout {}

/// The client's body went over `[limits] max_request_body`.
#[derive(Debug)]
pub(crate) struct BodyTooLarge;

impl std::fmt::Display for BodyTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body over the configured limit")
    }
}

impl std::error::Error for BodyTooLarge {}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut *self {
            RequestBody::Empty => Poll::Ready(None),
            RequestBody::Buffered(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            RequestBody::Client {
                read_ahead,
                inner,
                remaining,
            } => match read_ahead.pop_front() {
                Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                None => match Pin::new(inner).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Some(data) = frame.data_ref() {
                            let n = data.len() as u64;
                            if n > *remaining {
                                return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
                            }
                            *remaining -= n;
                        }
                        Poll::Ready(Some(Ok(frame)))
                    }
                    Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) => Poll::Ready(None),
                    Poll::Pending => Poll::Pending,
                },
            },
            RequestBody::Streamed(s) => s.as_mut().poll_next(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Empty => true,
            RequestBody::Buffered(b) => b.is_none(),
            RequestBody::Client {
                read_ahead, inner, ..
            } => read_ahead.is_empty() && inner.is_end_stream(),
            RequestBody::Streamed(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Buffered(b) => {
                SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
            RequestBody::Client {
                read_ahead, inner, ..
            } => {
                let ahead: u64 = read_ahead.iter().map(|c| c.len() as u64).sum();
                let rest = inner.size_hint();
                // The upper bound first: `set_lower` asserts that the lower bound does
                // not exceed it, which `lower + ahead` would with an exact hint.
                let mut hint = SizeHint::new();
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + ahead);
                }
                hint.set_lower(rest.lower() + ahead);
                hint
            }
            RequestBody::Streamed(_) => SizeHint::default(),
        }
    }
}
