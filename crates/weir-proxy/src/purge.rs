//! The PURGE method on client listeners (as Squid and Varnish take it): removes what is
//! stored for the request's URL, all variants included, or the cache groups its
//! `Cache-Group-Invalidation` field names. Never forwarded to the origin.
//! Also: fetches in flight stop taking new readers when an invalidation applies to them.

use std::sync::Arc;

use http::header::HeaderValue;
use http::{HeaderMap, Method, StatusCode};
use weir_cache::groups::{group_names, CACHE_GROUP_INVALIDATION};
use weir_cache::{Cache, Coalescer, Invalidation};

use crate::cluster::ClusterLink;
use crate::conn::ConnInfo;
use crate::engine::Engine;
use crate::error::ProxyError;
use crate::flight::FlightHead;
use crate::metrics::CacheOutcome;
use crate::served::Served;
use crate::target::Target;

/// Whether `method` is PURGE (methods are case-sensitive, RFC 9110 §9.1).
pub(crate) fn is_purge(method: &Method) -> bool {
    method.as_str() == "PURGE"
}

/// Answers a PURGE: 403 outside `[cache] purge_from`, 200 when something was removed,
/// 404 when nothing was stored. With a `Cache-Group-Invalidation` field, it removes
/// those cache groups of the URL's origin instead of the URL (400 when the field names
/// no group). In a cluster it is answered once every live member has applied it
/// (504 when they have not within `[cluster] purge_ack_wait`).
pub(crate) async fn purge(
    engine: &Engine,
    conn: &ConnInfo,
    target: &Target,
    request: &HeaderMap,
) -> Result<Served, ProxyError> {
    let ip = conn.client.ip().to_canonical();
    if !conn.listener.purge_from.iter().any(|n| n.contains(&ip)) {
        return Err(ProxyError::forbidden(format!(
            "PURGE is not allowed from {ip} (see [cache] purge_from)"
        )));
    }
    let key = crate::cached::cache_key(target);
    let (removed, what) = if request.contains_key(CACHE_GROUP_INVALIDATION) {
        let names = group_names(request, &CACHE_GROUP_INVALIDATION);
        if names.is_empty() {
            return Err(ProxyError::bad_request(
                "Cache-Group-Invalidation must be a list of quoted strings, e.g. \"a\", \"b\"",
            ));
        }
        let origin = crate::cached::origin_of(target);
        let what = format!("group(s) {} of {origin}", names.join(", "));
        let invalidation = Invalidation::Groups { origin, names };
        (engine.cache.purge(invalidation), what)
    } else {
        (engine.cache.invalidate(&key), key.url().to_string())
    };
    let (mut status, mut reason) = match removed {
        0 => (StatusCode::NOT_FOUND, format!("nothing stored for {what}")),
        n => (StatusCode::OK, format!("purged {n} object(s) of {what}")),
    };
    let mut ack = None;
    if let Some(cluster) = &engine.cluster {
        match cluster.cluster.barrier().await {
            Ok(a) => {
                reason.push_str(&format!(
                    " here; applied by all {} member(s) at revision {}",
                    a.members, a.revision
                ));
                ack = HeaderValue::from_str(&format!(
                    "revision={}; members={}; ms={:.1}",
                    a.revision,
                    a.members,
                    a.latency.as_secs_f64() * 1000.0
                ))
                .ok();
            }
            Err(e) => {
                status = StatusCode::GATEWAY_TIMEOUT;
                reason = format!(
                    "{reason} here, but the cluster did not acknowledge it: {}",
                    e.reason
                );
            }
        }
    }
    let answer = ProxyError {
        status,
        kind: None,
        reason,
        close: false,
        detail: None,
    };
    let mut response = answer.into_response();
    if let Some(ack) = ack {
        response.headers_mut().insert(CLUSTER_ACK, ack);
    }
    Ok(Served {
        response,
        outcome: CacheOutcome::Bypass,
        cache_status: HeaderValue::from_static("weir; detail=purge"),
        upstream: None,
        origin_body: false,
    })
}

/// The field of a PURGE's answer in a cluster: the revision of the invalidation, how
/// many members acknowledged it and how long that took.
const CLUSTER_ACK: http::HeaderName = http::HeaderName::from_static("weir-cluster-ack");

/// Makes every invalidation of `cache` detach the fetches in flight it applies to, so
/// that a request arriving after it starts a fetch of its own instead of being served
/// what was fetched before. A tag's fetches are not known until their headers are
/// stored, so a ban by tag detaches every fetch in flight (a group's, every fetch of
/// its origin).
///
/// In a cluster, every invalidation made here also goes into the cluster's log (those
/// applied from the log do not go back).
pub(crate) fn detach_flights_on_invalidation(
    cache: &Cache,
    flights: &Arc<Coalescer<FlightHead>>,
    cluster: Option<Arc<ClusterLink>>,
) {
    let flights = Arc::downgrade(flights);
    cache.on_invalidate(Box::new(move |what| {
        if let Some(flights) = flights.upgrade() {
            flights.detach(|key| what.may_match_url(key.url()));
        }
        if let Some(cluster) = &cluster {
            cluster.publish(what);
        }
    }));
}
