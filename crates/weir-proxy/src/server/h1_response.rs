//! A response head as Weir's own HTTP/1.1 server writes it, and how its body is
//! delimited (RFC 9112 §6). The rules are hyper's server's, so that a client sees the
//! same answer whichever of the two served it: a length when the body's is known, else
//! chunked; `content-length: 0` for an empty body where a length may stand; none for
//! `HEAD`, 1xx, 204 and 304; `Date` when the response has none; `connection: close`
//! when the connection ends after this response.

use http::header::{self, HeaderName};
use http::{response, Method, StatusCode};

use crate::wire::field;

use super::h1_request::tokens;

/// What the body is, as far as it is known before it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyHint {
    /// Already at its end.
    Empty,
    Known(u64),
    Unknown,
}

/// How the body goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Coding {
    /// Not at all: there is none, or the response may not have one.
    Nothing,
    Length(u64),
    Chunked,
}

/// What the head decided.
pub(super) struct Written {
    pub coding: Coding,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// The trailer fields the client may be sent (those the `Trailer` field names),
    /// when the body is chunked and the client takes trailers.
    pub trailer_names: Vec<HeaderName>,
}

/// Appends the head of `parts`, the answer to a `method` request, to `out`.
/// `keep_alive`: neither the client nor the proxy's stopping ends the connection.
/// `trailers`: the client takes trailer fields.
pub(super) fn encode_head(
    parts: &response::Parts,
    method: &Method,
    hint: BodyHint,
    keep_alive: bool,
    trailers: bool,
    out: &mut Vec<u8>,
) -> Written {
    let status = parts.status;
    // hyper's service may not answer with a 1xx (it would have no final response).
    if status.is_informational() {
        out.extend_from_slice(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n",
        );
        date(out);
        out.extend_from_slice(b"\r\n");
        return Written {
            coding: Coding::Nothing,
            keep_alive: false,
            trailer_names: Vec::new(),
        };
    }
    if status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let head = *method == Method::HEAD;
    let no_length = matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED);
    let may_have_body = !head && !no_length;
    let mut written = Written {
        coding: Coding::Nothing,
        keep_alive,
        trailer_names: Vec::new(),
    };
    let (mut wrote_length, mut wrote_date, mut says_close) = (false, false, false);
    for (name, value) in &parts.headers {
        match *name {
            header::CONTENT_LENGTH => {
                if wrote_length {
                    continue;
                }
                let length = match hint {
                    // An empty body's length is written below; a HEAD's is the entity's.
                    BodyHint::Empty if !head => continue,
                    BodyHint::Empty => 0,
                    BodyHint::Known(n) => n,
                    BodyHint::Unknown => match std::str::from_utf8(value.as_bytes())
                        .ok()
                        .and_then(|v| v.trim().parse::<u64>().ok())
                    {
                        Some(n) => n,
                        None => continue,
                    },
                };
                written.coding = Coding::Length(length);
                wrote_length = true;
            }
            // The framing is this server's to choose.
            header::TRANSFER_ENCODING => continue,
            header::TRAILER if !may_have_body => continue,
            header::TRAILER if trailers => {
                let names = value.to_str().unwrap_or("").split(',');
                written
                    .trailer_names
                    .extend(names.filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok()));
            }
            header::CONNECTION if tokens(value).any(|t| t.eq_ignore_ascii_case(b"close")) => {
                written.keep_alive = false;
                says_close = true;
            }
            header::DATE => wrote_date = true,
            _ => {}
        }
        field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if !wrote_length {
        written.coding = match hint {
            BodyHint::Unknown if may_have_body => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                Coding::Chunked
            }
            BodyHint::Unknown => Coding::Nothing,
            BodyHint::Empty | BodyHint::Known(0) => {
                if !no_length && !head {
                    out.extend_from_slice(b"content-length: 0\r\n");
                }
                Coding::Nothing
            }
            BodyHint::Known(_) if no_length => Coding::Nothing,
            BodyHint::Known(n) => {
                out.extend_from_slice(b"content-length: ");
                crate::wire::decimal(n, out);
                out.extend_from_slice(b"\r\n");
                Coding::Length(n)
            }
        };
    }
    if !may_have_body || matches!(written.coding, Coding::Length(0)) {
        written.coding = Coding::Nothing;
    }
    if written.coding != Coding::Chunked {
        written.trailer_names.clear();
    }
    if !written.keep_alive && !says_close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    if !wrote_date {
        date(out);
    }
    out.extend_from_slice(b"\r\n");
    written
}

