//! HTTP/1.1 as Weir writes it to origins and reads it back (RFC 9112): a request
//! head, a response head and the framing of the response body, and the chunked coding
//! both ways. Bytes in, bytes out: no I/O here (the connection is `h1_conn.rs`). The
//! bottom of the HTTP/1.1 client, beside the pool's data.
//!
//! Why Weir's own and not hyper's client: hyper runs every origin connection as a task
//! of its own, so that each miss crossed two tasks and a channel between them for its
//! head and its body, about 14,000 instructions of a 70,000-instruction miss
//! (docs/benchmarks.md). Here the fill's own task reads and writes the connection.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};

use crate::wire::field;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri, Version};

/// The largest response head (and trailer section) accepted.
pub(super) const MAX_HEAD: usize = 64 << 10;
/// The most fields a response head may have.
const MAX_FIELDS: usize = 100;
/// The fields of a response head whose places are noted on the stack (more are
/// noted in a vector).
const INLINE_FIELDS: usize = 24;
/// The longest chunk-size line (with extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// A response the origin broke the protocol with.
#[derive(Debug)]
pub(super) struct WireError(pub(super) String);

fn error<T>(what: impl Into<String>) -> Result<T, WireError> {
    Err(WireError(what.into()))
}

/// How a request body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outgoing {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked, ending with a last chunk and any trailers.
    Chunked,
}

/// What the request's body is known to be when its head is written.
#[derive(Debug, Clone, Copy)]
pub(super) enum BodyKnown {
    /// Nothing to send.
    Empty,
    Exact(u64),
    Unknown,
}

