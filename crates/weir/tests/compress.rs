//! The built-in `compress` module through the `weir` binary, with a real origin,
//! reqwest (which sends no `Accept-Encoding` of its own and decodes nothing, so the
//! tests see the bytes on the wire) and curl `--compressed`.

mod common;

use std::io::Read;
use std::time::Duration;

use common::module_config::reverse_with_modules;
use common::*;

const MODULE: &str = "[[module]]\nname = \"compress\"\n";

/// A JavaScript body of about 20 KB.
fn script() -> Vec<u8> {
    let mut s = String::new();
    for i in 0..400 {
        s.push_str(&format!(
            "function handler{i}(event) {{ return event.value + {i}; }}\n"
        ));
    }
    s.into_bytes()
}

fn decode(encoding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match encoding {
        "gzip" => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .expect("gzip");
        }
        "br" => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .expect("brotli");
        }
        "zstd" => out = zstd::stream::decode_all(data).expect("zstd"),
        other => panic!("unexpected encoding {other}"),
    }
    out
}

fn compressed_total(proxy: &Proxy) -> f64 {
    metric(
        &proxy.metrics(),
        "weir_module_compress_compressed_total",
        &[],
    )
    .unwrap_or(0.0)
}

fn origin() -> TestOrigin {
    let origin = TestOrigin::start();
    let js = |r: Reply| {
        r.header("content-type", "application/javascript")
            .cc("max-age=60")
    };
    origin.route("/app.js", js(Reply::ok(script())).header("etag", "\"v1\""));
    origin.route(
        "/chunked.json",
        Reply::ok(script())
            .chunked()
            .header("content-type", "application/json")
            .cc("max-age=60"),
    );
    origin.route(
        "/small.txt",
        Reply::ok("tiny")
            .header("content-type", "text/plain")
            .cc("max-age=60"),
    );
    origin.route(
        "/img.png",
        Reply::ok(script())
            .header("content-type", "image/png")
            .cc("max-age=60"),
    );
    origin.route(
        "/nt.txt",
        Reply::ok(script())
            .header("content-type", "text/plain")
            .cc("max-age=60, no-transform"),
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &script()).unwrap();
    let pre = gz.finish().unwrap();
    origin.route(
        "/pre.txt",
        Reply::ok(pre)
            .header("content-type", "text/plain")
            .header("content-encoding", "gzip")
            .cc("max-age=60"),
    );
    origin.route(
        "/missing.txt",
        Reply::status(404)
            .body(script())
            .header("content-type", "text/plain"),
    );
    origin
}

#[tokio::test]
async fn each_encoding_round_trips_and_is_stored_once() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/app.js");
    let body = script();

    for (n, encoding) in ["gzip", "br", "zstd"].into_iter().enumerate() {
        for round in ["miss", "hit"] {
            let r = get(&client, &url, &[("accept-encoding", encoding)]).await;
            assert_eq!(r.status, 200);
            assert_eq!(
                r.header("content-encoding").as_deref(),
                Some(encoding),
                "{round}"
            );
            assert_eq!(decode(encoding, &r.body), body, "{encoding} {round}");
            assert!(
                r.body.len() < body.len() / 4,
                "{encoding}: {} bytes",
                r.body.len()
            );
            if let Some(len) = r.header("content-length") {
                assert_eq!(len, r.body.len().to_string(), "{encoding} {round}: framing");
            }
            assert_eq!(r.header("etag"), Some(format!("W/\"v1-{encoding}\"")));
            assert!(r
                .header_all("vary")
                .iter()
                .any(|v| v.eq_ignore_ascii_case("accept-encoding")));
            assert_eq!(
                is_hit(&r.cache_status()),
                round == "hit",
                "{encoding} {round}: {}",
                r.cache_status()
            );
        }
        // Computed once per encoding: the hit was not compressed again.
        assert_eq!(compressed_total(&proxy), (n + 1) as f64, "{encoding}");
    }
    // Another header text that chooses gzip shares gzip's object.
    let r = get(&client, &url, &[("accept-encoding", "gzip, deflate")]).await;
    assert!(is_hit(&r.cache_status()) && r.header("content-encoding").as_deref() == Some("gzip"));
    // No Accept-Encoding: the identity, stored as an object of its own.
    for round in ["miss", "hit"] {
        let r = get(&client, &url, &[]).await;
        assert!(r.header("content-encoding").is_none(), "{round}");
        assert_eq!(r.body, body);
        assert_eq!(r.header("etag").as_deref(), Some("\"v1\""));
        assert_eq!(r.header("content-length"), Some(body.len().to_string()));
        assert!(r
            .header_all("vary")
            .iter()
            .any(|v| v.eq_ignore_ascii_case("accept-encoding")));
        assert_eq!(is_hit(&r.cache_status()), round == "hit");
    }
    assert_eq!(
        origin.count("/app.js"),
        4,
        "one fetch per encoding and the identity"
    );
    assert_eq!(compressed_total(&proxy), 3.0);

    // A HEAD is answered from the stored encoding.
    let head = send(&client, "HEAD", &url, &[("accept-encoding", "br")], None).await;
    assert_eq!(head.header("content-encoding").as_deref(), Some("br"));
    assert!(is_hit(&head.cache_status()));

    // A body of unknown length (chunked from the origin).
    let r = get(
        &client,
        &proxy.reverse_url("/chunked.json"),
        &[("accept-encoding", "zstd")],
    )
    .await;
    assert_eq!(r.header("content-encoding").as_deref(), Some("zstd"));
    assert_eq!(decode("zstd", &r.body), body);
}

