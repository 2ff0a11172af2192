//! ICAP/1.0 messages on the wire (RFC 3507, section 4): what the client writes, and
//! the pure parsing of what it reads. Every parser here works on bytes already read
//! (the [`reader`](super::reader) bounds how many) and answers an error instead of
//! panicking on anything a server may send.

use weir_api::http::header::{
    HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use weir_api::http::{HeaderMap, Method, StatusCode, Uri};
use weir_api::{RequestHead, ResponseHead};

/// At most this many headers in one ICAP head or one encapsulated HTTP head.
const MAX_HEADERS: usize = 128;

/// What is wrong with an answer; each is counted and then handled by the service's
/// failure policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The status line is not `ICAP/1.0 NNN reason`.
    StatusLine,
    /// A header block could not be parsed, or has too many headers.
    Headers,
    /// The `Encapsulated` header is missing, malformed, or its offsets disagree with
    /// what follows.
    Encapsulated,
    /// An encapsulated HTTP head could not be parsed.
    HttpHead,
    /// A chunk size line or a chunk's end is malformed.
    Chunk,
    /// A head or a body is larger than the limits allow.
    TooLarge,
    /// The connection ended before the answer did.
    Truncated,
}

impl WireError {
    /// A short name, for log fields.
    pub fn name(&self) -> &'static str {
        match self {
            WireError::StatusLine => "status-line",
            WireError::Headers => "headers",
            WireError::Encapsulated => "encapsulated",
            WireError::HttpHead => "http-head",
            WireError::Chunk => "chunk",
            WireError::TooLarge => "too-large",
            WireError::Truncated => "truncated",
        }
    }
}

/// One part named by the `Encapsulated` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `req-hdr`: an HTTP request head.
    ReqHdr,
    /// `res-hdr`: an HTTP response head.
    ResHdr,
    /// `req-body`, `res-body` or `opt-body`: a chunked body follows the heads.
    Body,
    /// `null-body`: no body follows.
    NullBody,
}

/// The `Encapsulated` header, checked: heads in increasing offsets from 0, then
/// exactly one body entity, last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encapsulated {
    /// The heads with their offsets, in order.
    pub heads: Vec<(Section, usize)>,
    /// Whether a chunked body follows the heads.
    pub body: bool,
    /// The offset of the body entity: the length of all the heads together.
    pub heads_len: usize,
}

/// Parses `Encapsulated: req-hdr=0, res-hdr=137, res-body=296`.
pub fn parse_encapsulated(value: &[u8]) -> Result<Encapsulated, WireError> {
    let text = std::str::from_utf8(value).map_err(|_| WireError::Encapsulated)?;
    let mut heads: Vec<(Section, usize)> = Vec::new();
    let mut end = None;
    for item in text.split(',') {
        if end.is_some() {
            return Err(WireError::Encapsulated); // the body entity must be last
        }
        let (name, offset) = item.trim().split_once('=').ok_or(WireError::Encapsulated)?;
        if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
            return Err(WireError::Encapsulated);
        }
        let offset: usize = offset.parse().map_err(|_| WireError::Encapsulated)?;
        let expected_min = match heads.last() {
            None => 0,
            Some(&(_, previous)) => previous + 1,
        };
        if (heads.is_empty() && offset != 0) || offset < expected_min {
            return Err(WireError::Encapsulated);
        }
        let section = match name.trim() {
            "req-hdr" => Section::ReqHdr,
            "res-hdr" => Section::ResHdr,
            "req-body" | "res-body" | "opt-body" => Section::Body,
            "null-body" => Section::NullBody,
            _ => return Err(WireError::Encapsulated),
        };
        match section {
            Section::ReqHdr | Section::ResHdr => {
                if heads.iter().any(|&(s, _)| s == section) {
                    return Err(WireError::Encapsulated);
                }
                heads.push((section, offset));
            }
            Section::Body | Section::NullBody => end = Some((section == Section::Body, offset)),
        }
    }
    let (body, heads_len) = end.ok_or(WireError::Encapsulated)?;
    Ok(Encapsulated {
        heads,
        body,
        heads_len,
    })
}

