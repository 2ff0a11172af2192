//! 206 responses kept as parts of their object (RFC 9111 §3.3, §3.4): later ranges
//! inside a part are hits, parts that cover the object make it, and only parts with
//! one strong validator are combined.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::common::*;
use super::{range, whole_fetches};

/// The representation an origin serves: its bytes and the fields sent with them.
struct Representation {
    body: Vec<u8>,
    fields: Vec<(&'static str, String)>,
    /// Pause before answering a request for the whole object.
    whole_delay: Duration,
}

type Current = Arc<Mutex<Representation>>;

/// `len` letters, lower or upper case, so two representations differ in every byte.
fn letters(len: usize, upper: bool) -> Vec<u8> {
    let base = if upper { b'A' } else { b'a' };
    (0..len).map(|i| base + (i % 26) as u8).collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// An origin route answering `Range: bytes=A-B` with a 206 of the current
/// representation, and anything else with all of it; `max-age=600` on both.
fn serve(
    origin: &TestOrigin,
    path: &str,
    body: Vec<u8>,
    fields: &[(&'static str, &str)],
) -> Current {
    let current = Arc::new(Mutex::new(Representation {
        body,
        fields: fields.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        whole_delay: Duration::ZERO,
    }));
    let shared = current.clone();
    origin.route_fn(path, move |req| {
        let r = shared.lock().unwrap();
        let len = r.body.len();
        let asked = req.header("range").and_then(|h| {
            let (a, b) = h.strip_prefix("bytes=")?.split_once('-')?;
            Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
        });
        let mut reply = match asked {
            Some((a, b)) if a <= b && b < len => Reply::status(206)
                .body(r.body[a..=b].to_vec())
                .header("content-range", format!("bytes {a}-{b}/{len}")),
            _ => Reply::ok(r.body.clone()).delay(r.whole_delay),
        };
        for (name, value) in &r.fields {
            reply = reply.header(name, value.clone());
        }
        reply.cc("max-age=600")
    });
    current
}

fn parts_only() -> Proxy {
    Proxy::builder()
        .forward()
        .option("cache", "range_fill", "\"parts\"")
        .start()
}

/// Asks for `bytes=first-last` and checks the bytes against `expected` (the whole
/// representation). Returns whether it was a hit.
async fn ask(
    client: &reqwest::Client,
    url: &str,
    first: usize,
    last: usize,
    expected: &[u8],
) -> bool {
    let asked = format!("bytes={first}-{last}");
    let r = get(client, url, &[("range", &asked)]).await;
    assert_eq!(r.status.as_u16(), 206, "{asked}");
    assert_eq!(r.text(), text(&expected[first..=last]), "{asked}");
    let announced = format!("bytes {first}-{last}/{}", expected.len());
    assert_eq!(range(&r).as_deref(), Some(announced.as_str()), "{asked}");
    assert_eq!(
        r.header("content-length"),
        Some((last - first + 1).to_string())
    );
    is_hit(&r.cache_status())
}

/// With `range_fill = "parts"` the origin is asked for nothing but the ranges: a later
/// range inside the first is a hit, one outside it goes to the origin.
#[tokio::test]
async fn a_later_range_inside_a_kept_part_is_a_hit() {
    let origin = TestOrigin::start();
    let body = letters(1000, false);
    serve(&origin, "/clip", body.clone(), &[("etag", "\"v1\"")]);
    let proxy = parts_only();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/clip");

    assert!(
        !ask(&client, &url, 100, 199, &body).await,
        "the first range is a miss"
    );
    let r = get(&client, &url, &[("range", "bytes=120-149")]).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.header("etag").as_deref(), Some("\"v1\""));
    assert!(ask(&client, &url, 100, 199, &body).await);
    assert!(ask(&client, &url, 199, 199, &body).await);
    assert_eq!(origin.count("/clip"), 1, "the origin was not asked again");
    assert!(
        !ask(&client, &url, 150, 250, &body).await,
        "beyond the part"
    );
    assert_eq!(origin.count("/clip"), 2);
    assert_eq!(whole_fetches(&origin, "/clip"), 0);
}

/// With the default `range_fill = "whole"`, an object over `max_object` is never
/// fetched whole, but the part of it is kept.
#[tokio::test]
async fn a_part_of_an_object_over_max_object_is_kept() {
    let origin = TestOrigin::start();
    let body = letters(4000, false);
    serve(&origin, "/big", body.clone(), &[("etag", "\"v1\"")]);
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "max_object", "\"1KiB\"")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/big");
    assert!(!ask(&client, &url, 0, 499, &body).await);
    assert!(ask(&client, &url, 200, 299, &body).await, "inside the part");
    assert_eq!(origin.count("/big"), 1);
    assert_eq!(whole_fetches(&origin, "/big"), 0);
}

/// The whole object fetched in the background is slow to come: ranges inside the
/// part are hits meanwhile.
#[tokio::test]
async fn a_part_is_a_hit_before_the_whole_object_arrives() {
    let origin = TestOrigin::start();
    let body = letters(2000, false);
    let current = serve(&origin, "/slow", body.clone(), &[("etag", "\"v1\"")]);
    current.lock().unwrap().whole_delay = Duration::from_secs(30);
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/slow");
    assert!(!ask(&client, &url, 0, 99, &body).await);
    assert!(
        origin.wait_until(Duration::from_secs(10), |o| whole_fetches(o, "/slow") == 1),
        "the whole object is being fetched"
    );
    assert!(
        ask(&client, &url, 10, 19, &body).await,
        "a hit from the part"
    );
    assert_eq!(
        origin.count("/slow"),
        2,
        "one range and the whole, still waited for"
    );
}

/// Parts that cover the object are stored as the complete object: a full GET is then
/// a hit with every byte, and the origin never sent the whole.
#[tokio::test]
async fn parts_that_cover_the_object_make_it_whole() {
    let origin = TestOrigin::start();
    let body = letters(1000, false);
    serve(&origin, "/doc", body.clone(), &[("etag", "\"v1\"")]);
    let proxy = parts_only();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/doc");
    assert!(!ask(&client, &url, 0, 399, &body).await);
    assert!(!ask(&client, &url, 600, 999, &body).await);
    let full = get(&client, &url, &[]).await;
    assert!(!is_hit(&full.cache_status()), "a gap is left: 400-599");
    assert_eq!(origin.count("/doc"), 3);

    let origin = TestOrigin::start();
    serve(&origin, "/doc", body.clone(), &[("etag", "\"v1\"")]);
    let url = origin.url("/doc");
    assert!(!ask(&client, &url, 0, 499, &body).await);
    assert!(!ask(&client, &url, 400, 999, &body).await);
    let full = get(&client, &url, &[]).await;
    assert_eq!(full.status.as_u16(), 200);
    assert!(is_hit(&full.cache_status()), "{}", full.cache_status());
    assert_eq!(full.text(), text(&body));
    assert_eq!(full.header("content-range"), None);
    assert_eq!(full.header("etag").as_deref(), Some("\"v1\""));
    assert!(
        ask(&client, &url, 450, 549, &body).await,
        "ranges now come from the object"
    );
    assert_eq!(origin.count("/doc"), 2);
    assert_eq!(whole_fetches(&origin, "/doc"), 0);
}

/// A part with another entity tag is another representation: it replaces the parts
/// kept so far instead of joining them, so no response mixes the two.
#[tokio::test]
async fn a_part_with_another_validator_replaces_the_parts() {
    let origin = TestOrigin::start();
    let old = letters(1000, false);
    let new = letters(1000, true);
    let current = serve(&origin, "/v", old.clone(), &[("etag", "\"v1\"")]);
    let proxy = parts_only();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/v");
    assert!(!ask(&client, &url, 0, 499, &old).await);
    {
        let mut r = current.lock().unwrap();
        r.body = new.clone();
        r.fields = vec![("etag", "\"v2\"".into())];
    }
    assert!(!ask(&client, &url, 500, 999, &new).await);
    assert!(
        ask(&client, &url, 600, 609, &new).await,
        "the new part is kept"
    );
    assert!(
        !ask(&client, &url, 0, 9, &new).await,
        "the old part is gone"
    );
    let full = get(&client, &url, &[]).await;
    assert_eq!(full.text(), text(&new));
    assert!(
        !is_hit(&full.cache_status()),
        "0-499 of v2 was never received whole"
    );
}

/// A PURGE of the URL removes its parts.
#[tokio::test]
async fn a_purge_removes_the_parts() {
    let origin = TestOrigin::start();
    let body = letters(1000, false);
    serve(&origin, "/p", body.clone(), &[("etag", "\"v1\"")]);
    let proxy = parts_only();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/p");
    assert!(!ask(&client, &url, 0, 499, &body).await);
    assert!(ask(&client, &url, 10, 19, &body).await);
    let purged = send(&client, "PURGE", &url, &[], None).await;
    assert_eq!(purged.status.as_u16(), 200);
    assert!(!ask(&client, &url, 10, 19, &body).await, "purged");
    assert_eq!(origin.count("/p"), 2);
}

/// Only a 206 with a strong validator is kept: not one with a weak entity tag or none,
/// nor one whose `Last-Modified` is within a minute of its `Date`; one whose
/// `Last-Modified` is an hour before its `Date` is.
#[tokio::test]
async fn a_part_without_a_strong_validator_is_not_kept() {
    let origin = TestOrigin::start();
    let body = letters(1000, false);
    let hour_ago = http_date(3600);
    let now = http_date(0);
    serve(&origin, "/weak", body.clone(), &[("etag", "W/\"w1\"")]);
    serve(&origin, "/none", body.clone(), &[]);
    serve(
        &origin,
        "/recent",
        body.clone(),
        &[("last-modified", &now), ("date", &now)],
    );
    serve(
        &origin,
        "/dated",
        body.clone(),
        &[("last-modified", &hour_ago), ("date", &now)],
    );
    let proxy = parts_only();
    let client = proxied_client(proxy.forward_addr());
    for path in ["/weak", "/none", "/recent"] {
        let url = origin.url(path);
        assert!(!ask(&client, &url, 0, 99, &body).await, "{path}");
        assert!(!ask(&client, &url, 10, 19, &body).await, "{path}: not kept");
        assert_eq!(origin.count(path), 2, "{path}");
    }
    let url = origin.url("/dated");
    assert!(!ask(&client, &url, 0, 99, &body).await);
    assert!(
        ask(&client, &url, 10, 19, &body).await,
        "Last-Modified as a strong validator"
    );
}
