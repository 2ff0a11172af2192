//! Vary matching (RFC 9111 §4.1): request fields that differ only in what their
//! grammar gives no meaning select the same stored variant; the others do not.

use crate::common::*;
use crate::helpers::{assert_hit, assert_not_hit, setup};

/// A route that varies on `field` and tells which request filled it.
fn varying(origin: &TestOrigin, path: &str, field: &'static str) {
    let filled = std::sync::atomic::AtomicUsize::new(0);
    origin.route_fn(path, move |_| {
        let n = filled.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::ok(format!("fill {n}"))
            .cc("max-age=60")
            .header("vary", field)
    });
}

/// Fetches `path` with `first`, then with each of `same` (each a hit on the first's
/// variant) and each of `other` (each a variant of its own).
async fn check(
    origin: &TestOrigin,
    client: &reqwest::Client,
    path: &str,
    field: &'static str,
    first: &[&str],
    same: &[&[&str]],
    other: &[&[&str]],
) {
    varying(origin, path, field);
    let url = origin.url(path);
    let lines = |values: &[&str]| -> Vec<(&str, String)> {
        values.iter().map(|v| (field, v.to_string())).collect()
    };
    let fetch = |values: Vec<(&'static str, String)>| {
        let url = url.clone();
        async move {
            let h: Vec<(&str, &str)> = values.iter().map(|(n, v)| (*n, v.as_str())).collect();
            get(client, &url, &h).await
        }
    };
    assert_eq!(fetch(lines(first)).await.text(), "fill 1");
    for values in same {
        let r = fetch(lines(values)).await;
        assert_hit(&r, &format!("{field}: {values:?} after {first:?}"));
        assert_eq!(r.text(), "fill 1");
    }
    for values in other {
        let r = fetch(lines(values)).await;
        assert_not_hit(&r, &format!("{field}: {values:?} after {first:?}"));
        assert_ne!(r.text(), "fill 1", "{values:?}");
    }
}

#[tokio::test]
async fn accept_encoding_ignores_case_space_order_and_default_weights() {
    let (origin, _proxy, client) = setup();
    check(
        &origin,
        &client,
        "/encoding",
        "accept-encoding",
        &["gzip, br"],
        &[
            &["br,gzip"],
            &["GZip , BR"],
            &["br;q=1.0, gzip"],
            &["br", "gzip"],
        ],
        &[&["gzip"], &["gzip;q=0.5, br"]],
    )
    .await;
}

#[tokio::test]
async fn accept_language_keeps_the_order_of_equal_weights() {
    let (origin, _proxy, client) = setup();
    // The order of members without weights is the client's preference.
    check(
        &origin,
        &client,
        "/language",
        "accept-language",
        &["en-US, fr"],
        &[&["en-us,fr"], &["EN-us , FR;q=1"]],
        &[&["fr, en-US"]],
    )
    .await;
    // Different weights say the preference whatever the order.
    check(
        &origin,
        &client,
        "/weighted",
        "accept-language",
        &["en;q=0.5, fr"],
        &[&["fr, en;q=0.50"], &["fr,en;Q=0.5"]],
        &[&["fr, en;q=0.6"]],
    )
    .await;
}

#[tokio::test]
async fn other_fields_ignore_only_space_around_commas_and_line_splits() {
    let (origin, _proxy, client) = setup();
    check(
        &origin,
        &client,
        "/other",
        "x-client-hints",
        &["Alpha, beta"],
        &[&["Alpha,beta"], &["Alpha", "beta"]],
        &[&["beta, Alpha"], &["alpha, beta"]],
    )
    .await;
}

#[tokio::test]
async fn an_absent_field_matches_only_an_absent_field() {
    let (origin, _proxy, client) = setup();
    check(
        &origin,
        &client,
        "/absent",
        "accept-encoding",
        &[],
        &[&[]],
        &[&[""]],
    )
    .await;
}
