//! Stale entries revalidated (ETag, Last-Modified, 304) and clients' conditional requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::helpers::{assert_forwarded, assert_hit, assert_stored_miss, setup};

#[tokio::test]
async fn stale_entry_is_validated_with_if_none_match_and_updated_on_304() {
    let (origin, _proxy, client) = setup();
    origin.route_fn("/etag", |req| {
        if req.header("if-none-match").as_deref() == Some("\"v1\"") {
            Reply::status(304)
                .header("etag", "\"v1\"")
                .cc("max-age=60")
                .header("x-version", "2")
        } else {
            Reply::ok("etag body")
                .header("etag", "\"v1\"")
                .cc("max-age=1")
                .header("x-version", "1")
        }
    });
    let url = origin.url("/etag");
    let first = get(&client, &url, &[]).await;
    assert_eq!(first.header("x-version").as_deref(), Some("1"));

    tokio::time::sleep(Duration::from_millis(1300)).await;
    let second = get(&client, &url, &[]).await;
    assert_eq!(
        second.status, 200,
        "the client did not ask a conditional question"
    );
    assert_eq!(second.text(), "etag body");
    assert_eq!(
        second.header("x-version").as_deref(),
        Some("2"),
        "headers updated from the 304"
    );
    assert_eq!(
        second.header("cache-control").as_deref(),
        Some("max-age=60")
    );
    assert_forwarded(&second, "stale", "304", "a stale entry validated");
    assert_eq!(origin.count("/etag"), 2);
    let validation = origin.last("/etag").unwrap();
    assert_eq!(
        validation.header("if-none-match").as_deref(),
        Some("\"v1\"")
    );

    // The refreshed entry is fresh for 60 s now.
    let third = get(&client, &url, &[]).await;
    assert_hit(&third, "after the 304 refresh");
    assert_eq!(third.text(), "etag body");
    assert_eq!(third.header("x-version").as_deref(), Some("2"));
    assert_eq!(origin.count("/etag"), 2);
}

#[tokio::test]
async fn stale_entry_is_validated_with_if_modified_since() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(3600);
    let lm = last_modified.clone();
    origin.route_fn("/ims", move |req| {
        if req.header("if-modified-since").as_deref() == Some(lm.as_str()) {
            Reply::status(304)
                .cc("max-age=60")
                .header("last-modified", lm.clone())
        } else {
            Reply::ok("ims body")
                .cc("max-age=1")
                .header("last-modified", lm.clone())
        }
    });
    let url = origin.url("/ims");
    get(&client, &url, &[]).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "ims body"));
    assert_forwarded(&r, "stale", "304", "a stale entry validated");
    assert_eq!(origin.count("/ims"), 2);
    assert_eq!(
        origin
            .last("/ims")
            .unwrap()
            .header("if-modified-since")
            .as_deref(),
        Some(last_modified.as_str())
    );
    assert_hit(&get(&client, &url, &[]).await, "after the 304 refresh");
    assert_eq!(origin.count("/ims"), 2);
}

#[tokio::test]
async fn stale_entry_replaced_when_origin_sends_a_new_response() {
    let (origin, _proxy, client) = setup();
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    origin.route_fn("/changing", move |_| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("version {n}"))
            .cc("max-age=1")
            .header("etag", format!("\"v{n}\""))
    });
    let url = origin.url("/changing");
    assert_eq!(get(&client, &url, &[]).await.text(), "version 1");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "version 2"));
    assert_eq!(
        origin
            .last("/changing")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"v1\""),
        "the stale entry's validator is sent"
    );
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.text(), "version 2");
    assert_hit(&r, "the new response is stored");
    assert_eq!(origin.count("/changing"), 2);
}

