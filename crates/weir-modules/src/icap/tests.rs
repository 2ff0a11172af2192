//! The module's callbacks, called directly, against the scripted test server and a
//! real c-icap.

use std::time::{Duration, Instant};

use super::c_icap::CIcap;
use super::test_server::*;
use super::*;
use weir_api::engine;

#[path = "failure_tests.rs"]
mod failures;
use weir_api::http::HeaderMap;

fn module(services: &str) -> Icap {
    Icap::from_settings(
        &Settings::parse(services).unwrap(),
        &ModuleContext::detached(),
    )
    .unwrap()
}

fn service(method: &str, url: &str, extra: &str) -> String {
    format!("[[service]]\n{method} = {url:?}\n{extra}\n")
}

fn txn() -> Txn {
    engine::new_txn("127.0.0.1:1".parse().unwrap(), 1)
}

fn request(method: &str, uri: &str) -> RequestHead {
    weir_api::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "site.example")
        .body(())
        .unwrap()
        .into_parts()
        .0
}

fn response(status: u16, body_len: usize) -> ResponseHead {
    weir_api::http::Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .header("content-length", body_len)
        .body(())
        .unwrap()
        .into_parts()
        .0
}

fn whole(data: &[u8]) -> WholeBody {
    WholeBody {
        data: Bytes::copy_from_slice(data),
        truncated: false,
    }
}

/// What a callback's flow decided, waiting for it if it waits.
async fn decide(flow: Flow<'_>) -> Option<Reply> {
    match flow {
        Flow::Continue => None,
        Flow::Respond(reply) => Some(reply),
        Flow::Wait(future) => match future.await {
            Decision::Continue => None,
            Decision::Respond(reply) => Some(reply),
        },
    }
}

/// Runs RESPMOD on `body` for a GET of `path`; returns the reply, head and body.
async fn respmod(
    m: &Icap,
    path: &str,
    body: WholeBody,
) -> (Option<Reply>, ResponseHead, WholeBody) {
    let mut t = txn();
    let _ = m.on_upstream_request(&mut t, &mut request("GET", path));
    let mut head = response(200, body.data.len());
    let mut body = body;
    let reply = decide(m.on_whole_response(&mut t, &mut head, &mut body)).await;
    (reply, head, body)
}

const BODY: &[u8] = b"the origin's own body, long enough for a preview";

#[tokio::test]
async fn reqmod_changes_the_request_head_and_body() {
    let s = IcapServer::offering("REQMOD", "", |_| {
        vec![Step::Send(modified_answer(
            "t1",
            "req-hdr",
            "POST /changed HTTP/1.1\r\nHost: other.example\r\nContent-Length: 3\r\nX-Adapted: yes\r\n\r\n",
            Some(b"new body"),
        ))]
    })
    .await;
    let m = module(&service("reqmod", &s.url("req"), ""));
    let (mut t, mut req, mut body) = (txn(), request("POST", "/form"), whole(b"a=1"));
    let reply = decide(m.on_whole_request(&mut t, &mut req, &mut body)).await;
    assert!(reply.is_none());
    assert_eq!(req.uri, "/changed");
    assert_eq!(req.headers["x-adapted"], "yes");
    assert_eq!(req.headers["host"], "other.example");
    assert!(
        req.headers.get("content-length").is_none(),
        "the engine frames the new body"
    );
    assert_eq!(&body.data[..], b"new body");
    let sent = &s.received()[1];
    assert!(
        sent.http_heads.starts_with("POST /form HTTP/1.1\r\n"),
        "{}",
        sent.http_heads
    );
    assert_eq!(sent.body, b"a=1");
    assert_eq!(m.metrics.modified.get(), 1);
    assert_eq!(t.log_fields(), [("icap", "modified".to_string())]);
}

#[tokio::test]
async fn reqmod_may_answer_the_client() {
    let s = IcapServer::offering("REQMOD", "", |_| {
        vec![Step::Send(modified_answer(
            "t1",
            "res-hdr",
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\n",
            Some(b"blocked"),
        ))]
    })
    .await;
    let m = module(&service("reqmod", &s.url("req"), ""));
    let (mut t, mut req, mut body) = (txn(), request("GET", "http://bad.example/"), whole(b""));
    let reply = decide(m.on_whole_request(&mut t, &mut req, &mut body))
        .await
        .unwrap();
    assert_eq!(reply.status, 403);
    assert_eq!(&reply.body[..], b"blocked");
    assert!(reply.headers.get("content-length").is_none());
    // A GET has no body: null-body, no preview.
    let sent = &s.received()[1];
    assert!(sent.head.contains("null-body="), "{}", sent.head);
    assert!(!sent.head.contains("Preview"), "{}", sent.head);
    assert_eq!(m.metrics.responded.get(), 1);
}

