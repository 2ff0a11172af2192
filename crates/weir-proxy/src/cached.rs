//! The cache path of a transaction: lookup, coalesced fetch or validation, store.
//! Above forwarding (`forward.rs`), the module calls and the engine's state. What this
//! file and its children share is in the children (`hit.rs`: answering from a stored
//! object; `fill.rs`: starting a fetch, which `fetch.rs` runs), so none looks up here.

use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use weir_cache::groups::{group_names, CACHE_GROUP_INVALIDATION};
use weir_cache::{
    CacheKey, CachedObject, FlightReader, Invalidation, Join, Lookup, RequestFields, Sharing,
    StaleUse,
};

use crate::body::{ProxyBody, RequestBody};
use crate::engine::Engine;
use crate::error::{ProxyError, ONLY_IF_CACHED};
use crate::flight::{FlightHead, FlightOutcome};
use crate::forward::{forward_hooked, logged_origin, upstream_request};
use crate::hooks;
use crate::metrics::CacheOutcome;
use crate::modules::txn::ModTxn;
use crate::served::Served;
use crate::target::Target;
use crate::upstream::OriginAddr;
use weir_api::{CacheLookup, Event};

mod fetch;
mod fetch_outcomes;
mod fill;
mod hit;
mod keep;
pub(crate) mod overrides;
pub(crate) mod part;
mod post;
pub(crate) mod range;
pub(crate) mod range_all;
mod tee;
use fill::{fetch_in_background, start_fetch, Fill};
use hit::{serve_object, HIT};
use post::same_origin_path;
pub(crate) use post::store_post_response;

/// GET and HEAD requests that may be answered from the cache; `asked`: the cache
/// fields of `parts` (found once per request, and handed to [`serve`]).
pub(crate) fn is_cache_candidate(parts: &request::Parts, asked: RequestFields) -> bool {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return false;
    }
    let no_store = asked.cache_control && request_directive(&parts.headers, "no-store");
    !asked.range && !no_store
}

fn request_directive(headers: &HeaderMap, name: &str) -> bool {
    weir_cache::directive(headers, name).is_some()
}

/// A request the cache cannot answer that says `only-if-cached` gets 504 (RFC 9111
/// §5.2.1.7) instead of going to the origin.
pub(crate) fn refuse_if_only_cached(
    headers: &HeaderMap,
    asked: RequestFields,
) -> Result<(), ProxyError> {
    if !asked.cache_control || !request_directive(headers, "only-if-cached") {
        return Ok(());
    }
    Err(ProxyError {
        status: StatusCode::GATEWAY_TIMEOUT,
        kind: None,
        reason: "not in the cache, and the request says only-if-cached".into(),
        close: false,
        detail: None,
    }
    .with_detail(ONLY_IF_CACHED))
}

/// `Cache-Control: no-cache`, or `Pragma: no-cache` without `Cache-Control`.
fn request_no_cache(headers: &HeaderMap, asked: RequestFields) -> bool {
    (asked.cache_control || asked.pragma)
        && weir_cache::freshness::request_directives(headers).no_cache
}

pub(crate) fn cache_key(target: &Target) -> CacheKey {
    CacheKey::for_url(
        "http",
        target.host.to_str().unwrap_or(""),
        target.path_and_query.as_str(),
    )
}

/// The key a request is looked up under: its URL's, with the module variant the
/// transaction's modules chose, if any.
pub(crate) fn key_for(target: &Target, txn: &Option<ModTxn>) -> CacheKey {
    let variant = txn
        .as_ref()
        .and_then(|t| t.txn.cache_overrides().variant.as_deref());
    CacheKey::for_url_variant(
        "http",
        target.host.to_str().unwrap_or(""),
        target.path_and_query.as_str(),
        variant,
    )
}

