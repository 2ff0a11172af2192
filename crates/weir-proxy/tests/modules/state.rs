//! Per-transaction state: each module keeps its own.

use crate::support::client::{is_hit, Fetched};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::HeaderName;
use weir_api::{CacheLookup, Event, Events, Flow, Module, RequestHead, ResponseHead, Txn};

/// Counts its calls in its own per-transaction state and reports the count at
/// deliver headers as `x-count-<name>`.
struct Counter {
    name: &'static str,
}

impl Counter {
    fn bump(txn: &mut Txn) -> u32 {
        let n = txn.state::<u32>();
        *n += 1;
        *n
    }
}

impl Module for Counter {
    fn name(&self) -> &str {
        self.name
    }

    fn events(&self) -> Events {
        Events::of(&[
            Event::RequestHeaders,
            Event::CacheLookup,
            Event::UpstreamRequest,
            Event::ResponseHeaders,
            Event::DeliverHeaders,
        ])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        Counter::bump(txn);
        Flow::Continue
    }

    fn on_cache_lookup<'a>(&'a self, txn: &'a mut Txn, _lookup: CacheLookup) -> Flow<'a> {
        Counter::bump(txn);
        Flow::Continue
    }

    fn on_upstream_request<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        Counter::bump(txn);
        Flow::Continue
    }

    fn on_response_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut ResponseHead) -> Flow<'a> {
        Counter::bump(txn);
        Flow::Continue
    }

    fn on_deliver_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        let n = Counter::bump(txn);
        let name = HeaderName::from_bytes(format!("x-count-{}", self.name).as_bytes()).unwrap();
        r.headers.insert(name, header_value(&n.to_string()));
        Flow::Continue
    }
}

#[tokio::test]
async fn each_module_keeps_its_own_state_per_transaction() {
    let origin = TestOrigin::start();
    origin.route("/state", Reply::ok("s").cc("max-age=60"));
    origin.route("/post", Reply::ok("p"));
    let weir = Setup::new(&origin)
        .module("one", Counter { name: "one" })
        .module("two", Counter { name: "two" })
        .start()
        .await;
    let counts = |r: &Fetched| (r.header_all("x-count-one"), r.header_all("x-count-two"));

    // Pass-through: one transaction sees all five events. Were the two modules'
    // states shared, the counts would add up (and differ).
    let posted = weir.post("/post", b"x").await;
    assert_eq!(counts(&posted), (vec!["5".into()], vec!["5".into()]));
    let again = weir.post("/post", b"x").await;
    assert_eq!(
        counts(&again),
        (vec!["5".into()], vec!["5".into()]),
        "fresh state per transaction"
    );

    // A hit: request headers, cache lookup, deliver headers.
    let miss = weir.get("/state").await;
    let hit = weir.get("/state").await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert_eq!(counts(&hit), (vec!["3".into()], vec!["3".into()]));
    // A miss: the cache fill that asks the origin may serve several clients, so its
    // upstream-request and response-headers events run in a transaction of its own
    // (the engine's design, in `cached.rs`): the client's transaction counts three.
    assert_eq!(counts(&miss), (vec!["3".into()], vec!["3".into()]));
    assert_eq!(origin.count("/state"), 1);
    weir.stop().await;
}
