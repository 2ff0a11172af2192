//! Sending a request to its origin outside the cache, as the transaction and the
//! cache path both do: the request as it goes up (`upstream_request`), the module
//! events around the exchange (`forward_hooked`), the response as it comes back
//! (`forward`), and what an upstream failure becomes (`upstream_error`). Above the
//! module calls and the upstream pools; below the cache path and the transaction.

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{request, Request, Response, StatusCode};
use weir_api::Event;

use crate::body::{ClientBodyTimeout, ProxyBody, RequestBody};
use crate::engine::Engine;
use crate::error::{body_too_large, client_body_error, ProxyError};
use crate::headers;
use crate::hooks::Whole;
use crate::interim::Interim;
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::modules::txn::ModTxn;
use crate::served::Served;
use crate::target::Target;
use crate::upstream::{OriginAddr, OriginRequest, UpstreamBody, UpstreamError};

/// The request to send to the origin: origin-form target, hop-by-hop fields removed,
/// `Via` added, Host set. `strip_conditionals` removes the client's validators when
/// Weir will answer them itself from a full response.
pub(crate) fn upstream_request(
    parts: &request::Parts,
    target: &Target,
    body: RequestBody,
    strip_conditionals: bool,
) -> Request<RequestBody> {
    let path = &target.path_and_query;
    crate::upstream::for_origin(parts, &target.host, path, body, strip_conditionals)
}

/// The origin a transaction went to, for its access log line: a copy is made only when
/// there is an access log.
pub(crate) fn logged_origin(engine: &Engine, target: &Target) -> Option<OriginAddr> {
    engine.log.as_ref().map(|_| target.origin.clone())
}

/// Forwards a request that does not go through the cache, with the upstream-request,
/// request-body, response-headers and whole-response events (the response-body event
/// runs as the body streams).
pub(crate) async fn forward_hooked(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    target: &Target,
    request: Request<RequestBody>,
    outcome: CacheOutcome,
    cache_status: HeaderValue,
) -> Result<Served, ProxyError> {
    let mut request = OriginRequest::from(request);
    if let Some(reply) = crate::hooks::upstream_request(engine, txn.as_mut(), &mut request).await? {
        return Ok(Served::module_reply(reply));
    }
    let (request, slot) = hook_request_body(engine, txn, request.into_request());
    let response = forward(engine, &target.origin, request, target.interim.as_ref()).await;
    if let Some(slot) = slot {
        // Chunks the client sends after the origin answered pass unchanged.
        *txn = slot.lock().await.take();
    }
    let (mut head, mut body) = response?.into_parts();
    if let Some(reply) =
        crate::hooks::response_headers(engine, txn.as_mut(), Event::ResponseHeaders, &mut head)
            .await?
    {
        return Ok(Served::module_reply(reply));
    }
    if let Some(m) = txn.as_mut().filter(|m| m.wants(Event::WholeResponse)) {
        match crate::hooks::whole_response(engine, m, &mut head, &mut body).await? {
            Whole::Body(read) if read.complete => body = ProxyBody::whole(read.data, read.trailers),
            Whole::Body(read) => body = ProxyBody::prefixed(read.data, body),
            Whole::Reply(reply) => return Ok(Served::module_reply(reply)),
            Whole::NotWanted => {}
            Whole::Unreadable(e) => {
                return Err(ProxyError::bad_gateway(format!(
                    "origin {} failed while sending the body: {e}",
                    target.origin
                )))
            }
        }
    }
    Ok(Served {
        response: Response::from_parts(head, body),
        outcome,
        cache_status,
        upstream: logged_origin(engine, target),
        origin_body: true,
    })
}

/// Puts the request-body event on a body going to the origin, when a module wants it.
/// The transaction's module context then waits in the returned slot while the body
/// streams (another task polls it); the caller takes it back when the origin answers.
/// Either way, the request's body declarations are read here and reset for the
/// response.
fn hook_request_body(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    mut request: Request<RequestBody>,
) -> (Request<RequestBody>, Option<crate::hooks::RequestSlot>) {
    use http_body::Body as _;
    let Some(m) = txn.as_mut() else {
        return (request, None);
    };
    let whole = m.txn.wants_whole_body();
    let length_changes = m.txn.body_length_changes();
    weir_api::engine::reset_body_length(&mut m.txn);
    let hooked = m.wants(Event::RequestBody) || m.wants(Event::RequestTrailers);
    if !hooked || request.body().is_end_stream() {
        return (request, None);
    }
    if length_changes {
        request.headers_mut().remove(header::CONTENT_LENGTH);
    }
    let slot = Arc::new(tokio::sync::Mutex::new(txn.take()));
    let (parts, body) = request.into_parts();
    let body = crate::hooks::hook_request_body(engine.clone(), body, slot.clone(), whole);
    (Request::from_parts(parts, body), Some(slot))
}

