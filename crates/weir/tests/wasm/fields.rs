//! Fields that are not plain headers: trailers both ways through a filter's trailer
//! callbacks, and the connection fields a filter adds, which an HTTP/2 client must
//! never get.

use crate::common::module_config::reverse_with_modules;
use crate::common::*;
use crate::{filters, section};

#[tokio::test]
async fn a_filter_reads_and_changes_trailers_both_ways() {
    let dir = temp_dir("wasm-trailers");
    let wasm = filters::write(&dir, "trailers", filters::TRAILERS);
    let origin = TestOrigin::start();
    let reply = Reply::ok("body")
        .cc("no-store")
        .trailer("x-checksum", "c0ffee");
    origin.route("/t", reply);
    origin.route("/up", Reply::ok("ok").cc("no-store"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));

    // HTTP/2 carries every trailer field, declared or not.
    let (_, body, trailers) = h2_get(&proxy, "/t").await;
    assert_eq!(body, b"body");
    let trailers = trailers.expect("trailers");
    assert_eq!(trailers.get("x-checksum").unwrap(), "c0ffee");
    assert_eq!(
        trailers.get("x-wasm-saw").unwrap(),
        "c0ffee",
        "{trailers:?}"
    );

    let declared = ["x-digest", "x-wasm-req"];
    let upload = chunked_post(
        "/up",
        proxy.reverse_addr(),
        "abc",
        &declared,
        &[("x-digest", "1")],
    );
    let resp = raw_exchange(proxy.reverse_addr(), &upload);
    assert_eq!(resp.status, 200, "{resp:?}");
    let seen = origin.last("/up").unwrap();
    let mut trailers = seen.trailers.clone();
    trailers.sort();
    assert_eq!(
        trailers,
        [
            ("x-digest".to_string(), "1".to_string()),
            ("x-wasm-req".to_string(), "yes".to_string())
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An HTTP/2 GET of `path` on the proxy's reverse listener (prior knowledge): the
/// response head, its body and its trailers.
async fn h2_get(
    proxy: &Proxy,
    path: &str,
) -> (http::response::Parts, Vec<u8>, Option<http::HeaderMap>) {
    let tcp = tokio::net::TcpStream::connect(proxy.reverse_addr())
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    let req = http::Request::get(proxy.reverse_url(path))
        .body(())
        .unwrap();
    let mut client = client.ready().await.unwrap();
    let (response, _) = client.send_request(req, true).unwrap();
    let (head, mut body) = response.await.expect("the response").into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.expect("the trailers");
    (head, data, trailers)
}

#[tokio::test]
async fn connection_fields_a_filter_adds_never_reach_an_http2_client() {
    let dir = temp_dir("wasm-connection-fields");
    let wasm = filters::write(&dir, "connection", filters::CONNECTION_FIELDS);
    let origin = TestOrigin::start();
    origin.route("/c", Reply::ok("fine").cc("no-store"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    // HTTP/2 forbids them: sent as they are, the client would reset the stream.
    let (head, body, _) = h2_get(&proxy, "/c").await;
    assert_eq!((head.status.as_u16(), body.as_slice()), (200, &b"fine"[..]));
    for name in ["connection", "x-hop", "keep-alive"] {
        assert!(!head.headers.contains_key(name), "{name}: {head:?}");
    }
    assert_eq!(head.headers.get("x-kept").unwrap(), "yes");
    let _ = std::fs::remove_dir_all(&dir);
}
