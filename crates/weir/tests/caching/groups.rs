//! HTTP Cache Groups (RFC 9875): `Cache-Groups` on stored responses, invalidated by
//! `Cache-Group-Invalidation` on a response to an unsafe method, by PURGE and by the
//! admin API; always within one origin, never resurrected by a fetch in flight.

use std::time::Duration;

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

const FIELD: &str = "cache-group-invalidation";

fn grouped(body: &'static str, groups: &str) -> Reply {
    Reply::ok(body)
        .cc("max-age=300")
        .header("cache-groups", groups)
}

/// Fetches `url` twice; the second must be a hit.
async fn cached(client: &reqwest::Client, url: &str) {
    get(client, url, &[]).await;
    assert_hit(&get(client, url, &[]).await, url);
}

/// `POST` to `path` of `origin`, whose answer (`status`) carries
/// `Cache-Group-Invalidation: <groups>`.
async fn post_invalidating(
    client: &reqwest::Client,
    origin: &TestOrigin,
    path: &str,
    status: u16,
    groups: &str,
) {
    origin.route(
        path,
        Reply::status(status).body("done").header(FIELD, groups),
    );
    let r = send(client, "POST", &origin.url(path), &[], Some(b"x".to_vec())).await;
    assert_eq!(r.status, status);
}

/// Whether a GET of `path` is served from the cache now (it asks the origin if not).
async fn still_hit(client: &reqwest::Client, origin: &TestOrigin, path: &str) -> bool {
    is_hit(&get(client, &origin.url(path), &[]).await.cache_status())
}

async fn admin_purge(proxy: &Proxy, body: String) -> Fetched {
    let url = format!("http://{}/admin/purge", proxy.admin_addr());
    send(&direct_client(), "POST", &url, &[], Some(body.into_bytes())).await
}

