//! What a module's decision becomes for the engine: nothing, its reply, or Weir's
//! error (with `Cache-Status` detail `module-error`); and the framing of a body whose
//! length a module may change. The bottom of `hooks/`: it uses only the error
//! vocabulary and the module chain's verdict.

use http::header::{self, HeaderValue};
use http::StatusCode;
use weir_api::Reply;

use crate::error::{ProxyError, MODULE_ERROR};
use crate::metrics::ErrorKind;
use crate::modules::Hook;

pub(crate) fn failed(module: String) -> ProxyError {
    ProxyError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::ModuleFailed,
        format!("module `{module}` failed while handling this request"),
    )
    .with_detail(MODULE_ERROR)
}

/// A module's reply stays boxed on its way out: the result of every event is then
/// small, which is what a hit pays for.
#[inline]
pub(crate) fn decide(hook: Hook) -> Result<Option<Box<Reply>>, ProxyError> {
    match hook {
        Hook::Continue => Ok(None),
        Hook::Respond(reply) => Ok(Some(reply)),
        Hook::Failed(module) => Err(failed(module)),
    }
}

/// The error when a module fails on a body that was not sent yet.
pub(crate) fn module_failed_in_body() -> ProxyError {
    ProxyError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::ModuleFailed,
        "a module failed while transforming the body",
    )
    .with_detail(MODULE_ERROR)
}

/// After a module changed (or may change) a body's length.
pub(crate) fn fix_framing(headers: &mut http::HeaderMap) {
    headers.remove(header::CONTENT_LENGTH);
    if let Some(etag) = headers.get(header::ETAG) {
        if !etag.as_bytes().starts_with(b"W/") {
            let mut weak = b"W/".to_vec();
            weak.extend_from_slice(etag.as_bytes());
            if let Ok(v) = HeaderValue::from_bytes(&weak) {
                headers.insert(header::ETAG, v);
            }
        }
    }
}
