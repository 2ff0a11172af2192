//! Settings that guard cache content: the admin API's token, who may PURGE, and which
//! response headers carry invalidation tags.

use http::HeaderName;
use serde::{Deserialize, Deserializer};

use super::values::string_with;

/// The bearer token of the admin API (`[admin] token`). Its `Debug` form hides it, so
/// that logging a configuration never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(pub String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for AdminToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string_with(d, "a token string", |text| {
            if text.trim().is_empty() {
                return Err("must not be empty; leave `token` out for no token".into());
            }
            if text.chars().any(|c| c.is_control() || c == ' ') {
                return Err("must not contain spaces or control characters".into());
            }
            Ok(AdminToken(text.to_string()))
        })
    }
}

/// Response header names, lowercased; each element is checked where it is written.
/// A header name in the file, such as `"Surrogate-Key"` (stored in lower case).
struct Name(HeaderName);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string_with(d, "a header name such as \"Surrogate-Key\"", |text| {
            HeaderName::from_bytes(text.trim().to_ascii_lowercase().as_bytes())
                .map(Name)
                .map_err(|_| format!("`{text}` is not a header name"))
        })
    }
}

pub(super) fn header_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<HeaderName>, D::Error> {
    let names = Vec::<Name>::deserialize(d)?;
    Ok(names.into_iter().map(|n| n.0).collect())
}

/// One header name, for a key that may be absent (`#[serde(default)]`).
pub(super) fn optional_header_name<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<HeaderName>, D::Error> {
    Ok(Some(Name::deserialize(d)?.0))
}

pub(super) fn default_tag_headers() -> Vec<HeaderName> {
    weir_cache::DEFAULT_TAG_HEADERS
        .iter()
        .map(|n| HeaderName::from_static(n))
        .collect()
}
