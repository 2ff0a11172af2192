//! HTTP callouts (`proxy_http_call`): a filter pauses a request, consults another
//! service through Weir's upstream pools, and changes or answers the request with
//! what it learnt.

use crate::common::module_config::reverse_with_modules;
use crate::common::*;
use crate::{filters, section};

#[tokio::test]
async fn a_filter_consults_a_service_before_the_request_goes_on() {
    let dir = TempDir::new("wasm-callout");
    let wasm = filters::write(dir.path(), "callout", filters::CALLOUT);
    let service = TestOrigin::start();
    service.route("/auth", Reply::ok("granted"));
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let config = format!("configuration = \"127.0.0.1:{}\"", service.port());
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, &config));
    let client = direct_client();
    for round in 0..2 {
        let r = get(&client, &proxy.reverse_url("/page"), &[]).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "page"),
            "round {round}"
        );
    }
    // Each request was held until its callout was answered, then went on changed.
    let seen = origin
        .last("/page")
        .expect("the request reached the origin");
    assert_eq!(seen.header_all("x-callout"), ["granted"]);
    assert_eq!(seen.header_all("x-callout-status"), ["200"]);
    assert_eq!(service.count("/auth"), 2, "one callout per request");
    let call = service.last("/auth").unwrap();
    assert_eq!(call.header_all("host"), ["auth"], "the call's :authority");
}

#[tokio::test]
async fn a_callout_answer_can_refuse_the_request() {
    let dir = TempDir::new("wasm-callout-403");
    let wasm = filters::write(dir.path(), "callout", filters::CALLOUT);
    let service = TestOrigin::start();
    service.route("/auth", Reply::status(403).body("no"));
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let config = format!("configuration = \"127.0.0.1:{}\"", service.port());
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, &config));
    let r = get(&direct_client(), &proxy.reverse_url("/page"), &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (403, "refused by the callout")
    );
    assert_eq!(origin.count("/page"), 0);
}

#[tokio::test]
async fn a_failed_callout_is_answered_without_headers() {
    let dir = TempDir::new("wasm-callout-failed");
    let wasm = filters::write(dir.path(), "callout", filters::CALLOUT);
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let config = format!("configuration = \"127.0.0.1:{port}\"");
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, &config));
    let r = get(&direct_client(), &proxy.reverse_url("/page"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "page"));
    let seen = origin.last("/page").unwrap();
    assert_eq!(seen.header_all("x-callout"), ["failed"]);
    assert!(seen.header_all("x-callout-status").is_empty());
}

#[tokio::test]
async fn a_callout_sends_trailers_and_reads_the_answers() {
    let dir = TempDir::new("wasm-callout-trailers");
    let wasm = filters::write(dir.path(), "trailers", filters::CALLOUT_TRAILERS);
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let client = direct_client();
    // A service that answers with a trailer, then one that answers without.
    for (answer, expected) in [(Some("yes"), "yes"), (None, "none")] {
        let service = TestOrigin::start();
        let reply = Reply::ok("granted");
        service.route(
            "/auth",
            match answer {
                Some(value) => reply.trailer("x-answer-trailer", value),
                None => reply,
            },
        );
        let config = format!("configuration = \"127.0.0.1:{}\"", service.port());
        let proxy = reverse_with_modules(&origin.base(), &section(&wasm, &config));
        let r = get(&client, &proxy.reverse_url("/page"), &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "page"));
        let seen = origin
            .last("/page")
            .expect("the request reached the origin");
        assert_eq!(seen.header_all("x-callout-trailer"), [expected]);
        // The call's own trailer reached the service after its (empty) body.
        let call = service.last("/auth").expect("the call reached the service");
        assert_eq!(
            call.trailers,
            [("x-call-trailer".to_string(), "sent".to_string())]
        );
    }
}

#[tokio::test]
async fn a_head_callout_with_trailers_fails_instead_of_losing_them() {
    // HEAD, as long as POST: the serialized pairs keep their sizes.
    let dir = TempDir::new("wasm-callout-head-trailers");
    let text = filters::CALLOUT_TRAILERS.replace(":method\\00POST", ":method\\00HEAD");
    assert_ne!(text, filters::CALLOUT_TRAILERS);
    let wasm = filters::write(dir.path(), "trailers", &text);
    let service = TestOrigin::start();
    service.route("/auth", Reply::ok("granted"));
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let config = format!("configuration = \"127.0.0.1:{}\"", service.port());
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, &config));
    let r = get(&direct_client(), &proxy.reverse_url("/page"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "page"));
    // The call failed before it was sent: answered without headers or trailers.
    assert_eq!(service.count("/auth"), 0);
    let seen = origin.last("/page").unwrap();
    assert_eq!(seen.header_all("x-callout-trailer"), ["none"]);
}
