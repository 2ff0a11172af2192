//! The module API end to end, in one process: modules and factories defined here, the
//! real engine started with `Server::start_with_modules` on free ports, a real origin
//! (the test origin of the binary's harness) and a real client (reqwest). Each test
//! asserts what the client saw and how often the origin was asked.
#![cfg(feature = "modules")]

mod support;

use support::modules::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::client::{cs_has, is_hit, metric, send, Fetched};
use support::eventually;
use support::origin::TestOrigin;
use support::reply::{pattern, Reply};
use weir_api::http::{HeaderName, StatusCode};
use weir_api::{
    BodyChunk, Bytes, CacheLookup, Decision, Event, Events, Flow, Module, RequestHead,
    ResponseHead, Txn,
};

/// Checks the body events `event` of one transaction: at least one chunk, all after
/// the entry at `after` and before `log`, the last one (and only it) marked `last`,
/// and together they carry `expected`.
fn check_body_events(journal: &[(String, Bytes)], event: &str, after: usize, expected: &[u8]) {
    let last_name = format!("{event}(last)");
    let log = journal.iter().position(|(n, _)| n == "log").unwrap();
    let chunks: Vec<(usize, &String, &Bytes)> = journal
        .iter()
        .enumerate()
        .filter(|(_, (n, _))| *n == event || *n == last_name)
        .map(|(i, (n, d))| (i, n, d))
        .collect();
    let s = summary(journal);
    assert!(!chunks.is_empty(), "no {event} event: {s}");
    for (k, (i, name, _)) in chunks.iter().enumerate() {
        assert!(*i > after && *i < log, "{event} out of place: {s}");
        let want = if k + 1 == chunks.len() {
            &last_name
        } else {
            event
        };
        assert_eq!(*name, want, "only the last {event} chunk is `last`: {s}");
    }
    let seen: Vec<u8> = chunks
        .iter()
        .flat_map(|(_, _, d)| d.iter().copied())
        .collect();
    assert!(
        seen == expected,
        "{event} chunks carry {} bytes, not the {} of the body: {s}",
        seen.len(),
        expected.len()
    );
}

/// Checks one transaction whose body came from the origin (a miss or a pass-through):
/// the head events in transaction order, exactly once each; the origin's body through
/// `response_body` after `response_headers`; the delivered body through `deliver_body`
/// after `deliver_headers`; no byte delivered before it went through `response_body`;
/// `log` last.
///
/// The body streams, so chunks are delivered while later ones are still arriving:
/// `deliver_headers` may come before the first `response_body` (on a pass-through it
/// always does) and the two body events interleave; only their data order is fixed.
fn check_origin_transaction(journal: &[(String, Bytes)], lookup: CacheLookup, body: &[u8]) {
    let s = summary(journal);
    let heads: Vec<&str> = journal
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !n.contains("_body"))
        .collect();
    let lookup = format!("cache_lookup({lookup:?})");
    assert_eq!(
        heads,
        [
            "request_headers",
            "whole_request",
            lookup.as_str(),
            "upstream_request",
            "response_headers",
            "whole_response",
            "deliver_headers",
            "log"
        ],
        "head events: {s}"
    );
    assert_eq!(journal.last().unwrap().0, "log", "log comes last: {s}");
    let at = |name: &str| journal.iter().position(|(n, _)| n == name).unwrap();
    // The whole-response event holds the head back until it has seen the whole body,
    // and runs before the body events, which see what it left.
    assert!(
        journal[at("whole_response")].1 == body,
        "whole_response saw the whole body: {s}"
    );
    check_body_events(journal, "response_body", at("whole_response"), body);
    check_body_events(journal, "deliver_body", at("deliver_headers"), body);
    let (mut through, mut delivered) = (0, 0);
    for (name, data) in journal {
        if name.starts_with("response_body") {
            through += data.len();
        } else if name.starts_with("deliver_body") {
            delivered += data.len();
            assert!(
                delivered <= through,
                "bytes delivered before the response-body event saw them: {s}"
            );
        }
    }
    assert!(
        at("response_body(last)") < at("deliver_body(last)"),
        "the origin's body ends before the delivered one: {s}"
    );
}

// ---------------------------------------------------------------------------------
// Event order, and only the registered events.

