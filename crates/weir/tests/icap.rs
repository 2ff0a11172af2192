//! The built-in `icap` module through the `weir` binary: a real origin, a real c-icap
//! (Debian's `c-icap`, its echo service) started by the tests, and a scripted ICAP
//! server for what c-icap's samples cannot show (modification, 204 after a preview,
//! answers to the client, malformed answers, a server that hangs or is down).

mod common;

// The scripted server and the c-icap runner are the module's own test helpers
// (std and tokio only), shared rather than copied.
#[path = "../../weir-modules/src/icap/c_icap.rs"]
mod c_icap;
#[path = "../../weir-modules/src/icap/test_server.rs"]
mod icap_server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use c_icap::CIcap;
use common::module_config::reverse_with_modules;
use common::*;
use icap_server::*;

/// `[[module]]` with one service per `(method, url, extra lines)`.
fn icap_module(services: &[(&str, &str, &str)]) -> String {
    let mut text = String::from("[[module]]\nname = \"icap\"\n");
    for (method, url, extra) in services {
        text.push_str(&format!(
            "[[module.service]]\n{method} = {url:?}\n{extra}\n"
        ));
    }
    text
}

fn icap_metric(proxy: &Proxy, name: &str) -> f64 {
    metric(
        &proxy.metrics(),
        &format!("weir_module_icap_{name}_total"),
        &[],
    )
    .unwrap_or(0.0)
}

