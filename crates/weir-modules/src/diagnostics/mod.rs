//! Diagnostic modules: they do no useful work and exist to measure what the module
//! API itself costs (see the [crate documentation](crate) for the ladder they form).

mod add_headers;
mod body_copy;
mod empty;

pub use add_headers::{AddHeaders, AddHeadersFactory};
pub use body_copy::{BodyCopy, BodyCopyFactory};
pub use empty::{Empty, EmptyFactory};

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
struct Stamp {
    value: HeaderValue,
}

impl Stamp {
    /// The stamp a module section configures: `value = "…"`, default `"1"`.
    fn from_settings(settings: &weir_api::Settings) -> Result<Stamp, SettingsError> {
        let StampSettings { value } = settings.get()?;
        let value = match value {
            None => HeaderValue::from_static("1"),
            Some(v) => HeaderValue::from_str(&v).map_err(|_| {
                SettingsError::at("value", format!("{v:?} is not a valid header value"))
            })?,
        };
        Ok(Stamp { value })
    }

    fn request(&self, request: &mut RequestHead) {
        request.headers.append(IN_1, self.value.clone());
    }

    fn upstream(&self, request: &mut RequestHead) {
        request.headers.append(IN_2, self.value.clone());
    }

    fn response(&self, response: &mut ResponseHead) {
        response.headers.append(OUT_1, self.value.clone());
    }

    fn deliver(&self, response: &mut ResponseHead) {
        response.headers.append(OUT_2, self.value.clone());
    }
}

/// What the tests of the diagnostic modules share.
#[cfg(test)]
mod test_support {
    use weir_api::{engine, RequestHead, ResponseHead, Txn};

    pub fn txn() -> Txn {
        engine::new_txn("127.0.0.1:4000".parse().unwrap(), 1)
    }

    pub fn request() -> RequestHead {
        weir_api::http::Request::new(()).into_parts().0
    }

    pub fn response() -> ResponseHead {
        weir_api::http::Response::new(()).into_parts().0
    }
}