/// Serves a GET or HEAD through the cache. `nested`: the request already passed through
/// this process on its way here (`via.rs`), so it joins no fetch in flight: the one
/// for its key may be its own first pass's, waiting for this one.
pub(crate) async fn serve(
    engine: &Arc<Engine>,
    parts: request::Parts,
    target: Target,
    txn: &mut Option<ModTxn>,
    asked: RequestFields,
    nested: bool,
) -> Result<Served, ProxyError> {
    let key = key_for(&target, txn);
    // Before the lookup: a stale copy read now must not outlive an invalidation either.
    let ticket = engine.cache.ticket();
    let now = SystemTime::now();
    let mut found = engine.cache.lookup(&key, &parts, now);
    let mut hit = CacheOutcome::Hit;
    if matches!(found, Lookup::Miss) && engine.cache.has_disk() {
        found = engine.cache.lookup_disk(&key, &parts, now).await;
        if matches!(found, Lookup::Fresh(_)) {
            hit = CacheOutcome::DiskHit;
        }
    }
    // A cluster node that may have missed invalidations serves nothing unvalidated.
    let must_revalidate = |object: &CachedObject, now| {
        engine
            .cluster
            .as_ref()
            .is_some_and(|c| c.must_revalidate(object, now))
    };
    let mut revalidate = false;
    if let Lookup::Fresh(object) = &found {
        if must_revalidate(object, now) {
            revalidate = true;
            found = Lookup::Stale(object.clone());
        }
    }
    if txn.as_ref().is_some_and(|t| t.wants(Event::CacheLookup)) {
        let seen = match &found {
            Lookup::Fresh(_) => CacheLookup::Fresh,
            Lookup::Stale(_) => CacheLookup::Stale,
            Lookup::Miss => CacheLookup::Miss,
        };
        if let Some(reply) = hooks::cache_lookup!(engine, txn.as_mut(), seen)? {
            return Ok(Served::module_reply(reply));
        }
    }
    // A copy fresh by its own lifetime that the lookup calls stale: the request asked
    // for a validation (its `no-cache` or `max-age`), not the copy's age.
    let mut validation_asked = false;
    let stale = match found {
        Lookup::Fresh(object) => return Ok(serve_object(&object, &parts, now, hit, HIT)),
        Lookup::Stale(object) => {
            let window = engine.cache.settings().stale_while_revalidate;
            if !revalidate
                && object.may_serve_stale(&parts.headers, now, StaleUse::WhileRevalidate, window)
            {
                let stale = object.clone();
                fetch_in_background(engine, &key, &parts, &target, txn, Some(stale), ticket);
                return Ok(serve_object(
                    &object,
                    &parts,
                    now,
                    CacheOutcome::StaleRevalidating,
                    STALE_WHILE_REVALIDATE,
                ));
            }
            validation_asked = !revalidate && object.policy.is_fresh(now);
            Some(object)
        }
        Lookup::Miss => None,
    };
    // Only a request that cannot be answered from a fresh copy needs this directive.
    refuse_if_only_cached(&parts.headers, asked)?;
    if parts.method == Method::HEAD {
        // HEAD responses are not stored; forward it as it is.
        let req = upstream_request(&parts, &target, RequestBody::Empty, false);
        // Boxed where it is awaited (here and below): its state is several KiB, and
        // inline it would make every request's future that much larger, copied
        // whole when the future is created, on hits too.
        return crate::boxed::in_place(|| {
            forward_hooked(
                engine,
                txn,
                &target,
                req,
                CacheOutcome::Miss,
                HeaderValue::from_static("weir; fwd=miss"),
            )
        })
        .await;
    }
    let recheck = || match engine.cache.lookup(&key, &parts, SystemTime::now()) {
        Lookup::Fresh(o) if !must_revalidate(&o, SystemTime::now()) => Some(o),
        _ => None,
    };
    // A request that says no-cache is answered by a fetch that begins after it
    // (RFC 9111 §5.2.1.4), never by one already in flight.
    let sharing = if nested || !engine.cache.settings().collapse {
        Sharing::Alone
    } else if request_no_cache(&parts.headers, asked) {
        Sharing::After
    } else {
        Sharing::Any
    };
    match engine.flights.join_as(&key, sharing, recheck) {
        Err(object) => Ok(serve_object(&object, &parts, now, CacheOutcome::Hit, HIT)),
        Ok(Join::Leader(flight, reader)) => {
            let fill = Fill {
                key,
                flight,
                stale,
                asked: validation_asked,
                ticket,
            };
            // The fill keeps the request; serving the flight needs only its conditions.
            let conditions = client_conditions(&parts.headers, asked);
            let upstream = logged_origin(engine, &target);
            start_fetch(engine, fill, parts, target, txn, true);
            serve_flight(reader, &conditions, upstream, false).await
        }
        Ok(Join::Follower(mut reader)) => {
            // Another client's fetch serves us only if it is stored (so shared) and
            // is the variant we would have been given.
            let unusable = match reader.head().await.as_deref() {
                Some(FlightOutcome::Response(h)) if !h.shareable => Some("weir; fwd=miss"),
                Some(FlightOutcome::Response(h))
                    if h.vary.as_ref().is_some_and(|(names, leader)| {
                        key.variant(names, &parts.headers) != *leader
                    }) =>
                {
                    Some("weir; fwd=vary-miss")
                }
                _ => None,
            };
            if unusable.is_none() {
                serve_flight(reader, &parts.headers, None, true).await
            } else {
                drop(reader);
                let req = upstream_request(&parts, &target, RequestBody::Empty, false);
                let cache_status = HeaderValue::from_static(unusable.unwrap_or("weir; fwd=miss"));
                crate::boxed::in_place(|| {
                    forward_hooked(engine, txn, &target, req, CacheOutcome::Miss, cache_status)
                })
                .await
            }
        }
    }
}