/// A 100 KB text body, cacheable for a minute.
fn page() -> Vec<u8> {
    (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect()
}

fn origin() -> TestOrigin {
    let origin = TestOrigin::start();
    origin.route(
        "/page.txt",
        Reply::ok(page())
            .header("content-type", "text/plain")
            .cc("max-age=60"),
    );
    origin.route("/form", Reply::echo().header("content-type", "text/plain"));
    origin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_icap_echo_adapts_requests_and_responses() {
    let c = match CIcap::start() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIPPED: c-icap tests: {why} (./test.sh installs it)");
            return;
        }
    };
    let origin = origin();
    let closed = "on_failure = \"fail-closed\"";
    let proxy = reverse_with_modules(
        &origin.base(),
        &icap_module(&[
            ("reqmod", &c.echo_url(), closed),
            ("respmod", &c.echo_url(), closed),
        ]),
    );
    let client = direct_client();
    // c-icap's echo answers 204 and echoes by turns: both keep the body intact.
    for round in 0..3 {
        let r = send(
            &client,
            "POST",
            &proxy.reverse_url("/form"),
            &[],
            Some(page()),
        )
        .await;
        assert_eq!(r.status, 200, "round {round}");
        assert!(
            r.body[..] == page()[..],
            "round {round}: the origin got the body whole"
        );
    }
    let first = get(&client, &proxy.reverse_url("/page.txt"), &[]).await;
    assert_eq!(first.status, 200);
    assert!(first.body[..] == page()[..]);
    assert_eq!(
        first.header("content-length"),
        Some(page().len().to_string())
    );
    let respmods = icap_metric(&proxy, "requests");
    let hit = get(&client, &proxy.reverse_url("/page.txt"), &[]).await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert!(hit.body[..] == page()[..]);
    let echoed = |r: &Fetched| r.header_all("via").iter().any(|v| v.contains("C-ICAP"));
    assert_eq!(
        echoed(&hit),
        echoed(&first),
        "the hit serves the stored (adapted) response"
    );
    // The hit ran REQMOD (before the lookup) but not RESPMOD.
    assert_eq!(icap_metric(&proxy, "requests"), respmods + 1.0);
    assert!(icap_metric(&proxy, "unmodified") >= 1.0);
    assert!(icap_metric(&proxy, "modified") >= 1.0);
    assert_eq!(icap_metric(&proxy, "failed_closed"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapted_response_is_stored_and_served_as_a_hit() {
    let s = IcapServer::offering("RESPMOD", "Preview: 0\r\n", |_| {
        vec![
            Step::Send(CONTINUE.to_vec()),
            Step::ReadRest,
            Step::Send(modified_answer(
                "t1",
                "res-hdr",
                "HTTP/1.1 200 OK\r\nContent-Type: text/x-adapted\r\nCache-Control: max-age=60\r\n\r\n",
                Some(b"ADAPTED"),
            )),
        ]
    })
    .await;
    let origin = origin();
    let proxy = reverse_with_modules(
        &origin.base(),
        &icap_module(&[("respmod", &s.url("r"), "")]),
    );
    let client = direct_client();
    for round in ["miss", "hit"] {
        let r = get(&client, &proxy.reverse_url("/page.txt"), &[]).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "ADAPTED"),
            "{round}"
        );
        assert_eq!(r.header("content-type").as_deref(), Some("text/x-adapted"));
        assert_eq!(r.header("content-length").as_deref(), Some("7"), "{round}");
    }
    assert_eq!(
        s.count("RESPMOD"),
        1,
        "adapted once, then served from the cache"
    );
    assert!(
        s.received()[1].body[..] == page()[..],
        "the service got the whole body"
    );
    assert_eq!(origin.count("/page.txt"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_istag_removes_what_the_old_service_adapted() {
    let version = Arc::new(AtomicUsize::new(1));
    let v = version.clone();
    let s = IcapServer::start(move |r| {
        let tag = format!("t{}", v.load(Ordering::SeqCst));
        if r.method == "OPTIONS" {
            return vec![Step::Send(options_answer("RESPMOD", &tag, ""))];
        }
        let body = format!("adapted by {tag}");
        vec![Step::Send(modified_answer(
            &tag,
            "res-hdr",
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=60\r\n\r\n",
            Some(body.as_bytes()),
        ))]
    })
    .await;
    let origin = origin();
    origin.route("/other.txt", Reply::ok("other").cc("max-age=60"));
    let proxy = reverse_with_modules(
        &origin.base(),
        &icap_module(&[("respmod", &s.url("r"), "")]),
    );
    let client = direct_client();
    let url = proxy.reverse_url("/page.txt");
    assert_eq!(get(&client, &url, &[]).await.text(), "adapted by t1");
    let hit = get(&client, &url, &[]).await;
    assert!(is_hit(&hit.cache_status()));
    assert_eq!(hit.text(), "adapted by t1");
    version.store(2, Ordering::SeqCst);
    // The next answer carries the new ISTag: what t1 adapted is removed.
    let other = get(&client, &proxy.reverse_url("/other.txt"), &[]).await;
    assert_eq!(other.text(), "adapted by t2");
    let again = get(&client, &url, &[]).await;
    assert!(!is_hit(&again.cache_status()), "{}", again.cache_status());
    assert_eq!(again.text(), "adapted by t2");
    assert_eq!(icap_metric(&proxy, "istag_changes"), 1.0);
    assert_eq!(origin.count("/page.txt"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_204_after_the_preview_passes_the_response_unchanged() {
    let s = IcapServer::offering("RESPMOD", "Preview: 16\r\n", |_| {
        vec![Step::Send(unmodified_answer("t1"))]
    })
    .await;
    let origin = origin();
    let proxy = reverse_with_modules(
        &origin.base(),
        &icap_module(&[("respmod", &s.url("r"), "")]),
    );
    // The module asks for the OPTIONS as soon as it is loaded, before any request.
    let asked = Instant::now() + Duration::from_secs(5);
    while s.count("OPTIONS") == 0 && Instant::now() < asked {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.count("OPTIONS"), 1, "OPTIONS at load");
    let r = get(&direct_client(), &proxy.reverse_url("/page.txt"), &[]).await;
    assert_eq!(s.count("OPTIONS"), 1, "kept for their TTL");
    assert!(r.body[..] == page()[..]);
    assert_eq!(r.header("content-type").as_deref(), Some("text/plain"));
    assert_eq!(
        s.received()[1].body.len(),
        16,
        "only the preview went to the service"
    );
    assert_eq!(icap_metric(&proxy, "unmodified"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_module_body_go_as_a_preview_and_oversize_decides() {
    let s = IcapServer::offering("RESPMOD, REQMOD", "Preview: 16\r\n", |r| {
        if r.http_heads.contains("/page.txt") {
            vec![Step::Send(CONTINUE.to_vec())] // wants the whole body
        } else {
            vec![Step::Send(unmodified_answer("t1"))]
        }
    })
    .await;
    let origin = origin();
    origin.route(
        "/other.txt",
        Reply::ok(page()).header("content-type", "text/plain"),
    );
    let limits = "[limits]\nmodule_body = \"1 KiB\"\n";
    let client = direct_client();
    for policy in ["bypass", "fail-closed"] {
        let extra = format!("on_oversize = {policy:?}");
        let modules = icap_module(&[
            ("respmod", &s.url("r"), &extra),
            ("reqmod", &s.url("q"), &extra),
        ]);
        let proxy = reverse_with_modules(&origin.base(), &format!("{modules}\n{limits}"));
        // A 204 after the preview is enough: the whole body passes.
        let other = get(&client, &proxy.reverse_url("/other.txt"), &[]).await;
        assert_eq!(other.status, 200, "{policy}");
        assert!(other.body[..] == page()[..], "{policy}");
        // 100 Continue: the module has only the beginning of the body.
        let page_response = get(&client, &proxy.reverse_url("/page.txt"), &[]).await;
        if policy == "bypass" {
            assert_eq!(page_response.status, 200);
            assert!(
                page_response.body[..] == page()[..],
                "passed on unchanged, whole"
            );
        } else {
            assert_eq!(page_response.status, 503);
        }
        assert_eq!(icap_metric(&proxy, "oversize"), 1.0, "{policy}");
        // A large POST goes through REQMOD as a preview too, and reaches the origin whole.
        let post = send(
            &client,
            "POST",
            &proxy.reverse_url("/form"),
            &[],
            Some(page()),
        )
        .await;
        assert!(post.body[..] == page()[..], "{policy}");
    }
    // GETs go through REQMOD without a body; every body went as a 16-byte preview.
    let received = s.received();
    let with_body: Vec<&Received> = received.iter().filter(|r| !r.body.is_empty()).collect();
    assert!(with_body.iter().all(|r| r.body.len() == 16 && !r.ieof));
    let reqmod_posts = with_body
        .iter()
        .filter(|r| r.method == "REQMOD" && r.http_heads.starts_with("POST"));
    assert_eq!(reqmod_posts.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqmod_can_block_or_rewrite_a_request() {
    let s = IcapServer::offering("REQMOD", "", |r| {
        if r.http_heads.contains("/blocked") {
            vec![Step::Send(modified_answer(
                "t1",
                "res-hdr",
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\r\n",
                Some(b"blocked by policy\n"),
            ))]
        } else {
            vec![Step::Send(modified_answer(
                "t1",
                "req-hdr",
                "POST /form HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Scanned: clean\r\n\r\n",
                Some(b"rewritten body"),
            ))]
        }
    })
    .await;
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), &icap_module(&[("reqmod", &s.url("q"), "")]));
    let client = direct_client();
    let blocked = get(&client, &proxy.reverse_url("/blocked"), &[]).await;
    assert_eq!(blocked.status, 403);
    assert_eq!(blocked.text(), "blocked by policy\n");
    assert_eq!(
        origin.total(),
        0,
        "a blocked request never reaches the origin"
    );
    let r = send(
        &client,
        "POST",
        &proxy.reverse_url("/form"),
        &[],
        Some(b"original".to_vec()),
    )
    .await;
    assert_eq!(r.text(), "rewritten body");
    let seen = origin.last("/form").expect("the origin got the request");
    assert_eq!(seen.header("x-scanned").as_deref(), Some("clean"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_bypass_or_fail_closed_by_policy() {
    let garbage = IcapServer::offering("RESPMOD", "", |_| {
        vec![
            Step::Send(
                b"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=9999\r\n\r\nHTTP/1.1 200"
                    .to_vec(),
            ),
            Step::Close,
        ]
    })
    .await;
    let hang = IcapServer::offering("RESPMOD", "", |_| {
        vec![Step::Sleep(Duration::from_secs(30))]
    })
    .await;
    let down = format!("icap://127.0.0.1:{}/gone", free_port());
    let origin = origin();
    let client = direct_client();
    for (name, url) in [
        ("malformed", garbage.url("r")),
        ("hang", hang.url("r")),
        ("down", down),
    ] {
        for closed in [false, true] {
            let policy = if closed { "fail-closed" } else { "bypass" };
            let extra = format!("on_failure = {policy:?}\ntimeout = \"500ms\"");
            let proxy =
                reverse_with_modules(&origin.base(), &icap_module(&[("respmod", &url, &extra)]));
            let started = Instant::now();
            let r = get(&client, &proxy.reverse_url("/page.txt"), &[]).await;
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name}: bounded"
            );
            if closed {
                assert_eq!(r.status, 503, "{name} {policy}");
                assert_eq!(icap_metric(&proxy, "failed_closed"), 1.0, "{name}");
            } else {
                assert_eq!(r.status, 200, "{name} {policy}");
                assert!(r.body[..] == page()[..], "{name}: the origin's body, whole");
                assert_eq!(icap_metric(&proxy, "bypassed"), 1.0, "{name}");
            }
            let kind = match name {
                "malformed" => "failures_protocol",
                "hang" => "failures_timeout",
                _ => "failures_connect",
            };
            assert_eq!(icap_metric(&proxy, kind), 1.0, "{name} {policy}");
        }
    }
}
