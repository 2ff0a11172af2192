//! `/admin/cache`: one URL's stored object. Query it (GET), inject one (PUT), delete
//! it (DELETE), read its body (`/admin/cache/body`), validate it with the origin
//! (`/admin/cache/validate`), set when it expires (`/admin/cache/expiry`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::json;
use weir_api::{BodyReader, ContentError, ContentManager};

use super::json::{self, content_error, error, not_allowed, param, reply};
use super::response::AdminBody;
use crate::content::EngineContent;

/// `/admin/cache?url=…`
pub(super) async fn object(content: &EngineContent, req: Request<Incoming>) -> Response<AdminBody> {
    let url = match param(req.uri(), "url") {
        Ok(u) => u,
        Err(r) => return *r,
    };
    match *req.method() {
        Method::GET => match content.query(&url) {
            Ok(info) => reply(StatusCode::OK, json::info(&info)),
            Err(e) => content_error(&e),
        },
        Method::DELETE => match content.purge_url(&url) {
            Ok(0) => content_error(&ContentError::NotFound),
            Ok(n) => reply(StatusCode::OK, json!({ "url": url, "purged": n })),
            Err(e) => content_error(&e),
        },
        Method::PUT => inject(content, &url, req).await,
        _ => not_allowed("GET, PUT, DELETE"),
    }
}

/// `GET /admin/cache/body?url=…`: the stored body, streamed, with its Content-Type.
pub(super) async fn body(content: &EngineContent, req: Request<Incoming>) -> Response<AdminBody> {
    if req.method() != Method::GET {
        return not_allowed("GET");
    }
    let url = match param(req.uri(), "url") {
        Ok(u) => u,
        Err(r) => return *r,
    };
    let stored = match content.read(&url) {
        Ok(s) => s,
        Err(e) => return content_error(&e),
    };
    let stream = futures_util::stream::unfold(stored.body, |mut reader| async move {
        let chunk = reader.next_chunk().await?;
        Some((Ok(hyper::body::Frame::data(chunk)), reader))
    });
    let mut response = Response::new(http_body_util::StreamBody::new(stream).boxed_unsync());
    let headers = response.headers_mut();
    if let Some(ct) = stored.info.headers.get(header::CONTENT_TYPE) {
        headers.insert(header::CONTENT_TYPE, ct.clone());
    }
    headers.insert(header::CONTENT_LENGTH, stored.info.size.into());
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// `POST /admin/cache/validate?url=…`: a conditional request to the origin now.
pub(super) async fn validate(
    content: &EngineContent,
    req: Request<Incoming>,
) -> Response<AdminBody> {
    if req.method() != Method::POST {
        return not_allowed("POST");
    }
    let url = match param(req.uri(), "url") {
        Ok(u) => u,
        Err(r) => return *r,
    };
    match content.validate(&url).await {
        Ok(info) => reply(StatusCode::OK, json::info(&info)),
        Err(e) => content_error(&e),
    }
}

/// The body of `/admin/cache/expiry`: exactly one of the two.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expiry {
    /// Fresh for this many seconds from now (0: stale at once).
    ttl: Option<f64>,
    /// Fresh until then: an HTTP date, or seconds since the Unix epoch.
    expires: Option<serde_json::Value>,
}

/// `POST /admin/cache/expiry?url=…` with `{"ttl": s}` or `{"expires": t}`.
pub(super) async fn expiry(content: &EngineContent, req: Request<Incoming>) -> Response<AdminBody> {
    if req.method() != Method::POST {
        return not_allowed("POST");
    }
    let url = match param(req.uri(), "url") {
        Ok(u) => u,
        Err(r) => return *r,
    };
    let expiry: Expiry = match json::body(req.into_body()).await {
        Ok(e) => e,
        Err(r) => return *r,
    };
    let ttl = match (expiry.ttl, expiry.expires) {
        (Some(s), None) if s.is_finite() && (0.0..1e10).contains(&s) => Duration::from_secs_f64(s),
        (None, Some(at)) => match instant(&at) {
            Some(at) => at.duration_since(SystemTime::now()).unwrap_or_default(),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "`expires` is an HTTP date or seconds since the Unix epoch",
                )
            }
        },
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "give either `ttl` (seconds, 0 or more) or `expires`",
            )
        }
    };
    if let Err(e) = content.set_expiry(&url, ttl) {
        return content_error(&e);
    }
    match content.query(&url) {
        Ok(info) => reply(StatusCode::OK, json::info(&info)),
        Err(e) => content_error(&e),
    }
}