#[tokio::test]
async fn origin_304_without_validators_refreshes() {
    let (origin, _proxy, client) = setup();
    // A 304 without ETag/Last-Modified confirms the copy Weir asked about.
    origin.route_fn("/bare-304", |req| {
        if req.has_header("if-none-match") {
            Reply::status(304)
                .cc("max-age=60")
                .header("x-refreshed", "yes")
        } else {
            Reply::ok("original body")
                .header("etag", "\"v1\"")
                .cc("max-age=1")
        }
    });
    let bare = origin.url("/bare-304");
    let first = get(&client, &bare, &[]).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "original body")
    );
    assert_stored_miss(&first, "first request (bare 304 case)");

    tokio::time::sleep(Duration::from_millis(1300)).await;

    // The client's GET is unconditional: it must get the stored body, updated.
    let r = get(&client, &bare, &[]).await;
    assert_eq!(
        r.status, 200,
        "an unconditional GET answered with the origin's bare 304; headers {:?}",
        r.headers
    );
    assert_eq!(r.text(), "original body");
    assert_eq!(
        r.header("x-refreshed").as_deref(),
        Some("yes"),
        "headers updated from the 304"
    );
    assert_forwarded(&r, "stale", "304", "a stale entry validated");
    assert_eq!(origin.count("/bare-304"), 2);
    assert_eq!(
        origin
            .last("/bare-304")
            .unwrap()
            .header("if-none-match")
            .as_deref(),
        Some("\"v1\""),
        "the validation carries the stored ETag"
    );
    let r = get(&client, &bare, &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "original body")
    );
    assert_hit(&r, "after the refresh by a bare 304");
    assert_eq!(r.header("x-refreshed").as_deref(), Some("yes"));
    assert_eq!(origin.count("/bare-304"), 2);
}

#[tokio::test]
async fn clients_own_conditional_requests_get_304_from_the_cache() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(7200);
    origin.route(
        "/cond",
        Reply::ok("conditional body")
            .cc("max-age=60")
            .header("etag", "\"abc\"")
            .header("last-modified", last_modified.clone()),
    );
    let url = origin.url("/cond");
    get(&client, &url, &[]).await;

    let r = get(&client, &url, &[("if-none-match", "\"abc\"")]).await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag").as_deref(), Some("\"abc\""));

    let r = get(&client, &url, &[("if-none-match", "\"other\"")]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "conditional body")
    );

    let r = get(
        &client,
        &url,
        &[("if-modified-since", last_modified.as_str())],
    )
    .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());

    assert_eq!(origin.count("/cond"), 1, "all answered from the cache");
}

#[tokio::test]
async fn a_conditional_miss_fetches_the_whole_response_to_store_it() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(7200);
    origin.route(
        "/cond-miss",
        Reply::ok("the whole body")
            .cc("max-age=60")
            .header("etag", "\"abc\"")
            .header("last-modified", last_modified.clone()),
    );
    let url = origin.url("/cond-miss");
    let r = get(
        &client,
        &url,
        &[
            ("if-none-match", "\"abc\""),
            ("if-modified-since", last_modified.as_str()),
        ],
    )
    .await;
    assert_eq!(r.status, 304, "the client's conditions are answered");
    let seen = origin.last("/cond-miss").unwrap();
    assert!(
        !seen.has_header("if-none-match") && !seen.has_header("if-modified-since"),
        "the client's conditions reached the origin"
    );
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.text(), "the whole body");
    assert_hit(&r, "stored from the conditional miss");
    assert_eq!(origin.count("/cond-miss"), 1);
}

#[tokio::test]
async fn a_miss_with_only_if_modified_since_is_answered_304() {
    let (origin, _proxy, client) = setup();
    let last_modified = http_date(7200);
    origin.route(
        "/ims-miss",
        Reply::ok("body")
            .cc("max-age=60")
            .header("last-modified", last_modified),
    );
    let url = origin.url("/ims-miss");
    let since = http_date(60);
    let r = get(&client, &url, &[("if-modified-since", since.as_str())]).await;
    assert_eq!(r.status, 304, "not modified since a later date");
    let r = get(
        &client,
        &url,
        &[("if-modified-since", http_date(9000).as_str())],
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "body"));
    assert_eq!(origin.count("/ims-miss"), 1);
}

#[tokio::test]
async fn if_modified_since_uses_the_date_without_last_modified() {
    let (origin, _proxy, client) = setup();
    origin.route("/dated", Reply::ok("dated body").cc("max-age=60"));
    let url = origin.url("/dated");
    let first = get(&client, &url, &[]).await;
    let date = first.header("date").expect("the origin sends Date");
    let r = get(&client, &url, &[("if-modified-since", date.as_str())]).await;
    assert_eq!(r.status, 304, "modified no later than its Date");
    let r = get(
        &client,
        &url,
        &[("if-modified-since", http_date(3600).as_str())],
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "dated body"));
    assert_eq!(origin.count("/dated"), 1);
}