#[tokio::test]
async fn q_values_and_identity() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/app.js");
    for (ae, expected) in [
        ("br;q=0.2, gzip;q=0.9", Some("gzip")),
        ("identity;q=0, zstd", Some("zstd")),
        ("gzip;q=0", None),
        ("gzip;q=0.5, identity", None),
        ("*", Some("br")),
        ("*;q=0.5, br;q=0", Some("zstd")),
        ("deflate", None),
    ] {
        let r = get(&client, &url, &[("accept-encoding", ae)]).await;
        assert_eq!(r.header("content-encoding").as_deref(), expected, "{ae}");
        let body = match expected {
            Some(e) => decode(e, &r.body),
            None => r.body.to_vec(),
        };
        assert_eq!(body, script(), "{ae}");
    }
}

#[tokio::test]
async fn leaves_alone_what_it_must_not_compress() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let gz = [("accept-encoding", "gzip, br, zstd")];
    for path in ["/small.txt", "/img.png", "/nt.txt", "/missing.txt"] {
        let r = get(&client, &proxy.reverse_url(path), &gz).await;
        assert!(r.header("content-encoding").is_none(), "{path}");
        let want = if path == "/small.txt" {
            b"tiny".to_vec()
        } else {
            script()
        };
        assert_eq!(r.body, want, "{path}");
    }
    // Already gzip: passed as it is, not encoded twice.
    let r = get(&client, &proxy.reverse_url("/pre.txt"), &gz).await;
    assert_eq!(r.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(decode("gzip", &r.body), script());
    // A Range request goes to the origin, uncompressed, whatever it answers.
    let range = [("accept-encoding", "gzip"), ("range", "bytes=0-99")];
    let r = get(&client, &proxy.reverse_url("/app.js"), &range).await;
    assert!(r.header("content-encoding").is_none());
    assert!(script().starts_with(&r.body), "identity bytes");
    assert_eq!(compressed_total(&proxy), 0.0);
}

#[tokio::test]
async fn curl_compressed_decodes_it() {
    require_curl!();
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let dir = temp_dir("compress-curl");
    let headers = dir.join("headers.txt");
    let url = proxy.reverse_url("/app.js");
    for _ in 0..2 {
        let out = curl(&["--compressed", "-D", headers.to_str().unwrap(), &url]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, script());
        let h = std::fs::read_to_string(&headers)
            .unwrap()
            .to_ascii_lowercase();
        assert!(h.contains("content-encoding:"), "{h}");
    }
    assert_eq!(compressed_total(&proxy), 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stored compressed variant goes stale and the origin answers its revalidation
/// with 304 and its own tag: the variant is refreshed (not refetched, not compressed
/// again) and keeps its encoding, its per-encoding tag and its `Vary`, even when the
/// 304 carries a `Content-Type` and a `Vary` of its own.
#[tokio::test]
async fn a_stale_compressed_variant_is_refreshed_by_a_304() {
    let origin = TestOrigin::start();
    origin.route_fn("/rev.js", |req| {
        let tagged = req
            .header("if-none-match")
            .is_some_and(|v| v.contains("\"r1\""));
        if tagged {
            Reply::status(304)
                .header("etag", "\"r1\"")
                .header("content-type", "application/javascript")
                .header("vary", "Origin")
                .header("x-version", "2")
                .cc("max-age=60")
        } else {
            Reply::ok(script())
                .header("etag", "\"r1\"")
                .header("content-type", "application/javascript")
                .header("x-version", "1")
                .cc("max-age=1")
        }
    });
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/rev.js");
    let first = get(&client, &url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(first.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(first.header("etag").as_deref(), Some("W/\"r1-gzip\""));

    tokio::time::sleep(Duration::from_millis(1300)).await;
    let second = get(&client, &url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(second.status, 200, "{}", second.text());
    let cs = second.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected a refresh by 304, got {cs:?}"
    );
    assert_eq!(
        origin
            .last("/rev.js")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"r1\""),
        "the origin is asked about its own tag"
    );
    assert_eq!(second.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(decode("gzip", &second.body), script());
    assert_eq!(second.header("etag").as_deref(), Some("W/\"r1-gzip\""));
    assert_eq!(second.header("x-version").as_deref(), Some("2"));
    let vary = second.header_all("vary").join(",").to_ascii_lowercase();
    assert!(vary.contains("accept-encoding"), "{vary}");
    assert_eq!(
        compressed_total(&proxy),
        1.0,
        "refreshed, not compressed again"
    );

    // Still the gzip variant for gzip clients, still the identity for the others.
    let third = get(&client, &url, &[("accept-encoding", "gzip")]).await;
    assert!(is_hit(&third.cache_status()), "{}", third.cache_status());
    assert_eq!(third.header("content-encoding").as_deref(), Some("gzip"));
    let plain = get(&client, &url, &[]).await;
    assert!(plain.header("content-encoding").is_none());
    assert_eq!(plain.body, script());
}

/// A client that asks for no transformation (request `Cache-Control: no-transform`)
/// gets the identity object, whatever it accepts; others still get their encoding.
#[tokio::test]
async fn a_request_that_says_no_transform_gets_the_identity() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/app.js");
    let asks = [
        ("accept-encoding", "gzip, br"),
        ("cache-control", "no-transform"),
    ];
    for _ in 0..2 {
        let r = get(&client, &url, &asks).await;
        assert!(r.header("content-encoding").is_none());
        assert_eq!(r.body, script());
    }
    let r = get(&client, &url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(r.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(compressed_total(&proxy), 1.0);
}
