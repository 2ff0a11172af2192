//! What a transaction answers before it is sent (`Served`): the response, how it was
//! served (the outcome, our `Cache-Status` entry) and from which origin; also the
//! answers made from a module's reply or from Weir's own error. Vocabulary of the
//! layers that answer: the cache path, the tunnel, purge, the transaction and deliver.

use http::header::{self, HeaderValue};
use http::Response;
use weir_api::Reply;

use crate::body::ProxyBody;
use crate::error::{ProxyError, MODULE_ERROR, ONLY_IF_CACHED};
use crate::metrics::{CacheOutcome, Metrics};
use crate::upstream::OriginAddr;

/// The result of a transaction before it is sent.
pub(crate) struct Served {
    pub response: Response<ProxyBody>,
    pub outcome: CacheOutcome,
    pub cache_status: HeaderValue,
    pub upstream: Option<OriginAddr>,
    /// The body comes straight from the origin, so the response-body event applies to
    /// it on its way (on a cache fill it ran on the fetch).
    pub origin_body: bool,
}

impl Served {
    /// A response a module made.
    // Boxed as the hooks return it, so that every event's result stays small.
    #[allow(clippy::boxed_local)]
    pub(crate) fn module_reply(reply: Box<Reply>) -> Served {
        // A module's 4xx is a refusal (access rules, limits): logged TCP_DENIED and
        // counted as denied, as the engine's own refusals are.
        let outcome = if reply.status.is_client_error() {
            CacheOutcome::Denied
        } else {
            CacheOutcome::Bypass
        };
        Served {
            response: reply_response(*reply),
            outcome,
            cache_status: HeaderValue::from_static("weir; detail=module"),
            upstream: None,
            origin_body: false,
        }
    }
}

/// The response a module made.
pub(crate) fn reply_response(reply: Reply) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(reply.body));
    *response.status_mut() = reply.status;
    *response.headers_mut() = reply.headers;
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

/// Adds our `Cache-Status` entry after those of caches nearer the origin (RFC 9211 §2).
pub(crate) fn set_cache_status(headers: &mut header::HeaderMap, ours: HeaderValue) {
    // One lookup for both cases (every response comes here).
    match headers.entry(CACHE_STATUS) {
        header::Entry::Vacant(e) => {
            e.insert(ours);
        }
        header::Entry::Occupied(mut e) => {
            let mut v = e.get().as_bytes().to_vec();
            v.extend_from_slice(b", ");
            v.extend_from_slice(ours.as_bytes());
            e.insert(HeaderValue::from_bytes(&v).unwrap_or(ours));
        }
    }
}

/// Our `Cache-Status` entry in a cluster: named `weir-<node>` in an answer to a peer
/// (so that the client of the node it reached sees one entry per node, that node's
/// named `weir`), with `cluster=out-of-touch` while this node may have missed
/// invalidations (and so validates everything it serves).
pub(crate) fn cluster_entry(
    engine: &crate::engine::Engine,
    ours: HeaderValue,
    to_peer: bool,
) -> HeaderValue {
    let Some(c) = &engine.cluster else {
        return ours;
    };
    let mut v = Vec::with_capacity(ours.len() + 32);
    match ours.as_bytes().strip_prefix(b"weir") {
        Some(rest) if to_peer => {
            v.extend_from_slice(b"weir-");
            v.extend_from_slice(c.cluster.node().as_bytes());
            v.extend_from_slice(rest);
        }
        _ => v.extend_from_slice(ours.as_bytes()),
    }
    if !c.in_touch() {
        v.extend_from_slice(b"; cluster=out-of-touch");
    }
    HeaderValue::from_bytes(&v).unwrap_or(ours)
}

pub(crate) const CACHE_STATUS: header::HeaderName = header::HeaderName::from_static("cache-status");

/// An error met at delivery: counted, answered, with its `Cache-Status`.
pub(crate) fn refusal(metrics: &Metrics, e: ProxyError) -> Response<ProxyBody> {
    let Served {
        mut response,
        cache_status,
        ..
    } = error_served(metrics, e);
    set_cache_status(response.headers_mut(), cache_status);
    response
}

pub(crate) fn error_served(metrics: &Metrics, e: ProxyError) -> Served {
    if let Some(kind) = e.kind {
        metrics.error(kind);
    }
    // A forwarding loop is refused as a client's error is, though its status is a 5xx.
    let denied = e.status.is_client_error() || e.status == http::StatusCode::LOOP_DETECTED;
    let cache_status = HeaderValue::from_static(match e.detail {
        _ if denied => "weir; detail=refused",
        Some(ONLY_IF_CACHED) => "weir; detail=only-if-cached",
        Some(MODULE_ERROR) => "weir; detail=module-error",
        _ => "weir; fwd=miss; detail=origin-error",
    });
    Served {
        response: e.into_response(),
        outcome: if denied {
            CacheOutcome::Denied
        } else {
            CacheOutcome::Error
        },
        cache_status,
        upstream: None,
        origin_body: false,
    }
}
