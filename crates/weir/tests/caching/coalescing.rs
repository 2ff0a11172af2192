//! Concurrent misses coalesced into one origin fetch; waiters served while it streams.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::setup;

/// `n` GETs of `url` sent at once, each on a task of its own; their responses.
async fn concurrent_gets(client: &reqwest::Client, url: &str, n: usize) -> Vec<Fetched> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, url) = (client.clone(), url.to_string());
        set.spawn(async move { get(&client, &url, &[]).await });
    }
    let mut results = Vec::new();
    while let Some(r) = set.join_next().await {
        results.push(r.expect("request task"));
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_are_coalesced_into_one_origin_fetch() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/popular",
        Reply::ok("the one and only fetch")
            .cc("max-age=60")
            .delay(Duration::from_millis(300)),
    );
    let results = concurrent_gets(&client, &origin.url("/popular"), 20).await;
    assert_eq!(
        origin.count("/popular"),
        1,
        "20 concurrent misses, one origin fetch"
    );
    let statuses: Vec<String> = results.iter().map(|r| r.cache_status()).collect();
    for r in &results {
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "the one and only fetch")
        );
    }
    let collapsed = statuses
        .iter()
        .filter(|cs| cs_has(cs, "collapsed", None))
        .count();
    assert!(
        collapsed >= 1,
        "at least one waiter is marked `weir; fwd=miss; collapsed`: {statuses:?}"
    );
    for cs in &statuses {
        assert!(
            cs_has(cs, "collapsed", None) || is_hit(cs) || cs_has(cs, "stored", None),
            "unexpected Cache-Status {cs:?} among {statuses:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_waiters_are_served_while_the_fetch_streams() {
    let (origin, proxy, _client) = setup();
    const LEN: u64 = 2_000_000; // 31 chunks, 50 ms apart: about 1.5 s
    origin.route(
        "/streaming",
        Reply::stream(LEN)
            .cc("max-age=60")
            .chunk_delay(Duration::from_millis(50)),
    );
    let url = origin.url("/streaming");
    let start = Instant::now();
    let a_client = proxied_client(proxy.forward_addr());
    let mut a = a_client.get(&url).send().await.expect("first request");
    let first = a.chunk().await.expect("first chunk").expect("some body");
    let a_task = tokio::spawn(async move {
        let mut len = first.len() as u64;
        while let Some(c) = a.chunk().await.expect("first client's body") {
            len += c.len() as u64;
        }
        (len, start.elapsed())
    });

    let b_client = proxied_client(proxy.forward_addr());
    let mut b = b_client.get(&url).send().await.expect("second request");
    let b_cs = b
        .headers()
        .get("cache-status")
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let mut b_body = Vec::new();
    let b_first = b
        .chunk()
        .await
        .expect("second client's body")
        .expect("some body");
    let b_first_at = start.elapsed();
    b_body.extend_from_slice(&b_first);
    while let Some(c) = b.chunk().await.expect("second client's body") {
        b_body.extend_from_slice(&c);
    }
    let (a_len, a_done) = a_task.await.unwrap();
    assert_eq!(a_len, LEN);
    assert_eq!(b_body.len() as u64, LEN);
    assert!(
        b_body == pattern(LEN as usize),
        "second client's body differs"
    );
    assert_eq!(origin.count("/streaming"), 1, "one origin fetch for both");
    assert!(
        b_first_at < a_done,
        "the waiter's first bytes ({b_first_at:?}) came only after the fetch ended ({a_done:?})"
    );
    assert!(
        cs_has(&b_cs, "collapsed", None),
        "second client's Cache-Status: {b_cs:?}"
    );
}

/// Clients that joined another client's fetch are answered as a stored copy would
/// answer them: without the fields the origin kept from reuse (`private="…"`,
/// `no-cache="…"`), which only the client that asked gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_clients_do_not_get_the_fields_kept_from_reuse() {
    let (origin, _proxy, client) = setup();
    origin.route(
        "/qualified",
        Reply::ok("shared")
            .cc(r#"max-age=60, private="set-cookie", no-cache="x-secret""#)
            .header("set-cookie", "session=first-client")
            .header("x-secret", "s")
            .header("x-kept", "k")
            .delay(Duration::from_millis(300)),
    );
    let mut with_fields = 0;
    let mut collapsed = 0;
    for r in concurrent_gets(&client, &origin.url("/qualified"), 10).await {
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "shared"));
        assert_eq!(r.header("x-kept").as_deref(), Some("k"));
        let cs = r.cache_status();
        if cs_has(&cs, "collapsed", None) {
            collapsed += 1;
            assert_eq!(r.header("set-cookie"), None, "{cs}");
            assert_eq!(r.header("x-secret"), None, "{cs}");
        } else if r.header("set-cookie").is_some() {
            with_fields += 1;
            assert_eq!(r.header("x-secret").as_deref(), Some("s"));
        }
    }
    assert_eq!(origin.count("/qualified"), 1);
    assert!(collapsed >= 1, "some clients joined the fetch");
    assert_eq!(with_fields, 1, "only the client whose request was fetched");
}
