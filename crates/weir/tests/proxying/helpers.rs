//! What the proxying tests share: absolute-form requests and `Via` values.

use crate::common::*;

/// An absolute-form request for `path` on `origin`, for the forward listener.
pub fn absolute(method: &str, origin: &TestOrigin, path: &str, extra: &str) -> Vec<u8> {
    format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
        origin.url(path),
        origin.addr()
    )
    .into_bytes()
}

pub fn via_values(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}
