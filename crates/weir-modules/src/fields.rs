//! Header fields that several modules read or extend the same way.

use weir_api::http::header::{self, Entry};
use weir_api::http::{HeaderMap, HeaderValue};

/// Whether `Cache-Control` says `no-transform`: on a response (RFC 9111, section
/// 5.2.2.6) no module may change the body; on a request (section 5.2.1.6) the client
/// asks for the body untransformed.
pub fn no_transform(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|d| d.trim().eq_ignore_ascii_case("no-transform"))
}

/// Adds the request field `name` to `Vary`, unless it is there already (in any case)
/// or `Vary` is `*`. One map lookup: this runs on every hit of an adapted response.
pub fn merge_vary(headers: &mut HeaderMap, name: &'static str) {
    let value = HeaderValue::from_static(name);
    match headers.entry(header::VARY) {
        Entry::Vacant(v) => {
            v.insert(value);
        }
        Entry::Occupied(mut o) => {
            let present = o
                .iter()
                .flat_map(|v| v.as_bytes().split(|&b| b == b','))
                .map(<[u8]>::trim_ascii)
                .any(|n| n == b"*" || n.eq_ignore_ascii_case(name.as_bytes()));
            if !present {
                o.append(value);
            }
        }
    }
}
