//! Keeping the origin's 206 to a range miss as a part of the object (RFC 9111 §3.3):
//! the body is copied as it goes to the client, and handed to the cache once every
//! byte the `Content-Range` announced has passed. The cache combines parts with the
//! same strong validator and stores the whole once they cover it (`weir-cache`'s
//! `parts.rs`); `range.rs` answers later ranges inside a part. Above `range.rs`, whose
//! request for the whole object the part's storage policy is judged on.

use std::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use http::header;
use http::{request, StatusCode};
use weir_cache::{CacheKey, CachedObject, FillHold, Part, Ticket};

use super::range::{whole_object, WholeObject};
use crate::body::{BodySource, ProxyBody};
use crate::engine::Engine;
use crate::served::Served;
use crate::target::Target;

/// What a kept part still needs once its body has passed.
struct Keeping {
    engine: Arc<Engine>,
    key: CacheKey,
    request: request::Parts,
    head: CachedObject,
    first: u64,
    length: u64,
    expected: usize,
    ticket: Ticket,
    held: BytesMut,
    hold: FillHold,
}

impl Keeping {
    /// Takes note of a chunk on its way to the client. Returns `false` once the part
    /// can no longer be kept: more bytes than announced, or no room in the fill budget.
    fn take(&mut self, chunk: &Bytes) -> bool {
        if self.held.len() + chunk.len() > self.expected || !self.hold.try_add(chunk.len() as u64) {
            return false;
        }
        self.held.extend_from_slice(chunk);
        true
    }

    fn store(self) {
        let part = Part {
            head: self.head,
            first: self.first,
            body: self.held.freeze(),
            length: self.length,
        };
        self.engine
            .cache
            .store_part(&self.key, &self.request, part, self.ticket);
    }
}

/// Keeps the 206 of `served` as a part of `key`'s object when it may be: a single
/// byte range with a complete length that the memory tier would keep, a strong
/// validator, no `Vary`, and caching fields under which the whole object as a 200
/// would be stored. `rewrite`: modules change the body as it is delivered, so what the
/// client gets is not the origin's part. `ticket` was taken before the request went
/// to the origin, so a purge meanwhile keeps the part out.
pub(crate) fn keep_part(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    ticket: Ticket,
    rewrite: bool,
    mut served: Served,
) -> Served {
    let headers = served.response.headers();
    if rewrite || served.response.status() != StatusCode::PARTIAL_CONTENT {
        return served;
    }
    let Some((first, last, length)) = weir_cache::content_range(headers) else {
        return served;
    };
    let expected = last - first + 1;
    if expected > engine.cache.memory_object_limit()
        || headers.contains_key(header::VARY)
        || weir_cache::strong_validator(headers).is_none()
    {
        return served;
    }
    let Some(WholeObject {
        request: whole,
        head,
        policy,
        ..
    }) = whole_object(engine, key, parts, target, headers, length)
    else {
        return served;
    };
    let mut keeping = Some(Keeping {
        engine: engine.clone(),
        key: key.clone(),
        request: whole,
        head: CachedObject::new(StatusCode::OK, &head.headers, Bytes::new(), policy),
        first,
        length,
        expected: expected as usize,
        ticket,
        held: BytesMut::with_capacity(expected as usize),
        hold: engine.cache.fill_budget().hold(),
    });
    let mut body = std::mem::replace(served.response.body_mut(), ProxyBody::empty());
    // Stored when the last announced byte passes: hyper may drop a body whose declared
    // length was sent without polling it to its end.
    let tee = futures_util::stream::poll_fn(move |cx| {
        let polled = body.poll_chunk(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(k) = keeping.as_mut() {
                    if !k.take(chunk) {
                        keeping = None;
                    } else if k.held.len() == k.expected {
                        if let Some(k) = keeping.take() {
                            k.store();
                        }
                    }
                }
            }
            Poll::Ready(_) => keeping = None,
            Poll::Pending => {}
        }
        polled
    });
    *served.response.body_mut() = ProxyBody::stream(Box::pin(tee));
    served
}