/// Parses an ICAP status line and header block (`head` ends with the blank line).
pub fn parse_icap_head(head: &[u8]) -> Result<(u16, HeaderMap), WireError> {
    let line_end = find(head, b"\r\n").ok_or(WireError::StatusLine)?;
    let status = parse_status_line(&head[..line_end])?;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let parsed = match httparse::parse_headers(&head[line_end + 2..], &mut slots) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        _ => return Err(WireError::Headers),
    };
    Ok((status, header_map(parsed).ok_or(WireError::Headers)?))
}

fn parse_status_line(line: &[u8]) -> Result<u16, WireError> {
    let rest = line
        .strip_prefix(b"ICAP/1.0 ")
        .ok_or(WireError::StatusLine)?;
    let code = rest.get(..3).ok_or(WireError::StatusLine)?;
    if !code.iter().all(u8::is_ascii_digit) || !matches!(rest.get(3), None | Some(b' ')) {
        return Err(WireError::StatusLine);
    }
    let status = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if !(100..600).contains(&status) {
        return Err(WireError::StatusLine);
    }
    Ok(status)
}

fn header_map(parsed: &[httparse::Header<'_>]) -> Option<HeaderMap> {
    let mut map = HeaderMap::with_capacity(parsed.len());
    for h in parsed {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(h.value).ok()?;
        map.append(name, value);
    }
    Some(map)
}

/// An HTTP head an ICAP server sent back.
#[derive(Debug)]
pub enum HttpHead {
    /// A (modified) request.
    Request {
        method: Method,
        uri: Uri,
        headers: HeaderMap,
    },
    /// A response: the adapted one, or one that answers a request.
    Response {
        status: StatusCode,
        headers: HeaderMap,
    },
}

/// Parses one encapsulated HTTP head, which must fill `bytes` exactly.
pub fn parse_http_head(section: Section, bytes: &[u8]) -> Result<HttpHead, WireError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let complete = |status: httparse::Result<usize>| match status {
        Ok(httparse::Status::Complete(n)) if n == bytes.len() => Ok(()),
        _ => Err(WireError::HttpHead),
    };
    match section {
        Section::ReqHdr => {
            let mut req = httparse::Request::new(&mut slots);
            complete(req.parse(bytes))?;
            let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
                .map_err(|_| WireError::HttpHead)?;
            let uri: Uri = req
                .path
                .unwrap_or_default()
                .parse()
                .map_err(|_| WireError::HttpHead)?;
            let headers = header_map(req.headers).ok_or(WireError::HttpHead)?;
            Ok(HttpHead::Request {
                method,
                uri,
                headers,
            })
        }
        Section::ResHdr => {
            let mut res = httparse::Response::new(&mut slots);
            complete(res.parse(bytes))?;
            // A final status only: an interim one (1xx) cannot stand for a response.
            let status = StatusCode::from_u16(res.code.unwrap_or_default())
                .ok()
                .filter(|s| (200..600).contains(&s.as_u16()))
                .ok_or(WireError::HttpHead)?;
            let headers = header_map(res.headers).ok_or(WireError::HttpHead)?;
            Ok(HttpHead::Response { status, headers })
        }
        Section::Body | Section::NullBody => Err(WireError::Encapsulated),
    }
}

/// Parses a chunk-size line (without its CRLF): hexadecimal size, then optional
/// extensions after `;`, which are ignored.
pub fn parse_chunk_size(line: &[u8]) -> Result<usize, WireError> {
    let digits_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let (digits, rest) = line.split_at(digits_end);
    let rest = trim_spaces(rest);
    if digits.is_empty() || digits.len() > 8 || !(rest.is_empty() || rest[0] == b';') {
        return Err(WireError::Chunk);
    }
    let text = std::str::from_utf8(digits).map_err(|_| WireError::Chunk)?;
    usize::from_str_radix(text, 16).map_err(|_| WireError::Chunk)
}

