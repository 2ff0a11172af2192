//! Range requests that the whole object answers. One for every byte, `Range:
//! bytes=0-`, is what a media player or a download manager sends first, to learn
//! whether ranges are served. Forwarded with its `Range` as other range misses are,
//! the origin sends the whole body as a 206, and the background fetch that fills the
//! cache sends it all again. Such a request takes the cache path as a plain GET instead
//! (filled once, coalesced, a hit once stored), and a 200 of known length is answered
//! as the 206 of all its bytes, as nginx and Varnish answer it. And a range miss that
//! an origin answers with the whole object (a 200: it does not serve ranges) is stored
//! as that object. Above `range.rs` and `part.rs`, which handle the origin's 206.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Response, StatusCode};
use weir_cache::{CacheKey, CachedObject, StoragePolicy, Ticket};

use super::range::{content_range, fill_after_partial, fill_whole, whole_object_request};
use super::tee::keep_as_it_passes;
use crate::body::ProxyBody;
use crate::engine::Engine;
use crate::modules::txn::ModTxn;
use crate::served::Served;
use crate::target::Target;
use weir_api::Event;

/// Whether the request's only `Range` asks for every byte (`bytes=0-`) and nothing
/// makes it conditional (`If-Range`): it may then be served as a plain GET.
pub(crate) fn asks_for_everything(headers: &HeaderMap) -> bool {
    let mut ranges = headers.get_all(header::RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        return false;
    };
    if headers.contains_key(header::IF_RANGE) {
        return false;
    }
    let Some((unit, set)) = range.to_str().ok().and_then(|r| r.split_once('=')) else {
        return false;
    };
    unit.trim().eq_ignore_ascii_case("bytes") && set.trim() == "0-"
}

/// The answer to a request for every byte: a 200 whose length is known becomes the
/// 206 of all its bytes; anything else (a 304, an error, a body of unknown length)
/// is left as it is, which a client that asked for a range accepts (RFC 9110 §14.2).
pub(crate) fn as_all_bytes(mut served: Served) -> Served {
    let response = &mut served.response;
    if response.status() != StatusCode::OK {
        return served;
    }
    if let Some(length @ 1..) = crate::headers::content_length(response.headers()) {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        let all = content_range(Some((0, length - 1)), length);
        response.headers_mut().insert(header::CONTENT_RANGE, all);
    }
    served
}

/// After a range miss was forwarded: the origin's 206 may be kept as a part and start
/// the background fill of the whole (`range.rs`, `part.rs`); its 200 is the whole
/// object, stored as a miss's answer would be. `ticket` was taken before the origin
/// was asked, so a purge meanwhile keeps what it answered out.
pub(crate) async fn after_range_miss(
    engine: &Arc<Engine>,
    key: CacheKey,
    ticket: Ticket,
    parts: &request::Parts,
    target: &Target,
    txn: &mut Option<ModTxn>,
    served: Served,
) -> Served {
    if super::overrides::skipped(super::overrides::of(txn.as_ref())) {
        // A module asked that nothing of this be stored: not the part, not a whole
        // answer, and no whole object fetched for them.
        return served;
    }
    let rewrite = txn.as_ref().is_some_and(|t| t.wants(Event::ResponseBody));
    match served.response.status() {
        StatusCode::PARTIAL_CONTENT => {
            let partial = served.response.headers();
            fill_after_partial(engine, &key, parts, target, txn, partial).await;
            let overrides = super::overrides::of(txn.as_ref());
            super::part::keep_part(
                engine, &key, parts, target, ticket, rewrite, overrides, served,
            )
        }
        StatusCode::OK if !rewrite => {
            keep_whole_answer(engine, key, ticket, parts, target, txn, served).await
        }
        _ => served,
    }
}

/// The origin ignored the range and sent the whole object. One the memory tier takes
/// is copied as it goes to the client and stored once every byte its
/// `Content-Length` announced has passed, as a kept part is (`part.rs`); a larger one
/// is fetched again in the background and stored (`range_fill = "whole"`), as a 206's
/// whole object is.
async fn keep_whole_answer(
    engine: &Arc<Engine>,
    key: CacheKey,
    ticket: Ticket,
    parts: &request::Parts,
    target: &Target,
    txn: &mut Option<ModTxn>,
    mut served: Served,
) -> Served {
    let request = whole_object_request(parts);
    let now = SystemTime::now();
    let options = engine.policy_options(target.targeted, key.url());
    let (head, body) =
        std::mem::replace(&mut served.response, Response::new(ProxyBody::empty())).into_parts();
    let policy = StoragePolicy::with_options(&request, &head, now, &options);
    let overrides = super::overrides::of(txn.as_ref());
    let policy = super::overrides::policy(overrides, policy, now);
    let length = crate::headers::content_length(&head.headers);
    let storable = policy.is_worth_storing(now);
    match length {
        Some(n) if storable && n <= engine.cache.memory_object_limit() => {}
        Some(n) if storable => {
            fill_whole(engine, &key, parts, target, txn, &head.headers, n).await;
            served.response = Response::from_parts(head, body);
            return served;
        }
        _ => {
            served.response = Response::from_parts(head, body);
            return served;
        }
    }
    let expected = length.unwrap_or(0) as usize;
    let object = CachedObject::new(StatusCode::OK, &head.headers, Bytes::new(), policy);
    let mut object = super::overrides::tagged(overrides, object);
    let cache = engine.cache.clone();
    let body = keep_as_it_passes(engine, body, expected, move |body| {
        object.body = weir_cache::Body::Memory(body);
        cache.store(&key, &request, object, ticket);
    });
    served.response = Response::from_parts(head, body);
    served.cache_status = HeaderValue::from_static("weir; fwd=bypass; stored");
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in fields {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_a_lone_unconditional_range_from_the_first_byte() {
        for asked in ["bytes=0-", "Bytes = 0- ", "BYTES=0-"] {
            assert!(asks_for_everything(&with(&[("range", asked)])), "{asked}");
        }
        for asked in [
            "bytes=0-99",
            "bytes=1-",
            "bytes=-5",
            "bytes=0-,5-",
            "items=0-",
            "bytes",
        ] {
            assert!(!asks_for_everything(&with(&[("range", asked)])), "{asked}");
        }
        assert!(!asks_for_everything(&with(&[])));
        let two = with(&[("range", "bytes=0-"), ("range", "bytes=0-")]);
        assert!(!asks_for_everything(&two));
        let conditional = with(&[("range", "bytes=0-"), ("if-range", "\"v1\"")]);
        assert!(!asks_for_everything(&conditional));
    }
}
