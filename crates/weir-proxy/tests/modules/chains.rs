//! Per-listener and per-route module chains, and the log event once per transaction.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::Shared;
use crate::support::client::is_hit;
use crate::support::eventually;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::StatusCode;
use weir_api::{Event, Events, Flow, Module, RequestHead, Txn};

#[tokio::test]
async fn each_listener_runs_the_modules_it_names() {
    let origin = TestOrigin::start();
    origin.route("/sel/*", Reply::ok("selected").cc("max-age=60"));
    let (a, journal_a) = Recorder::new("a", Events::ALL);
    let (b, journal_b) = Recorder::new("b", Events::ALL);
    let weir = Setup::new(&origin)
        .module("a", a)
        .module("b", b)
        .listeners(&[Some(&["a"]), None, Some(&[])])
        .start()
        .await;

    // `modules = ["a"]`: a only (miss and hit).
    for _ in 0..2 {
        assert_eq!(weir.get_on(0, "/sel/0").await.text(), "selected");
        journal_a.take_transaction().await;
        assert!(journal_b.names().is_empty(), "{:?}", journal_b.names());
    }
    // No `modules` key: both.
    assert_eq!(weir.get_on(1, "/sel/1").await.text(), "selected");
    journal_a.take_transaction().await;
    journal_b.take_transaction().await;
    // `modules = []`: neither. A request on listener 1 after it tells when the
    // transactions are over.
    assert_eq!(weir.get_on(2, "/sel/2").await.text(), "selected");
    assert_eq!(weir.get_on(1, "/sel/1").await.text(), "selected");
    journal_b.take_transaction().await;
    eventually("a's log event", || {
        journal_a.names().iter().any(|n| n == "log")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (name, journal) in [("a", &journal_a), ("b", &journal_b)] {
        let seen = journal.entries();
        let requests = seen.iter().filter(|(n, _)| n == "request_headers").count();
        let expected = if name == "a" { 1 } else { 0 };
        assert_eq!(requests, expected, "{name}: {}", summary(&seen));
    }
    weir.stop().await;
}

#[tokio::test]
async fn a_route_runs_the_modules_it_names() {
    let origin = TestOrigin::start();
    origin.route("/r/*", Reply::ok("routed").cc("max-age=60"));
    let (a, journal_a) = Recorder::new("a", Events::ALL);
    let (b, journal_b) = Recorder::new("b", Events::ALL);
    let weir = Setup::new(&origin)
        .module("a", a)
        .module("b", b)
        .listeners(&[Some(&["a"])])
        .route("/r/b-only", Some(&["b"]))
        .route("/r/listener", None)
        .start()
        .await;

    // A route naming `b` runs b only, from the first event on.
    assert_eq!(weir.get("/r/b-only").await.text(), "routed");
    journal_b.take_transaction().await;
    // A route without its own list runs the listener's (a).
    assert_eq!(weir.get("/r/listener").await.text(), "routed");
    journal_a.take_transaction().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let requests = |j: &Journal| {
        j.entries()
            .iter()
            .filter(|(n, _)| n == "request_headers")
            .count()
    };
    assert_eq!(requests(&journal_a), 0, "a ran on b's route");
    assert_eq!(requests(&journal_b), 0, "b ran on the listener's route");
    weir.stop().await;
}

/// Counts `on_log` calls, and those that saw the log field it adds at request
/// headers; answers `/answered` itself.
#[derive(Default)]
struct Logger {
    logs: AtomicUsize,
    with_field: AtomicUsize,
}

impl Module for Logger {
    fn name(&self) -> &str {
        "logger"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::Log])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        txn.log_field("logger", "seen");
        if path(r) == "/answered" {
            return Flow::Respond(weir_api::Reply::text(StatusCode::OK, "answered"));
        }
        Flow::Continue
    }

    fn on_log(&self, txn: &Txn) {
        self.logs.fetch_add(1, Ordering::SeqCst);
        if txn
            .log_fields()
            .iter()
            .any(|(k, v)| *k == "logger" && v == "seen")
        {
            self.with_field.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test]
async fn the_log_event_comes_once_per_transaction() {
    let origin = TestOrigin::start();
    origin.route("/log", Reply::ok("logged").cc("max-age=60"));
    let logger = Arc::new(Logger::default());
    let weir = Setup::new(&origin)
        .module("logger", Shared(logger.clone()))
        .start()
        .await;
    assert_eq!(weir.get("/log").await.status, StatusCode::OK); // miss
    assert!(is_hit(&weir.get("/log").await.cache_status())); // hit
    assert_eq!(weir.post("/log", b"x").await.status, StatusCode::OK); // pass-through
    assert_eq!(weir.get("/answered").await.text(), "answered"); // module reply
    assert_eq!(weir.get("/missing").await.status, StatusCode::NOT_FOUND); // origin 404
    eventually("five log events", || {
        logger.logs.load(Ordering::SeqCst) >= 5
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        logger.logs.load(Ordering::SeqCst),
        5,
        "once per transaction"
    );
    assert_eq!(logger.with_field.load(Ordering::SeqCst), 5);
    weir.stop().await;
}