#[tokio::test]
async fn a_204_after_the_preview_leaves_the_response_alone() {
    let s = IcapServer::offering("RESPMOD", "Preview: 4\r\n", |_| {
        vec![Step::Send(unmodified_answer("t1"))]
    })
    .await;
    let m = module(&service("respmod", &s.url("resp"), ""));
    let (reply, head, body) = respmod(&m, "/page.html", whole(BODY)).await;
    assert!(reply.is_none());
    assert_eq!(&body.data[..], BODY);
    assert_eq!(
        head.headers["content-length"],
        BODY.len().to_string().as_str()
    );
    let sent = &s.received()[1];
    assert_eq!(sent.body, &BODY[..4], "only the preview went out");
    assert!(!sent.ieof);
    assert!(sent.head.contains("Preview: 4\r\n") && sent.head.contains("Allow: 204\r\n"));
    assert!(
        sent.http_heads.starts_with("GET /page.html HTTP/1.1\r\n"),
        "req-hdr: {}",
        sent.http_heads
    );
    assert_eq!(m.metrics.unmodified.get(), 1);
}

#[tokio::test]
async fn after_100_continue_the_rest_goes_and_the_answer_is_applied() {
    let s = IcapServer::offering("RESPMOD", "Preview: 4\r\n", |_| {
        vec![
            Step::Send(CONTINUE.to_vec()),
            Step::ReadRest,
            Step::Send(modified_answer(
                "t1",
                "res-hdr",
                "HTTP/1.1 200 OK\r\nContent-Type: text/x-adapted\r\nContent-Length: 12345\r\n\r\n",
                Some(b"ADAPTED"),
            )),
        ]
    })
    .await;
    let m = module(&service("respmod", &s.url("resp"), ""));
    let (reply, head, body) = respmod(&m, "/page.html", whole(BODY)).await;
    assert!(reply.is_none());
    assert_eq!(&body.data[..], b"ADAPTED");
    assert_eq!(head.headers["content-type"], "text/x-adapted");
    assert_eq!(head.headers["content-length"], "7");
    assert_eq!(s.received()[1].body, BODY, "the preview, then the rest");
}

#[tokio::test]
async fn stored_responses_are_tagged_with_the_istag() {
    let s =
        IcapServer::offering("RESPMOD", "", |_| vec![Step::Send(unmodified_answer("t1"))]).await;
    let m = module(&service("respmod", &s.url("resp"), ""));
    let mut t = txn();
    let _ = m.on_upstream_request(&mut t, &mut request("GET", "/a"));
    let (mut head, mut body) = (response(200, BODY.len()), whole(BODY));
    let _ = decide(m.on_whole_response(&mut t, &mut head, &mut body)).await;
    assert_eq!(
        t.cache_overrides().tags,
        [format!("icap:{}#t1", s.url("resp"))]
    );
}

#[tokio::test]
async fn a_body_within_the_preview_ends_with_ieof() {
    let s = IcapServer::offering("RESPMOD", "Preview: 1024\r\n", |_| {
        vec![Step::Send(unmodified_answer("t1"))]
    })
    .await;
    let m = module(&service("respmod", &s.url("resp"), ""));
    let _ = respmod(&m, "/a", whole(BODY)).await;
    let sent = &s.received()[1];
    assert!(sent.ieof);
    assert_eq!(sent.body, BODY);
}

#[tokio::test]
async fn services_are_skipped_by_methods_and_transfer_ignore() {
    let s = IcapServer::offering("REQMOD", "Preview: 0\r\nTransfer-Ignore: jpg\r\n", |_| {
        vec![Step::Send(unmodified_answer("t1"))]
    })
    .await;
    let m = module(&(service("respmod", &s.url("x"), "") + &service("reqmod", &s.url("x"), "")));
    let _ = respmod(&m, "/a.html", whole(BODY)).await;
    assert_eq!(s.count("RESPMOD"), 0, "OPTIONS do not list RESPMOD");
    let (mut t, mut req, mut body) = (txn(), request("POST", "/img.JPG"), whole(b"x"));
    assert!(decide(m.on_whole_request(&mut t, &mut req, &mut body))
        .await
        .is_none());
    assert_eq!(s.count("REQMOD"), 0, "Transfer-Ignore names jpg");
    assert_eq!(m.metrics.skipped.get(), 2);
}

#[tokio::test]
async fn connections_are_reused_and_a_new_istag_refreshes_the_options() {
    let s = IcapServer::start(|r| {
        let tag = if r.method == "OPTIONS" || r.body.starts_with(b"first") {
            "t1"
        } else {
            "t2"
        };
        if r.method == "OPTIONS" {
            vec![Step::Send(options_answer(
                "RESPMOD",
                tag,
                "Options-TTL: 3600\r\n",
            ))]
        } else {
            vec![Step::Send(unmodified_answer(tag))]
        }
    })
    .await;
    let m = module(&service("respmod", &s.url("resp"), ""));
    let _ = respmod(&m, "/a", whole(b"first")).await;
    let _ = respmod(&m, "/a", whole(b"first")).await;
    assert_eq!(s.count("OPTIONS"), 1, "OPTIONS are kept for their TTL");
    let _ = respmod(&m, "/a", whole(b"second")).await;
    let _ = respmod(&m, "/a", whole(b"first")).await;
    assert_eq!(s.count("OPTIONS"), 2, "a new ISTag asks for OPTIONS again");
    assert_eq!(m.metrics.istag_changes.get(), 1);
    assert_eq!(s.connections(), 1, "one persistent connection for all");
}

