//! Range requests answered from stored copies (memory and disk) and from kept parts
//! (`parts.rs`), against the real binary and a real origin.

#[path = "../common/mod.rs"]
mod common;
mod parts;

use std::time::Duration;

use common::*;

fn range(r: &Fetched) -> Option<String> {
    r.header("content-range")
}

#[tokio::test]
async fn a_stored_copy_answers_single_ranges() {
    let origin = TestOrigin::start();
    origin.route(
        "/r",
        Reply::ok("0123456789")
            .cc("max-age=600")
            .header("etag", "\"v1\""),
    );
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/r");

    // Not stored yet: forwarded with its range. This origin ignores ranges, and its
    // whole answer is stored as it passes.
    let r = get(&client, &url, &[("range", "bytes=0-1")]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "0123456789"));
    assert_eq!(r.cache_status(), "weir; fwd=bypass; stored");
    let r = get(&client, &url, &[]).await;
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    assert_eq!(origin.count("/r"), 1);

    for (asked, body, content_range) in [
        ("bytes=2-5", "2345", "bytes 2-5/10"),
        ("bytes=-3", "789", "bytes 7-9/10"),
        ("bytes=8-", "89", "bytes 8-9/10"),
        ("bytes=9-100", "9", "bytes 9-9/10"),
    ] {
        let r = get(&client, &url, &[("range", asked)]).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (206, body),
            "{asked}"
        );
        assert_eq!(range(&r).as_deref(), Some(content_range), "{asked}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string()),
            "{asked}"
        );
        assert!(is_hit(&r.cache_status()), "{asked}: {:?}", r.cache_status());
    }
    let r = get(&client, &url, &[("range", "bytes=20-")]).await;
    assert_eq!(r.status.as_u16(), 416);
    assert_eq!(range(&r).as_deref(), Some("bytes */10"));
    // Several ranges, or an If-Range that does not match: the whole copy.
    for headers in [
        vec![("range", "bytes=0-1,4-5")],
        vec![("range", "bytes=0-1"), ("if-range", "\"v0\"")],
    ] {
        let r = get(&client, &url, &headers).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "0123456789"),
            "{headers:?}"
        );
    }
    let r = get(
        &client,
        &url,
        &[("range", "bytes=0-1"), ("if-range", "\"v1\"")],
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (206, "01"));
    assert_eq!(origin.count("/r"), 1, "every range came from the cache");
}