fn instant(v: &serde_json::Value) -> Option<SystemTime> {
    match v {
        serde_json::Value::String(s) => httpdate::parse_http_date(s).ok(),
        serde_json::Value::Number(n) => {
            let secs = n
                .as_f64()
                .filter(|s| s.is_finite() && (0.0..1e11).contains(s))?;
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs))
        }
        _ => None,
    }
}

/// Request fields that describe the request, not the representation to store.
const NOT_STORED: [&str; 14] = [
    "host",
    "authorization",
    "user-agent",
    "accept",
    "expect",
    "content-length",
    "cookie",
    "referer",
    "origin",
    "via",
    "forwarded",
    "range",
    "if-match",
    "if-none-match",
];

/// The request's representation headers: what is stored with the body.
fn stored_headers(request: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in request {
        let n = name.as_str();
        let request_only = NOT_STORED.contains(&n)
            || n.starts_with("accept-")
            || n.starts_with("if-")
            || n.starts_with("x-forwarded-")
            || n.starts_with("proxy-");
        if !request_only {
            headers.append(HeaderName::clone(name), value.clone());
        }
    }
    headers
}

/// `PUT /admin/cache?url=…[&status=…]`: the request body (streamed) is stored as the
/// body, its representation headers as the headers; no origin is asked.
async fn inject(content: &EngineContent, url: &str, req: Request<Incoming>) -> Response<AdminBody> {
    let status = match param(req.uri(), "status") {
        Err(_) => StatusCode::OK,
        Ok(s) => match s
            .parse::<u16>()
            .ok()
            .and_then(|s| StatusCode::from_u16(s).ok())
        {
            Some(s) if (200..600).contains(&s.as_u16()) => s,
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "`status` is a status code such as 200",
                )
            }
        },
    };
    let max = content.max_object();
    if crate::headers::content_length(req.headers()).is_some_and(|n| n > max) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than the largest object stored ({max} bytes)"),
        );
    }
    let (parts, body) = req.into_parts();
    let headers = stored_headers(&parts.headers);
    let failed = Arc::new(AtomicBool::new(false));
    let reader = Box::new(IncomingReader {
        body,
        failed: failed.clone(),
    });
    let complete = move || !failed.load(Ordering::Acquire);
    match content
        .inject_checked(url, None, status, headers, reader, &complete)
        .await
    {
        Ok(info) => reply(StatusCode::OK, json::info(&info)),
        Err(ContentError::NotStorable) => error(
            StatusCode::BAD_REQUEST,
            "not stored: the headers forbid it (no-store, private ...), give it neither \
             freshness nor a validator, or the body is larger than the largest object",
        ),
        Err(ContentError::Origin(e)) => error(StatusCode::BAD_REQUEST, e),
        Err(e) => content_error(&e),
    }
}

/// A request body as the content manager reads it; an error ends it early and is
/// remembered, so that nothing is stored.
struct IncomingReader {
    body: Incoming,
    failed: Arc<AtomicBool>,
}

impl BodyReader for IncomingReader {
    fn next_chunk(&mut self) -> Pin<Box<dyn Future<Output = Option<Bytes>> + Send + '_>> {
        Box::pin(async move {
            loop {
                match self.body.frame().await? {
                    Ok(frame) => match frame.into_data() {
                        Ok(data) if !data.is_empty() => return Some(data),
                        _ => continue,
                    },
                    Err(_) => {
                        self.failed.store(true, Ordering::Release);
                        return None;
                    }
                }
            }
        })
    }
}
