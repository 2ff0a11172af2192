//! An origin's response body: its chunks as they arrive, within the idle limit, and
//! the connection (HTTP/1.1) or stream (HTTP/2) it holds until it ends. Above the
//! senders whose handles it holds; the response body sent to clients wraps it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, SizeHint};
use hyper::body::Incoming;

use super::{h1, h2_pool, owned};
use crate::body::request::BoxError;
use crate::body::source::BodySource;

/// What an origin's response body holds on to until it ends.
pub(super) enum Hold {
    None,
    /// The HTTP/1.1 connection, back to the pool at the end.
    Http1(h1::PooledConn),
    /// The HTTP/2 stream's place on its connection, given back when dropped.
    Http2 {
        _slot: h2_pool::StreamSlot,
    },
}

/// An origin's response body. Its connection (HTTP/1.1) goes back to the pool, or its
/// stream (HTTP/2) is counted as done, when it ends.
pub(crate) struct UpstreamBody {
    pub(super) inner: Incoming,
    pub(super) hold: Hold,
    pub(super) idle: IdleLimit,
}

/// The longest an origin may leave a body without new data. The timer is made the
/// first time the body has nothing ready, so a body that arrives at once costs none.
pub(super) struct IdleLimit {
    limit: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl IdleLimit {
    pub(super) fn new(limit: Duration) -> IdleLimit {
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

impl BodySource for UpstreamBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        self.poll_data(cx)
    }
}
