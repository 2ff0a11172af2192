//! Answering from a stored object: the object, or 304 to a client whose validators
//! match, with our `Cache-Status`. The bottom of the cache path: it uses only the
//! vocabulary (bodies, `Served`).

use std::time::SystemTime;

use http::header::HeaderValue;
use http::{request, Method, Response, StatusCode};
use weir_cache::CachedObject;

use crate::body::ProxyBody;
use crate::metrics::CacheOutcome;
use crate::served::Served;

pub(super) const HIT: HeaderValue = HeaderValue::from_static("weir; hit");

/// Answers from a stored object: 304 to a matching conditional request, else the
/// object (headers only for HEAD).
pub(super) fn serve_object(
    object: &CachedObject,
    parts: &request::Parts,
    now: SystemTime,
    outcome: CacheOutcome,
    cache_status: HeaderValue,
) -> Served {
    let response = if object.satisfies_conditional(&parts.headers) {
        let mut r = Response::new(ProxyBody::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = object.not_modified_headers(now);
        r
    } else {
        let body = if parts.method == Method::HEAD {
            ProxyBody::empty()
        } else {
            stored_body(&object.body)
        };
        let mut r = Response::new(body);
        *r.status_mut() = object.status;
        *r.headers_mut() = object.response_headers(now);
        r
    };
    Served {
        response,
        outcome,
        cache_status,
        upstream: None,
        origin_body: false,
    }
}

/// A stored body as a response body: by reference from memory, streamed from a file.
pub(crate) fn stored_body(body: &weir_cache::Body) -> ProxyBody {
    if let Some(b) = body.in_memory() {
        return ProxyBody::full(b.clone());
    }
    let stream = futures_util::stream::unfold(body.reader(), |mut r| async move {
        r.next_chunk()
            .await
            .map(|c| (c.map_err(|e| e.to_string().into()), r))
    });
    ProxyBody::stream(Box::pin(stream))
}