/// A proxy whose only module records every event.
async fn recorded(origin: &TestOrigin) -> (Weir, Journal) {
    let (recorder, journal) = Recorder::new("recorder", Events::ALL);
    let weir = Setup::new(origin)
        .module("recorder", recorder)
        .start()
        .await;
    (weir, journal)
}

/// GETs `path` twice, a miss then a hit, and checks each transaction's events.
async fn check_miss_then_hit(
    weir: &Weir,
    journal: &Journal,
    origin: &TestOrigin,
    path: &str,
    body: &[u8],
) {
    // A miss: the whole transaction, the origin's body through both body events.
    let miss = weir.get(path).await;
    assert_eq!(miss.status, StatusCode::OK);
    assert!(miss.body == body, "{path}: the body differs");
    let txn = journal.take_transaction().await;
    eprintln!("{path} miss: {}", summary(&txn));
    check_origin_transaction(&txn, CacheLookup::Miss, body);

    // A hit: no upstream or response events.
    let hit = weir.get(path).await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert!(hit.body == body, "{path}: the body differs");
    let txn = journal.take_transaction().await;
    eprintln!("{path} hit: {}", summary(&txn));
    let heads: Vec<&str> = txn
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !n.contains("_body"))
        .collect();
    assert_eq!(
        heads,
        [
            "request_headers",
            "whole_request",
            "cache_lookup(Fresh)",
            "deliver_headers",
            "log"
        ],
        "{path} hit: {}",
        summary(&txn)
    );
    check_body_events(&txn, "deliver_body", 3, body);
    assert_eq!(origin.count(path), 1);
}

#[tokio::test]
async fn event_order_on_miss_and_hit() {
    let origin = TestOrigin::start();
    origin.route("/small", Reply::ok("hello modules").cc("max-age=60"));
    origin.route("/big", Reply::stream(300_000).cc("max-age=60"));
    let (weir, journal) = recorded(&origin).await;
    check_miss_then_hit(&weir, &journal, &origin, "/small", b"hello modules").await;
    check_miss_then_hit(&weir, &journal, &origin, "/big", &pattern(300_000)).await;
    weir.stop().await;
}

#[tokio::test]
async fn event_order_on_miss_and_hit_of_chunked_responses() {
    let origin = TestOrigin::start();
    origin.route(
        "/small",
        Reply::ok("hello modules").chunked().cc("max-age=60"),
    );
    origin.route("/big", Reply::stream(300_000).chunked().cc("max-age=60"));
    let (weir, journal) = recorded(&origin).await;
    check_miss_then_hit(&weir, &journal, &origin, "/small", b"hello modules").await;
    check_miss_then_hit(&weir, &journal, &origin, "/big", &pattern(300_000)).await;
    weir.stop().await;
}

/// POSTs to `path`, which passes through: lookup Bypass, then as a miss.
async fn check_pass_through(origin: &TestOrigin, path: &str, body: &[u8]) {
    let (weir, journal) = recorded(origin).await;
    let posted = weir.post(path, b"payload").await;
    assert_eq!(posted.status, StatusCode::OK);
    assert!(posted.body == body, "{path}: the body differs");
    let txn = journal.take_transaction().await;
    eprintln!("{path} pass-through: {}", summary(&txn));
    check_origin_transaction(&txn, CacheLookup::Bypass, body);
    // The client's body: whole before the lookup, then in chunks on its way out.
    let at = |name: &str| txn.iter().position(|(n, _)| n == name).unwrap();
    assert!(
        txn[at("whole_request")].1 == b"payload"[..],
        "{}",
        summary(&txn)
    );
    check_body_events(&txn, "request_body", at("upstream_request"), b"payload");
    assert_eq!(origin.count(path), 1);
    weir.stop().await;
}

#[tokio::test]
async fn event_order_on_pass_through() {
    let origin = TestOrigin::start();
    origin.route("/post", Reply::ok("posted"));
    check_pass_through(&origin, "/post", b"posted").await;
}

#[tokio::test]
async fn event_order_on_pass_through_of_a_chunked_response() {
    let origin = TestOrigin::start();
    origin.route("/post", Reply::ok("posted").chunked());
    check_pass_through(&origin, "/post", b"posted").await;
}

