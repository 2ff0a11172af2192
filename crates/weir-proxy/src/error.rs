//! Errors the proxy answers itself: a status and a short plain-text reason.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::ProxyBody;
use crate::metrics::ErrorKind;

/// An answer the proxy gives instead of an origin's.
#[derive(Debug)]
pub(crate) struct ProxyError {
    pub status: StatusCode,
    pub kind: Option<ErrorKind>,
    pub reason: String,
    /// Close the client connection after answering (the framing can't be trusted).
    pub close: bool,
    /// The `detail` parameter of `Cache-Status`, when the status alone is not enough.
    pub detail: Option<&'static str>,
}

impl ProxyError {
    pub fn new(status: StatusCode, kind: ErrorKind, reason: impl Into<String>) -> Self {
        ProxyError {
            status,
            kind: Some(kind),
            reason: reason.into(),
            close: false,
            detail: None,
        }
    }

    /// With the `detail` of its `Cache-Status` (e.g. `only-if-cached`).
    pub fn with_detail(mut self, detail: &'static str) -> Self {
        self.detail = Some(detail);
        self
    }

    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    pub fn bad_request(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorKind::BadRequest, reason)
    }

    pub fn forbidden(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorKind::Forbidden, reason)
    }

    pub fn bad_gateway(reason: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            ErrorKind::OriginUnreachable,
            reason,
        )
    }

    pub fn gateway_timeout(reason: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::OriginTimeout,
            reason,
        )
    }

    /// The response; `Cache-Status` is added by the caller.
    pub fn into_response(self) -> Response<ProxyBody> {
        let mut text = self.reason;
        text.push('\n');
        let mut resp = Response::new(ProxyBody::full(Bytes::from(text)));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.close {
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}