/// Writes the request line and fields of a request to `out`, with the framing fields
/// its body needs; says how the body must follow. The rules are those hyper's client
/// applied before: a `Transfer-Encoding` or `Content-Length` the request carries is
/// kept (`Transfer-Encoding` ending in chunked), else an exact length is announced,
/// else a body of unknown length is chunked (except on GET, HEAD and CONNECT, which
/// then send none).
pub(super) fn encode_request(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: BodyKnown,
    out: &mut Vec<u8>,
) -> Outgoing {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    match (uri.scheme(), uri.path_and_query()) {
        // Absolute form (a request to a parent proxy) as given.
        (Some(_), _) => out.extend_from_slice(uri.to_string().as_bytes()),
        (None, Some(pq)) => out.extend_from_slice(pq.as_str().as_bytes()),
        (None, None) => out.push(b'/'),
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // A request without a body (most) needs no look at its framing fields; it sends
    // no Transfer-Encoding, as hyper did.
    let empty = matches!(body, BodyKnown::Empty);
    let has_te = !empty && headers.contains_key(header::TRANSFER_ENCODING);
    let length = match empty {
        true => None,
        // A client's length was checked when its request came in (conflicting values
        // are refused there); an origin's is checked below.
        false => crate::headers::content_length(headers),
    };
    let outgoing = match body {
        BodyKnown::Empty => Outgoing::None,
        _ if has_te => Outgoing::Chunked,
        _ if length.is_some() => Outgoing::Length(length.unwrap_or(0)),
        BodyKnown::Exact(n) => Outgoing::Length(n),
        BodyKnown::Unknown => match *method {
            Method::GET | Method::HEAD | Method::CONNECT => Outgoing::None,
            _ => Outgoing::Chunked,
        },
    };
    for (name, value) in headers {
        // The body's framing is written below, as it is sent.
        if name == header::TRANSFER_ENCODING || (name == header::CONTENT_LENGTH && has_te) {
            continue;
        }
        field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    match (body, outgoing) {
        (_, Outgoing::Chunked) => {
            // The request's own codings, then chunked unless they end with it.
            let mut last_chunked = false;
            let codings = headers.get_all(header::TRANSFER_ENCODING);
            for v in codings
                .iter()
                .map(|v| v.as_bytes())
                .filter(|v| !v.is_empty())
            {
                field(out, b"transfer-encoding", v);
                last_chunked = ends_in_chunked(v);
            }
            if !last_chunked {
                field(out, b"transfer-encoding", b"chunked");
            }
        }
        (BodyKnown::Exact(_), Outgoing::Length(n)) if length.is_none() => {
            out.extend_from_slice(b"content-length: ");
            crate::wire::decimal(n, out);
            out.extend_from_slice(b"\r\n");
        }
        _ => {}
    }
    out.extend_from_slice(b"\r\n");
    outgoing
}

/// Appends a chunk's size line; the chunk's data and its `\r\n` follow.
pub(super) fn chunk_size_line(len: usize, out: &mut Vec<u8>) {
    crate::wire::chunk_size_line(len, out);
}

/// Appends the last chunk and the trailer section.
pub(super) fn last_chunk(trailers: Option<&HeaderMap>, out: &mut Vec<u8>) {
    crate::wire::last_chunk(trailers.into_iter().flatten(), out);
}

/// A response head as read.
#[derive(Debug)]
pub(super) struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    /// The connection may carry another request once this response has ended.
    pub keep_alive: bool,
    /// The framing fields as they were read: whether there was a `Transfer-Encoding`
    /// (and whether its last coding was chunked) and a `Content-Length` (`Err`: not
    /// valid), so that framing the body looks nothing up again.
    te: Option<bool>,
    length: Result<Option<u64>, ()>,
}

/// The field a `Connection: close` names along with the connection option.
const CLOSE: HeaderName = HeaderName::from_static("close");

/// Parses the response head at the start of `buf`, and takes it out of `buf` when it
/// is complete. `Ok(None)`: more bytes are needed.
pub(super) fn parse_response(buf: &mut BytesMut) -> Result<Option<ResponseHead>, WireError> {
    // Slots httparse fills as it goes, and places noted only for the fields there are:
    // a hundred empty fields and their places written first were 6 KiB of stack
    // touched on every miss (about 70 first-level cache lines, docs/benchmarks.md).
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut response = httparse::Response::new(&mut []);
    let parser = httparse::ParserConfig::default();
    let len = match parser.parse_response_with_uninit_headers(&mut response, buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return error("the origin's response head is too large")
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return error(format!("the origin's response head is not valid: {e}")),
    };
    let status = StatusCode::from_u16(response.code.unwrap_or(0))
        .map_err(|_| WireError("the origin's status code is not valid".into()))?;
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    // Offsets of the names and values, so that the head's bytes can be frozen and the
    // values shared with them (one allocation for the head, not one per value).
    let base = buf.as_ptr() as usize;
    let mut inline = [(0, 0, 0, 0); INLINE_FIELDS];
    let mut spilled = Vec::new();
    let spans = crate::wire::spans(base, response.headers, &mut inline, &mut spilled);
    let head = buf.split_to(len).freeze();
    // Room for the fields Weir adds to every response it relays (`Via`, and
    // `Cache-Status` or `Age`): an exact map would move all its fields to grow.
    let mut headers = HeaderMap::with_capacity(spans.len() + 2);
    let mut keep_alive = version == Version::HTTP_11;
    // `close` names a field too (RFC 9110 §7.6.1: a proxy removes every field a
    // connection option names); the name is reserved, so one is rare and looked for
    // only in a head that says `close`.
    let mut close = false;
    let (mut te, mut length) = (None, Ok(None));
    for &(n, nl, v, vl) in spans {
        let name = crate::field_name::field_name(&head[n as usize..(n + nl) as usize])
            .map_err(|_| WireError("the origin sent a field name that is not valid".into()))?;
        let value = crate::wire::checked_value(head.slice(v as usize..(v + vl) as usize));
        if name == header::TRANSFER_ENCODING {
            te = Some(ends_in_chunked(value.as_bytes()));
        } else if name == header::CONTENT_LENGTH {
            length = match (length, content_length(value.as_bytes())) {
                (Ok(None), this) => this,
                (Ok(Some(a)), Ok(Some(b))) if a == b => Ok(Some(a)),
                _ => Err(()),
            };
        } else if name == header::CONNECTION {
            let mut names_fields = false;
            for token in value.as_bytes().split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive |= version == Version::HTTP_10;
                } else {
                    names_fields |= !crate::headers::is_connection_option(token);
                }
            }
            // Read here and never relayed (hop-by-hop): only a field that names others
            // is kept, for `headers::remove_hop_by_hop` to remove them with it. Left
            // out, an origin's `Connection: keep-alive` costs a miss no hashed append
            // now and no hashed removal later (about 300 instructions).
            if !names_fields {
                continue;
            }
        } else if name == crate::headers::KEEP_ALIVE {
            // Hop-by-hop, and names no other field.
            continue;
        }
        headers.append(name, value);
    }
    if close {
        headers.remove(CLOSE);
    }
    Ok(Some(ResponseHead {
        status,
        version,
        headers,
        keep_alive,
        te,
        length,
    }))
}

/// How a response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body: a response to HEAD, 1xx, 204, 304.
    Empty,
    Length(u64),
    Chunked,
    /// Until the origin closes the connection.
    Close,
}

