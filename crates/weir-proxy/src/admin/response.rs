//! How the admin listener builds its responses: the body type every endpoint answers
//! with, and whole bodies with a content type and `no-store`. Below every endpoint file,
//! so that they share these without reaching up to `mod.rs`.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

/// What the admin listener answers with: whole bodies, or a stored body streamed.
pub(crate) type AdminBody = UnsyncBoxBody<Bytes, Infallible>;

/// A whole body with `content_type`, as the admin API answers.
pub(super) fn full(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<AdminBody> {
    reply(status, content_type, body).map(|b| b.boxed_unsync())
}

pub(super) fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    reply(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(body.as_bytes()),
    )
}

pub(super) fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    // Scrapes and probes must always see the live values.
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}
