//! A body copied for the cache as it goes to the client: the copy is held within the
//! fill budget and handed on once every byte the response announced has passed (a
//! kept 206 part, `part.rs`; an origin's whole answer to a range miss,
//! `range_all.rs`). Below both.

use std::task::Poll;

use bytes::{Bytes, BytesMut};
use weir_cache::FillHold;

use crate::body::{BodySource, ProxyBody};
use crate::engine::Engine;

/// `body`, with its bytes copied as they pass; `kept` gets the copy once `expected`
/// bytes have passed. Nothing is kept when more bytes come than announced, when the
/// fill budget has no room, or when the body ends or fails first. The copy is handed
/// on at the last announced byte, not at the body's end: a body whose declared length
/// was sent may be dropped without being polled to its end.
pub(super) fn keep_as_it_passes(
    engine: &Engine,
    mut body: ProxyBody,
    expected: usize,
    kept: impl FnOnce(Bytes) + Send + 'static,
) -> ProxyBody {
    let mut copy = Some(Copy {
        held: BytesMut::with_capacity(expected),
        expected,
        hold: engine.cache.fill_budget().hold(),
        kept,
    });
    let tee = futures_util::stream::poll_fn(move |cx| {
        let polled = body.poll_chunk(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                if copy.as_mut().is_some_and(|c| !c.take(chunk)) {
                    copy = None;
                }
                if copy.as_ref().is_some_and(|c| c.held.len() == c.expected) {
                    if let Some(c) = copy.take() {
                        (c.kept)(c.held.freeze());
                    }
                }
            }
            Poll::Ready(_) => copy = None,
            Poll::Pending => {}
        }
        polled
    });
    ProxyBody::stream(Box::pin(tee))
}

/// The copy being made.
struct Copy<F> {
    held: BytesMut,
    expected: usize,
    hold: FillHold,
    kept: F,
}

impl<F> Copy<F> {
    /// Takes note of a chunk on its way to the client; `false` once nothing can be
    /// kept (more bytes than announced, or no room in the fill budget).
    fn take(&mut self, chunk: &Bytes) -> bool {
        if self.held.len() + chunk.len() > self.expected || !self.hold.try_add(chunk.len() as u64) {
            return false;
        }
        self.held.extend_from_slice(chunk);
        true
    }
}
