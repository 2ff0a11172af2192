//! Whole requests and request-body chunks: rewritten, answered, or over the limit.

use crate::support::client::{is_hit, send};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::{pattern, Reply};
use weir_api::http::StatusCode;
use weir_api::{BodyChunk, Bytes, Event, Events, Flow, Module, RequestHead, Txn, WholeBody};

/// A whole-request module: rewrites `/old/…` to `/new/…`, replaces a POST body, and
/// answers `/blocked` itself.
struct RequestRewriter;

impl Module for RequestRewriter {
    fn name(&self) -> &str {
        "request-rewriter"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeRequest])
    }

    fn on_whole_request<'a>(
        &'a self,
        _txn: &'a mut Txn,
        head: &'a mut RequestHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        let path = head.uri.path().to_string();
        if path == "/blocked" {
            return Flow::Respond(weir_api::Reply::text(StatusCode::FORBIDDEN, "blocked"));
        }
        if let Some(rest) = path.strip_prefix("/old/") {
            head.uri = format!("/new/{rest}").parse().unwrap();
        }
        if !body.data.is_empty() {
            body.data = Bytes::from(format!("[{}]", String::from_utf8_lossy(&body.data)));
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn a_whole_request_changes_routing_key_and_body_or_is_answered() {
    let origin = TestOrigin::start();
    origin.route("/new/page", Reply::ok("new page").cc("max-age=60"));
    origin.route("/echo", Reply::echo());
    let weir = Setup::new(&origin)
        .module("request-rewriter", RequestRewriter)
        .start()
        .await;
    let got = weir.get("/old/page").await;
    assert_eq!(got.text(), "new page");
    // The cache key is the changed URL: the new path is a hit now.
    let again = weir.get("/new/page").await;
    assert!(is_hit(&again.cache_status()), "{}", again.cache_status());
    assert_eq!(origin.count("/new/page"), 1);

    let posted = weir.post("/echo", b"payload").await;
    assert_eq!(posted.text(), "[payload]");
    let seen = origin.last("/echo").unwrap();
    assert_eq!(seen.body, Bytes::from_static(b"[payload]"));
    assert_eq!(seen.header("content-length").as_deref(), Some("9"));

    let blocked = weir.get("/blocked").await;
    assert_eq!(blocked.status, StatusCode::FORBIDDEN);
    assert_eq!(origin.count("/blocked"), 0);
    weir.stop().await;
}

/// A request-body module that appends `+` to each chunk (so the length changes).
struct Plus;

impl Module for Plus {
    fn name(&self) -> &str {
        "plus"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::RequestBody])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        txn.body_length_may_change();
        Flow::Continue
    }

    fn on_request_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        if chunk.last {
            let mut data = chunk.data.to_vec();
            data.push(b'+');
            chunk.data = Bytes::from(data);
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn request_body_chunks_are_transformed_on_their_way() {
    let origin = TestOrigin::start();
    origin.route("/echo", Reply::echo());
    let weir = Setup::new(&origin).module("plus", Plus).start().await;
    let big = pattern(300_000);
    let url = format!("http://{}/echo", weir.addrs[0]);
    let got = send(&weir.client, "POST", &url, &[], Some(big.clone())).await;
    assert_eq!(got.status, StatusCode::OK);
    let seen = origin.last("/echo").unwrap();
    assert_eq!(seen.body.len(), big.len() + 1);
    assert!(seen.body[..big.len()] == big[..] && seen.body.ends_with(b"+"));
    assert!(
        !seen.has_header("content-length"),
        "the changed body goes chunked"
    );
    weir.stop().await;
}

#[tokio::test]
async fn a_request_body_over_the_limit_passes_whole_and_unchanged() {
    let origin = TestOrigin::start();
    origin.route("/echo", Reply::echo());
    let weir = Setup::new(&origin)
        .extra("[limits]\nmodule_body = \"64 KiB\"\n")
        .module("request-rewriter", RequestRewriter)
        .start()
        .await;
    // A declared length larger than the limit: read in part, then streamed.
    let big = pattern(300_000);
    let url = format!("http://{}/echo", weir.addrs[0]);
    let got = send(&weir.client, "POST", &url, &[], Some(big.clone())).await;
    assert_eq!(got.status, StatusCode::OK);
    let seen = origin.last("/echo").unwrap();
    assert!(seen.body == big[..], "the body passes unchanged");
    assert_eq!(seen.header("content-length"), Some(big.len().to_string()));
    weir.stop().await;
}