fn trim_spaces(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| *c != b' ' && *c != b'\t')
        .unwrap_or(b.len());
    &b[start..]
}

/// The first position of `needle` in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What an ICAP request encapsulates, written by [`encode_request`].
pub struct Outgoing<'a> {
    /// `REQMOD`, `RESPMOD` or `OPTIONS`.
    pub method: &'static str,
    /// The service's `icap://` URL.
    pub url: &'a str,
    /// The `Host` header: the service's `host:port`.
    pub host: &'a str,
    /// `Preview: n`, when previewing.
    pub preview: Option<usize>,
    /// The encapsulated HTTP request head, if any.
    pub request: Option<Vec<u8>>,
    /// The encapsulated HTTP response head, if any.
    pub response: Option<Vec<u8>>,
    /// Whether a body follows (`req-body`/`res-body`) or not (`null-body`).
    pub body: bool,
}

/// The ICAP head and the encapsulated HTTP heads; the body, if any, follows as chunks.
pub fn encode_request(out: &Outgoing<'_>) -> Vec<u8> {
    let mut encapsulated = Vec::new();
    let mut offset = 0;
    if let Some(h) = &out.request {
        encapsulated.push(format!("req-hdr={offset}"));
        offset += h.len();
    }
    if let Some(h) = &out.response {
        encapsulated.push(format!("res-hdr={offset}"));
        offset += h.len();
    }
    let body = match (out.body, out.response.is_some()) {
        (false, _) => "null-body",
        (true, true) => "res-body",
        (true, false) => "req-body",
    };
    encapsulated.push(format!("{body}={offset}"));
    let mut w = format!(
        "{} {} ICAP/1.0\r\nHost: {}\r\nAllow: 204\r\n",
        out.method, out.url, out.host
    );
    if let Some(n) = out.preview {
        w.push_str(&format!("Preview: {n}\r\n"));
    }
    w.push_str(&format!(
        "Encapsulated: {}\r\n\r\n",
        encapsulated.join(", ")
    ));
    let mut bytes = w.into_bytes();
    for h in [&out.request, &out.response].into_iter().flatten() {
        bytes.extend_from_slice(h);
    }
    bytes
}

/// An HTTP/1.1 request head, as an ICAP server expects it encapsulated.
pub fn encode_request_head(head: &RequestHead) -> Vec<u8> {
    let mut w = format!("{} {} HTTP/1.1\r\n", head.method, head.uri).into_bytes();
    write_headers(&mut w, &head.headers);
    w
}

/// An HTTP/1.1 response head, as an ICAP server expects it encapsulated.
pub fn encode_response_head(head: &ResponseHead) -> Vec<u8> {
    let reason = head.status.canonical_reason().unwrap_or("Unknown");
    let mut w = format!("HTTP/1.1 {} {reason}\r\n", head.status.as_u16()).into_bytes();
    write_headers(&mut w, &head.headers);
    w
}

fn write_headers(w: &mut Vec<u8>, headers: &HeaderMap) {
    for (name, value) in headers {
        // The body travels in ICAP's own chunking, whatever framing HTTP had.
        if name == TRANSFER_ENCODING {
            continue;
        }
        w.extend_from_slice(name.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    w.extend_from_slice(b"\r\n");
}

/// `data` as one chunk (nothing for empty data: an empty chunk would end the body).
pub fn encode_chunk(w: &mut Vec<u8>, data: &[u8]) {
    if !data.is_empty() {
        w.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        w.extend_from_slice(data);
        w.extend_from_slice(b"\r\n");
    }
}

/// The end of a body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
/// The end of a preview that holds the whole body (RFC 3507, 4.5).
pub const LAST_CHUNK_IEOF: &[u8] = b"0; ieof\r\n\r\n";

/// Removes the framing and hop-by-hop headers of an adapted head: they described the
/// ICAP server's view of a connection, and the engine frames the body anew.
pub fn strip_framing(headers: &mut HeaderMap) {
    for name in [
        TRANSFER_ENCODING,
        CONTENT_LENGTH,
        CONNECTION,
        TE,
        TRAILER,
        UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
