//! Range requests (RFC 9110 §14) answered from a fresh stored copy: one range gets a
//! 206 with the slice, an unsatisfiable one a 416, anything else (several ranges, a
//! syntax Weir does not serve, an `If-Range` that does not match) the whole object.
//! Without a fresh copy the request is forwarded with its `Range`, and the client gets
//! the origin's 206 at once. When that 206 says the whole object is storable and no
//! larger than `[cache] max_object`, Weir then fetches the whole object in the
//! background and stores it, so the next ranges of it are hits (as nginx and Varnish
//! fill their caches from range requests; without the wait of fetching it all first).

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::stream;
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use weir_cache::{CacheKey, CachedObject, Freshness, Lookup, StoragePolicy};

use super::fill::{fetch_in_background, strip_body};
use super::hit::{serve_object, HIT};
use crate::body::ProxyBody;
use crate::engine::Engine;
use crate::metrics::CacheOutcome;
use crate::modules::txn::ModTxn;
use crate::served::Served;
use crate::target::Target;

/// A GET with one `Range` header, which a stored copy may answer.
pub(crate) fn is_range_candidate(parts: &request::Parts) -> bool {
    parts.method == Method::GET
        && parts.headers.get_all(header::RANGE).iter().count() == 1
        && weir_cache::directive(&parts.headers, "no-store").is_none()
        && weir_cache::directive(&parts.headers, "no-cache").is_none()
}

/// The answer from a fresh stored copy, or `None` when there is none.
pub(crate) async fn from_cache(
    engine: &Arc<Engine>,
    parts: &request::Parts,
    key: CacheKey,
) -> Option<Served> {
    let now = SystemTime::now();
    let mut outcome = CacheOutcome::Hit;
    let mut found = engine.cache.lookup(&key, parts, now);
    if matches!(found, Lookup::Miss) && engine.cache.has_disk() {
        found = engine.cache.lookup_disk(&key, parts, now).await;
        outcome = CacheOutcome::DiskHit;
    }
    let Lookup::Fresh(object) = found else {
        return from_parts(engine, parts, &key, now);
    };
    if object.status != StatusCode::OK {
        return None;
    }
    let whole = || Some(serve_object(&object, parts, now, outcome, HIT));
    if object.satisfies_conditional(&parts.headers) {
        return whole();
    }
    if let Some(condition) = parts.headers.get(header::IF_RANGE) {
        if !if_range_holds(condition, &object.headers) {
            return whole();
        }
    }
    let len = object.body.len();
    let range = parts.headers.get(header::RANGE)?;
    let response = match parse(range, len) {
        Spec::Ignore => return whole(),
        Spec::Unsatisfiable => {
            let mut r = Response::new(ProxyBody::empty());
            *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let h = r.headers_mut();
            *h = object.response_headers(now);
            h.insert(header::CONTENT_RANGE, content_range(None, len));
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            r
        }
        Spec::Bytes(first, last) => partial(&object, now, first, last),
    };
    Some(Served {
        response,
        outcome,
        cache_status: HIT,
        upstream: None,
        origin_body: false,
    })
}