/// Appends the last chunk and the trailer fields among `allowed`.
pub(super) fn last_chunk(
    trailers: Option<&http::HeaderMap>,
    allowed: &[HeaderName],
    out: &mut Vec<u8>,
) {
    let fields = trailers.into_iter().flatten();
    crate::wire::last_chunk(fields.filter(|(name, _)| allowed.contains(name)), out);
}

/// Appends a `date` field for now.
fn date(out: &mut Vec<u8>) {
    super::date::with_date(|date| field(out, b"date", date.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Response;

    fn head(
        status: u16,
        fields: &[(&str, &str)],
        method: Method,
        hint: BodyHint,
        keep_alive: bool,
    ) -> (String, Written) {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        for (n, v) in fields {
            response.headers_mut().append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let (parts, ()) = response.into_parts();
        let mut out = Vec::new();
        let written = encode_head(&parts, &method, hint, keep_alive, true, &mut out);
        (String::from_utf8(out).unwrap(), written)
    }

    #[test]
    fn a_known_body_gets_its_length_and_a_date() {
        let (text, w) = head(200, &[("x-a", "1")], Method::GET, BodyHint::Known(5), true);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\ndate: "));
        assert!(text.ends_with(" GMT\r\n\r\n"), "{text}");
        assert_eq!((w.coding, w.keep_alive), (Coding::Length(5), true));
    }

    #[test]
    fn an_unknown_body_is_chunked_with_only_its_declared_trailers() {
        let fields = [("trailer", "x-sum"), ("transfer-encoding", "chunked")];
        let (text, w) = head(200, &fields, Method::GET, BodyHint::Unknown, true);
        assert_eq!(text.matches("transfer-encoding").count(), 1, "{text}");
        assert_eq!(w.coding, Coding::Chunked);
        assert_eq!(w.trailer_names, [HeaderName::from_static("x-sum")]);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-sum", "7".parse().unwrap());
        trailers.insert("x-other", "8".parse().unwrap());
        let mut out = Vec::new();
        last_chunk(Some(&trailers), &w.trailer_names, &mut out);
        assert_eq!(out, b"0\r\nx-sum: 7\r\n\r\n");
    }

    #[test]
    fn empty_bodies_head_and_bodiless_statuses() {
        let (text, w) = head(
            404,
            &[("content-length", "0")],
            Method::GET,
            BodyHint::Empty,
            true,
        );
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n"));
        assert_eq!(w.coding, Coding::Nothing);
        let (text, w) = head(
            200,
            &[("content-length", "10")],
            Method::HEAD,
            BodyHint::Empty,
            true,
        );
        assert!(text.contains("content-length: 10\r\n"), "{text}");
        assert_eq!(w.coding, Coding::Nothing);
        let (text, _) = head(
            304,
            &[("etag", "\"a\"")],
            Method::GET,
            BodyHint::Empty,
            true,
        );
        assert!(!text.contains("content-length"), "{text}");
        let (text, w) = head(204, &[], Method::GET, BodyHint::Known(3), true);
        assert!(!text.contains("content-length"), "{text}");
        assert_eq!(w.coding, Coding::Nothing);
    }

    #[test]
    fn a_closing_connection_says_so_once() {
        let (text, w) = head(200, &[], Method::GET, BodyHint::Known(1), false);
        assert!(text.contains("connection: close\r\n"));
        assert!(!w.keep_alive);
        let (text, w) = head(
            400,
            &[("connection", "close")],
            Method::GET,
            BodyHint::Known(1),
            true,
        );
        assert_eq!(text.matches("connection").count(), 1, "{text}");
        assert!(!w.keep_alive);
    }
}
