//! Waiting modules hold up no other transaction; a wait that never ends is cut off.

use std::time::{Duration, Instant};

use crate::support;
use crate::support::client::{metric, send};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::StatusCode;
use weir_api::{Decision, Event, Events, Flow, Module, RequestHead, Txn};

/// Waits 50 ms at request headers, then adds `x-waited` to the request it borrowed
/// (the future holds the callback's arguments) and continues, or answers for
/// `/decided`.
struct Waiter;

const WAIT: Duration = Duration::from_millis(50);

impl Module for Waiter {
    fn name(&self) -> &str {
        "waiter"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        Flow::wait(async move {
            tokio::time::sleep(WAIT).await;
            if path(r) == "/decided" {
                return Decision::Respond(weir_api::Reply::text(
                    StatusCode::FORBIDDEN,
                    "decided after waiting",
                ));
            }
            r.headers.insert("x-waited", header_value("yes"));
            Decision::Continue
        })
    }
}

#[tokio::test]
async fn waiting_modules_do_not_hold_up_other_transactions() {
    let origin = TestOrigin::start();
    origin.route("/wait/*", Reply::ok("waited"));
    origin.route("/decided", Reply::ok("never"));
    // One worker thread: concurrency comes from the transactions' own futures.
    let weir = Setup::new(&origin).module("waiter", Waiter).start().await;

    let start = Instant::now();
    let r = weir.get("/wait/one").await;
    assert!(start.elapsed() >= WAIT, "{:?}", start.elapsed());
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "waited");
    let seen = origin.last("/wait/one").unwrap();
    assert_eq!(seen.header("x-waited").as_deref(), Some("yes"));

    let r = weir.get("/decided").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.text(), "decided after waiting");
    assert_eq!(origin.count("/decided"), 0);

    // 20 at once: serialized they would take 20 × 50 ms = 1 s.
    let start = Instant::now();
    let mut all = tokio::task::JoinSet::new();
    for i in 0..20 {
        let client = weir.client.clone();
        let url = weir.url_on(0, &format!("/wait/{i}"));
        all.spawn(async move { send(&client, "GET", &url, &[], None).await });
    }
    let mut done = 0;
    while let Some(r) = all.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.text(), "waited");
        done += 1;
    }
    let elapsed = start.elapsed();
    eprintln!("20 concurrent waiting transactions: {elapsed:?}");
    assert_eq!(done, 20);
    assert!(
        elapsed < Duration::from_secs(1),
        "20 transactions waiting 50 ms each took {elapsed:?}: serialized?"
    );
    weir.stop().await;
}

/// Waits forever at request headers when the request carries `x-stuck: <its name>`.
struct Stuck {
    name: &'static str,
}

impl Module for Stuck {
    fn name(&self) -> &str {
        self.name
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if r.headers.get("x-stuck").is_some_and(|v| v == self.name) {
            return Flow::wait(std::future::pending());
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn a_wait_that_never_ends_is_cut_off_by_module_wait() {
    let origin = TestOrigin::start();
    origin.route("/s/*", Reply::ok("fine"));
    let weir = Setup::new(&origin)
        .module("stuck", Stuck { name: "stuck" })
        .module_with("lax", Stuck { name: "lax" }, "optional = true")
        .extra("[limits]\nmodule_wait = \"300ms\"\n")
        .admin()
        .start()
        .await;

    let start = Instant::now();
    let r = weir.get_with("/s/stuck", &[("x-stuck", "stuck")]).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.text());
    assert!(r.text().contains("stuck"), "{}", r.text());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < support::SOON,
        "{took:?}"
    );
    assert_eq!(origin.count("/s/stuck"), 0);

    // An optional module that waits too long is passed by.
    let r = weir.get_with("/s/lax", &[("x-stuck", "lax")]).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "fine"));

    let text = weir.metrics().await;
    for module in ["stuck", "lax"] {
        let n = metric(&text, "weir_module_failures_total", &[("module", module)]);
        assert_eq!(n, Some(1.0), "{module}: {text}");
    }
    weir.stop().await;
}