/// How the body of `head`, the response to a `method` request, is delimited. A
/// response with both `Transfer-Encoding` and `Content-Length` is chunked (the length
/// is removed) and ends its connection: the classic smuggling vector.
pub(super) fn response_framing(
    method: &Method,
    head: &mut ResponseHead,
) -> Result<Framing, WireError> {
    let status = head.status;
    if *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if let Some(chunked) = head.te {
        if head.length != Ok(None) {
            head.headers.remove(header::CONTENT_LENGTH);
            head.keep_alive = false;
        }
        if chunked && head.version == Version::HTTP_11 {
            return Ok(Framing::Chunked);
        }
        head.keep_alive = false;
        return Ok(Framing::Close);
    }
    match head.length {
        Ok(Some(n)) => Ok(Framing::Length(n)),
        Ok(None) => {
            head.keep_alive = false;
            Ok(Framing::Close)
        }
        Err(()) => error("the origin's Content-Length is not valid"),
    }
}

/// The `Content-Length` in one field value: one number, or the same number in every
/// item of a list; `Err` for anything else.
fn content_length(value: &[u8]) -> Result<Option<u64>, ()> {
    let mut found = None;
    for item in value.split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
            return Err(());
        }
        let n = item.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0'));
        if found.is_some_and(|f| f != n) {
            return Err(());
        }
        found = Some(n);
    }
    Ok(found)
}

/// Whether a `Transfer-Encoding` value's last coding is `chunked`.
fn ends_in_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// Where a chunked body's reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunked {
    /// At a chunk-size line.
    Size,
    /// In a chunk's data, with this much left.
    Data(u64),
    /// After a chunk's data, at its `\r\n`.
    DataEnd,
    /// After the last chunk, at the trailer section.
    Trailers,
}

/// What the chunked reader got from the bytes read so far.
#[derive(Debug)]
pub(super) enum Decoded {
    /// Body data.
    Data(Bytes),
    /// More bytes are needed.
    More,
    /// The body ended, with these trailer fields (none: empty).
    End(HeaderMap),
}

impl Chunked {
    /// Reads what it can from the start of `buf`, taking it out of `buf`.
    pub(super) fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, WireError> {
        loop {
            match *self {
                Chunked::Size => {
                    // httparse's reading of the line, as the client side's framing guard
                    // uses; it takes an empty size for 0, which is refused here.
                    let parsed = match buf.first() {
                        None => return Ok(Decoded::More),
                        Some(b) if !b.is_ascii_hexdigit() => None,
                        Some(_) => httparse::parse_chunk_size(buf).ok(),
                    };
                    let (end, size) = match parsed {
                        Some(httparse::Status::Complete(line)) => line,
                        Some(httparse::Status::Partial) if buf.len() <= MAX_CHUNK_LINE => {
                            return Ok(Decoded::More)
                        }
                        Some(httparse::Status::Partial) => {
                            return error("the origin's chunk-size line is too long")
                        }
                        None => return error("the origin's chunk size is not valid"),
                    };
                    let _ = buf.split_to(end);
                    *self = match size {
                        0 => Chunked::Trailers,
                        n => Chunked::Data(n),
                    };
                }
                Chunked::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::More);
                    }
                    let n = left.min(buf.len() as u64) as usize;
                    *self = match left - n as u64 {
                        0 => Chunked::DataEnd,
                        rest => Chunked::Data(rest),
                    };
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                Chunked::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(Decoded::More);
                    }
                    if &buf[..2] != b"\r\n" {
                        return error("the origin's chunk does not end where its size says");
                    }
                    let _ = buf.split_to(2);
                    *self = Chunked::Size;
                }
                Chunked::Trailers => return trailers(buf),
            }
        }
    }
}

/// The trailer section after the last chunk, up to its empty line.
fn trailers(buf: &mut BytesMut) -> Result<Decoded, WireError> {
    if buf.starts_with(b"\r\n") {
        let _ = buf.split_to(2);
        return Ok(Decoded::End(HeaderMap::new()));
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let (len, parsed) = match httparse::parse_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete((len, parsed))) => (len, parsed),
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return error("the origin's trailer section is too large")
        }
        Ok(httparse::Status::Partial) => return Ok(Decoded::More),
        Err(e) => return error(format!("the origin's trailer section is not valid: {e}")),
    };
    let mut map = HeaderMap::with_capacity(parsed.len());
    for f in parsed.iter() {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(f.name.as_bytes()),
            HeaderValue::from_bytes(f.value),
        ) else {
            return error("the origin's trailer section is not valid");
        };
        map.append(name, value);
    }
    let _ = buf.split_to(len);
    Ok(Decoded::End(map))
}

#[cfg(test)]
#[path = "h1_wire_tests.rs"]
mod tests;
