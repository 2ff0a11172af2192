//! Keeping the origin's 206 to a range miss as a part of the object (RFC 9111 §3.3):
//! the body is copied as it goes to the client, and handed to the cache once every
//! byte the `Content-Range` announced has passed. The cache combines parts with the
//! same strong validator and stores the whole once they cover it (`weir-cache`'s
//! `parts.rs`); `range.rs` answers later ranges inside a part. Above `range.rs`, whose
//! request for the whole object the part's storage policy is judged on.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header;
use http::{request, StatusCode};
use weir_api::CacheOverrides;
use weir_cache::{CacheKey, CachedObject, Part, Ticket};

use super::range::{whole_object, WholeObject};
use super::tee::keep_as_it_passes;
use crate::body::ProxyBody;
use crate::engine::Engine;
use crate::served::Served;
use crate::target::Target;

/// Keeps the 206 of `served` as a part of `key`'s object when it may be: a single
/// byte range with a complete length that the memory tier would keep, a strong
/// validator, no `Vary`, and caching fields under which the whole object as a 200
/// would be stored. `rewrite`: modules change the body as it is delivered, so what the
/// client gets is not the origin's part. `ticket` was taken before the request went
/// to the origin, so a purge meanwhile keeps the part out. The modules' time to live
/// and tags apply (`overrides.rs`); the caller has checked that they did not ask to
/// skip the cache.
#[allow(clippy::too_many_arguments)]
pub(crate) fn keep_part(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    ticket: Ticket,
    rewrite: bool,
    overrides: Option<&CacheOverrides>,
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
    let policy = super::overrides::policy(overrides, policy, SystemTime::now());
    let head = CachedObject::new(StatusCode::OK, &head.headers, Bytes::new(), policy);
    let head = super::overrides::tagged(overrides, head);
    let (cache, key) = (engine.cache.clone(), key.clone());
    let body = std::mem::replace(served.response.body_mut(), ProxyBody::empty());
    *served.response.body_mut() = keep_as_it_passes(engine, body, expected as usize, move |body| {
        let part = Part {
            head,
            first,
            body,
            length,
        };
        cache.store_part(&key, &whole, part, ticket);
    });
    served
}
