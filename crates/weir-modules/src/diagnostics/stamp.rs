//! The four headers `add-headers` and `body-copy` add, and their value.
//!
//! Its own file because both modules stamp the same headers the same way; the
//! diagnostics facade above them only declares and re-exports the modules.

use serde::Deserialize;
use weir_api::http::{HeaderName, HeaderValue};
use weir_api::{RequestHead, ResponseHead, SettingsError};

/// Added to the client's request head (request headers event).
const IN_1: HeaderName = HeaderName::from_static("x-weir-in-1");
/// Added to the request sent to the origin (upstream request event).
const IN_2: HeaderName = HeaderName::from_static("x-weir-in-2");
/// Added to the origin's response head, before it is stored (response headers event).
const OUT_1: HeaderName = HeaderName::from_static("x-weir-out-1");
/// Added to every response head sent to the client (deliver headers event).
const OUT_2: HeaderName = HeaderName::from_static("x-weir-out-2");

/// The settings of the modules that add the four headers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StampSettings {
    /// The value of the four headers.
    value: Option<String>,
}

/// The four headers' value, shared by `add-headers` and `body-copy`. The names are
/// static and so is the default value, and a configured value is parsed once at
/// build: adding a header never allocates a name or a value (cloning a
/// [`HeaderValue`] is a reference-count bump at most).
#[derive(Debug, Clone)]
pub(super) struct Stamp {
    value: HeaderValue,
}

impl Stamp {
    /// The stamp a module section configures: `value = "…"`, default `"1"`.
    pub(super) fn from_settings(settings: &weir_api::Settings) -> Result<Stamp, SettingsError> {
        let StampSettings { value } = settings.get()?;
        let value = match value {
            None => HeaderValue::from_static("1"),
            Some(v) => HeaderValue::from_str(&v).map_err(|_| {
                SettingsError::at("value", format!("{v:?} is not a valid header value"))
            })?,
        };
        Ok(Stamp { value })
    }

    pub(super) fn request(&self, request: &mut RequestHead) {
        request.headers.append(IN_1, self.value.clone());
    }

    pub(super) fn upstream(&self, request: &mut RequestHead) {
        request.headers.append(IN_2, self.value.clone());
    }

    pub(super) fn response(&self, response: &mut ResponseHead) {
        response.headers.append(OUT_1, self.value.clone());
    }

    pub(super) fn deliver(&self, response: &mut ResponseHead) {
        response.headers.append(OUT_2, self.value.clone());
    }
}
