//! JSON answers, JSON request bodies and the `url` query parameter of the admin API.

use std::time::SystemTime;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use weir_api::{ContentError, ObjectInfo};

use super::response::{full, AdminBody};

/// The largest JSON request body read.
const MAX_JSON: usize = 1 << 20;

/// `value` as a JSON answer with `status`.
pub(super) fn reply(status: StatusCode, value: Value) -> Response<AdminBody> {
    let mut text = value.to_string();
    text.push('\n');
    let mut response = full(status, "application/json", Bytes::from(text));
    // The cache's content changes under it: no one should keep an answer.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `{"error": reason}` with `status`.
pub(super) fn error(status: StatusCode, reason: impl Into<String>) -> Response<AdminBody> {
    reply(status, json!({ "error": reason.into() }))
}

/// 405 naming the methods `allow`ed.
pub(super) fn not_allowed(allow: &'static str) -> Response<AdminBody> {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method not allowed; use {allow}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// A content-management failure as an answer.
pub(super) fn content_error(e: &ContentError) -> Response<AdminBody> {
    let status = match e {
        ContentError::BadUrl(_) => StatusCode::BAD_REQUEST,
        ContentError::NotFound => StatusCode::NOT_FOUND,
        ContentError::NotStorable => StatusCode::UNPROCESSABLE_ENTITY,
        ContentError::Origin(_) => StatusCode::BAD_GATEWAY,
    };
    error(status, e.to_string())
}

/// Reads a JSON body of at most 1 MiB into `T`, or the 400 (413) answer.
pub(super) async fn body<T: DeserializeOwned>(
    body: Incoming,
) -> Result<T, Box<Response<AdminBody>>> {
    let limited = http_body_util::Limited::new(body, MAX_JSON);
    let bytes = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(Box::new(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the JSON body is larger than 1 MiB",
            )))
        }
        Err(e) => {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )))
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("invalid JSON body: {e}"),
        ))
    })
}

/// The query parameter `name`, percent-decoded, or the 400 answer.
pub(super) fn param(uri: &Uri, name: &str) -> Result<String, Box<Response<AdminBody>>> {
    let missing = || {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("missing the `{name}` query parameter (percent-encoded)"),
        ))
    };
    let raw = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .ok_or_else(missing)?;
    let decoded = percent_decode(raw).ok_or_else(|| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("the `{name}` query parameter is not valid percent-encoded UTF-8"),
        ))
    })?;
    if decoded.is_empty() {
        return Err(missing());
    }
    Ok(decoded)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What the cache holds for a URL, as the admin API shows it.
pub(super) fn info(info: &ObjectInfo) -> Value {
    let headers: Vec<[String; 2]> = info
        .headers
        .iter()
        .map(|(k, v)| {
            [
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            ]
        })
        .collect();
    let fresh = !info.time_to_live.is_zero();
    let expires = httpdate::fmt_http_date(SystemTime::now() + info.time_to_live);
    json!({
        "url": info.url,
        "status": info.status.as_u16(),
        "headers": headers,
        "size": info.size,
        "age": info.age.as_secs(),
        "freshness": if fresh { "fresh" } else { "stale" },
        "ttl": info.time_to_live.as_secs(),
        "expires": expires,
        "variants": info.variants,
        "tags": info.tags,
        "groups": info.groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_percent_decoded() {
        let uri: Uri = "/admin/cache?x=1&url=http%3A%2F%2Fh%2Fa%3Fb%3D1%26c&y"
            .parse()
            .unwrap();
        assert_eq!(param(&uri, "url").unwrap(), "http://h/a?b=1&c");
        let uri: Uri = "/admin/cache?url=http://h/a+b".parse().unwrap();
        assert_eq!(param(&uri, "url").unwrap(), "http://h/a+b");
        for bad in [
            "/admin/cache",
            "/admin/cache?url=",
            "/admin/cache?url=%zz",
            "/admin/cache?urls=x",
        ] {
            let uri: Uri = bad.parse().unwrap();
            assert_eq!(
                param(&uri, "url").unwrap_err().status(),
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
    }
}
