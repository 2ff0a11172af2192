//! Calls that modules make to other services ([`weir_api::ContentManager::call`]):
//! one request through the engine's upstream pools, past the cache and every module,
//! its whole response returned. Beside `content.rs`, which answers the call with it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Request, Response};
use weir_api::{ContentError, CALL_BODY_LIMIT};

use crate::body::RequestBody;
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
    let body = match body.is_empty() {
        true => RequestBody::Empty,
        false => RequestBody::Buffered(Some(body)),
    };
    let exchange = async {
        let response = engine
            .upstream
            .send(&origin, Request::from_parts(parts, body))
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
        Ok(Response::from_parts(head, whole.freeze()))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(ContentError::Origin(format!(
            "no whole answer within {} ms",
            timeout.as_millis()
        ))),
    }
}
