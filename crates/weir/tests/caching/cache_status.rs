//! `Cache-Status` (RFC 9211) on every response, and one from a cache nearer the origin.

use crate::common::*;
use crate::helpers::setup;

#[tokio::test]
async fn cache_status_is_on_every_response() {
    let (origin, proxy, client) = setup();
    origin.route("/cs", Reply::ok("cs").cc("max-age=60"));
    origin.route("/cs-post", Reply::ok("posted"));
    let url = origin.url("/cs");
    // Every mismatch is collected, so that one failure shows them all.
    let mut wrong = Vec::new();

    let r = get(&client, &url, &[]).await;
    if r.cache_status() != "weir; fwd=miss; stored" {
        wrong.push(format!(
            "first GET: {:?}, expected \"weir; fwd=miss; stored\"",
            r.cache_status()
        ));
    }
    let r = get(&client, &url, &[]).await;
    if r.cache_status() != "weir; hit" {
        wrong.push(format!(
            "second GET: {:?}, expected \"weir; hit\"",
            r.cache_status()
        ));
    }

    // A request whose method must be forwarded (RFC 9211 §2.2: fwd=method).
    let r = send(
        &client,
        "POST",
        &origin.url("/cs-post"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(r.status, 200);
    if !cs_has(&r.cache_status(), "fwd", Some("method")) {
        wrong.push(format!(
            "POST: {:?}, expected \"weir; fwd=method\"",
            r.cache_status()
        ));
    }

    // Errors carry it too.
    let dead = format!("http://127.0.0.1:{}/nothing-listens", free_port());
    let r = get(&client, &dead, &[]).await;
    assert_eq!(r.status, 502);
    if weir_cache_status(&r.cache_status()).is_none() {
        wrong.push(format!(
            "502: no weir Cache-Status ({:?})",
            r.cache_status()
        ));
    }
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            free_port()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 403);
    if r.header("cache-status")
        .and_then(weir_cache_status)
        .is_none()
    {
        wrong.push(format!("403: no weir Cache-Status ({:?})", r.headers));
    }
    assert_eq!(origin.count("/cs"), 1);
    assert_eq!(origin.count("/cs-post"), 1);
    assert!(
        wrong.is_empty(),
        "Cache-Status problems:\n{}",
        wrong.join("\n")
    );
}

/// Where `entry` starts in a `Cache-Status` value (panics, showing it, when absent).
fn position(cs: &str, entry: &str) -> usize {
    cs.find(entry)
        .unwrap_or_else(|| panic!("Cache-Status {cs:?} has no {entry:?}"))
}

#[tokio::test]
async fn cache_status_from_a_cache_nearer_the_origin_is_kept_before_ours() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/chain",
        Reply::ok("chained")
            .cc("max-age=60")
            .header("cache-status", "upstream; hit"),
    );
    let url = origin.url("/chain");

    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "chained"));
    let cs = r.cache_status();
    assert!(
        position(&cs, "upstream; hit") < position(&cs, "weir; fwd=miss; stored"),
        "ours must follow the origin's entry: {cs:?}"
    );
    assert_eq!(cs, "upstream; hit, weir; fwd=miss; stored");

    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "chained"));
    let cs = r.cache_status();
    assert!(
        position(&cs, "upstream; hit") < position(&cs, "weir; hit"),
        "ours must follow the stored entry: {cs:?}"
    );
    assert_eq!(cs, "upstream; hit, weir; hit");
    assert_eq!(origin.count("/chain"), 1);
}
