//! A POST response that names its own target in `Content-Location` and gives explicit
//! freshness answers later GETs (RFC 9110 §9.3.3, RFC 9111 §3, §4.4).

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

/// GETs of `path` the origin received.
fn gets(origin: &TestOrigin, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r| r.path == path && r.method == "GET")
        .count()
}

/// An origin route: a GET gets "stored before" (fresh a minute), a POST gets
/// "posted result" with `post_headers`.
fn form(origin: &TestOrigin, path: &str, post_headers: &[(&str, &str)]) {
    let post_headers: Vec<(String, String)> = post_headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    origin.route_fn(path, move |req| {
        if req.method == "POST" {
            post_headers
                .iter()
                .fold(Reply::ok("posted result"), |r, (n, v)| {
                    r.header(n, v.clone())
                })
        } else {
            Reply::ok("stored before").cc("max-age=60")
        }
    });
}

#[tokio::test]
async fn a_post_response_naming_its_target_answers_the_next_get() {
    let (origin, _proxy, client) = setup();
    form(
        &origin,
        "/form",
        &[
            ("content-location", "/form"),
            ("cache-control", "max-age=60"),
        ],
    );
    let url = origin.url("/form");
    get(&client, &url, &[]).await;
    assert_hit(&get(&client, &url, &[]).await, "the GET before the POST");

    let posted = send(&client, "POST", &url, &[], Some(b"x=1".to_vec())).await;
    assert_eq!(posted.text(), "posted result");
    let cs = posted.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("method")) && cs_has(&cs, "stored", None),
        "expected `weir; fwd=method; stored`, got {cs:?}"
    );

    // The POST invalidated the old GET response, then its own response took its place.
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.text(), "posted result");
    assert_hit(&r, "the GET after the POST");
    assert_eq!(gets(&origin, "/form"), 1);
}

#[tokio::test]
async fn an_absolute_content_location_of_the_target_counts_too() {
    let (origin, _proxy, client) = setup();
    let url = origin.url("/absolute");
    form(
        &origin,
        "/absolute",
        &[
            ("content-location", url.as_str()),
            ("expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
        ],
    );
    send(&client, "POST", &url, &[], Some(b"x=1".to_vec())).await;
    let r = get(&client, &url, &[]).await;
    assert_eq!(r.text(), "posted result");
    assert_hit(
        &r,
        "Content-Location in absolute form, freshness by Expires",
    );
    assert_eq!(gets(&origin, "/absolute"), 0);
}

#[tokio::test]
async fn a_post_response_without_explicit_freshness_or_naming_another_uri_is_not_stored() {
    let (origin, _proxy, client) = setup();
    // Heuristically fresh for a day (Last-Modified a year ago), but not explicitly.
    let heuristic = http_date(365 * 86400);
    let cases: [(&str, &[(&str, &str)]); 3] = [
        (
            "/heuristic",
            &[
                ("content-location", "/heuristic"),
                ("last-modified", heuristic.as_str()),
            ],
        ),
        (
            "/elsewhere",
            &[
                ("content-location", "/other"),
                ("cache-control", "max-age=60"),
            ],
        ),
        ("/unnamed", &[("cache-control", "max-age=60")]),
    ];
    for (path, headers) in cases {
        form(&origin, path, headers);
        let url = origin.url(path);
        let posted = send(&client, "POST", &url, &[], Some(b"x=1".to_vec())).await;
        assert!(
            !cs_has(&posted.cache_status(), "stored", None),
            "{path}: {:?}",
            posted.cache_status()
        );
        let r = get(&client, &url, &[]).await;
        assert_eq!(r.text(), "stored before", "{path}");
        assert_not_hit(&r, path);
        assert_eq!(gets(&origin, path), 1, "{path}");
    }
}
