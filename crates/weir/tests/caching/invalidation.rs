//! Variants kept apart by Vary, and entries invalidated by unsafe methods.

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

#[tokio::test]
async fn vary_keeps_one_entry_per_variant() {
    let (origin, _proxy, client) = setup();
    origin.route_fn("/vary", |req| {
        let enc = req.header("accept-encoding").unwrap_or_default();
        Reply::ok(format!("encoded for {enc}"))
            .cc("max-age=60")
            .header("vary", "Accept-Encoding")
    });
    let url = origin.url("/vary");
    let gzip = [("accept-encoding", "gzip")];
    let br = [("accept-encoding", "br")];
    assert_eq!(get(&client, &url, &gzip).await.text(), "encoded for gzip");
    assert_eq!(get(&client, &url, &br).await.text(), "encoded for br");
    assert_eq!(origin.count("/vary"), 2);
    let r = get(&client, &url, &gzip).await;
    assert_eq!(r.text(), "encoded for gzip");
    assert_hit(&r, "gzip variant");
    let r = get(&client, &url, &br).await;
    assert_eq!(r.text(), "encoded for br");
    assert_hit(&r, "br variant");
    assert_eq!(origin.count("/vary"), 2);
}

#[tokio::test]
async fn unsafe_methods_invalidate_the_target_uri() {
    let (origin, _proxy, client) = setup();
    // RFC 9111 §4.4: every method not known to be safe, Weir's own unknown ones too.
    for method in [
        "POST", "PUT", "DELETE", "PATCH", "PROPFIND", "M-SEARCH", "FOO",
    ] {
        let path = format!("/inv-{}", method.to_lowercase());
        origin.route_fn(&path, |req| {
            if req.method == "GET" {
                Reply::ok("cached representation").cc("max-age=60")
            } else {
                Reply::ok("changed")
            }
        });
        let url = origin.url(&path);
        get(&client, &url, &[]).await;
        assert_hit(
            &get(&client, &url, &[]).await,
            &format!("{path} before {method}"),
        );
        assert_eq!(origin.count(&path), 1);

        let r = send(&client, method, &url, &[], Some(b"new".to_vec())).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "changed"),
            "{method}"
        );
        assert_eq!(origin.count(&path), 2, "{method} reaches the origin");

        let r = get(&client, &url, &[]).await;
        assert_eq!(r.text(), "cached representation");
        assert_not_hit(&r, &format!("GET {path} after {method}"));
        assert_eq!(
            origin.count(&path),
            3,
            "GET after {method} reaches the origin"
        );
    }
}

#[tokio::test]
async fn unsafe_methods_invalidate_same_origin_location_and_content_location() {
    let (origin, _proxy, client) = setup();
    origin.route("/loc-target", Reply::ok("loc").cc("max-age=60"));
    origin.route("/cl-target", Reply::ok("cl").cc("max-age=60"));
    let cl_url = origin.url("/cl-target");
    origin.route(
        "/form",
        Reply::status(201)
            .body("created")
            .header("location", "/loc-target")
            .header("content-location", cl_url.clone()),
    );
    for path in ["/loc-target", "/cl-target"] {
        get(&client, &origin.url(path), &[]).await;
        assert_hit(&get(&client, &origin.url(path), &[]).await, path);
    }
    let r = send(
        &client,
        "POST",
        &origin.url("/form"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(r.status, 201);
    for path in ["/loc-target", "/cl-target"] {
        let r = get(&client, &origin.url(path), &[]).await;
        assert_not_hit(&r, &format!("{path} after the POST"));
        assert_eq!(origin.count(path), 2, "{path} fetched again after the POST");
    }
}