#[tokio::test]
async fn cache_groups_are_kept_with_the_stored_response() {
    let (origin, proxy, client) = setup();
    origin.route(
        "/page",
        grouped("page", r#""user-1", "pages""#).header("surrogate-key", "t1"),
    );
    cached(&client, &origin.url("/page")).await;
    let q = format!(
        "http://{}/admin/cache?url={}",
        proxy.admin_addr(),
        origin.url("/page")
    );
    let r = get(&direct_client(), &q, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let info = r.text();
    assert!(info.contains(r#""groups":["user-1","pages"]"#), "{info}");
    assert!(
        info.contains(r#""tags":["t1"]"#),
        "groups are not tags: {info}"
    );
    // The field itself is delivered unchanged.
    let r = get(&client, &origin.url("/page"), &[]).await;
    assert_eq!(
        r.header("cache-groups").as_deref(),
        Some(r#""user-1", "pages""#)
    );
}

#[tokio::test]
async fn a_write_invalidates_the_groups_its_response_names_in_its_origin_only() {
    let (origin, proxy, client) = setup();
    let other = TestOrigin::start();
    origin.route("/a", grouped("a", r#""g""#));
    origin.route("/b", grouped("b", r#""x", "g""#));
    origin.route("/c", grouped("c", r#""h""#));
    other.route("/a", grouped("other a", r#""g""#));
    for url in [
        origin.url("/a"),
        origin.url("/b"),
        origin.url("/c"),
        other.url("/a"),
    ] {
        cached(&client, &url).await;
    }

    post_invalidating(&client, &origin, "/form", 200, r#""G""#).await;
    assert!(
        still_hit(&client, &origin, "/a").await,
        "names are case-sensitive"
    );

    post_invalidating(&client, &origin, "/form", 200, r#""g""#).await;
    for path in ["/a", "/b"] {
        let r = get(&client, &origin.url(path), &[]).await;
        assert_not_hit(&r, &format!("{path} after the POST"));
        assert_eq!(origin.count(path), 2, "{path} fetched again");
    }
    assert!(still_hit(&client, &origin, "/c").await, "another group");
    assert!(still_hit(&client, &other, "/a").await, "another origin");
    assert_eq!(other.count("/a"), 1);
    let purged = metric(
        &proxy.metrics(),
        "weir_cache_purged_objects_total",
        &[("by", "group")],
    );
    assert_eq!(purged, Some(2.0));
}

#[tokio::test]
async fn cache_group_invalidation_is_ignored_on_errors_and_safe_methods() {
    let (origin, _proxy, client) = setup();
    origin.route("/a", grouped("a", r#""g""#));
    cached(&client, &origin.url("/a")).await;

    post_invalidating(&client, &origin, "/fails", 500, r#""g""#).await;
    assert!(
        still_hit(&client, &origin, "/a").await,
        "after a 500 to a POST"
    );

    origin.route("/read", Reply::ok("read").header(FIELD, r#""g""#));
    let r = get(&client, &origin.url("/read"), &[]).await;
    assert_eq!(r.header(FIELD).as_deref(), Some(r#""g""#));
    assert!(still_hit(&client, &origin, "/a").await, "after a GET");
    assert_eq!(origin.count("/a"), 1);
}

#[tokio::test]
async fn purge_with_cache_group_invalidation_removes_groups_of_the_urls_origin() {
    let (origin, _proxy, client) = setup();
    let other = TestOrigin::start();
    origin.route("/a", grouped("a", r#""g""#));
    origin.route("/b", grouped("b", r#""g", "y""#));
    origin.route("/c", grouped("c", r#""y""#));
    other.route("/a", grouped("other a", r#""g""#));
    for url in [
        origin.url("/a"),
        origin.url("/b"),
        origin.url("/c"),
        other.url("/a"),
    ] {
        cached(&client, &url).await;
    }
    let purge = |value: &'static str| {
        let client = client.clone();
        let url = origin.url("/");
        async move { send(&client, "PURGE", &url, &[(FIELD, value)], None).await }
    };

    let r = purge(r#""g""#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("purged 2 object(s)"), "{}", r.text());
    assert!(!still_hit(&client, &origin, "/a").await);
    assert!(!still_hit(&client, &origin, "/b").await);
    assert!(still_hit(&client, &origin, "/c").await, "another group");
    assert!(still_hit(&client, &other, "/a").await, "another origin");
    assert_eq!(origin.total(), 5, "PURGE is never forwarded");

    assert_eq!(purge(r#""nothing""#).await.status, 404);
    let r = purge("g, 1").await;
    assert_eq!(r.status, 400, "no string in the field: {}", r.text());
    assert!(
        r.text().contains("Cache-Group-Invalidation"),
        "{}",
        r.text()
    );
    assert!(still_hit(&client, &origin, "/c").await);
}

#[tokio::test]
async fn the_admin_api_purges_a_group_of_an_origin() {
    let (origin, proxy, client) = setup();
    let other = TestOrigin::start();
    origin.route("/a", grouped("a", r#""g""#));
    origin.route("/b", grouped("b", r#""g""#));
    other.route("/a", grouped("other a", r#""g""#));
    for url in [origin.url("/a"), origin.url("/b"), other.url("/a")] {
        cached(&client, &url).await;
    }
    let body = format!(r#"{{"group": "g", "origin": "{}"}}"#, origin.base());
    let r = admin_purge(&proxy, body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text().trim_end(), r#"{"by":"group","purged":2}"#);
    assert!(!still_hit(&client, &origin, "/a").await);
    assert!(!still_hit(&client, &origin, "/b").await);
    assert!(still_hit(&client, &other, "/a").await, "another origin");

    for bad in [
        r#"{"group": "g"}"#.to_string(),
        format!(r#"{{"group": "g", "origin": "{}"}}"#, origin.url("/a")),
        format!(
            r#"{{"group": "g", "tag": "t", "origin": "{}"}}"#,
            origin.base()
        ),
        format!(r#"{{"origin": "{}"}}"#, origin.base()),
    ] {
        let r = admin_purge(&proxy, bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    assert!(still_hit(&client, &other, "/a").await);
}

#[tokio::test]
async fn no_resurrection_of_a_group_from_a_fill_in_flight() {
    let (origin, proxy, client) = setup();
    // About 0.6 s of body: long enough to invalidate while it arrives.
    // Each path in a group of its own name, so that each form invalidates its own.
    origin.route_fn("/s/*", |req| {
        let group = req.path.trim_start_matches("/s/");
        Reply::stream(256 * 1024)
            .chunk_delay(Duration::from_millis(150))
            .cc("max-age=300")
            .header("cache-groups", format!("\"{group}\""))
    });
    for (path, form) in [
        ("/s/post", "POST"),
        ("/s/purge", "PURGE"),
        ("/s/admin", "admin"),
    ] {
        let group = &path[3..];
        let field = format!("\"{group}\"");
        origin.route("/form", Reply::ok("done").header(FIELD, field.clone()));
        let url = origin.url(path);
        let fetch = tokio::spawn({
            let (client, url) = (client.clone(), url.clone());
            async move { get(&client, &url, &[]).await }
        });
        assert!(
            origin
                .eventually(Duration::from_secs(10), |o| o.count(path) == 1)
                .await
        );
        match form {
            "POST" => {
                let r = send(
                    &client,
                    "POST",
                    &origin.url("/form"),
                    &[],
                    Some(b"x".to_vec()),
                )
                .await;
                assert_eq!(r.status, 200);
            }
            "PURGE" => {
                let r = send(&client, "PURGE", &url, &[(FIELD, &field)], None).await;
                assert_eq!(r.status, 404, "nothing stored yet: {}", r.text());
            }
            _ => {
                let body = format!(r#"{{"group": "{group}", "origin": "{}"}}"#, origin.base());
                assert_eq!(admin_purge(&proxy, body).await.status, 200);
            }
        }
        let first = fetch.await.unwrap();
        assert_eq!(
            first.body.len(),
            256 * 1024,
            "{form}: the client in flight is served"
        );
        let next = get(&client, &url, &[]).await;
        assert!(
            cs_has(&next.cache_status(), "fwd", Some("miss")),
            "{form}: {}",
            next.cache_status()
        );
        assert_eq!(origin.count(path), 2, "{form}");
    }
    let refused = metric(&proxy.metrics(), "weir_cache_stores_refused_total", &[]);
    assert_eq!(refused, Some(3.0));
}

#[tokio::test]
async fn malformed_group_fields_are_ignored() {
    let (origin, _proxy, client) = setup();
    // Not a List at all (an unterminated string): in no group.
    origin.route("/broken", grouped("broken", r#""g", "h"#));
    // Members that are not Strings are skipped; "s" still counts.
    origin.route("/mixed", grouped("mixed", r#"tok, 1, ("i"), "s""#));
    for path in ["/broken", "/mixed"] {
        cached(&client, &origin.url(path)).await;
    }

    post_invalidating(&client, &origin, "/form", 200, r#""g""#).await;
    assert!(
        still_hit(&client, &origin, "/broken").await,
        "a broken field puts it in no group"
    );
    post_invalidating(&client, &origin, "/form", 200, r#""tok", "i""#).await;
    assert!(
        still_hit(&client, &origin, "/mixed").await,
        "tokens and inner lists are not groups"
    );
    post_invalidating(&client, &origin, "/form", 200, r#""s", "unterminated"#).await;
    assert!(
        still_hit(&client, &origin, "/mixed").await,
        "a broken invalidation is ignored"
    );
    post_invalidating(&client, &origin, "/form", 200, r#"s, "s""#).await;
    assert!(
        !still_hit(&client, &origin, "/mixed").await,
        "its String member counts"
    );
}

#[tokio::test]
async fn at_most_32_groups_per_field_are_honoured() {
    let (origin, _proxy, client) = setup();
    let list = |names: std::ops::Range<usize>| {
        names
            .map(|i| format!("\"g{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let many = list(0..33);
    origin.route_fn("/many", move |_| grouped("many", &many));
    cached(&client, &origin.url("/many")).await;

    post_invalidating(&client, &origin, "/form", 200, r#""g32""#).await;
    assert!(
        still_hit(&client, &origin, "/many").await,
        "the 33rd group is ignored"
    );
    // An invalidation naming 33 groups honours its first 32 only.
    let unrelated_first = format!("{}, \"g31\"", list(100..132));
    post_invalidating(&client, &origin, "/form", 200, &unrelated_first).await;
    assert!(
        still_hit(&client, &origin, "/many").await,
        "the 33rd name is ignored"
    );
    post_invalidating(&client, &origin, "/form", 200, r#""g31""#).await;
    assert!(
        !still_hit(&client, &origin, "/many").await,
        "the 32nd group counts"
    );
}
