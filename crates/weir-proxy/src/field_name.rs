//! A field name read off the wire, for both HTTP/1.1 parsers (Weir's server and its
//! origin client). `HeaderName::from_bytes` lowercases every name into a scratch
//! buffer and looks it up (about 120 instructions); the names nearly every request and
//! response carry come spelt the same way from nearly every client and server, either
//! as the standards write them (`Content-Type`) or in lowercase. Those spellings are
//! recognised by their bytes; any other goes the long way, with the same result.

use http::header::{self, HeaderName, InvalidHeaderName};

/// The name `raw` spells, as `HeaderName::from_bytes` reads it.
pub(crate) fn field_name(raw: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
    // By length first: a match on byte strings alone tries its arms one by one (a
    // comparison each), so a name that is none of them would be tried against all.
    let known = match raw.len() {
        2 => match raw {
            b"TE" | b"te" => Some(header::TE),
            _ => None,
        },
        3 => match raw {
            b"Age" | b"age" => Some(header::AGE),
            b"Via" | b"via" => Some(header::VIA),
            _ => None,
        },
        4 => match raw {
            b"Host" | b"host" => Some(header::HOST),
            b"Date" | b"date" => Some(header::DATE),
            b"ETag" | b"Etag" | b"etag" => Some(header::ETAG),
            b"Vary" | b"vary" => Some(header::VARY),
            _ => None,
        },
        5 => match raw {
            b"Range" | b"range" => Some(header::RANGE),
            _ => None,
        },
        6 => match raw {
            b"Accept" | b"accept" => Some(header::ACCEPT),
            b"Cookie" | b"cookie" => Some(header::COOKIE),
            b"Server" | b"server" => Some(header::SERVER),
            b"Pragma" | b"pragma" => Some(header::PRAGMA),
            _ => None,
        },
        7 => match raw {
            b"Expires" | b"expires" => Some(header::EXPIRES),
            b"Referer" | b"referer" => Some(header::REFERER),
            _ => None,
        },
        8 => match raw {
            b"Location" | b"location" => Some(header::LOCATION),
            _ => None,
        },
        10 => match raw {
            b"User-Agent" | b"user-agent" => Some(header::USER_AGENT),
            b"Connection" | b"connection" => Some(header::CONNECTION),
            b"Set-Cookie" | b"set-cookie" => Some(header::SET_COOKIE),
            _ => None,
        },
        12 => match raw {
            b"Content-Type" | b"content-type" => Some(header::CONTENT_TYPE),
            _ => None,
        },
        13 => match raw {
            b"Cache-Control" | b"cache-control" => Some(header::CACHE_CONTROL),
            b"Last-Modified" | b"last-modified" => Some(header::LAST_MODIFIED),
            b"Accept-Ranges" | b"accept-ranges" => Some(header::ACCEPT_RANGES),
            b"If-None-Match" | b"if-none-match" => Some(header::IF_NONE_MATCH),
            b"Authorization" | b"authorization" => Some(header::AUTHORIZATION),
            _ => None,
        },
        14 => match raw {
            b"Content-Length" | b"content-length" => Some(header::CONTENT_LENGTH),
            _ => None,
        },
        15 => match raw {
            b"Accept-Encoding" | b"accept-encoding" => Some(header::ACCEPT_ENCODING),
            b"Accept-Language" | b"accept-language" => Some(header::ACCEPT_LANGUAGE),
            _ => None,
        },
        16 => match raw {
            b"Content-Encoding" | b"content-encoding" => Some(header::CONTENT_ENCODING),
            _ => None,
        },
        17 => match raw {
            b"Transfer-Encoding" | b"transfer-encoding" => Some(header::TRANSFER_ENCODING),
            b"If-Modified-Since" | b"if-modified-since" => Some(header::IF_MODIFIED_SINCE),
            _ => None,
        },
        19 => match raw {
            b"Proxy-Authorization" | b"proxy-authorization" => Some(header::PROXY_AUTHORIZATION),
            _ => None,
        },
        _ => None,
    };
    match known {
        Some(name) => Ok(name),
        None => HeaderName::from_bytes(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling the short way knows, and a few it does not.
    const SPELLINGS: &[&str] = &[
        "TE",
        "Age",
        "Via",
        "Host",
        "Date",
        "ETag",
        "Etag",
        "Vary",
        "Range",
        "Accept",
        "Cookie",
        "Server",
        "Pragma",
        "Expires",
        "Referer",
        "Location",
        "User-Agent",
        "Connection",
        "Set-Cookie",
        "Content-Type",
        "Cache-Control",
        "Last-Modified",
        "Accept-Ranges",
        "If-None-Match",
        "Authorization",
        "Content-Length",
        "Accept-Encoding",
        "Accept-Language",
        "Content-Encoding",
        "Transfer-Encoding",
        "If-Modified-Since",
        "Proxy-Authorization",
        "X-Custom",
        "HOST",
        "hOsT",
        "Content-type",
        "Cache-Status",
        "x",
        "Keep-Alive",
        "Upgrade-Insecure-Requests",
    ];

    #[test]
    fn every_spelling_reads_as_the_long_way_reads_it() {
        for spelt in SPELLINGS {
            for raw in [spelt.to_string(), spelt.to_ascii_lowercase()] {
                let long = HeaderName::from_bytes(raw.as_bytes()).unwrap();
                assert_eq!(field_name(raw.as_bytes()).unwrap(), long, "{raw}");
            }
        }
        for bad in [&b""[..], b"Host ", b"Con tent", b"a:b", b"\xff"] {
            assert!(field_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_known_spelling_is_the_standard_name_not_a_custom_one() {
        // Standard names are compared by their tag: one made from custom bytes would
        // not equal `header::HOST` in a `match`.
        assert!(matches!(field_name(b"Host").unwrap(), header::HOST));
        assert!(matches!(
            field_name(b"content-length").unwrap(),
            header::CONTENT_LENGTH
        ));
    }
}