/// The answer from the parts kept of the object (see `part.rs`): a range inside one
/// part, or a 416 for one beyond the complete length, while the parts are fresh.
/// `None` for anything else, conditional requests included, which go to the origin.
fn from_parts(
    engine: &Engine,
    parts: &request::Parts,
    key: &CacheKey,
    now: SystemTime,
) -> Option<Served> {
    let set = engine.cache.parts(key)?;
    let conditional = [
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
    ];
    if conditional.iter().any(|c| parts.headers.contains_key(c))
        || !matches!(set.head.freshness(parts, now), Freshness::Fresh)
    {
        return None;
    }
    if let Some(condition) = parts.headers.get(header::IF_RANGE) {
        if !if_range_holds(condition, &set.head.headers) {
            return None;
        }
    }
    let len = set.length();
    let response = match parse(parts.headers.get(header::RANGE)?, len) {
        Spec::Ignore => return None,
        Spec::Unsatisfiable => {
            let mut r = Response::new(ProxyBody::empty());
            *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            *r.headers_mut() = set.head.response_headers(now);
            r.headers_mut()
                .insert(header::CONTENT_RANGE, content_range(None, len));
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            r
        }
        Spec::Bytes(first, last) => {
            let bytes = set.slice(first, last)?;
            let mut r = Response::new(ProxyBody::full(bytes));
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            *r.headers_mut() = set.head.response_headers(now);
            r.headers_mut().insert(
                header::CONTENT_RANGE,
                content_range(Some((first, last)), len),
            );
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(last - first + 1));
            r
        }
    };
    Some(Served {
        response,
        outcome: CacheOutcome::Hit,
        cache_status: HIT,
        upstream: None,
        origin_body: false,
    })
}

/// After the origin answered a range miss with `partial` (a 206): fetches and stores
/// the whole object in the background when the 206's own caching fields say a 200 with
/// them would be stored and its `Content-Range` says the whole fits in
/// `[cache] max_object`, unless `[cache] range_fill = "parts"`. Nothing happens for a module that skips the cache, when a
/// fetch of the object is already under way, or when one stored it meanwhile.
pub(crate) async fn fill_after_partial(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    // `&mut`: a shared reference to the transaction would make this future not `Send`.
    txn: &mut Option<ModTxn>,
    partial: &HeaderMap,
) {
    if let Some(total) = complete_length(partial) {
        fill_whole(engine, key, parts, target, txn, partial, total).await;
    }
}

/// Fetches and stores in the background the whole object of `total` bytes whose
/// fields (a 206's or a 200's) are `fields`, as [`fill_after_partial`] says.
pub(super) async fn fill_whole(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    txn: &mut Option<ModTxn>,
    fields: &HeaderMap,
    total: u64,
) {
    let settings = engine.cache.settings();
    if !settings.range_fill_whole {
        return;
    }
    if total == 0 || total > settings.max_object_bytes {
        return;
    }
    if txn.as_ref().is_some_and(|t| t.txn.cache_overrides().skip) {
        return;
    }
    let Some(WholeObject {
        request: whole,
        now,
        ..
    }) = whole_object(engine, key, parts, target, fields, total)
    else {
        return;
    };
    let ticket = engine.cache.ticket();
    // A fill that ended while this range was forwarded has stored it already.
    let mut found = engine.cache.lookup(key, &whole, now);
    if matches!(found, Lookup::Miss) && engine.cache.has_disk() {
        found = engine.cache.lookup_disk(key, &whole, now).await;
    }
    if matches!(found, Lookup::Fresh(_)) {
        return;
    }
    fetch_in_background(engine, key, &whole, target, &*txn, None, ticket);
}

/// The whole object behind a 206, as the cache would take it.
pub(super) struct WholeObject {
    /// The request for it ([`whole_object_request`]).
    pub request: request::Parts,
    /// A 200's head: the 206's fields, its complete length, no `Content-Range`.
    pub head: http::response::Parts,
    pub policy: StoragePolicy,
    pub now: SystemTime,
}

/// The whole object of `length` bytes behind a 206 with the fields `partial`, with the
/// storage policy a 200 with those fields would get; `None` when that policy would not
/// store it. What the background whole fetch and a kept part both start from.
pub(super) fn whole_object(
    engine: &Engine,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    partial: &HeaderMap,
    length: u64,
) -> Option<WholeObject> {
    let request = whole_object_request(parts);
    let mut head = Response::new(()).into_parts().0;
    head.headers = partial.clone();
    head.headers.remove(header::CONTENT_RANGE);
    head.headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    let now = SystemTime::now();
    let options = engine.policy_options(target.targeted, key.url());
    let policy = StoragePolicy::with_options(&request, &head, now, &options);
    policy.is_worth_storing(now).then_some(WholeObject {
        request,
        head,
        policy,
        now,
    })
}

