//! Event order on misses, hits and pass-through, and only the registered events delivered.

use crate::support::client::is_hit;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::{pattern, Reply};
use weir_api::http::StatusCode;
use weir_api::{Bytes, CacheLookup, Event, Events};

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
