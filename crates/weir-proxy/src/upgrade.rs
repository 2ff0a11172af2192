//! Requests that ask to switch protocols (`Connection: upgrade` with `Upgrade`, such
//! as a WebSocket handshake): sent to the origin with those fields, which other
//! requests lose as hop-by-hop, on a connection of their own. When the origin answers
//! 101, the client is sent it and the two connections are joined, bytes copied both
//! ways until either side closes, as nginx and HAProxy relay WebSockets; any other
//! answer is relayed as an uncached response. HTTP/1.1 clients only: HTTP/2 has no
//! `Upgrade` (RFC 9113 §8.2.2).

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Request, Response, StatusCode, Version};
use weir_api::Event;

use crate::body::request::RequestBody;
use crate::engine::Engine;
use crate::error::ProxyError;
use crate::forward::{logged_origin, relayed, upstream_error, upstream_request};
use crate::headers;
use crate::hooks;
use crate::metrics::CacheOutcome;
use crate::modules::txn::ModTxn;
use crate::served::Served;
use crate::target::Target;
use crate::upstream::{OriginRequest, UpgradeAnswer};

/// The protocols an HTTP/1.1 request asks to switch to, when it asks: an `Upgrade`
/// field, and `upgrade` among its `Connection` options (RFC 9110 §7.8).
pub(crate) fn asked(parts: &request::Parts) -> Option<HeaderValue> {
    if parts.version != Version::HTTP_11 {
        return None;
    }
    let upgrade = parts.headers.get(header::UPGRADE)?;
    let named = headers::lists(&parts.headers, header::CONNECTION, "upgrade");
    named.then(|| upgrade.clone())
}

/// Sends the request that asked for `protocols` to its origin, and joins the
/// connections if the origin switches. The modules see the request to the origin
/// (`UpstreamRequest`) and its answer (`ResponseHeaders`), as on a pass-through; the
/// switched connection's bytes then go through `TunnelData` when they ask.
pub(crate) async fn serve(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    parts: request::Parts,
    target: Target,
    protocols: HeaderValue,
) -> Result<Served, ProxyError> {
    let mut req = upstream_request(&parts, &target, RequestBody::Empty, false);
    switching(req.headers_mut(), protocols);
    let mut req = OriginRequest::from(req);
    if let Some(reply) = hooks::upstream_request(engine, txn.as_mut(), &mut req).await? {
        return Ok(Served::module_reply(reply));
    }
    let answer = engine
        .upstream
        .upgrade(&target.origin, req)
        .await
        .map_err(|e| upstream_error(&target.origin, e, engine.limits.max_request_body.0))?;
    let upstream = logged_origin(engine, &target);
    let cache_status = HeaderValue::from_static("weir; fwd=bypass; detail=upgrade");
    let (headers, origin) = match answer {
        UpgradeAnswer::Switched(headers, origin) => (headers, origin),
        UpgradeAnswer::Response(response) => {
            let (mut head, body) = relayed(response).into_parts();
            let event = Event::ResponseHeaders;
            if let Some(reply) =
                hooks::response_headers(engine, txn.as_mut(), event, &mut head).await?
            {
                return Ok(Served::module_reply(reply));
            }
            return Ok(Served {
                response: Response::from_parts(head, body),
                outcome: CacheOutcome::Bypass,
                cache_status,
                upstream,
                origin_body: true,
            });
        }
    };
    let mut head = Response::new(()).into_parts().0;
    head.status = StatusCode::SWITCHING_PROTOCOLS;
    head.headers = headers;
    let chosen = head.headers.get(header::UPGRADE).cloned();
    headers::remove_hop_by_hop(&mut head.headers);
    if let Some(chosen) = chosen {
        switching(&mut head.headers, chosen);
    }
    headers::append_via(&mut head.headers, Version::HTTP_11);
    let event = Event::ResponseHeaders;
    if let Some(reply) = hooks::response_headers(engine, txn.as_mut(), event, &mut head).await? {
        // The origin's side of the switched connection closes as it is dropped.
        return Ok(Served::module_reply(reply));
    }
    let req = Request::from_parts(parts, ());
    let body = crate::relay::join(engine, req, origin, "an upgrade");
    Ok(Served {
        response: Response::from_parts(head, body),
        outcome: CacheOutcome::Tunnel,
        cache_status,
        upstream,
        origin_body: false,
    })
}

/// The fields that ask for, or agree to, a switch to `protocols`.
fn switching(headers: &mut HeaderMap, protocols: HeaderValue) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, protocols);
}