#[tokio::test]
async fn only_registered_events_are_delivered() {
    let origin = TestOrigin::start();
    origin.route("/only", Reply::ok("x").cc("max-age=60"));
    origin.route("/post", Reply::ok("y"));
    let (recorder, journal) = Recorder::new("deliver-only", Events::of(&[Event::DeliverHeaders]));
    // A second module on every event, whose `log` tells when a transaction is over.
    let (all, all_journal) = Recorder::new("all", Events::ALL);
    let weir = Setup::new(&origin)
        .module("deliver-only", recorder)
        .module("all", all)
        .start()
        .await;
    for (i, post) in [false, false, true].into_iter().enumerate() {
        let r = if post {
            weir.post("/post", b"body").await
        } else {
            weir.get("/only").await
        };
        assert_eq!(r.status, StatusCode::OK);
        all_journal.take_transaction().await;
        assert_eq!(journal.names(), vec!["deliver_headers"; i + 1]);
    }
    assert_eq!(origin.count("/only"), 1);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Changes at each header event: where they go, what is stored.

/// Adds a header at each of the four header events. The response-headers and
/// deliver-headers values count their calls.
#[derive(Default)]
struct Stamper {
    responses: AtomicUsize,
    deliveries: AtomicUsize,
}

impl Module for Stamper {
    fn name(&self) -> &str {
        "stamper"
    }

    fn events(&self) -> Events {
        Events::of(&[
            Event::RequestHeaders,
            Event::UpstreamRequest,
            Event::ResponseHeaders,
            Event::DeliverHeaders,
        ])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        r.headers
            .insert("x-from-request-headers", header_value("rh"));
        Flow::Continue
    }

    fn on_upstream_request<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        // What the request-headers event added is already there.
        let seen = r.headers.contains_key("x-from-request-headers");
        r.headers.insert(
            "x-from-upstream-request",
            header_value(if seen { "ur, saw rh" } else { "ur" }),
        );
        Flow::Continue
    }

    fn on_response_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        let n = self.responses.fetch_add(1, Ordering::SeqCst) + 1;
        r.headers
            .insert("x-stored", header_value(&format!("response {n}")));
        Flow::Continue
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        let n = self.deliveries.fetch_add(1, Ordering::SeqCst) + 1;
        r.headers
            .insert("x-delivery", header_value(&format!("delivery {n}")));
        Flow::Continue
    }
}

