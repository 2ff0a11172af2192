//! The whole-message events (`WholeRequest`, `WholeResponse`) and the request-body
//! event end to end: modules built here, the real engine, a real origin and client.
#![cfg(feature = "modules")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::client::{is_hit, send};
use support::modules::*;
use support::origin::TestOrigin;
use support::reply::{pattern, Reply};
use weir_api::http::header::{self, HeaderValue};
use weir_api::http::StatusCode;
use weir_api::{
    BodyChunk, Bytes, Decision, Event, Events, Flow, Module, RequestHead, ResponseHead, Txn,
    WholeBody,
};

/// What a whole-response module does with what it sees.
#[derive(Clone, Copy)]
enum OnResponse {
    /// Replaces a text body with its upper case, longer by `!!`, and changes the type.
    Shout,
    /// The same, after waiting 50 ms (a helper process or an ICAP service).
    ShoutLater,
    /// The same, after waiting this long.
    ShoutAfter(Duration),
    /// Answers 503 when the body is over the limit (fail closed), else goes on.
    RefuseTruncated,
    /// Answers with its own response.
    Answer,
}

/// A whole-response module that notes (body length, truncated) of each call.
struct Rewriter {
    on: OnResponse,
    seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

/// Wants only responses of this type whole; leaves the rest alone.
struct Picky {
    content_type: &'static str,
    /// Keeps what it sees out of the cache (as a transcoder does when its helpers are
    /// busy).
    skip: bool,
    seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

impl Module for Picky {
    fn name(&self) -> &str {
        "picky"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn wants_whole_response(&self, _txn: &mut Txn, response: &ResponseHead) -> bool {
        response
            .headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|t| t == self.content_type)
    }

    fn on_whole_response<'a>(
        &'a self,
        txn: &'a mut Txn,
        _head: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.seen
            .lock()
            .unwrap()
            .push((body.data.len(), body.truncated));
        txn.cache().skip = self.skip;
        Flow::Continue
    }
}

fn shout(head: &mut ResponseHead, body: &mut WholeBody) {
    let mut upper = body.data.to_ascii_uppercase();
    upper.extend_from_slice(b"!!");
    body.data = Bytes::from(upper);
    head.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/x-shout"),
    );
}

impl Module for Rewriter {
    fn name(&self) -> &str {
        "rewriter"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn on_whole_response<'a>(
        &'a self,
        _txn: &'a mut Txn,
        head: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.seen
            .lock()
            .unwrap()
            .push((body.data.len(), body.truncated));
        match self.on {
            OnResponse::Shout => {
                shout(head, body);
                Flow::Continue
            }
            OnResponse::ShoutLater => Flow::wait(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                shout(head, body);
                Decision::Continue
            }),
            OnResponse::ShoutAfter(wait) => Flow::wait(async move {
                tokio::time::sleep(wait).await;
                shout(head, body);
                Decision::Continue
            }),
            OnResponse::RefuseTruncated if body.truncated => Flow::Respond(weir_api::Reply::text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too large to check",
            )),
            OnResponse::RefuseTruncated => Flow::Continue,
            OnResponse::Answer => Flow::Respond(weir_api::Reply::text(
                StatusCode::FORBIDDEN,
                "rewriter says no",
            )),
        }
    }
}

async fn with_rewriter(
    origin: &TestOrigin,
    on: OnResponse,
    extra: &'static str,
) -> (Weir, Arc<Mutex<Vec<(usize, bool)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Rewriter {
        on,
        seen: seen.clone(),
    };
    let weir = Setup::new(origin)
        .extra(extra)
        .module("rewriter", module)
        .start()
        .await;
    (weir, seen)
}

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

/// GETs `path` and returns (time to the head, time to the end of the body).
async fn timed_get(weir: &Weir, path: &str) -> (Duration, Duration) {
    let start = std::time::Instant::now();
    let response = weir.client.get(weir.url_on(0, path)).send().await.unwrap();
    let head = start.elapsed();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.bytes().await.unwrap();
    assert_eq!(body.len(), 4 * 64 * 1024);
    (head, start.elapsed())
}

#[tokio::test]
async fn only_the_responses_a_module_wants_are_held_back_whole() {
    let origin = TestOrigin::start();
    // Four chunks, 250 ms apart: a held head comes after the last.
    for (path, kind) in [("/slow.txt", "text/plain"), ("/slow.img", "image/x-test")] {
        origin.route(
            path,
            Reply::stream(4 * 64 * 1024)
                .chunk_delay(Duration::from_millis(250))
                .header("content-type", kind),
        );
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Picky {
        content_type: "image/x-test",
        skip: false,
        seen: seen.clone(),
    };
    let weir = Setup::new(&origin).module("picky", module).start().await;
    let (head, end) = timed_get(&weir, "/slow.txt").await;
    assert!(
        head + Duration::from_millis(400) < end,
        "text streams: head after {head:?}, body ends after {end:?}"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "not called for what it declined"
    );
    let (head, end) = timed_get(&weir, "/slow.img").await;
    assert!(
        head >= Duration::from_millis(750),
        "the image's head waits for its body: {head:?} (end {end:?})"
    );
    assert_eq!(*seen.lock().unwrap(), [(4 * 64 * 1024, false)]);
    weir.stop().await;
}

#[tokio::test]
async fn skip_set_in_a_fill_keeps_the_response_out_of_the_cache() {
    let origin = TestOrigin::start();
    origin.route(
        "/busy.img",
        Reply::ok("image bytes")
            .cc("max-age=60")
            .header("content-type", "image/x-test"),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Picky {
        content_type: "image/x-test",
        skip: true,
        seen: seen.clone(),
    };
    let weir = Setup::new(&origin).module("picky", module).start().await;
    for _ in 0..2 {
        let got = weir.get("/busy.img").await;
        assert_eq!(got.text(), "image bytes");
        assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
        assert!(
            !got.cache_status().contains("stored"),
            "{}",
            got.cache_status()
        );
    }
    assert_eq!(origin.count("/busy.img"), 2, "not stored, so asked again");
    weir.stop().await;
}

/// Panics when asked whether it wants a response whole.
struct PanicsWhenAsked;

impl Module for PanicsWhenAsked {
    fn name(&self) -> &str {
        "panics-when-asked"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn wants_whole_response(&self, _txn: &mut Txn, _response: &ResponseHead) -> bool {
        panic!("asked and panicked")
    }
}

#[tokio::test]
async fn a_module_that_panics_when_asked_fails_only_its_transaction_or_is_passed_by() {
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let weir = Setup::new(&origin)
        .module("panics-when-asked", PanicsWhenAsked)
        .start()
        .await;
    let got = weir.get("/page").await;
    assert_eq!(got.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(got.text().contains("panics-when-asked"), "{}", got.text());
    weir.stop().await;

    let weir = Setup::new(&origin)
        .module_with("panics-when-asked", PanicsWhenAsked, "optional = true")
        .start()
        .await;
    let got = weir.get("/page").await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "page"));
    weir.stop().await;
}
