//! Whole responses changed, truncated over the limits, or answered; fills and pass-through.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::helpers::{with_rewriter, OnResponse, Rewriter};
use crate::support::client::is_hit;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::{pattern, Reply};
use weir_api::http::StatusCode;

#[tokio::test]
async fn a_whole_response_change_is_framed_and_stored() {
    let origin = TestOrigin::start();
    origin.route(
        "/text",
        Reply::ok("hello whole")
            .chunked()
            .cc("max-age=60")
            .header("etag", "\"v1\""),
    );
    for on in [OnResponse::Shout, OnResponse::ShoutLater] {
        let (weir, seen) = with_rewriter(&origin, on, "").await;
        let path = match on {
            OnResponse::Shout => "/text",
            _ => "/text?later",
        };
        for round in 0..2 {
            let got = weir.get(path).await;
            assert_eq!(got.status, StatusCode::OK);
            assert_eq!(got.text(), "HELLO WHOLE!!");
            assert_eq!(got.header("content-type").as_deref(), Some("text/x-shout"));
            assert_eq!(got.header("content-length").as_deref(), Some("13"));
            assert_eq!(got.header("etag").as_deref(), Some("W/\"v1\""));
            assert_eq!(
                is_hit(&got.cache_status()),
                round == 1,
                "{}",
                got.cache_status()
            );
        }
        // Changed once, stored changed: the hit did not call the module again.
        assert_eq!(*seen.lock().unwrap(), [(11, false)]);
        weir.stop().await;
    }
    assert_eq!(origin.count("/text"), 2, "one fill per proxy");
}

#[tokio::test]
async fn a_body_over_the_limit_comes_truncated_and_passes_unchanged() {
    let origin = TestOrigin::start();
    origin.route("/big", Reply::stream(200_000).cc("max-age=60"));
    origin.route("/refused", Reply::stream(200_000).cc("max-age=60"));
    let limits = "[limits]\nmodule_body = \"64 KiB\"\n";
    let (weir, seen) = with_rewriter(&origin, OnResponse::Shout, limits).await;
    let got = weir.get("/big").await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(got.body == pattern(200_000), "the body passes unchanged");
    let (len, truncated) = seen.lock().unwrap()[0];
    assert!(
        truncated && len > 64 * 1024 && len < 200_000,
        "{len} {truncated}"
    );
    assert_eq!(
        got.header("content-type").as_deref(),
        Some("text/x-shout"),
        "head changes apply"
    );
    weir.stop().await;

    // Failing closed: the module answers instead, and nothing is stored.
    let (weir, _) = with_rewriter(&origin, OnResponse::RefuseTruncated, limits).await;
    for _ in 0..2 {
        let got = weir.get("/refused").await;
        assert_eq!(got.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(got.text(), "too large to check");
    }
    assert_eq!(origin.count("/refused"), 2);
    weir.stop().await;
}

/// `[limits] module_body_total` bounds what all transactions hold at once: while one
/// body is held (its module waits), a second that would go over the total comes
/// truncated, as one over `module_body` does, and passes unchanged; the refusal is
/// counted. The room comes back once a module has had its body.
#[tokio::test]
async fn bodies_that_would_go_over_the_total_pass_unheld() {
    let origin = TestOrigin::start();
    origin.route("/first", Reply::stream(100_000).cc("no-store"));
    origin.route("/second", Reply::stream(100_000).cc("no-store"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Rewriter {
        on: OnResponse::ShoutAfter(Duration::from_millis(1500)),
        seen: seen.clone(),
    };
    let weir = Arc::new(
        Setup::new(&origin)
            .extra("[limits]\nmodule_body = \"128 KiB\"\nmodule_body_total = \"128 KiB\"\n")
            .module("rewriter", module)
            .admin()
            .start()
            .await,
    );
    let held = {
        let weir = weir.clone();
        tokio::spawn(async move { weir.get("/first").await })
    };
    // The first body is held while its module waits; the second does not fit beside it.
    for _ in 0..250 {
        if !seen.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = weir.get("/second").await;
    assert!(second.body == pattern(100_000), "passes unchanged");
    let first = held.await.unwrap();
    assert_eq!(
        first.body.len(),
        100_002,
        "the first was held whole and changed"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    // In the order the module was called: the first whole, the second truncated.
    assert_eq!(seen[0], (100_000, false), "{seen:?}");
    assert!(
        seen[1].1 && seen[1].0 < 100_000,
        "the second came truncated: {seen:?}"
    );
    assert!(
        weir.metrics()
            .await
            .contains("weir_module_body_refused_total 1"),
        "counted"
    );
    // Both rooms are back: the same body fits again.
    let again = weir.get("/second").await;
    assert_eq!(again.body.len(), 100_002);
}

#[tokio::test]
async fn a_whole_response_answer_replaces_the_response_on_fills_and_pass_through() {
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("secret").cc("max-age=60"));
    let (weir, seen) = with_rewriter(&origin, OnResponse::Answer, "").await;
    for _ in 0..2 {
        let got = weir.get("/page").await;
        assert_eq!(got.status, StatusCode::FORBIDDEN);
        assert_eq!(got.text(), "rewriter says no");
    }
    let posted = weir.post("/page", b"x").await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN);
    assert_eq!(origin.count("/page"), 3, "answers are not stored");
    assert_eq!(seen.lock().unwrap().len(), 3);
    weir.stop().await;
}

#[tokio::test]
async fn a_whole_response_change_on_pass_through() {
    let origin = TestOrigin::start();
    origin.route("/echo", Reply::echo());
    let (weir, _) = with_rewriter(&origin, OnResponse::Shout, "").await;
    let got = weir.post("/echo", b"quiet words").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), "QUIET WORDS!!");
    assert_eq!(got.header("content-length").as_deref(), Some("13"));
    weir.stop().await;
}
