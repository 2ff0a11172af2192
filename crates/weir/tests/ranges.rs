//! Range requests answered from stored copies (memory and disk), against the real
//! binary and a real origin.

mod common;

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

    // Not stored yet: forwarded as before (this origin ignores Range), not stored.
    let r = get(&client, &url, &[("range", "bytes=0-1")]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "0123456789"));
    assert!(!is_hit(&r.cache_status()), "{:?}", r.cache_status());
    get(&client, &url, &[]).await;
    assert_eq!(origin.count("/r"), 2);

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
    assert_eq!(origin.count("/r"), 2, "every range came from the cache");
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