#[tokio::test]
async fn max_connections_from_options_bounds_the_pool() {
    let s = IcapServer::offering("RESPMOD", "Max-Connections: 1\r\n", |_| {
        vec![
            Step::Sleep(Duration::from_millis(50)),
            Step::Send(unmodified_answer("t1")),
        ]
    })
    .await;
    let m = module(&service("respmod", &s.url("resp"), "max_connections = 8"));
    let _ = respmod(&m, "/warm", whole(b"x")).await;
    let runs = (0..4).map(|_| respmod(&m, "/a", whole(b"x")));
    let _ = join_all(runs.collect()).await;
    assert_eq!(s.count("RESPMOD"), 5);
    assert_eq!(s.connections(), 1);
}

/// Runs the futures concurrently, on this task.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    use std::task::Poll;
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

#[test]
fn events_follow_the_services() {
    let req = module(&service("reqmod", "icap://127.0.0.1:1/a", ""));
    assert_eq!(req.events(), Events::of(&[Event::WholeRequest]));
    let resp = module(&service("respmod", "icap://127.0.0.1:1/a", ""));
    assert_eq!(
        resp.events(),
        Events::of(&[Event::UpstreamRequest, Event::WholeResponse])
    );
}

/// Starts c-icap, or prints why the test is skipped.
fn c_icap() -> Option<CIcap> {
    match CIcap::start() {
        Ok(c) => Some(c),
        Err(why) => {
            eprintln!("SKIPPED: c-icap tests: {why} (./test.sh installs it)");
            None
        }
    }
}

/// c-icap's echo service answers alternately `204` and an echo of the message (it
/// shows both paths), adding a `Via` header when it echoes: either way the body must
/// come back as it was, and over a few requests both answers must have been used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_icap_echo_answers_reqmod_and_respmod() {
    let Some(c) = c_icap() else { return };
    let fail_closed = "on_failure = \"fail-closed\"";
    let m = module(
        &(service("reqmod", &c.echo_url(), fail_closed)
            + &service("respmod", &c.echo_url(), fail_closed)),
    );
    let echoed = |headers: &HeaderMap| {
        headers
            .get("via")
            .is_some_and(|v| v.to_str().unwrap_or("").contains("C-ICAP"))
    };
    let big: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut echoes = 0;
    for round in 0..4 {
        // Larger than c-icap's 1024-byte preview: preview, then 100 Continue or 204.
        let (reply, head, body) = respmod(&m, "/big.txt", whole(&big)).await;
        assert!(reply.is_none(), "round {round}");
        assert!(
            body.data[..] == big[..],
            "round {round}: the body comes back whole"
        );
        if echoed(&head.headers) {
            echoes += 1;
            assert_eq!(
                head.headers["content-length"],
                big.len().to_string().as_str()
            );
        }
        // Within the preview: one exchange, ended by ieof.
        let (reply, _, body) = respmod(&m, "/small.txt", whole(BODY)).await;
        assert!(reply.is_none() && body.data[..] == *BODY, "round {round}");
        // A POST through REQMOD.
        let (mut t, mut req, mut body) = (
            txn(),
            request("POST", "http://site.example/up"),
            whole(&big),
        );
        assert!(decide(m.on_whole_request(&mut t, &mut req, &mut body))
            .await
            .is_none());
        assert!(body.data[..] == big[..], "round {round}");
        assert_eq!(req.uri, "http://site.example/up");
        echoes += usize::from(echoed(&req.headers));
        // A GET: no body.
        let (mut t, mut req, mut body) =
            (txn(), request("GET", "http://site.example/"), whole(b""));
        assert!(decide(m.on_whole_request(&mut t, &mut req, &mut body))
            .await
            .is_none());
        assert!(body.data.is_empty() && req.method == "GET");
    }
    assert!(echoes > 0, "c-icap echoed some messages");
    assert!(m.metrics.unmodified.get() > 0, "and answered 204 to others");
    assert_eq!(m.metrics.requests.get(), 16);
    assert_eq!(m.metrics.unmodified.get() + m.metrics.modified.get(), 16);
    assert_eq!(m.metrics.options.get(), 2, "once per service");
    assert_eq!(m.metrics.failed_closed.get(), 0);
    assert!(c.access_log().lines().count() >= 16, "{}", c.access_log());
}
