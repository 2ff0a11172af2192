//! The framing guard fed the reads hyper would make.

use super::*;
use crate::metrics::ErrorKind;

fn feed(pieces: &[&[u8]]) -> (u64, Arc<FramingReport>) {
    let (mut g, report) = FramingGuard::new((), 65536, Arc::new(Metrics::new()));
    for p in pieces {
        g.observe(&mut p.to_vec());
    }
    (g.requests, report)
}

#[test]
fn follows_fixed_and_chunked_bodies_across_reads() {
    let (n, report) = feed(&[
        b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhel",
        b"loPOST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
        b"c\r\n0\r\n\r\nGET /c HTTP/1.1\r\nHo",
        b"st: h\r\n\r\n",
    ]);
    assert_eq!(n, 3);
    assert!(!report.is_ambiguous(1) && !report.is_ambiguous(2) && !report.is_ambiguous(3));
}

#[test]
fn flags_content_length_with_transfer_encoding() {
    let (n, report) = feed(&[
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ]);
    assert_eq!(n, 2);
    assert!(report.is_ambiguous(2));
    assert!(!report.is_ambiguous(1));
}

#[test]
fn a_body_that_looks_like_a_request_is_not_parsed() {
    let body = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let head = format!(
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (n, report) = feed(&[head.as_bytes(), body]);
    assert_eq!(n, 1);
    assert!(!report.is_ambiguous(1) && !report.is_ambiguous(2));
}

#[test]
fn replaces_only_hypers_bare_error_answers() {
    let hyper_400 =
        b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
    let (bytes, kind) = replacement_for(hyper_400, 32768, Oversize::Section).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert!(text.ends_with(
        "\r\n\r\nmalformed request: not a valid HTTP/1.1 request line and header section\n"
    ));
    assert_eq!(kind, ErrorKind::BadRequest);
    let ours = b"HTTP/1.1 400 Bad Request\r\ncache-status: weir; detail=refused\r\ncontent-length: 0\r\n\r\n";
    assert!(replacement_for(ours, 32768, Oversize::Section).is_none());
    assert!(replacement_for(
        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
        32768,
        Oversize::Section
    )
    .is_none());
}

#[test]
fn steps_aside_for_http2() {
    let (n, _) = feed(&[
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
    ]);
    assert_eq!(n, 0);
}

#[test]
fn renames_proxy_connection_of_an_http10_head_in_place() {
    let (mut g, _) = FramingGuard::new((), 65536, Arc::new(Metrics::new()));
    let mut read =
        b"GET http://h/ HTTP/1.0\r\nHost: h\r\nProxy-Connection: keep-alive\r\n\r\n".to_vec();
    g.observe(&mut read);
    assert_eq!(
        &read[..],
        &b"GET http://h/ HTTP/1.0\r\nHost: h\r\nConnection:       keep-alive\r\n\r\n"[..]
    );
    // A field that came in an earlier read is already hyper's: left alone.
    let mut first = b"GET http://h/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n".to_vec();
    let mut second = b"Host: h\r\n\r\n".to_vec();
    g.observe(&mut first);
    g.observe(&mut second);
    assert!(first.starts_with(b"GET http://h/ HTTP/1.0\r\nProxy-Connection"));
    assert_eq!(g.requests, 2);
}

#[test]
fn hypers_refusals_of_large_heads_say_what_the_service_says() {
    let bare = |status: &str| {
        format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
    };
    let text = |r: Option<(Vec<u8>, ErrorKind)>| String::from_utf8(r.unwrap().0).unwrap();
    let big = text(replacement_for(
        bare("431 Request Header Fields Too Large").as_bytes(),
        32768,
        Oversize::Section,
    ));
    assert!(
        big.ends_with("request header section is larger than 32768 bytes\n"),
        "{big}"
    );
    let many = text(replacement_for(
        bare("431 Request Header Fields Too Large").as_bytes(),
        32768,
        Oversize::Fields,
    ));
    assert!(many.ends_with("more than 256 header fields\n"), "{many}");
    let target = text(replacement_for(
        bare("431 Request Header Fields Too Large").as_bytes(),
        32768,
        Oversize::Target,
    ));
    assert!(target.starts_with("HTTP/1.1 414 "), "{target}");
    assert!(
        target.ends_with("request target is longer than 32768 bytes\n"),
        "{target}"
    );
    // A target over hyper's 65,534 bytes is over a 32 KiB limit too: the service's
    // 414 for a target over the limit.
    let long = text(replacement_for(
        bare("414 URI Too Long").as_bytes(),
        32768,
        Oversize::Section,
    ));
    assert!(long.starts_with("HTTP/1.1 414 "), "{long}");
    assert!(
        long.ends_with("request target is longer than 32768 bytes\n"),
        "{long}"
    );
    let allowed = text(replacement_for(
        bare("414 URI Too Long").as_bytes(),
        1 << 20,
        Oversize::Section,
    ));
    assert!(
        allowed.ends_with("request target is longer than 65534 bytes\n"),
        "{allowed}"
    );
}

#[test]
fn notes_a_head_with_too_many_fields() {
    let (mut g, _) = FramingGuard::new((), 65536, Arc::new(Metrics::new()));
    let mut head = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_REQUEST_FIELDS {
        head.extend_from_slice(format!("x{i}: y\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    g.observe(&mut head);
    assert_eq!(g.oversize, Oversize::Fields);
}

#[test]
fn pipelined_heads_in_one_read_are_each_followed_and_mended() {
    let (mut g, report) = FramingGuard::new((), 65536, Arc::new(Metrics::new()));
    let first = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n".as_slice();
    let second = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".as_slice();
    let third =
        b"GET http://h/ HTTP/1.0\r\nHost: h\r\nProxy-Connection: keep-alive\r\n\r\n".as_slice();
    let mut read = [first, second, third].concat();
    g.observe(&mut read);
    assert_eq!(g.requests, 3);
    assert!(!report.is_ambiguous(1) && report.is_ambiguous(2) && !report.is_ambiguous(3));
    let mended = &read[first.len() + second.len()..];
    assert_eq!(
        mended,
        &b"GET http://h/ HTTP/1.0\r\nHost: h\r\nConnection:       keep-alive\r\n\r\n"[..]
    );
    assert!(g.between_requests());
}

#[test]
fn tells_a_target_longer_than_the_limit() {
    assert!(target_longer_than(b"GET /aaaaaaaaaa HTTP/1.1\r\n", 10));
    assert!(!target_longer_than(b"GET /aaaaaaaaa HTTP/1.1\r\n", 10));
    // Cut short: the line has not ended yet.
    assert!(target_longer_than(b"GET http://h/aaaaaaaaaa", 10));
    assert!(!target_longer_than(
        b"GET / HTTP/1.1\r\nX: aaaaaaaaaaaaaaaaaaaa",
        10
    ));
    assert!(!target_longer_than(b"GARBAGE", 3));
}

#[test]
fn notes_a_head_whose_target_fills_hypers_buffer() {
    // A limit of 100 bytes: hyper's buffer holds 2 × 100 + 8,192.
    let mut g = FramingGuard::new((), 100, Arc::new(Metrics::new())).0;
    g.observe(&mut format!("GET /{} HTTP/1.1\r\n", "a".repeat(9000)).into_bytes());
    assert_eq!(g.oversize, Oversize::Target);
    let mut g = FramingGuard::new((), 100, Arc::new(Metrics::new())).0;
    g.observe(&mut format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(9000)).into_bytes());
    assert_eq!(g.oversize, Oversize::Section);
}
