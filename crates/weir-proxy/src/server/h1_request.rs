//! A request head as Weir's own HTTP/1.1 server reads it: the common request, an
//! HTTP/1.1 request without a body, parsed once into an `http::Request`. Everything
//! else (a body, an upgrade or CONNECT, `Expect`, HTTP/1.0, a head the parser refuses)
//! is left to hyper's server, which already answers all of it (`server/connection.rs`).
//!
//! The head's bytes are frozen once and every field value shares them, as hyper does:
//! one allocation for the head, not one per value.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri, Version};

use crate::headers::{Credentials, MAX_REQUEST_FIELDS};

/// The longest request target hyper's parser takes; a longer one goes to hyper, which
/// refuses it (414, which the framing guard gives Weir's reason).
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// The fields of a head whose places are noted on the stack.
const INLINE_FIELDS: usize = 32;

/// What the bytes at the start of a connection's read buffer are.
// The request is moved out at once, and a box would cost every request an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Parsed {
    /// A whole request head this server serves; its bytes are out of the buffer.
    Request(Head),
    /// The head is not complete yet.
    Partial,
    /// For hyper: the buffer is as it was.
    Hyper,
}

/// A request without a body, and what its head says about the connection.
pub(super) struct Head {
    pub request: Request<()>,
    /// The client did not ask to close the connection after the response.
    pub keep_alive: bool,
    /// The client takes trailer fields (`TE: trailers`).
    pub trailers: bool,
    /// The credentials field, when the parser was asked to set it aside.
    pub credentials: Credentials,
}

/// Parses the request head at the start of `buf`, and takes it out of `buf` when it
/// is one this server serves. `head_limit` is the most bytes a head may take before
/// it goes to hyper, which refuses it (and the framing guard explains why).
/// `set_aside`: the credentials field a module takes (see [`Credentials`]), kept out
/// of the request's fields.
pub(super) fn parse(
    buf: &mut BytesMut,
    head_limit: usize,
    set_aside: Option<&HeaderName>,
) -> Parsed {
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_REQUEST_FIELDS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) if len <= head_limit => len,
        Ok(httparse::Status::Partial) if buf.len() <= head_limit => return Parsed::Partial,
        _ => return Parsed::Hyper,
    };
    if req.version != Some(1) {
        return Parsed::Hyper;
    }
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Parsed::Hyper;
    };
    let method = match method {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        "CONNECT" => return Parsed::Hyper,
        other => match Method::from_bytes(other.as_bytes()) {
            Ok(m) => m,
            Err(_) => return Parsed::Hyper,
        },
    };
    if path.len() > MAX_TARGET {
        return Parsed::Hyper;
    }
    // Offsets into the head, so that it can be frozen and its values shared.
    let base = buf.as_ptr() as usize;
    let target = (path.as_ptr() as usize - base, path.len());
    // On the stack for the usual few fields.
    let mut inline = [(0, 0, 0, 0); INLINE_FIELDS];
    let mut spilled = Vec::new();
    let spans = crate::wire::spans(base, req.headers, &mut inline, &mut spilled);
    let head = buf.split_to(len).freeze();
    match build(&head, method, target, spans, set_aside) {
        Some(parsed) => Parsed::Request(parsed),
        None => {
            // Put back for hyper (rare: a body, an upgrade, an expectation).
            let mut whole = BytesMut::with_capacity(head.len() + buf.len());
            whole.extend_from_slice(&head);
            whole.extend_from_slice(buf);
            *buf = whole;
            Parsed::Hyper
        }
    }
}

/// The request, or `None` when hyper is to serve it.
fn build(
    head: &Bytes,
    method: Method,
    (at, len): (usize, usize),
    spans: &[crate::wire::Span],
    set_aside: Option<&HeaderName>,
) -> Option<Head> {
    let uri = Uri::from_maybe_shared(head.slice(at..at + len)).ok()?;
    // Room for the fields the origin's copy gains (`TE`, `Via`): a copy keeps the
    // index's size, and an index that must grow is made again (about 700
    // instructions of a miss).
    let mut headers = HeaderMap::with_capacity(spans.len() + 2);
    let mut keep_alive = true;
    let mut trailers = false;
    let mut credentials = match set_aside {
        Some(_) => Credentials::SetAside(None),
        None => Credentials::InFields,
    };
    for &(n, nl, v, vl) in spans {
        let name = crate::field_name::field_name(&head[n as usize..(n + nl) as usize]).ok()?;
        let value = crate::wire::checked_value(head.slice(v as usize..(v + vl) as usize));
        match name {
            header::CONTENT_LENGTH if value.as_bytes().trim_ascii() != b"0" => return None,
            header::TRANSFER_ENCODING | header::EXPECT | header::UPGRADE => return None,
            header::CONNECTION => {
                for token in tokens(&value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"upgrade") {
                        return None;
                    }
                }
            }
            header::TE => {
                trailers |= tokens(&value).any(|t| t.eq_ignore_ascii_case(b"trailers"));
            }
            _ if set_aside.is_some_and(|aside| *aside == name) => match &mut credentials {
                // A second line goes to hyper's path, where the whole field is
                // removed from the map: one value set aside and one forwarded would
                // give the origin credentials meant for the proxy.
                Credentials::SetAside(Some(_)) => return None,
                taken => {
                    *taken = Credentials::SetAside(Some(Box::new(value)));
                    continue;
                }
            },
            _ => {}
        }
        headers.append(name, value);
    }
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = headers;
    Some(Head {
        request,
        keep_alive,
        trailers,
        credentials,
    })
}

