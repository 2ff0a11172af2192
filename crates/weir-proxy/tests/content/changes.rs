//! validate, set_expiry, delete and inject: a module changing what the cache holds.

use std::time::Duration;

use crate::control::{field, validating_route, with_control};
use crate::support::client::{cs_has, is_hit};
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::StatusCode;

#[tokio::test]
async fn validate_sends_a_conditional_request_and_refreshes_the_ttl() {
    let origin = TestOrigin::start();
    validating_route(&origin, "/val", "validated", 60);
    let weir = with_control().await;
    let url = origin.url("/val");
    assert_eq!(weir.get(&url).await.text(), "validated");
    assert_eq!(origin.count("/val"), 1);

    assert_eq!(weir.control("expire", &url, &[("x-ttl", "0")]).await, "ok");
    let info = weir.control("query", &url, &[]).await;
    assert_eq!(field(&info, "ttl"), 0, "{info}");

    let info = weir.control("validate", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "refreshed: {info}");
    assert_eq!(origin.count("/val"), 2);
    let seen = origin.last("/val").unwrap();
    assert_eq!(seen.header("if-none-match").as_deref(), Some("\"v1\""));
    let info = weir.control("query", &url, &[]).await;
    assert!(field(&info, "ttl") >= 55, "{info}");

    // Validating a fresh copy asks the origin all the same.
    weir.control("validate", &url, &[]).await;
    assert_eq!(origin.count("/val"), 3);
    assert!(origin.last("/val").unwrap().has_header("if-none-match"));

    let r = weir.get(&url).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "validated");
    assert_eq!(origin.count("/val"), 3);
    weir.stop().await;
}

#[tokio::test]
async fn set_expiry_makes_the_next_get_revalidate_or_stay_fresh() {
    let origin = TestOrigin::start();
    validating_route(&origin, "/exp", "expiring", 60);
    validating_route(&origin, "/short", "short", 1);
    let weir = with_control().await;
    let url = origin.url("/exp");
    assert_eq!(weir.get(&url).await.text(), "expiring");

    // Zero: stale at once; the next client GET is a conditional request.
    assert_eq!(weir.control("expire", &url, &[("x-ttl", "0")]).await, "ok");
    let r = weir.get(&url).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "expiring");
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert!(
        cs_has(&r.cache_status(), "fwd", Some("stale")),
        "{}",
        r.cache_status()
    );
    assert!(
        cs_has(&r.cache_status(), "fwd-status", Some("304")),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count("/exp"), 2);
    let seen = origin.last("/exp").unwrap();
    assert_eq!(seen.header("if-none-match").as_deref(), Some("\"v1\""));
    // The 304 made it fresh again.
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/exp"), 2);

    // Longer than the origin said: a max-age=1 response is still fresh after 1.5 s.
    let short = origin.url("/short");
    assert_eq!(weir.get(&short).await.text(), "short");
    assert_eq!(
        weir.control("expire", &short, &[("x-ttl", "60")]).await,
        "ok"
    );
    let info = weir.control("query", &short, &[]).await;
    assert!(field(&info, "ttl") >= 55, "{info}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = weir.get(&short).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "short");
    assert_eq!(origin.count("/short"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn delete_makes_the_next_get_a_miss() {
    let origin = TestOrigin::start();
    origin.route("/del", Reply::ok("deleted").cc("max-age=60"));
    let weir = with_control().await;
    let url = origin.url("/del");
    weir.get(&url).await;
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/del"), 1);

    assert_eq!(weir.control("delete", &url, &[]).await, "ok");
    assert_eq!(weir.control("query", &url, &[]).await, "error=NotFound");
    let r = weir.get(&url).await;
    assert_eq!(r.text(), "deleted");
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/del"), 2);
    // Stored again by that miss.
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/del"), 2);
    weir.stop().await;
}

#[tokio::test]
async fn an_injected_response_is_a_hit_without_the_origin() {
    let origin = TestOrigin::start();
    let weir = with_control().await;
    let url = origin.url("/inj");
    let args = [
        ("x-status", "200"),
        ("x-cache-control", "max-age=60"),
        ("x-body", "injected"),
    ];
    let info = weir.control("inject", &url, &args).await;
    assert!(info.starts_with("status=200 size=8 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "{info}");

    for _ in 0..2 {
        let r = weir.get(&url).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.text(), "injected");
        assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(r.header("cache-control").as_deref(), Some("max-age=60"));
    }
    let read = weir.control_response("read", &url, &[]).await;
    assert_eq!(read.text(), "injected");
    assert!(read
        .header("x-info")
        .unwrap()
        .starts_with("status=200 size=8 "));
    assert_eq!(origin.total(), 0, "the origin was never asked");

    // Another status is stored as it is.
    let gone = origin.url("/gone");
    let args = [
        ("x-status", "404"),
        ("x-cache-control", "max-age=60"),
        ("x-body", "not here"),
    ];
    let info = weir.control("inject", &gone, &args).await;
    assert!(info.starts_with("status=404 size=8 "), "{info}");
    let r = weir.get(&gone).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.text(), "not here");
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.total(), 0, "the origin was never asked");
    weir.stop().await;
}
