//! A POST response that answers later GETs of its target (RFC 9110 §9.3.3, RFC 9111
//! §3): one with explicit freshness whose `Content-Location` is the target itself.
//! Stored after the POST invalidated the target (RFC 9111 §4.4), so the invalidation
//! does not remove it. Used by the transaction after forwarding; below it, references
//! to the same origin (`same_origin_path`), which the invalidation reads too.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use weir_api::CacheOverrides;
use weir_cache::{CacheKey, CachedObject, StoragePolicy};

use super::overrides;
use crate::body::{BodySource, ProxyBody};
use crate::engine::Engine;
use crate::headers;
use crate::served::Served;
use crate::target::Target;

/// Stores the response to a POST under its target's key when it may answer a GET,
/// after reading its body (at most the memory tier's largest object, within the fill
/// budget); the client gets the same response either way. Not when modules rewrite
/// the body as it is delivered (`modules_rewrite`): the stored body would differ from
/// what this client got; nor when they asked to skip the cache. Their time to live
/// and tags apply (`overrides`).
pub(crate) async fn store_post_response(
    engine: &Arc<Engine>,
    parts: &request::Parts,
    target: &Target,
    key: CacheKey,
    overrides: Option<&CacheOverrides>,
    modules_rewrite: bool,
    mut served: Served,
) -> Served {
    if parts.method != Method::POST
        || overrides::skipped(overrides)
        || !names_target(served.response.headers(), target)
    {
        return served;
    }
    let options = engine.policy_options(target.targeted, key.url());
    let headers = served.response.headers();
    let limit = engine.cache.memory_object_limit();
    if modules_rewrite
        || !weir_cache::freshness::has_explicit_freshness(headers, &options)
        || headers::content_length(headers).is_some_and(|n| n > limit)
        || headers
            .get_all(header::VARY)
            .iter()
            .any(|v| v.as_bytes().contains(&b'*'))
        || served.response.status() == StatusCode::PARTIAL_CONTENT
    {
        return served;
    }
    let now = SystemTime::now();
    let (head, body) =
        std::mem::replace(&mut served.response, Response::new(ProxyBody::empty())).into_parts();
    let policy = StoragePolicy::with_options(parts, &head, now, &options);
    let policy = overrides::policy(overrides, policy, now);
    if !policy.is_worth_storing(now) {
        served.response = Response::from_parts(head, body);
        return served;
    }
    let (body, whole) = read_up_to(engine, body, limit).await;
    if let Some(whole) = whole {
        let object = CachedObject::new(head.status, &head.headers, whole, policy);
        let object = overrides::tagged(overrides, object);
        // Taken now: the POST's own invalidation of the target came before.
        let ticket = engine.cache.ticket();
        if engine.cache.store(&key, parts, object, ticket) {
            served.cache_status = HeaderValue::from_static("weir; fwd=method; stored");
        }
    }
    served.response = Response::from_parts(head, body);
    served
}

/// Whether the response's `Content-Location` is the request's target.
fn names_target(response: &HeaderMap, target: &Target) -> bool {
    let Some(location) = response
        .get(header::CONTENT_LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let path = target.path_and_query.as_str();
    same_origin_path(location.trim(), target.host.to_str().unwrap_or("")).is_some_and(|p| p == path)
}

/// Reads `body` whole when it is at most `limit` bytes and the fill budget has room:
/// returns the body to send on (the bytes read, then any rest) and the whole body.
async fn read_up_to(
    engine: &Engine,
    mut body: ProxyBody,
    limit: u64,
) -> (ProxyBody, Option<Bytes>) {
    let mut hold = engine.cache.fill_budget().hold();
    let mut held = BytesMut::new();
    let mut trailers = None;
    loop {
        match std::future::poll_fn(|cx| body.poll_chunk_keeping(cx, &mut trailers)).await {
            None => {
                // The client gets the trailers; the stored copy has none (RFC 9111 §3).
                let whole = held.freeze();
                return (ProxyBody::whole(whole.clone(), trailers), Some(whole));
            }
            Some(Ok(data)) => {
                let n = data.len() as u64;
                held.extend_from_slice(&data);
                if held.len() as u64 > limit || !hold.try_add(n) {
                    return (ProxyBody::prefixed(held.freeze(), body), None);
                }
            }
            Some(Err(e)) => {
                // The client sees what came, then the same failure.
                let read = futures_util::stream::iter([Ok(held.freeze()), Err(e)]);
                return (ProxyBody::stream(Box::pin(read)), None);
            }
        }
    }
}

/// The path of `reference` when it names the same origin as `host` (relative
/// references always do).
pub(crate) fn same_origin_path(reference: &str, host: &str) -> Option<String> {
    if reference.starts_with('/') && !reference.starts_with("//") {
        return Some(reference.to_string());
    }
    let uri: http::Uri = reference.parse().ok()?;
    if uri.scheme_str() != Some("http") {
        return None;
    }
    let authority = uri.authority()?.as_str();
    let same = authority.eq_ignore_ascii_case(host)
        || authority
            .trim_end_matches(":80")
            .eq_ignore_ascii_case(host.trim_end_matches(":80"));
    same.then(|| uri.path_and_query().map_or("/", |p| p.as_str()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_references() {
        assert_eq!(same_origin_path("/a?b", "h:8080").as_deref(), Some("/a?b"));
        assert_eq!(
            same_origin_path("http://H:8080/x", "h:8080").as_deref(),
            Some("/x")
        );
        assert_eq!(
            same_origin_path("http://h/x", "h:80").as_deref(),
            Some("/x")
        );
        assert_eq!(same_origin_path("http://other/x", "h"), None);
        assert_eq!(same_origin_path("//other/x", "h"), None);
    }
}
