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
