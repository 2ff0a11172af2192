//! Calls that modules make to other services ([`weir_api::ContentManager::call`]):
//! one request through the engine's upstream pools, past the cache and every module,
//! its whole response returned, trailers both ways ([`weir_api::Trailers`]). Beside
//! `content.rs`, which answers the call with it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Method, Request, Response};
use weir_api::{ContentError, Trailers, CALL_BODY_LIMIT};

use crate::body::{data_then_trailers, RequestBody};
use crate::engine::Engine;
use crate::upstream::OriginAddr;

/// Sends `request` to the origin its absolute URI names; the whole response.
pub(crate) async fn call(
    engine: &Engine,
    request: Request<Bytes>,
    timeout: Duration,
) -> Result<Response<Bytes>, ContentError> {
    let (mut parts, body) = request.into_parts();
    let bad = || ContentError::BadUrl(parts.uri.to_string());
    let origin = OriginAddr::from_uri(&parts.uri).ok_or_else(bad)?;
    let authority = parts.uri.authority().ok_or_else(bad)?.clone();
    if !parts.headers.contains_key(header::HOST) {
        let value = HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?;
        parts.headers.insert(header::HOST, value);
    }
    // The pools take origin-form requests.
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = path.parse().map_err(|_| bad())?;
    let trailers = parts
        .extensions
        .remove::<Trailers>()
        .filter(|t| !t.0.is_empty());
    if trailers.is_some() && [Method::GET, Method::HEAD, Method::CONNECT].contains(&parts.method) {
        // hyper sends these to an HTTP/1.1 service without a body: refused rather
        // than sent without the trailers.
        return Err(ContentError::Origin(format!(
            "a {} call carries no body, so no trailers",
            parts.method
        )));
    }
    let body = match (trailers, body.is_empty()) {
        (Some(Trailers(trailers)), _) => {
            // hyper sends an HTTP/1.1 body's trailers only when `Trailer` names them.
            if !parts.headers.contains_key(header::TRAILER) {
                let names: Vec<&str> = trailers.keys().map(|n| n.as_str()).collect();
                // Field names joined by commas always make a valid value.
                let value = HeaderValue::from_str(&names.join(", "))
                    .map_err(|e| ContentError::Origin(e.to_string()))?;
                parts.headers.insert(header::TRAILER, value);
            }
            RequestBody::Streamed(data_then_trailers([body], trailers))
        }
        (None, true) => RequestBody::Empty,
        (None, false) => RequestBody::Buffered(Some(body)),
    };
    let exchange = async {
        let response = engine
            .upstream
            .send(&origin, Request::from_parts(parts, body).into(), None)
            .await
            .map_err(|e| ContentError::Origin(format!("{e:?}")))?;
        let (head, mut body) = response.into_parts();
        let mut whole = BytesMut::new();
        while let Some(chunk) = body.next_chunk().await {
            let chunk = chunk.map_err(|e| ContentError::Origin(e.to_string()))?;
            if whole.len() + chunk.len() > CALL_BODY_LIMIT {
                return Err(ContentError::Origin(format!(
                    "the response body is over {CALL_BODY_LIMIT} bytes"
                )));
            }
            whole.extend_from_slice(&chunk);
        }
        let mut response = Response::from_parts(head, whole.freeze());
        if let Some(trailers) = body.take_trailers() {
            response.extensions_mut().insert(Trailers(trailers));
        }
        Ok(response)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(ContentError::Origin(format!(
            "no whole answer within {} ms",
            timeout.as_millis()
        ))),
    }
}
