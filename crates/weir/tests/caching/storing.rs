//! What may be stored: no-store, private, authorization, statuses cacheable by default.

use std::time::Duration;

use crate::common::*;
use crate::helpers::{age, assert_hit, assert_not_hit, assert_stored_miss, setup};

#[tokio::test]
async fn fresh_response_is_served_from_cache_with_age() {
    let (origin, _proxy, client) = setup();
    origin.route("/fresh", Reply::ok("fresh body").cc("max-age=60"));
    let url = origin.url("/fresh");

    let first = get(&client, &url, &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "fresh body");
    assert_stored_miss(&first, "first request");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = get(&client, &url, &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.text(), "fresh body");
    assert_hit(&second, "second request");
    assert!(age(&second) >= 1, "Age after 1.1 s: {}", age(&second));
    assert_eq!(
        second.header("cache-control").as_deref(),
        Some("max-age=60")
    );
    assert_eq!(origin.count("/fresh"), 1);
}

#[tokio::test]
async fn no_store_response_is_not_cached() {
    let (origin, _proxy, client) = setup();
    origin.route("/nostore", Reply::ok("secret").cc("no-store, max-age=60"));
    let url = origin.url("/nostore");
    for i in 0..2 {
        let r = get(&client, &url, &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "secret"));
        assert_not_hit(&r, &format!("request {i}"));
        assert!(
            !cs_has(&r.cache_status(), "stored", None),
            "{:?}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count("/nostore"), 2);
}

#[tokio::test]
async fn private_response_is_not_cached() {
    let (origin, _proxy, client) = setup();
    origin.route("/private", Reply::ok("mine").cc("private, max-age=60"));
    let url = origin.url("/private");
    for i in 0..2 {
        let r = get(&client, &url, &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "mine"));
        assert_not_hit(&r, &format!("request {i}"));
    }
    assert_eq!(origin.count("/private"), 2);
}

#[tokio::test]
async fn authorized_request_with_plain_max_age_is_not_stored() {
    let (origin, _proxy, client) = setup();
    origin.route("/auth-plain", Reply::ok("for alice").cc("max-age=60"));
    let url = origin.url("/auth-plain");
    let auth = [("authorization", "Bearer alice-token")];
    for i in 0..2 {
        let r = get(&client, &url, &auth).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "for alice"));
        assert_not_hit(&r, &format!("request {i}"));
    }
    assert_eq!(origin.count("/auth-plain"), 2);
    assert_eq!(
        origin
            .last("/auth-plain")
            .unwrap()
            .header("authorization")
            .as_deref(),
        Some("Bearer alice-token"),
        "Authorization must reach the origin"
    );
}

#[tokio::test]
async fn authorized_request_with_s_maxage_is_stored() {
    let (origin, _proxy, client) = setup();
    origin.route("/auth-shared", Reply::ok("shared").cc("s-maxage=60"));
    let url = origin.url("/auth-shared");
    let auth = [("authorization", "Bearer alice-token")];
    let first = get(&client, &url, &auth).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "shared")
    );
    assert_stored_miss(&first, "first request");
    let second = get(&client, &url, &auth).await;
    assert_eq!(
        (second.status.as_u16(), second.text().as_str()),
        (200, "shared")
    );
    assert_hit(&second, "second request");
    assert_eq!(origin.count("/auth-shared"), 1);
}

#[tokio::test]
async fn status_404_is_cacheable_by_default_with_heuristic_freshness() {
    let (origin, _proxy, client) = setup();
    // No Cache-Control, no Expires: only Last-Modified (ten days ago) gives freshness.
    origin.route(
        "/gone",
        Reply::status(404)
            .body("not here")
            .header("last-modified", http_date(10 * 86400)),
    );
    let url = origin.url("/gone");
    let first = get(&client, &url, &[]).await;
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (404, "not here")
    );
    assert_stored_miss(&first, "first request");
    let second = get(&client, &url, &[]).await;
    assert_eq!(
        (second.status.as_u16(), second.text().as_str()),
        (404, "not here")
    );
    assert_hit(&second, "second request");
    assert_eq!(origin.count("/gone"), 1);
}

#[tokio::test]
async fn status_not_cacheable_by_default_needs_explicit_freshness() {
    let (origin, _proxy, client) = setup();
    // 500 and 403 are not heuristically cacheable: Last-Modified alone does not make them
    // reusable.
    origin.route(
        "/err500",
        Reply::status(500)
            .body("boom")
            .header("last-modified", http_date(10 * 86400)),
    );
    origin.route(
        "/err403",
        Reply::status(403)
            .body("no")
            .header("last-modified", http_date(10 * 86400)),
    );
    for path in ["/err500", "/err403"] {
        for _ in 0..2 {
            let r = get(&client, &origin.url(path), &[]).await;
            assert!(r.status == 500 || r.status == 403);
            assert_not_hit(&r, path);
        }
        assert_eq!(origin.count(path), 2, "{path}");
    }
}
