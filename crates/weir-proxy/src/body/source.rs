//! Reading a body chunk by chunk, whatever it is: what the whole-message events
//! collect from, and how a body already begun is chained after its first bytes. Each
//! body type implements it beside its definition; the request bodies here. Uses only
//! the request bodies, so every body type, above or below the upstream pools, can.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::request::{BoxError, ClientIncoming, RequestBody};

/// Something a body can be read from, chunk by chunk (trailers skipped).
pub(crate) trait BodySource: Send {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>>;
}

impl BodySource for ClientIncoming {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        poll_data_frames(Pin::new(self), cx)
    }
}

impl BodySource for RequestBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        poll_data_frames(Pin::new(self), cx)
    }
}

pub(crate) fn poll_data_frames<B>(
    mut body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Bytes, B::Error>>>
where
    B: http_body::Body<Data = Bytes>,
{
    loop {
        return match body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => Poll::Ready(Some(Ok(data))),
                Err(_) => continue,
            },
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        };
    }
}
