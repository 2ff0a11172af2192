//! Errors the proxy answers itself: a status and a short plain-text reason. Above the
//! response body (an error is answered with one); below everything that fails a
//! transaction.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::{ClientBodyTimeout, ProxyBody};
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

/// The `Cache-Status` detail of a failure caused by a module.
pub(crate) const MODULE_ERROR: &str = "module-error";
/// The `Cache-Status` detail of a miss refused by `only-if-cached`.
pub(crate) const ONLY_IF_CACHED: &str = "only-if-cached";

/// The client's request body could not be read: 408 when the client paused too long
/// (`[timeouts] client_body_idle`), 400 otherwise. The connection is closed either way:
/// the rest of the body is still on it.
pub(crate) fn client_body_error(e: &(dyn std::error::Error + 'static)) -> ProxyError {
    let timed_out =
        std::iter::successors(Some(e), |e| e.source()).any(|e| e.is::<ClientBodyTimeout>());
    if timed_out {
        ProxyError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorKind::ClientTimeout,
            format!("cannot read the request body: {e}"),
        )
        .closing()
    } else {
        ProxyError::bad_request(format!("cannot read the request body: {e}")).closing()
    }
}

pub(crate) fn body_too_large(max: u64) -> ProxyError {
    ProxyError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::BodyTooLarge,
        format!("request body is larger than {max} bytes"),
    )
    .closing()
}
