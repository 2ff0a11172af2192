//! What modules change: headers at each event, the answer instead, the body (whole or not).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::helpers::Shared;
use crate::support::client::{is_hit, Fetched};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::StatusCode;
use weir_api::{BodyChunk, Bytes, Event, Events, Flow, Module, RequestHead, ResponseHead, Txn};

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