/// The request for the whole object behind a range miss: the client's, without what
/// only concerned its own exchange. Gone are the range (`Range`, `If-Range`), its
/// preconditions (`If-Match`, `If-None-Match`, `If-Modified-Since`,
/// `If-Unmodified-Since`: one could turn the fetch into a 412 or 304 with nothing to
/// store), its freshness demands (`Cache-Control`, `Pragma`: a range candidate never
/// says `no-store` or `no-cache`, so nothing it forbade gets stored), and the fields
/// of a request body the fetch does not send (`Content-*`: a `Content-Length` without
/// its body would leave the origin waiting).
///
/// Fields that may choose the representation stay: `Accept-*`, `Cookie`,
/// `Authorization`, `User-Agent`, `Origin`, `Referer` and the like. The stored object
/// must be the representation the client just got a part of (a download resumed from
/// the cache mixes the two), and whether it may serve other clients is the origin's to
/// say, through `Vary`, `private` and the rules for `Authorization` (RFC 9111 §3.5),
/// which apply to this fetch as to any miss. Without them an origin could answer with
/// a login page, a 401 or an anonymous variant, stored under the URL the client was
/// served.
pub(super) fn whole_object_request(parts: &request::Parts) -> request::Parts {
    let mut whole = strip_body(parts);
    let exchange_only = [
        header::RANGE,
        header::IF_RANGE,
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
        header::CACHE_CONTROL,
        header::PRAGMA,
    ];
    for name in exchange_only {
        whole.headers.remove(name);
    }
    let content: Vec<_> = whole
        .headers
        .keys()
        .filter(|name| name.as_str().starts_with("content-"))
        .cloned()
        .collect();
    for name in content {
        whole.headers.remove(name);
    }
    whole
}

/// The complete length in a 206's `Content-Range: bytes FIRST-LAST/LENGTH`.
fn complete_length(partial: &HeaderMap) -> Option<u64> {
    let value = partial.get(header::CONTENT_RANGE)?.to_str().ok()?.trim();
    let rest = value.strip_prefix("bytes ")?;
    let (_, length) = rest.split_once('/')?;
    length.trim().parse().ok()
}

/// A 206 with bytes `first..=last` of the object.
fn partial(object: &CachedObject, now: SystemTime, first: u64, last: u64) -> Response<ProxyBody> {
    let len = last - first + 1;
    let reader = object.body.range_reader(first, len);
    let body = stream::unfold(reader, |mut r| async move {
        r.next_chunk()
            .await
            .map(|c| (c.map_err(|e| e.to_string().into()), r))
    });
    let mut r = Response::new(ProxyBody::stream(Box::pin(body)));
    *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    let h = r.headers_mut();
    *h = object.response_headers(now);
    h.insert(
        header::CONTENT_RANGE,
        content_range(Some((first, last)), object.body.len()),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    r
}

pub(super) fn content_range(range: Option<(u64, u64)>, len: u64) -> HeaderValue {
    let text = match range {
        Some((first, last)) => format!("bytes {first}-{last}/{len}"),
        None => format!("bytes */{len}"),
    };
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("bytes */0"))
}

/// What a `Range` header asks of a body of `len` bytes.
#[derive(Debug, PartialEq, Eq)]
enum Spec {
    /// Bytes `first..=last`.
    Bytes(u64, u64),
    /// One range, none of whose bytes exist: 416.
    Unsatisfiable,
    /// Several ranges, another unit, or invalid syntax: the whole body (a server may
    /// ignore `Range`, RFC 9110 §14.2).
    Ignore,
}