#[tokio::test]
async fn a_range_of_a_large_object_is_read_from_disk() {
    const LEN: usize = 3 << 20;
    let origin = TestOrigin::start();
    origin.route("/big", Reply::stream(LEN as u64).cc("max-age=600"));
    let dir = temp_dir("ranges-disk");
    let proxy = Proxy::builder()
        .forward()
        .option(
            "cache",
            "disk",
            &format!(
                "{{ path = {:?}, size = \"64MiB\" }}",
                dir.display().to_string()
            ),
        )
        .option("cache", "max_memory_object", "64KiB")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/big");
    get(&client, &url, &[]).await;
    let stored = wait_until(Duration::from_secs(10), || {
        metric(&proxy.metrics(), "weir_cache_disk_entries", &[]).is_some_and(|n| n >= 1.0)
    });
    assert!(stored, "not written to disk");
    let r = get(&client, &url, &[("range", "bytes=1000000-1099999")]).await;
    assert_eq!(r.status.as_u16(), 206);
    assert!(
        r.body == pattern(LEN)[1_000_000..1_100_000],
        "slice differs"
    );
    assert_eq!(
        range(&r).as_deref(),
        Some(format!("bytes 1000000-1099999/{LEN}").as_str())
    );
    assert_eq!(origin.count("/big"), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An origin that answers `Range: bytes=A-B` with a 206 and anything else with the
/// whole body, with `cache_control` on both.
fn ranged(origin: &TestOrigin, path: &str, len: usize, cache_control: &'static str) {
    let body: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
    origin.route_fn(path, move |req| {
        let asked = req.header("range").and_then(|r| {
            let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
            Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
        });
        match asked {
            Some((a, b)) if a <= b && b < len => Reply::status(206)
                .body(body[a..=b].to_vec())
                .header("content-range", format!("bytes {a}-{b}/{len}"))
                .header("etag", "\"r1\"")
                .cc(cache_control),
            _ => Reply::ok(body.clone())
                .header("etag", "\"r1\"")
                .cc(cache_control),
        }
    });
}

fn whole_fetches(origin: &TestOrigin, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r| r.path == path && r.header("range").is_none())
        .count()
}

/// A range miss is answered with the origin's 206 at once, and the whole object is
/// then fetched in the background and stored: the next ranges are hits. Not when the
/// 206 says the object may not be stored, or that it is larger than `max_object`.
#[tokio::test]
async fn a_range_miss_fills_the_cache_in_the_background() {
    let origin = TestOrigin::start();
    ranged(&origin, "/clip", 10_000, "max-age=600");
    ranged(&origin, "/private", 10_000, "no-store");
    ranged(&origin, "/huge", 100_000, "max-age=600");
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "max_object", "\"64KiB\"")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let expected = |a: usize, b: usize| -> String {
        (a..=b).map(|i| (b'a' + (i % 26) as u8) as char).collect()
    };

    let url = origin.url("/clip");
    let first = get(&client, &url, &[("range", "bytes=0-99")]).await;
    assert_eq!(first.status.as_u16(), 206);
    assert_eq!(first.text(), expected(0, 99));
    assert!(!is_hit(&first.cache_status()), "{}", first.cache_status());
    assert!(
        origin.wait_until(Duration::from_secs(10), |o| whole_fetches(o, "/clip") == 1),
        "the whole object was fetched in the background"
    );
    // The background fetch stores the object as it ends; wait for the hit.
    let mut hit = None;
    for _ in 0..100 {
        let r = get(&client, &url, &[("range", "bytes=5000-5099")]).await;
        if is_hit(&r.cache_status()) {
            hit = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hit = hit.expect("a later range is a hit");
    assert_eq!(hit.status.as_u16(), 206);
    assert_eq!(hit.text(), expected(5000, 5099));
    assert_eq!(range(&hit).as_deref(), Some("bytes 5000-5099/10000"));
    let whole = get(&client, &url, &[]).await;
    assert!(is_hit(&whole.cache_status()));
    assert_eq!(whole.text(), expected(0, 9_999));
    assert_eq!(whole_fetches(&origin, "/clip"), 1);

    // Too large to be fetched whole, /huge keeps its part (see parts.rs).
    for (path, second_is_hit) in [("/private", false), ("/huge", true)] {
        let url = origin.url(path);
        for hit in [false, second_is_hit] {
            let r = get(&client, &url, &[("range", "bytes=10-19")]).await;
            assert_eq!(
                (r.status.as_u16(), r.text()),
                (206, expected(10, 19)),
                "{path}"
            );
            assert_eq!(is_hit(&r.cache_status()), hit, "{path}");
        }
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            whole_fetches(&origin, path),
            0,
            "{path}: nothing fetched whole"
        );
    }
}

/// `Range: bytes=0-` (a media player's first request) asks for everything: the origin
/// is asked once, without the range, the object is stored, and the client gets the
/// 206 of all its bytes; later requests for it or for a range of it are hits. A HEAD
/// with such a range is answered as a HEAD.
#[tokio::test]
async fn a_range_of_every_byte_is_filled_once_as_a_plain_get() {
    let origin = TestOrigin::start();
    ranged(&origin, "/movie", 50_000, "max-age=600");
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/movie");
    let everything: String = (0..50_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    for hit in [false, true] {
        let r = get(&client, &url, &[("range", "bytes=0-")]).await;
        assert_eq!(r.status.as_u16(), 206, "{}", r.cache_status());
        assert_eq!(range(&r).as_deref(), Some("bytes 0-49999/50000"));
        assert_eq!(r.header("content-length").as_deref(), Some("50000"));
        assert!(r.text() == everything, "the whole body");
        assert_eq!(is_hit(&r.cache_status()), hit, "{}", r.cache_status());
    }
    let r = get(&client, &url, &[("range", "bytes=100-109")]).await;
    assert_eq!(
        (r.status.as_u16(), r.text()),
        (206, everything[100..110].to_string())
    );
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(origin.count("/movie"), 1, "one fetch, no background one");
    assert_eq!(whole_fetches(&origin, "/movie"), 1);
    let r = send(&client, "HEAD", &url, &[("range", "bytes=0-")], None).await;
    assert_eq!(r.status.as_u16(), 200);
    assert!(r.header("content-range").is_none());
}

/// An origin that ignores ranges answers a range miss with the whole object: one too
/// large for the memory tier is fetched again in the background and stored (on disk),
/// one not to be stored is not; after that, ranges are hits.
#[tokio::test]
async fn a_whole_answer_to_a_range_miss_fills_the_cache() {
    let origin = TestOrigin::start();
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    origin.route("/big", Reply::ok(body.clone()).cc("max-age=600"));
    origin.route("/nostore", Reply::ok(body.clone()).cc("no-store"));
    let dir = temp_dir("ranges-whole-answer");
    let disk = format!(
        "{{ path = {:?}, size = \"64MiB\" }}",
        dir.display().to_string()
    );
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "disk", &disk)
        .option("cache", "max_memory_object", "64KiB")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/big");
    let first = get(&client, &url, &[("range", "bytes=10-19")]).await;
    assert_eq!(first.status.as_u16(), 200);
    assert!(first.body == body, "the whole body");
    let stored = wait_until(Duration::from_secs(10), || {
        metric(&proxy.metrics(), "weir_cache_disk_entries", &[]).is_some_and(|n| n >= 1.0)
    });
    assert!(stored, "fetched again and written to disk");
    let hit = get(&client, &url, &[("range", "bytes=1000-1009")]).await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert_eq!(hit.status.as_u16(), 206);
    assert!(hit.body == body[1000..1010], "bytes 1000-1009");
    assert_eq!(
        origin.count("/big"),
        2,
        "the range miss, then the background fetch"
    );

    let url = origin.url("/nostore");
    for _ in 0..2 {
        let r = get(&client, &url, &[("range", "bytes=10-19")]).await;
        assert_eq!(r.status.as_u16(), 200);
        assert_eq!(r.cache_status(), "weir; fwd=bypass");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(origin.count("/nostore"), 2);
}

/// The background fetch of the whole object asks for the object alone: without the
/// client's range, preconditions, freshness demands and request-body fields, and with
/// the fields that may choose the representation (here `Cookie`, `Accept-Language`).
#[tokio::test]
async fn the_background_fetch_leaves_out_what_only_the_range_request_asked() {
    let origin = TestOrigin::start();
    ranged(&origin, "/doc", 4_000, "max-age=600");
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/doc");
    let asked = [
        ("range", "bytes=0-9"),
        ("if-range", "\"r1\""),
        ("if-match", "\"r1\""),
        ("if-none-match", "\"old\""),
        ("if-modified-since", "Tue, 15 Nov 1994 08:12:31 GMT"),
        ("if-unmodified-since", "Tue, 15 Nov 2044 08:12:31 GMT"),
        ("cache-control", "max-age=0, min-fresh=5"),
        ("content-type", "text/plain"),
        ("cookie", "session=1"),
        ("accept-language", "fr"),
    ];
    // A GET with a body: its Content-Length must not reach the body-less fetch.
    let first = send(&client, "GET", &url, &asked, Some(b"x".to_vec())).await;
    assert_eq!(first.status.as_u16(), 206);
    assert!(
        origin.wait_until(Duration::from_secs(10), |o| whole_fetches(o, "/doc") == 1),
        "the whole object was fetched in the background"
    );
    let fetch = origin
        .requests()
        .into_iter()
        .find(|r| r.path == "/doc" && r.header("range").is_none())
        .unwrap();
    for (name, _) in &asked[..8] {
        assert_eq!(
            fetch.header(name),
            None,
            "{name} reached the whole-object fetch"
        );
    }
    assert_eq!(fetch.header("content-length"), None);
    assert!(fetch.body.is_empty());
    assert_eq!(fetch.header("cookie").as_deref(), Some("session=1"));
    assert_eq!(fetch.header("accept-language").as_deref(), Some("fr"));
    let mut hit = false;
    for _ in 0..100 {
        let r = get(
            &client,
            &url,
            &[("range", "bytes=100-109"), ("cookie", "session=1")],
        )
        .await;
        if is_hit(&r.cache_status()) {
            assert_eq!(range(&r).as_deref(), Some("bytes 100-109/4000"));
            hit = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(hit, "a later range is served from the stored object");
}
