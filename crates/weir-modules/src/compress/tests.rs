//! The compressor's callbacks, called directly.

use super::*;
use std::io::Read;
use weir_api::engine;

fn module(text: &str) -> Compress {
    Compress::from_settings(&Settings::parse(text).unwrap(), &ModuleContext::detached()).unwrap()
}

fn request(method: &str, headers: &[(&str, &str)]) -> RequestHead {
    let mut b = weir_api::http::Request::builder()
        .method(method)
        .uri("http://site.example/app.js");
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn response(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
    let mut b = weir_api::http::Response::builder().status(status);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap().into_parts().0
}

/// Runs request headers, then (in a fill's transaction with the same overrides)
/// response headers and the body; returns the response head and body.
fn run(
    m: &Compress,
    req: &[(&str, &str)],
    resp: &[(&str, &str)],
    body: &[u8],
) -> (ResponseHead, Vec<u8>) {
    let mut client = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let _ = m.on_request_headers(&mut client, &mut request("GET", req));
    let mut fill = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    *fill.cache() = client.cache_overrides().clone();
    let mut head = response(200, resp);
    let _ = m.on_response_headers(&mut fill, &mut head);
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = body.chunks(1000).collect();
    for (i, c) in chunks.iter().enumerate() {
        let mut chunk = BodyChunk {
            data: Bytes::copy_from_slice(c),
            last: i + 1 == chunks.len(),
        };
        let _ = m.on_response_body(&mut fill, &mut chunk);
        out.extend_from_slice(&chunk.data);
    }
    (head, out)
}

fn js(n: usize) -> Vec<u8> {
    b"function f(a, b) { return a + b; }\n"
        .iter()
        .cycle()
        .take(n)
        .copied()
        .collect()
}

#[test]
fn settings_are_checked() {
    let bad = |t: &str| {
        Compress::from_settings(&Settings::parse(t).unwrap(), &ModuleContext::detached())
            .err()
            .unwrap()
    };
    assert_eq!(bad("encodings = []").key.as_deref(), Some("encodings"));
    assert!(bad("encodings = [\"deflate\"]")
        .to_string()
        .contains("deflate"));
    assert_eq!(bad("gzip_level = 10").key.as_deref(), Some("gzip_level"));
    assert_eq!(
        bad("brotli_level = 12").key.as_deref(),
        Some("brotli_level")
    );
    assert_eq!(bad("zstd_level = 0").key.as_deref(), Some("zstd_level"));
    assert_eq!(
        bad("types = [\"text/*\", \"bad\"]").key.as_deref(),
        Some("types[1]")
    );
    assert_eq!(bad("min_sise = 1").key.as_deref(), Some("min_sise"));
    module("encodings = [\"gzip\"]\ntypes = [\"text/html\"]\nmin_size = 0\ngzip_level = 9");
}

#[test]
fn compresses_with_the_negotiated_encoding() {
    let m = module("");
    let body = js(50_000);
    for (ae, token) in [
        ("gzip", "gzip"),
        ("gzip, br", "br"),
        ("zstd, gzip;q=0.5", "zstd"),
    ] {
        let (head, out) = run(
            &m,
            &[("accept-encoding", ae)],
            &[
                ("content-type", "application/javascript"),
                ("etag", "\"v1\""),
                ("accept-ranges", "bytes"),
            ],
            &body,
        );
        assert_eq!(head.headers["content-encoding"], token, "{ae}");
        assert_eq!(head.headers["etag"], format!("W/\"v1-{token}\""));
        assert!(head.headers.get("accept-ranges").is_none());
        let mut decoded = Vec::new();
        match token {
            "gzip" => {
                flate2::read::GzDecoder::new(&out[..])
                    .read_to_end(&mut decoded)
                    .unwrap();
            }
            "br" => {
                brotli::Decompressor::new(&out[..], 4096)
                    .read_to_end(&mut decoded)
                    .unwrap();
            }
            _ => decoded = zstd::stream::decode_all(&out[..]).unwrap(),
        }
        assert_eq!(decoded, body, "{ae}");
        assert!(out.len() < body.len() / 10);
    }
    assert_eq!(m.compressed.get(), 3);
}

#[test]
fn leaves_alone_what_it_must() {
    let m = module("");
    let body = js(5000);
    let gz = [("accept-encoding", "gzip")];
    let text = ("content-type", "text/plain");
    for (req, resp) in [
        (&[][..], vec![text]),
        (&[("accept-encoding", "identity")][..], vec![text]),
        (&gz[..], vec![("content-type", "image/png")]),
        (
            &gz[..],
            vec![text, ("cache-control", "max-age=60, no-transform")],
        ),
        (&gz[..], vec![text, ("content-encoding", "br")]),
        (&gz[..], vec![text, ("content-length", "100")]),
        (
            &[("accept-encoding", "gzip"), ("range", "bytes=0-9")][..],
            vec![text],
        ),
    ] {
        let (head, out) = run(&m, req, &resp, &body);
        let ce = head
            .headers
            .get("content-encoding")
            .map(|v| v.to_str().unwrap());
        assert!(ce.is_none() || ce == Some("br"), "{req:?} {resp:?}");
        assert_eq!(out, body, "{req:?} {resp:?}");
    }
    assert_eq!(m.compressed.get(), 0);
}

#[test]
fn head_requests_get_headers_and_no_body() {
    let m = module("");
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let _ = m.on_request_headers(&mut t, &mut request("HEAD", &[("accept-encoding", "br")]));
    let mut head = response(
        200,
        &[("content-type", "text/html"), ("content-length", "5000")],
    );
    let _ = m.on_response_headers(&mut t, &mut head);
    assert_eq!(head.headers["content-encoding"], "br");
    assert!(t.body_length_changes());
    let mut chunk = BodyChunk {
        data: Bytes::new(),
        last: true,
    };
    let _ = m.on_response_body(&mut t, &mut chunk);
    assert!(chunk.data.is_empty());
}

#[test]
fn revalidation_and_delivery_headers() {
    let m = module("");
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let _ = m.on_request_headers(&mut t, &mut request("GET", &[("accept-encoding", "gzip")]));
    let mut up = request("GET", &[("if-none-match", "W/\"v1-gzip\"")]);
    let _ = m.on_upstream_request(&mut t, &mut up);
    assert_eq!(up.headers["if-none-match"], "W/\"v1\"");
    // Vary on what varies by encoding, compressed or not; not on images.
    for (resp, vary) in [
        (
            vec![("content-type", "text/html"), ("content-encoding", "gzip")],
            true,
        ),
        (vec![("content-type", "text/html")], true),
        (vec![("content-type", "image/png")], false),
        (
            vec![
                ("content-type", "text/html"),
                ("content-encoding", "compress"),
            ],
            false,
        ),
    ] {
        let mut head = response(200, &resp);
        let _ = m.on_deliver_headers(&mut t, &mut head);
        assert_eq!(head.headers.get("vary").is_some(), vary, "{resp:?}");
    }
}
