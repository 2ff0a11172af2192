//! Reading a body chunk by chunk, whatever it is: what the whole-message events
//! collect from, and how a body already begun is chained after its first bytes. Each
//! body type implements it beside its definition; the request bodies here. Uses only
//! the request bodies, so every body type, above or below the upstream pools, can.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;

use super::request::{BoxError, ClientIncoming, RequestBody};

/// Something a body can be read from, chunk by chunk (trailers skipped).
pub(crate) trait BodySource: Send {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>>;

    /// As `poll_chunk`, but the trailers that end the body are put in `trailers`
    /// rather than skipped: for a reader that takes the body whole and passes it on.
    /// A source that keeps its trailers for its owner to take at the end (the
    /// origin's body) leaves `trailers` alone.
    fn poll_chunk_keeping(
        &mut self,
        cx: &mut Context<'_>,
        trailers: &mut Option<HeaderMap>,
    ) -> Poll<Option<Result<Bytes, BoxError>>> {
        let _ = trailers;
        self.poll_chunk(cx)
    }

    /// Whether a source that keeps its trailers (see `poll_chunk_keeping`) has some.
    fn has_trailers(&self) -> bool {
        false
    }
}

/// `BodySource` for bodies (`http_body::Body<Data = Bytes, Error = BoxError>`, `Unpin`)
/// whose trailers come as their last frame.
macro_rules! frame_source {
    ($($body:ty),*) => {$(
        impl $crate::body::source::BodySource for $body {
            fn poll_chunk(
                &mut self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Result<bytes::Bytes, $crate::body::BoxError>>> {
                $crate::body::source::poll_data_frames(std::pin::Pin::new(self), cx)
            }

            fn poll_chunk_keeping(
                &mut self,
                cx: &mut std::task::Context<'_>,
                trailers: &mut Option<http::HeaderMap>,
            ) -> std::task::Poll<Option<Result<bytes::Bytes, $crate::body::BoxError>>> {
                $crate::body::source::poll_data_keeping(std::pin::Pin::new(self), cx, trailers)
            }
        }
    )*};
}
pub(crate) use frame_source;

frame_source!(ClientIncoming, RequestBody);

/// The body's data frames; other frames (trailers) skipped.
pub(crate) fn poll_data_frames<B>(
    body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Bytes, B::Error>>>
where
    B: http_body::Body<Data = Bytes>,
{
    poll_data_keeping(body, cx, &mut None)
}

/// The body's data frames; its trailers put in `trailers`.
pub(crate) fn poll_data_keeping<B>(
    mut body: Pin<&mut B>,
    cx: &mut Context<'_>,
    trailers: &mut Option<HeaderMap>,
) -> Poll<Option<Result<Bytes, B::Error>>>
where
    B: http_body::Body<Data = Bytes>,
{
    loop {
        return match body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(data))),
                Err(frame) => {
                    if let Ok(fields) = frame.into_trailers() {
                        *trailers = Some(fields);
                    }
                    continue;
                }
            },
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        };
    }
}
