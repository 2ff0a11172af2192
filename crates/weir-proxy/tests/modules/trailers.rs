//! The trailer events: a module sees and changes the trailers that end a request body
//! on its way to the origin and a response body on its way to the client, after the
//! last body chunk; a hit has none, so its modules get no trailer event.

use std::net::SocketAddr;

use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::raw::{chunked_post, RawConn, RawResponse};
use crate::support::reply::Reply;
use weir_api::http::{HeaderMap, HeaderValue};
use weir_api::{Events, Flow, Module, Txn};

/// Adds a field to each side's trailers and removes `x-secret` from the response's.
struct TrailerEditor;

impl Module for TrailerEditor {
    fn name(&self) -> &str {
        "editor"
    }

    fn events(&self) -> Events {
        Events::TRAILERS
    }

    fn on_request_trailers<'a>(&'a self, _txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        t.insert("x-request-added", HeaderValue::from_static("module"));
        Flow::Continue
    }

    fn on_response_trailers<'a>(&'a self, _txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        t.remove("x-secret");
        t.insert("x-checked", HeaderValue::from_static("yes"));
        Flow::Continue
    }
}

/// Sends `request` on a new connection (blocking, off the runtime's threads).
async fn exchange(addr: SocketAddr, request: Vec<u8>) -> RawResponse {
    tokio::task::spawn_blocking(move || {
        let mut conn = RawConn::connect(addr);
        conn.send(&request);
        conn.read_response(false).expect("a response")
    })
    .await
    .unwrap()
}

fn get(addr: SocketAddr, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nTE: trailers\r\nConnection: TE\r\n\r\n")
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_changes_trailers_both_ways() {
    let origin = TestOrigin::start();
    let reply = Reply::ok("body")
        .cc("no-store")
        .trailer("x-secret", "s3cret")
        .trailer("x-checked", "no");
    origin.route("/t", reply);
    origin.route("/up", Reply::ok("ok").cc("no-store"));
    let weir = Setup::new(&origin)
        .module("editor", TrailerEditor)
        .start()
        .await;
    let addr = weir.addrs[0];

    let resp = exchange(addr, get(addr, "/t")).await;
    assert_eq!((resp.status, resp.text().as_str()), (200, "body"));
    assert_eq!(resp.trailer("x-checked"), Some("yes"), "{resp:?}");
    assert_eq!(resp.trailer("x-secret"), None, "{resp:?}");

    let declared = ["x-digest", "x-request-added"];
    let upload = chunked_post("/up", addr, "abc", &declared, &[("x-digest", "1")]);
    let resp = exchange(addr, upload).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    let seen = origin.last("/up").unwrap();
    assert_eq!(seen.body, "abc");
    let mut trailers = seen.trailers.clone();
    trailers.sort();
    assert_eq!(
        trailers,
        [
            ("x-digest".to_string(), "1".to_string()),
            ("x-request-added".to_string(), "module".to_string())
        ],
        "{seen:?}"
    );
    weir.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailer_events_come_after_the_body_and_never_on_a_hit() {
    let origin = TestOrigin::start();
    origin.route(
        "/kept",
        Reply::ok("kept").cc("max-age=60").trailer("x-sum", "9"),
    );
    let (recorder, journal) = Recorder::new("recorder", Events::ALL);
    let weir = Setup::new(&origin)
        .module("recorder", recorder)
        .start()
        .await;
    let addr = weir.addrs[0];

    let miss = exchange(addr, get(addr, "/kept")).await;
    assert_eq!(miss.trailer("x-sum"), Some("9"), "{miss:?}");
    let txn = journal.take_transaction().await;
    let s = summary(&txn);
    let at = |name: &str| txn.iter().position(|(n, _)| n == name);
    let trailers = at("response_trailers").unwrap_or_else(|| panic!("no trailer event: {s}"));
    assert_eq!(txn[trailers].1, "x-sum: 9\n", "{s}");
    assert!(trailers > at("deliver_body(last)").unwrap(), "{s}");
    assert_eq!(trailers + 1, at("log").unwrap(), "{s}");

    let hit = exchange(addr, get(addr, "/kept")).await;
    assert!(hit.trailers.is_empty(), "{hit:?}");
    let txn = journal.take_transaction().await;
    assert!(
        at_name(&txn, "response_trailers").is_none(),
        "{}",
        summary(&txn)
    );
    assert_eq!(origin.count("/kept"), 1);
    weir.stop().await;
}

/// Takes both bodies whole, makes the response's upper case, and adds a request
/// trailer.
struct WholeTaker;

impl Module for WholeTaker {
    fn name(&self) -> &str {
        "whole"
    }

    fn events(&self) -> Events {
        Events::WHOLE.with(Events::of(&[weir_api::Event::RequestTrailers]))
    }

    fn on_request_trailers<'a>(&'a self, _txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        t.insert("x-request-added", HeaderValue::from_static("module"));
        Flow::Continue
    }

    fn on_whole_response<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _response: &'a mut weir_api::ResponseHead,
        body: &'a mut weir_api::WholeBody,
    ) -> Flow<'a> {
        body.data = body.data.to_ascii_uppercase().into();
        Flow::Continue
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_taken_whole_keep_their_trailers() {
    let origin = TestOrigin::start();
    origin.route("/t", Reply::ok("body").cc("no-store").trailer("x-sum", "4"));
    origin.route(
        "/up",
        Reply::ok("ok").cc("no-store").trailer("x-up", "done"),
    );
    let weir = Setup::new(&origin)
        .module("whole", WholeTaker)
        .start()
        .await;
    let addr = weir.addrs[0];

    // A pass-through response changed whole: the client still gets its trailer.
    let resp = exchange(addr, get(addr, "/t")).await;
    assert_eq!(
        (resp.status, resp.text().as_str()),
        (200, "BODY"),
        "{resp:?}"
    );
    assert_eq!(resp.trailer("x-sum"), Some("4"), "{resp:?}");

    // A request read whole: its trailer still reaches the origin; and its answer,
    // passed through (not a cacheable method) and changed whole, keeps its own.
    let declared = ["x-digest", "x-request-added"];
    let upload = chunked_post("/up", addr, "abc", &declared, &[("x-digest", "1")]);
    let upload = String::from_utf8(upload).unwrap().replacen(
        "Transfer-Encoding",
        "TE: trailers\r\nConnection: TE\r\nTransfer-Encoding",
        1,
    );
    let resp = exchange(addr, upload.into_bytes()).await;
    assert_eq!((resp.status, resp.text().as_str()), (200, "OK"), "{resp:?}");
    assert_eq!(resp.trailer("x-up"), Some("done"), "{resp:?}");
    let seen = origin.last("/up").unwrap();
    assert_eq!(seen.body, "abc");
    let mut trailers = seen.trailers.clone();
    trailers.sort();
    let expected = [("x-digest", "1"), ("x-request-added", "module")];
    let expected: Vec<_> = expected.map(|(n, v)| (n.to_string(), v.to_string())).into();
    assert_eq!(trailers, expected, "with the trailer event's field");
    weir.stop().await;
}

fn at_name(txn: &[(String, weir_api::Bytes)], name: &str) -> Option<usize> {
    txn.iter().position(|(n, _)| n == name)
}
