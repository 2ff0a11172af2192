//! Encoding and parsing of ICAP messages, and the reader's limits.

use super::*;
use crate::icap::reader::{Limits, ReadError, Reader};

const LIMITS: Limits = Limits {
    head: 4096,
    body: 1024,
};

async fn read(bytes: &[u8]) -> Result<crate::icap::reader::Answer, ReadError> {
    Reader::new(bytes).answer(LIMITS).await
}

fn wire_error(result: Result<crate::icap::reader::Answer, ReadError>) -> WireError {
    match result {
        Err(ReadError::Wire(e)) => e,
        other => panic!("expected a wire error, got {other:?}"),
    }
}

#[test]
fn encapsulated_offsets_are_checked() {
    let e = parse_encapsulated(b"req-hdr=0, res-hdr=40, res-body=100").unwrap();
    assert_eq!(e.heads, [(Section::ReqHdr, 0), (Section::ResHdr, 40)]);
    assert!(e.body && e.heads_len == 100);
    let null = parse_encapsulated(b"null-body=0").unwrap();
    assert!(!null.body && null.heads.is_empty() && null.heads_len == 0);
    for bad in [
        "",
        "res-hdr=5, res-body=10",
        "res-hdr=0, res-body=0",
        "req-hdr=0, res-hdr=30, res-body=20",
        "res-hdr=0",
        "res-body=0, res-hdr=0",
        "res-hdr=0, res-hdr=10, null-body=20",
        "res-hdr=0, x-body=10",
        "res-hdr=0, res-body=-1",
        "res-hdr=0, res-body=99999999999999999999999",
        "res-hdr=0, res-body=+5",
    ] {
        assert!(parse_encapsulated(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn status_lines_are_strict() {
    assert_eq!(
        parse_icap_head(b"ICAP/1.0 204 No Content\r\n\r\n")
            .unwrap()
            .0,
        204
    );
    assert_eq!(
        parse_icap_head(b"ICAP/1.0 200\r\nA: b\r\n\r\n").unwrap().0,
        200
    );
    for bad in [
        "HTTP/1.1 200 OK\r\n\r\n",
        "ICAP/1.0 20 OK\r\n\r\n",
        "ICAP/1.0 2000 OK\r\n\r\n",
        "ICAP/1.0 abc OK\r\n\r\n",
        "ICAP/1.0 099 OK\r\n\r\n",
        "ICAP/1.0 200 OK\r\nno colon here\r\n\r\n",
    ] {
        assert!(parse_icap_head(bad.as_bytes()).is_err(), "{bad:?}");
    }
}

#[test]
fn chunk_sizes() {
    assert_eq!(parse_chunk_size(b"1a").unwrap(), 26);
    assert_eq!(parse_chunk_size(b"0; ieof").unwrap(), 0);
    assert_eq!(parse_chunk_size(b"A ;ext=1").unwrap(), 10);
    for bad in ["", "x", "-1", "123456789", "1 2", "g"] {
        assert!(parse_chunk_size(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn requests_are_encoded_with_offsets_that_match() {
    let req = weir_api::http::Request::builder()
        .method("POST")
        .uri("http://site.example/form")
        .header("host", "site.example")
        .header("transfer-encoding", "chunked")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let head = encode_request_head(&req);
    assert_eq!(
        head,
        b"POST http://site.example/form HTTP/1.1\r\nhost: site.example\r\n\r\n"
    );
    let res = weir_api::http::Response::builder()
        .status(404)
        .header("content-type", "text/plain")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let out = Outgoing {
        method: "RESPMOD",
        url: "icap://127.0.0.1:1344/echo",
        host: "127.0.0.1:1344",
        preview: Some(10),
        request: Some(head.clone()),
        response: Some(encode_response_head(&res)),
        body: true,
    };
    let bytes = encode_request(&out);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.starts_with("RESPMOD icap://127.0.0.1:1344/echo ICAP/1.0\r\nHost: 127.0.0.1:1344\r\nAllow: 204\r\nPreview: 10\r\n"));
    let icap_head_end = find(&bytes, b"\r\n\r\n").unwrap() + 4;
    let first_line_end = find(&bytes, b"\r\n").unwrap() + 2;
    let mut slots = [httparse::EMPTY_HEADER; 8];
    let Ok(httparse::Status::Complete((_, headers))) =
        httparse::parse_headers(&bytes[first_line_end..icap_head_end], &mut slots)
    else {
        panic!("{text}")
    };
    let encapsulated = headers.iter().find(|h| h.name == "Encapsulated").unwrap();
    let e = parse_encapsulated(encapsulated.value).unwrap();
    assert!(e.body);
    let heads = &bytes[icap_head_end..];
    assert_eq!(heads.len(), e.heads_len);
    let (_, res_offset) = e.heads[1];
    assert!(heads[res_offset..].starts_with(b"HTTP/1.1 404 Not Found\r\n"));
    assert!(matches!(
        parse_http_head(Section::ReqHdr, &heads[..res_offset]).unwrap(),
        HttpHead::Request { .. }
    ));
    let mut chunk = Vec::new();
    encode_chunk(&mut chunk, b"");
    assert!(chunk.is_empty());
    encode_chunk(&mut chunk, &[b'x'; 26]);
    assert!(chunk.starts_with(b"1a\r\nxxx"));
}

#[test]
fn adapted_heads_are_checked() {
    assert!(parse_http_head(Section::ResHdr, b"HTTP/1.1 101 Switching\r\n\r\n").is_err());
    assert!(parse_http_head(Section::ResHdr, b"HTTP/1.1 200 OK\r\n\r\nextra").is_err());
    assert!(parse_http_head(Section::ReqHdr, b"GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n").is_err());
    let mut headers = HeaderMap::new();
    for name in [
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "x-kept",
    ] {
        headers.insert(name, HeaderValue::from_static("1"));
    }
    strip_framing(&mut headers);
    assert_eq!(
        headers.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["x-kept"]
    );
}

#[tokio::test]
async fn a_modified_response_is_read_whole() {
    let http = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 99\r\n\r\n";
    let answer = format!(
        "ICAP/1.0 200 OK\r\nISTag: \"t1\"\r\nEncapsulated: res-hdr=0, res-body={}\r\n\r\n{http}5\r\nhello\r\n6; x=y\r\n world\r\n0\r\nTrailer: 1\r\n\r\nNEXT",
        http.len()
    );
    let mut reader = Reader::new(answer.as_bytes());
    let a = reader.answer(LIMITS).await.unwrap();
    assert_eq!(a.status, 200);
    assert_eq!(a.body.as_deref(), Some(&b"hello world"[..]));
    match &a.heads[..] {
        [HttpHead::Response { status, headers }] => {
            assert_eq!(status.as_u16(), 200);
            assert_eq!(headers["content-type"], "text/plain");
        }
        other => panic!("{other:?}"),
    }
    assert!(a.keeps_alive() && reader.has_leftover());
}

#[tokio::test]
async fn malformed_answers_are_errors_not_panics() {
    let http = "HTTP/1.1 200 OK\r\n\r\n";
    let cases: Vec<(String, WireError)> = vec![
        ("garbage\r\n\r\n".into(), WireError::StatusLine),
        ("ICAP/1.0 200 OK\r\n\r\n".into(), WireError::Encapsulated),
        (
            format!("ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, null-body=5\r\n\r\n{http}"),
            WireError::HttpHead,
        ),
        (
            format!("ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, null-body=50\r\n\r\n{http}"),
            WireError::Truncated,
        ),
        (
            format!(
                "ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body={}\r\n\r\n{http}zz\r\n",
                http.len()
            ),
            WireError::Chunk,
        ),
        (
            format!(
                "ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body={}\r\n\r\n{http}5\r\nhelloXX",
                http.len()
            ),
            WireError::Chunk,
        ),
        (
            format!(
                "ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body={}\r\n\r\n{http}5\r\nhel",
                http.len()
            ),
            WireError::Truncated,
        ),
        (
            format!(
                "ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body={}\r\n\r\n{http}800\r\n{}\r\n0\r\n\r\n",
                http.len(),
                "x".repeat(0x800)
            ),
            WireError::TooLarge,
        ),
        (
            format!("ICAP/1.0 200 OK\r\nX: {}\r\n\r\n", "y".repeat(5000)),
            WireError::TooLarge,
        ),
        (
            "ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, null-body=100000\r\n\r\n".into(),
            WireError::TooLarge,
        ),
        ("ICAP/1.0 200 OK\r\nEncaps".into(), WireError::Truncated),
    ];
    for (answer, expected) in cases {
        assert_eq!(
            wire_error(read(answer.as_bytes()).await),
            expected,
            "{answer:?}"
        );
    }
    // An error status without a message is an answer, not a malformed one.
    assert_eq!(
        read(b"ICAP/1.0 500 Server Error\r\n\r\n")
            .await
            .unwrap()
            .status,
        500
    );
    let closing = read(b"ICAP/1.0 204 No Content\r\nConnection: close\r\n\r\n").await;
    assert!(!closing.unwrap().keeps_alive());
}
