use bytes::BytesMut;
use http::header::{HeaderMap, HeaderValue};
use http::{Method, StatusCode, Uri, Version};

use super::*;

fn head(
    method: Method,
    uri: &str,
    fields: &[(&'static str, &'static str)],
    body: BodyKnown,
) -> (String, Outgoing) {
    let mut headers = HeaderMap::new();
    for (k, v) in fields {
        headers.append(*k, HeaderValue::from_static(v));
    }
    let mut out = Vec::new();
    let outgoing = encode_request(
        &method,
        &uri.parse::<Uri>().unwrap(),
        &headers,
        body,
        &mut out,
    );
    (String::from_utf8(out).unwrap(), outgoing)
}

#[test]
fn a_request_head_announces_its_body_as_hyper_did() {
    let (text, out) = head(
        Method::GET,
        "/a?b=1",
        &[("host", "o.test")],
        BodyKnown::Empty,
    );
    assert_eq!(text, "GET /a?b=1 HTTP/1.1\r\nhost: o.test\r\n\r\n");
    assert_eq!(out, Outgoing::None);
    let (text, out) = head(Method::POST, "/p", &[], BodyKnown::Exact(5));
    assert_eq!(text, "POST /p HTTP/1.1\r\ncontent-length: 5\r\n\r\n");
    assert_eq!(out, Outgoing::Length(5));
    let (text, out) = head(
        Method::POST,
        "/p",
        &[("content-length", "7")],
        BodyKnown::Unknown,
    );
    assert_eq!(
        text, "POST /p HTTP/1.1\r\ncontent-length: 7\r\n\r\n",
        "the request's own length is kept"
    );
    assert_eq!(out, Outgoing::Length(7));
    let (text, out) = head(Method::PUT, "/p", &[], BodyKnown::Unknown);
    assert_eq!(
        text,
        "PUT /p HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(out, Outgoing::Chunked);
    // Transfer-Encoding wins over Content-Length, and ends in chunked.
    let (text, out) = head(
        Method::POST,
        "/p",
        &[("content-length", "3"), ("transfer-encoding", "gzip")],
        BodyKnown::Unknown,
    );
    assert_eq!(
        text,
        "POST /p HTTP/1.1\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(out, Outgoing::Chunked);
    // An empty coding is left out, and chunked is announced once.
    let (text, _) = head(
        Method::POST,
        "/p",
        &[("transfer-encoding", "")],
        BodyKnown::Unknown,
    );
    assert_eq!(
        text,
        "POST /p HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    // A GET of unknown length sends no body; an absolute target (a parent proxy) as is.
    let (text, out) = head(Method::GET, "http://o.test/x", &[], BodyKnown::Unknown);
    assert_eq!(text, "GET http://o.test/x HTTP/1.1\r\n\r\n");
    assert_eq!(out, Outgoing::None);
}

#[test]
fn chunks_are_written_with_their_sizes_and_the_last_with_trailers() {
    let mut out = Vec::new();
    chunk_size_line(300, &mut out);
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("9"));
    last_chunk(Some(&trailers), &mut out);
    assert_eq!(out, b"12c\r\n0\r\nx-sum: 9\r\n\r\n");
}

fn parse(bytes: &[u8]) -> Result<Option<ResponseHead>, WireError> {
    parse_response(&mut BytesMut::from(bytes))
}

#[test]
fn a_response_head_is_read_whole_or_not_at_all() {
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: 1\r\nX-A: 2\r\n\r\nabc"[..]);
    let head = parse_response(&mut buf).unwrap().unwrap();
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.version, Version::HTTP_11);
    assert!(head.keep_alive);
    assert_eq!(head.headers.get_all("x-a").iter().count(), 2);
    assert_eq!(&buf[..], b"abc", "the body's bytes stay");
    let mut partial = BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Le"[..]);
    assert!(parse_response(&mut partial).unwrap().is_none());
    assert_eq!(partial.len(), 27, "nothing taken");
    assert!(parse(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
    assert!(parse(b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n").is_err());
    assert!(
        parse(b"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n").is_err(),
        "no line folding"
    );
    let huge = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD));
    assert!(
        parse(huge.as_bytes()).is_err(),
        "a head past the limit fails, not waits"
    );
}

/// Heads with more fields than the parser notes on its stack are read whole, every
/// field in its order with its value; past the most a head may have, they fail.
#[test]
fn a_response_head_with_many_fields_keeps_every_one_in_order() {
    for count in [INLINE_FIELDS, INLINE_FIELDS + 1, MAX_FIELDS] {
        let mut wire = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..count {
            wire += &format!("X-F{}: value {i}\r\n", i % 7);
        }
        wire += "\r\nbody";
        let mut buf = BytesMut::from(wire.as_bytes());
        let head = parse_response(&mut buf).unwrap().unwrap();
        assert_eq!(head.headers.len(), count);
        for f in 0..7 {
            let values: Vec<&str> = head
                .headers
                .get_all(format!("x-f{f}"))
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect();
            let expected: Vec<String> = (0..count)
                .filter(|i| i % 7 == f)
                .map(|i| format!("value {i}"))
                .collect();
            assert_eq!(values, expected, "{count} fields");
        }
        assert_eq!(&buf[..], b"body");
    }
    let mut wire = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..=MAX_FIELDS {
        wire += &format!("X-{i}: v\r\n");
    }
    wire += "\r\n";
    assert!(
        parse(wire.as_bytes()).is_err(),
        "more fields than a head may have"
    );
}

#[test]
fn keep_alive_follows_the_version_and_connection_field() {
    let alive = |b: &[u8]| parse(b).unwrap().unwrap().keep_alive;
    assert!(!alive(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
    assert!(!alive(b"HTTP/1.1 200 OK\r\nConnection: x, Close\r\n\r\n"));
    assert!(!alive(b"HTTP/1.0 200 OK\r\n\r\n"));
    assert!(alive(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"));
}

#[test]
fn connection_fields_that_name_no_other_field_are_left_out() {
    let head = |b: &[u8]| parse(b).unwrap().unwrap();
    let plain = head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nETag: \"a\"\r\n\r\n");
    assert!(plain.keep_alive);
    let names: Vec<_> = plain.headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["etag"], "read, and never relayed");
    let closing = head(b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n");
    assert!(!closing.keep_alive && closing.headers.is_empty());
    // One that names a field stays, for the hop-by-hop removal to take both.
    let naming = head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\n");
    assert!(!naming.keep_alive);
    let kept: Vec<_> = naming.headers.get_all("connection").iter().collect();
    assert_eq!(kept, ["close, X-Hop"]);
    let mut relayed = naming.headers.clone();
    crate::headers::remove_hop_by_hop(&mut relayed);
    assert!(relayed.is_empty(), "{relayed:?}");
}

#[test]
fn a_field_named_close_goes_with_connection_close() {
    // RFC 9110 §7.6.1: every connection option names a field, `close` included.
    let head = |b: &[u8]| parse(b).unwrap().unwrap();
    let closing = head(b"HTTP/1.1 200 OK\r\nClose: x\r\nConnection: close\r\nETag: \"a\"\r\n\r\n");
    assert!(!closing.keep_alive);
    let names: Vec<_> = closing.headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["etag"]);
    // Without `Connection: close` the field is an ordinary one.
    let open = head(b"HTTP/1.1 200 OK\r\nClose: x\r\n\r\n");
    assert_eq!(open.headers["close"], "x");
}

fn framing(method: Method, bytes: &[u8]) -> (Result<Framing, WireError>, ResponseHead) {
    let mut head = parse(bytes).unwrap().unwrap();
    (response_framing(&method, &mut head), head)
}

#[test]
fn the_body_is_framed_as_rfc_9112_says() {
    let f = |m: Method, b: &[u8]| framing(m, b).0.unwrap();
    assert_eq!(
        f(
            Method::HEAD,
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
        ),
        Framing::Empty
    );
    assert_eq!(
        f(
            Method::GET,
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"
        ),
        Framing::Empty
    );
    assert_eq!(
        f(Method::GET, b"HTTP/1.1 204 No Content\r\n\r\n"),
        Framing::Empty
    );
    assert_eq!(
        f(Method::GET, b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"),
        Framing::Length(9)
    );
    assert_eq!(
        f(
            Method::GET,
            b"HTTP/1.1 200 OK\r\nContent-Length: 9, 9\r\n\r\n"
        ),
        Framing::Length(9)
    );
    assert_eq!(
        f(
            Method::GET,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        ),
        Framing::Chunked
    );
    let (close, head) = framing(Method::GET, b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(close.unwrap(), Framing::Close);
    assert!(
        !head.keep_alive,
        "a body that ends with the connection ends the connection"
    );
    let (gzip, head) = framing(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    );
    assert_eq!(gzip.unwrap(), Framing::Close);
    assert!(!head.keep_alive);
    // Both: chunked, the length removed, and the connection not reused.
    let (both, head) = framing(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert_eq!(both.unwrap(), Framing::Chunked);
    assert!(head.headers.get("content-length").is_none());
    assert!(!head.keep_alive);
    let two_lines = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n";
    assert!(
        framing(Method::GET, two_lines).0.is_err(),
        "two lengths on two lines"
    );
    let same_twice = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n";
    assert_eq!(
        framing(Method::GET, same_twice).0.unwrap(),
        Framing::Length(4)
    );
    for bad in [&b"9, 8"[..], b"-1", b"0x10", b"", b"99999999999999999999"] {
        let text = [
            &b"HTTP/1.1 200 OK\r\nContent-Length: "[..],
            bad,
            b"\r\n\r\n",
        ]
        .concat();
        assert!(
            framing(Method::GET, &text).0.is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// Feeds `wire` to a chunked reader `step` bytes at a time: the data, and the trailers.
fn dechunk(wire: &[u8], step: usize) -> Result<(Vec<u8>, HeaderMap, usize), WireError> {
    let mut reader = Chunked::Size;
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut fed = 0;
    loop {
        match reader.decode(&mut buf)? {
            Decoded::Data(d) => data.extend_from_slice(&d),
            Decoded::End(trailers) => return Ok((data, trailers, buf.len())),
            Decoded::More => {
                if fed == wire.len() {
                    return Err(WireError("ran out".into()));
                }
                let end = (fed + step).min(wire.len());
                buf.extend_from_slice(&wire[fed..end]);
                fed = end;
            }
        }
    }
}

#[test]
fn a_chunked_body_is_read_in_any_pieces() {
    let wire = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\nNEXT";
    for step in [1, 2, 3, 7, 100] {
        let (data, trailers, left) = dechunk(wire, step).unwrap();
        assert_eq!(data, b"hello world", "step {step}");
        assert_eq!(trailers.get("x-sum").unwrap(), "11");
        assert!(left <= 4, "the next response's bytes stay");
    }
    let (data, trailers, _) = dechunk(b"A\r\n0123456789\r\n0\r\n\r\n", 4).unwrap();
    assert_eq!(data, b"0123456789");
    assert!(trailers.is_empty());
}

#[test]
fn a_broken_chunked_body_fails() {
    for bad in [
        &b"zz\r\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhelloXX0\r\n\r\n",
        b"fffffffffffffffff\r\n",
        b"5 x\r\nhello\r\n0\r\n\r\n",
        b"\r\n\r\n",
        b";ext\r\n\r\n",
    ] {
        assert!(
            dechunk(bad, 3).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let long = format!("1;{}\r\n", "e".repeat(MAX_CHUNK_LINE + 10));
    assert!(
        dechunk(long.as_bytes(), 1000).is_err(),
        "an endless size line fails"
    );
}