/// Sends a request to the origin and streams its response back unchanged (apart from
/// hop-by-hop fields and `Via`); the origin's 1xx responses go to `interim`.
pub(crate) async fn forward(
    engine: &Engine,
    origin: &OriginAddr,
    req: Request<RequestBody>,
    interim: Option<&Interim>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let response = engine
        .upstream
        .send(origin, req.into(), interim)
        .await
        .map_err(|e| upstream_error(origin, e, engine.limits.max_request_body.0))?;
    Ok(relayed(response))
}

/// An origin's response as a client is sent it: hop-by-hop fields removed, `Via`
/// added, Weir's own HTTP version, the body streamed from the origin.
pub(crate) fn relayed(response: Response<UpstreamBody>) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    headers::remove_hop_by_hop(&mut parts.headers);
    headers::append_via(&mut parts.headers, parts.version);
    // Via records what the origin spoke; the client gets Weir's own version.
    parts.version = http::Version::HTTP_11;
    Response::from_parts(parts, ProxyBody::upstream(body))
}

pub(crate) fn upstream_error(origin: &OriginAddr, e: UpstreamError, max_body: u64) -> ProxyError {
    match e {
        UpstreamError::Connect(reason) => ProxyError::bad_gateway(reason),
        UpstreamError::Tls(reason) => {
            ProxyError::new(StatusCode::BAD_GATEWAY, ErrorKind::OriginTls, reason)
        }
        UpstreamError::Timeout => {
            ProxyError::gateway_timeout(format!("origin {origin} did not answer in time"))
        }
        UpstreamError::BodyTooLarge => body_too_large(max_body),
        UpstreamError::ClientTimeout(idle) => client_body_error(&ClientBodyTimeout(idle)),
        UpstreamError::Protocol(reason) => ProxyError::new(
            StatusCode::BAD_GATEWAY,
            ErrorKind::OriginProtocol,
            format!("origin {origin} failed: {reason}"),
        ),
    }
}

/// The same request without the validators Weir added for its stored copy.
pub(crate) fn without_validators(req: &mut OriginRequest) -> OriginRequest {
    let head = req.head_mut();
    let mut copy = http::Request::new(RequestBody::Empty);
    *copy.method_mut() = head.method.clone();
    *copy.uri_mut() = head.uri.clone();
    *copy.version_mut() = head.version;
    *copy.headers_mut() = head.headers.clone();
    copy.headers_mut().remove(header::IF_NONE_MATCH);
    copy.headers_mut().remove(header::IF_MODIFIED_SINCE);
    copy.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path_and_query: &'static str) -> Target {
        Target {
            origin: OriginAddr::http("a.example", 80),
            host: HeaderValue::from_static("a.example"),
            path_and_query: http::uri::PathAndQuery::from_static(path_and_query),
            targeted: false,
            interim: None,
        }
    }

    fn sent(client_uri: &str, target: &Target) -> String {
        let (parts, ()) = Request::get(client_uri).body(()).unwrap().into_parts();
        let req = upstream_request(&parts, target, RequestBody::Empty, false);
        req.uri().to_string()
    }

    #[test]
    fn the_origin_gets_the_targets_path_and_query_in_origin_form() {
        // The client's own, as target.rs reads them: origin-form and absolute-form.
        let t = target("/a/b%20c?x=1&y=%2F");
        assert_eq!(sent("/a/b%20c?x=1&y=%2F", &t), "/a/b%20c?x=1&y=%2F");
        assert_eq!(
            sent("http://a.example/a/b%20c?x=1&y=%2F", &t),
            "/a/b%20c?x=1&y=%2F"
        );
        // A target that is not the client's URI's is the one sent.
        assert_eq!(sent("/other?q", &t), "/a/b%20c?x=1&y=%2F");
        assert_eq!(sent("http://a.example", &target("/")), "/");
    }
}
