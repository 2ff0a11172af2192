//! A range request for every byte, `Range: bytes=0-`: what a media player or a
//! download manager sends first, to learn whether ranges are served. Forwarded with
//! its `Range` as other range misses are, the origin sends the whole body as a 206,
//! and the background fetch that fills the cache sends it all again. Such a request
//! takes the cache path as a plain GET instead (filled once, coalesced, a hit once
//! stored), and a 200 of known length is answered as the 206 of all its bytes, as
//! nginx and Varnish answer it. Above `range.rs`, whose `Content-Range` it writes.

use http::header::{self, HeaderMap};
use http::StatusCode;

use super::range::content_range;
use crate::served::Served;

/// Whether the request's only `Range` asks for every byte (`bytes=0-`) and nothing
/// makes it conditional (`If-Range`): it may then be served as a plain GET.
pub(crate) fn asks_for_everything(headers: &HeaderMap) -> bool {
    let mut ranges = headers.get_all(header::RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        return false;
    };
    if headers.contains_key(header::IF_RANGE) {
        return false;
    }
    let Some((unit, set)) = range.to_str().ok().and_then(|r| r.split_once('=')) else {
        return false;
    };
    unit.trim().eq_ignore_ascii_case("bytes") && set.trim() == "0-"
}

/// The answer to a request for every byte: a 200 whose length is known becomes the
/// 206 of all its bytes; anything else (a 304, an error, a body of unknown length)
/// is left as it is, which a client that asked for a range accepts (RFC 9110 §14.2).
pub(crate) fn as_all_bytes(mut served: Served) -> Served {
    let response = &mut served.response;
    if response.status() != StatusCode::OK {
        return served;
    }
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length @ 1..) = length {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        let all = content_range(Some((0, length - 1)), length);
        response.headers_mut().insert(header::CONTENT_RANGE, all);
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in fields {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_a_lone_unconditional_range_from_the_first_byte() {
        for asked in ["bytes=0-", "Bytes = 0- ", "BYTES=0-"] {
            assert!(asks_for_everything(&with(&[("range", asked)])), "{asked}");
        }
        for asked in [
            "bytes=0-99",
            "bytes=1-",
            "bytes=-5",
            "bytes=0-,5-",
            "items=0-",
            "bytes",
        ] {
            assert!(!asks_for_everything(&with(&[("range", asked)])), "{asked}");
        }
        assert!(!asks_for_everything(&with(&[])));
        let two = with(&[("range", "bytes=0-"), ("range", "bytes=0-")]);
        assert!(!asks_for_everything(&two));
        let conditional = with(&[("range", "bytes=0-"), ("if-range", "\"v1\"")]);
        assert!(!asks_for_everything(&conditional));
    }
}