#[tokio::test]
async fn header_changes_reach_origin_store_and_client() {
    let origin = TestOrigin::start();
    origin.route("/changes", Reply::ok("changed").cc("max-age=60"));
    origin.route("/post", Reply::ok("posted"));
    let weir = Setup::new(&origin)
        .module("stamper", Stamper::default())
        .start()
        .await;

    let miss = weir.get("/changes").await;
    assert_eq!(miss.status, StatusCode::OK);
    assert_eq!(miss.text(), "changed");
    let seen = origin.last("/changes").unwrap();
    assert_eq!(seen.header_all("x-from-request-headers"), ["rh"]);
    assert_eq!(seen.header_all("x-from-upstream-request"), ["ur, saw rh"]);
    assert_eq!(miss.header_all("x-stored"), ["response 1"]);
    assert_eq!(miss.header_all("x-delivery"), ["delivery 1"]);

    // Hits: the response-headers change was stored (computed once); the
    // deliver-headers change is made again on each delivery and never stored.
    for n in 2..=3 {
        let hit = weir.get("/changes").await;
        assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
        assert_eq!(hit.text(), "changed");
        assert_eq!(hit.header_all("x-stored"), ["response 1"]);
        assert_eq!(hit.header_all("x-delivery"), [format!("delivery {n}")]);
    }
    assert_eq!(origin.count("/changes"), 1);

    // The same on a pass-through.
    let posted = weir.post("/post", b"body").await;
    let seen = origin.last("/post").unwrap();
    assert_eq!(seen.header_all("x-from-request-headers"), ["rh"]);
    assert_eq!(seen.header_all("x-from-upstream-request"), ["ur, saw rh"]);
    assert_eq!(seen.body.as_ref(), b"body");
    assert_eq!(posted.header_all("x-stored"), ["response 2"]);
    assert_eq!(posted.header_all("x-delivery"), ["delivery 4"]);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Answering the client instead.

/// Answers `/blocked` itself at request headers, and replaces any origin response
/// that carries `x-replace` at response headers.
struct Gate;

impl Module for Gate {
    fn name(&self) -> &str {
        "gate"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::ResponseHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if path(r) == "/blocked" {
            return Flow::Respond(weir_api::Reply::text(
                StatusCode::FORBIDDEN,
                "blocked by the gate",
            ));
        }
        Flow::Continue
    }

    fn on_response_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        if r.headers.contains_key("x-replace") {
            return Flow::Respond(weir_api::Reply::text(
                StatusCode::IM_A_TEAPOT,
                "replaced by the gate",
            ));
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn a_module_answers_at_request_headers() {
    let origin = TestOrigin::start();
    origin.route("/blocked", Reply::ok("secret").cc("max-age=60"));
    let weir = Setup::new(&origin).module("gate", Gate).start().await;
    for _ in 0..2 {
        let r = weir.get("/blocked").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert_eq!(r.text(), "blocked by the gate");
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(
            r.header("content-length").as_deref(),
            Some("blocked by the gate".len().to_string().as_str())
        );
        assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    }
    let posted = weir.post("/blocked", b"x").await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN);
    assert_eq!(posted.text(), "blocked by the gate");
    assert_eq!(origin.count("/blocked"), 0, "the origin is never asked");
    weir.stop().await;
}

#[tokio::test]
async fn a_module_answers_at_response_headers_and_nothing_is_stored() {
    let origin = TestOrigin::start();
    origin.route(
        "/replaced",
        Reply::ok("original")
            .cc("max-age=60")
            .header("x-replace", "yes"),
    );
    let weir = Setup::new(&origin).module("gate", Gate).start().await;
    for n in 1..=2 {
        let r = weir.get("/replaced").await;
        assert_eq!(r.status, StatusCode::IM_A_TEAPOT);
        assert_eq!(r.text(), "replaced by the gate");
        assert!(r.header("x-replace").is_none(), "{:?}", r.headers);
        assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(origin.count("/replaced"), n, "not stored: asked again");
    }
    let posted = weir.post("/replaced", b"x").await;
    assert_eq!(posted.status, StatusCode::IM_A_TEAPOT);
    assert_eq!(posted.text(), "replaced by the gate");
    assert_eq!(origin.count("/replaced"), 3);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Waiting.

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

// ---------------------------------------------------------------------------------
// Per-transaction state.

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

// ---------------------------------------------------------------------------------
// Steering the cache.

/// At request headers: skips the cache for `/skip*`, keeps `/ttl*` for 60 s, and
/// makes the `x-variant` request header a variant of the cache key.
struct Steer;

impl Module for Steer {
    fn name(&self) -> &str {
        "steer"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if path(r).starts_with("/skip") {
            txn.cache().skip = true;
        }
        if path(r).starts_with("/ttl") {
            txn.cache().ttl = Some(Duration::from_secs(60));
        }
        if let Some(v) = r.headers.get("x-variant").and_then(|v| v.to_str().ok()) {
            txn.cache().variant = Some(v.to_string().into());
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn skip_keeps_a_response_out_of_the_cache() {
    let origin = TestOrigin::start();
    origin.route("/skip", Reply::ok("skipped").cc("max-age=60"));
    origin.route("/kept", Reply::ok("kept").cc("max-age=60"));
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    for n in 1..=2 {
        let r = weir.get("/skip").await;
        assert_eq!(r.text(), "skipped");
        assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(origin.count("/skip"), n);
        weir.get("/kept").await;
    }
    // The same response without the override is stored.
    assert_eq!(origin.count("/kept"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn a_variant_is_stored_apart() {
    let origin = TestOrigin::start();
    origin.route_fn("/variant", |req| {
        let v = req.header("x-variant").unwrap_or_else(|| "none".into());
        Reply::ok(format!("for {v}")).cc("max-age=60")
    });
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    let a = [("x-variant", "a")];
    let b = [("x-variant", "b")];
    assert_eq!(weir.get_with("/variant", &a).await.text(), "for a");
    assert_eq!(weir.get_with("/variant", &b).await.text(), "for b");
    assert_eq!(origin.count("/variant"), 2, "b is not a's stored response");
    for (headers, body) in [(&a, "for a"), (&b, "for b"), (&a, "for a")] {
        let r = weir.get_with("/variant", headers).await;
        assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(r.text(), body);
    }
    assert_eq!(origin.count("/variant"), 2);
    weir.stop().await;
}

#[tokio::test]
async fn a_ttl_override_keeps_a_response_fresh() {
    let origin = TestOrigin::start();
    origin.route("/ttl", Reply::ok("long").cc("max-age=1"));
    origin.route("/control", Reply::ok("short").cc("max-age=1"));
    let weir = Setup::new(&origin).module("steer", Steer).start().await;
    weir.get("/ttl").await;
    weir.get("/control").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = weir.get("/ttl").await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "long");
    assert_eq!(origin.count("/ttl"), 1);
    // Without the override, max-age=1 is over.
    let r = weir.get("/control").await;
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/control"), 2);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Transforming a body.

/// Uppercases the origin's body and appends `!`, declaring at response headers that
/// the length may change.
struct Shout;

impl Module for Shout {
    fn name(&self) -> &str {
        "shout"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::ResponseHeaders, Event::ResponseBody])
    }

    fn on_response_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut ResponseHead) -> Flow<'a> {
        txn.body_length_may_change();
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        let mut data = chunk.data.to_ascii_uppercase();
        if chunk.last {
            data.push(b'!');
        }
        chunk.data = Bytes::from(data);
        Flow::Continue
    }
}

/// Lowercase letters, `len` of them.
fn letters(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

fn shouted(body: &[u8]) -> Vec<u8> {
    let mut v = body.to_ascii_uppercase();
    v.push(b'!');
    v
}

/// The framing the client got agrees with the body, and the ETag is weak.
fn check_transformed(r: &Fetched, expected: &[u8], etag: &str) {
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.body == expected,
        "body of {} bytes, expected {}",
        r.body.len(),
        expected.len()
    );
    if let Some(len) = r.header("content-length") {
        assert_eq!(len, expected.len().to_string(), "Content-Length");
    }
    assert_eq!(r.header_all("etag"), [format!("W/{etag}")]);
}

#[tokio::test]
async fn a_body_transform_changes_length_and_is_stored() {
    let origin = TestOrigin::start();
    origin.route(
        "/small",
        Reply::ok("hello world")
            .cc("max-age=60")
            .header("etag", "\"small\""),
    );
    let big = letters(200_000);
    origin.route(
        "/big",
        Reply::ok(big.clone())
            .chunked()
            .cc("max-age=60")
            .header("etag", "\"big\""),
    );
    origin.route("/post", Reply::ok("posted").header("etag", "\"post\""));
    let weir = Setup::new(&origin).module("shout", Shout).start().await;

    for (path, body, etag) in [
        ("/small", b"hello world".to_vec(), "\"small\""),
        ("/big", big, "\"big\""),
    ] {
        let miss = weir.get(path).await;
        check_transformed(&miss, &shouted(&body), etag);
        assert!(
            miss.header("content-length").is_none(),
            "{path}: the origin's Content-Length is dropped and the body sent chunked: {:?}",
            miss.headers
        );
        // The transformed body was stored: the hit serves it as it is.
        let hit = weir.get(path).await;
        assert!(
            is_hit(&hit.cache_status()),
            "{path}: {}",
            hit.cache_status()
        );
        check_transformed(&hit, &shouted(&body), etag);
        assert_eq!(origin.count(path), 1);
    }

    let posted = weir.post("/post", b"x").await;
    check_transformed(&posted, b"POSTED!", "\"post\"");
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Panics.

/// Panics at request headers when `x-panic` names it, or in its wait future when
/// `x-panic-wait` does; otherwise does nothing.
struct Panicker {
    name: &'static str,
}

fn boom(what: &str) -> Decision {
    panic!("{what}: a test module panics on purpose")
}

impl Module for Panicker {
    fn name(&self) -> &str {
        self.name
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        let named = |header: &str| r.headers.get(header).is_some_and(|v| v == self.name);
        if named("x-panic") {
            boom("request_headers");
        }
        if named("x-panic-wait") {
            return Flow::wait(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                boom("wait future")
            });
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn a_panicking_module_fails_only_its_transaction() {
    let origin = TestOrigin::start();
    origin.route("/p/*", Reply::ok("fine"));
    let weir = Setup::new(&origin)
        .module("fragile", Panicker { name: "fragile" })
        .module_with("spare", Panicker { name: "spare" }, "optional = true")
        .admin()
        .start()
        .await;
    let failures = |text: &str, module: &str| {
        metric(text, "weir_module_failures_total", &[("module", module)]).unwrap_or(0.0)
    };

    for (n, header) in ["x-panic", "x-panic-wait"].into_iter().enumerate() {
        let n = n as f64 + 1.0;
        // A module that is not optional: 500, with a reason naming it.
        let r = weir
            .get_with(&format!("/p/{header}-fragile"), &[(header, "fragile")])
            .await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{header}");
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("text/plain")),
            "{:?}",
            r.headers
        );
        assert!(r.text().contains("fragile"), "{header}: {}", r.text());
        assert!(
            cs_has(&r.cache_status(), "detail", Some("module-error")),
            "{}",
            r.cache_status()
        );
        assert_eq!(origin.count(&format!("/p/{header}-fragile")), 0);

        // The process goes on serving.
        let r = weir.get(&format!("/p/after-{header}")).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.text(), "fine");

        // An optional module: the transaction passes through as if it were absent.
        let r = weir
            .get_with(&format!("/p/{header}-spare"), &[(header, "spare")])
            .await;
        assert_eq!(r.status, StatusCode::OK, "{header}: {}", r.text());
        assert_eq!(r.text(), "fine");
        assert_eq!(origin.count(&format!("/p/{header}-spare")), 1);

        let text = weir.metrics().await;
        assert_eq!(failures(&text, "fragile"), n, "{text}");
        assert_eq!(failures(&text, "spare"), n, "{text}");
    }
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

// ---------------------------------------------------------------------------------
// Per-listener chains, and the log event.

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

/// Asks for the whole body and reverses it; counts its body calls.
#[derive(Default)]
struct Reverser {
    calls: AtomicUsize,
    not_last: AtomicUsize,
}

impl Module for Reverser {
    fn name(&self) -> &str {
        "reverser"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::ResponseHeaders, Event::ResponseBody])
    }

    fn on_response_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut ResponseHead) -> Flow<'a> {
        txn.whole_body();
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if !chunk.last {
            self.not_last.fetch_add(1, Ordering::SeqCst);
        }
        let mut data = chunk.data.to_vec();
        data.reverse();
        chunk.data = Bytes::from(data);
        Flow::Continue
    }
}

#[tokio::test]
async fn a_module_may_ask_for_the_whole_body() {
    let origin = TestOrigin::start();
    // Under the 64 KiB limit set below: handed over whole. Over it: passes unchanged.
    let under = letters(30_000);
    origin.route(
        "/whole",
        Reply::ok(under.clone()).chunked().cc("max-age=60"),
    );
    let over = letters(100_000);
    origin.route("/over", Reply::ok(over.clone()).chunked().cc("max-age=60"));
    let reverser = Arc::new(Reverser::default());
    let weir = Setup::new(&origin)
        .module("reverser", Shared(reverser.clone()))
        .extra("[limits]\nmodule_body = \"64KiB\"\n")
        .start()
        .await;

    let mut reversed = under.clone();
    reversed.reverse();
    let r = weir.get("/whole").await;
    assert!(r.body == reversed, "the whole body, reversed at once");
    assert_eq!(
        reverser.calls.load(Ordering::SeqCst),
        1,
        "one call for the whole body"
    );
    assert_eq!(reverser.not_last.load(Ordering::SeqCst), 0);
    let hit = weir.get("/whole").await;
    assert!(
        is_hit(&hit.cache_status()) && hit.body == reversed,
        "stored transformed"
    );

    let r = weir.get("/over").await;
    assert!(
        r.body == over,
        "a body over the limit passes through unchanged"
    );
    assert_eq!(
        reverser.calls.load(Ordering::SeqCst),
        1,
        "not called for it"
    );
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

/// Shares a module with the engine while the test reads its counters.
struct Shared<M>(Arc<M>);

impl<M: Module> Module for Shared<M> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn events(&self) -> Events {
        self.0.events()
    }
    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        self.0.on_request_headers(txn, r)
    }
    fn on_response_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        self.0.on_response_headers(txn, r)
    }
    fn on_response_body<'a>(&'a self, txn: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
        self.0.on_response_body(txn, c)
    }
    fn on_log(&self, txn: &Txn) {
        self.0.on_log(txn)
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