/// The comma-separated tokens of a field value.
pub(super) fn tokens(value: &HeaderValue) -> impl Iterator<Item = &[u8]> {
    value
        .as_bytes()
        .split(|&b| b == b',')
        .map(|t| t.trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Parsed, BytesMut) {
        let mut buf = BytesMut::from(text);
        (parse(&mut buf, 8192, None), buf)
    }

    #[test]
    fn a_bodiless_request_is_parsed_and_taken_out_of_the_buffer() {
        let (p, rest) = parsed(
            "GET /a?b HTTP/1.1\r\nHost: example.com\r\nX-One: 1\r\nTE: trailers\r\n\r\nGET /next",
        );
        let Parsed::Request(head) = p else {
            panic!("not parsed")
        };
        assert_eq!(head.request.method(), Method::GET);
        assert_eq!(head.request.uri(), "/a?b");
        assert_eq!(head.request.headers()["host"], "example.com");
        assert_eq!(head.request.headers()["x-one"], "1");
        assert!(head.keep_alive && head.trailers);
        assert_eq!(&rest[..], b"GET /next");
    }

    #[test]
    fn an_absolute_target_and_a_close_are_kept() {
        let (p, _) = parsed(
            "HEAD http://example.com/x HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, close\r\n\r\n",
        );
        let Parsed::Request(head) = p else {
            panic!("not parsed")
        };
        assert_eq!(head.request.uri().host(), Some("example.com"));
        assert_eq!(head.request.method(), Method::HEAD);
        assert!(!head.keep_alive && !head.trailers);
    }

    #[test]
    fn what_hyper_serves_is_left_in_the_buffer_as_it_was() {
        for text in [
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "GET / HTTP/1.0\r\nHost: a\r\n\r\n",
            "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
            "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
            "GET /\x01 HTTP/1.1\r\n\r\n",
        ] {
            let (p, rest) = parsed(text);
            assert!(matches!(p, Parsed::Hyper), "{text:?}");
            assert_eq!(&rest[..], text.as_bytes(), "{text:?}");
        }
    }

    #[test]
    fn the_credentials_field_is_set_aside_only_when_asked() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic YTpi\r\nX-After: 1\r\n\r\n";
        let aside = |text: &str, name: &HeaderName| {
            let mut buf = BytesMut::from(text);
            match parse(&mut buf, 8192, Some(name)) {
                Parsed::Request(head) => Some(head),
                _ => None,
            }
        };
        let head = aside(text, &header::AUTHORIZATION).expect("parsed");
        assert!(!head.request.headers().contains_key(header::AUTHORIZATION));
        assert_eq!(head.request.headers()["x-after"], "1");
        assert!(matches!(&head.credentials, Credentials::SetAside(Some(v)) if **v == "Basic YTpi"));
        // Another field's name: in the fields, and none set aside.
        let head = aside(text, &header::PROXY_AUTHORIZATION).expect("parsed");
        assert_eq!(head.request.headers()["authorization"], "Basic YTpi");
        assert!(matches!(head.credentials, Credentials::SetAside(None)));
        // Not asked: in the fields.
        let Parsed::Request(head) = parsed(text).0 else {
            panic!("not parsed")
        };
        assert_eq!(head.request.headers()["authorization"], "Basic YTpi");
        assert!(matches!(head.credentials, Credentials::InFields));
        // Two lines of it: hyper's path, the buffer as it was.
        let two = "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic YTpi\r\nauthorization: Basic Yzpk\r\n\r\n";
        let mut buf = BytesMut::from(two);
        let p = parse(&mut buf, 8192, Some(&header::AUTHORIZATION));
        assert!(matches!(p, Parsed::Hyper));
        assert_eq!(&buf[..], two.as_bytes());
    }

    #[test]
    fn a_head_in_pieces_waits_and_one_over_the_limit_goes_to_hyper() {
        let (p, rest) = parsed("GET / HTTP/1.1\r\nHost: a\r\n");
        assert!(matches!(p, Parsed::Partial));
        assert_eq!(rest.len(), 25);
        let long = format!("GET / HTTP/1.1\r\nX-Long: {}\r\n", "a".repeat(9000));
        assert!(matches!(parsed(&long).0, Parsed::Hyper));
        let empty_body = "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(parsed(empty_body).0, Parsed::Request(_)));
    }
}