fn parse(value: &HeaderValue, len: u64) -> Spec {
    let Some(spec) = value.to_str().ok().map(str::trim).and_then(|v| {
        v.get(..6)
            .filter(|u| u.eq_ignore_ascii_case("bytes="))
            .map(|_| &v[6..])
    }) else {
        return Spec::Ignore;
    };
    if spec.contains(',') {
        return Spec::Ignore;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Spec::Ignore;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (a.trim(), b.trim()) {
        ("", suffix) => match number(suffix) {
            Some(0) => Spec::Unsatisfiable,
            Some(_) if len == 0 => Spec::Unsatisfiable,
            Some(n) => Spec::Bytes(len - n.min(len), len - 1),
            None => Spec::Ignore,
        },
        (first, "") => match number(first) {
            Some(f) if f < len => Spec::Bytes(f, len - 1),
            Some(_) => Spec::Unsatisfiable,
            None => Spec::Ignore,
        },
        (first, last) => match (number(first), number(last)) {
            (Some(f), Some(l)) if f > l => Spec::Ignore,
            (Some(f), Some(_)) if f >= len => Spec::Unsatisfiable,
            (Some(f), Some(l)) => Spec::Bytes(f, l.min(len - 1)),
            _ => Spec::Ignore,
        },
    }
}

/// `If-Range`: a strong entity tag equal to the stored one, or a date equal to the
/// stored `Last-Modified` (RFC 9110 §13.1.5). Anything else means "send it all".
fn if_range_holds(condition: &HeaderValue, stored: &HeaderMap) -> bool {
    let Ok(condition) = condition.to_str().map(str::trim) else {
        return false;
    };
    if condition.starts_with('"') {
        return stored
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|etag| etag.trim() == condition);
    }
    if condition.starts_with("W/") {
        return false;
    }
    let stored = stored
        .get(header::LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .map(httpdate::parse_http_date);
    matches!((stored, httpdate::parse_http_date(condition)), (Some(Ok(a)), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &str, len: u64) -> Spec {
        parse(&HeaderValue::from_str(v).unwrap(), len)
    }

    #[test]
    fn byte_ranges() {
        assert_eq!(p("bytes=0-3", 10), Spec::Bytes(0, 3));
        assert_eq!(p("bytes=5-", 10), Spec::Bytes(5, 9));
        assert_eq!(p("bytes=-4", 10), Spec::Bytes(6, 9));
        assert_eq!(p("bytes=-40", 10), Spec::Bytes(0, 9));
        assert_eq!(p("bytes=8-100", 10), Spec::Bytes(8, 9));
        assert_eq!(p("Bytes= 2-2", 10), Spec::Bytes(2, 2));
        assert_eq!(p("bytes=10-", 10), Spec::Unsatisfiable);
        assert_eq!(p("bytes=12-20", 10), Spec::Unsatisfiable);
        assert_eq!(p("bytes=-0", 10), Spec::Unsatisfiable);
        assert_eq!(p("bytes=0-1,4-5", 10), Spec::Ignore);
        assert_eq!(p("bytes=5-2", 10), Spec::Ignore);
        assert_eq!(p("items=0-1", 10), Spec::Ignore);
        assert_eq!(p("bytes=a-b", 10), Spec::Ignore);
        assert_eq!(p("bytes=+1-2", 10), Spec::Ignore);
    }

    #[test]
    fn if_range() {
        let mut stored = HeaderMap::new();
        stored.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        stored.insert(
            header::LAST_MODIFIED,
            HeaderValue::from_static("Tue, 15 Nov 1994 08:12:31 GMT"),
        );
        let holds = |c: &str| if_range_holds(&HeaderValue::from_str(c).unwrap(), &stored);
        assert!(holds("\"v1\""));
        assert!(!holds("\"v2\""));
        assert!(!holds("W/\"v1\""));
        assert!(holds("Tue, 15 Nov 1994 08:12:31 GMT"));
        assert!(!holds("Wed, 16 Nov 1994 08:12:31 GMT"));
        assert!(!holds("garbage"));
    }
}