const STALE_WHILE_REVALIDATE: HeaderValue =
    HeaderValue::from_static("weir; hit; detail=stale-while-revalidate");

/// Answers a client from a flight: its head, then its body as it arrives, or a 304 when
/// `conditions` (the client's request fields, or at least its conditional ones) match
/// it. `upstream`: the origin the leader's access log line names (a follower's names
/// none).
async fn serve_flight(
    mut reader: FlightReader<FlightHead>,
    conditions: &HeaderMap,
    upstream: Option<OriginAddr>,
    follower: bool,
) -> Result<Served, ProxyError> {
    let head = match reader.head().await {
        Some(h) => h,
        None => return Err(ProxyError::bad_gateway("the origin fetch failed")),
    };
    let h = match &*head {
        FlightOutcome::Failed(e) => {
            return Err(ProxyError {
                status: e.status,
                kind: None,
                reason: e.reason.clone(),
                close: false,
                detail: e.detail,
            })
        }
        FlightOutcome::Response(h) => h,
    };
    let (outcome, cache_status) = if follower {
        (
            CacheOutcome::Collapsed,
            HeaderValue::from_static("weir; fwd=miss; collapsed"),
        )
    } else {
        (h.outcome, h.cache_status.clone())
    };
    let served = |response| Served {
        response,
        outcome,
        cache_status,
        upstream,
        origin_body: false,
    };
    if h.status == StatusCode::OK
        && h.shareable
        && client_conditional_matches(h.headers(), conditions)
    {
        let mut r = Response::new(ProxyBody::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = not_modified_from(h.headers());
        return Ok(served(r));
    }
    // The flight's trailers, if the origin sent any, follow its last chunk.
    let mut r = Response::new(ProxyBody::flight(reader, head.clone()));
    *r.status_mut() = h.status;
    *r.headers_mut() = if follower {
        h.follower_headers()
    } else {
        h.leader_headers()
    };
    Ok(served(r))
}

/// The fields of a request that `client_conditional_matches` reads, copied (most
/// requests have none, and the copy then allocates nothing).
fn client_conditions(request: &HeaderMap, asked: RequestFields) -> HeaderMap {
    let mut conditions = HeaderMap::new();
    if !asked.conditions {
        return conditions;
    }
    for name in weir_cache::conditional::CONDITION_FIELDS {
        if let Some(value) = request.get(&name) {
            conditions.insert(name, value.clone());
        }
    }
    conditions
}

fn client_conditional_matches(response: &HeaderMap, request: &HeaderMap) -> bool {
    weir_cache::conditional::not_modified(StatusCode::OK, response, request)
}

fn not_modified_from(response: &HeaderMap) -> HeaderMap {
    weir_cache::conditional::not_modified_headers(response)
}

/// The origin of a target as cache keys begin: `http://authority`.
pub(crate) fn origin_of(target: &Target) -> String {
    let key = CacheKey::for_url("http", target.host.to_str().unwrap_or(""), "/");
    let url = key.url();
    url[..url.len() - 1].to_string()
}

/// After a successful unsafe request, the target URI and the same-origin URIs in
/// `Location` and `Content-Location` are invalidated (RFC 9111 §4.4), and the cache
/// groups of the target's origin that `Cache-Group-Invalidation` names (RFC 9875).
pub(crate) fn invalidate_after_write(engine: &Engine, target: &Target, response: &HeaderMap) {
    engine.cache.invalidate(&cache_key(target));
    let groups = group_names(response, &CACHE_GROUP_INVALIDATION);
    if !groups.is_empty() {
        engine.cache.purge(Invalidation::Groups {
            origin: origin_of(target),
            names: groups,
        });
    }
    let host = target.host.to_str().unwrap_or("");
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(v) = response.get(&name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(path) = same_origin_path(v, host) {
            engine
                .cache
                .invalidate(&CacheKey::for_url("http", host, &path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives() {
        let mut h = HeaderMap::new();
        h.insert(
            "cache-control",
            "max-age=0, Only-If-Cached".parse().unwrap(),
        );
        assert!(request_directive(&h, "only-if-cached"));
        assert!(!request_directive(&h, "no-store"));
    }
}
