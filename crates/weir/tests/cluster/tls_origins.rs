//! `https://` origins in a cluster: a miss at a node that does not own the key goes to
//! the owner (over the plain-HTTP hop), which fetches over TLS, trusting the origin as
//! its own `[[origin]]` table says.

use std::time::Duration;

use crate::common::tls::{make_cert, tls_line};
use crate::common::*;
use crate::harness::*;
use crate::need_etcd;

/// Requests the `front` proxy (the https origin) has answered so far.
fn answered(front: &Proxy) -> f64 {
    front
        .metrics()
        .lines()
        .filter(|l| l.starts_with("weir_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_origin_is_fetched_once_through_its_owner() {
    need_etcd!();
    let etcd = Etcd::start();
    let dir = TempDir::new("cluster-tls");
    let cert = make_cert(dir.path(), "origin", &["localhost", "127.0.0.1"]);
    let origin = TestOrigin::start();
    for i in 0..8 {
        origin.route(
            &format!("/t{i}"),
            Reply::ok(format!("t{i}")).cc("max-age=600"),
        );
    }
    // The https origin: a TLS reverse listener in front of the plain one.
    let front = Proxy::builder()
        .reverse(&origin.base())
        .listener_line(&tls_line(&[&cert]))
        .start();
    let https = format!("https://127.0.0.1:{}", front.reverse_addr().port());
    let trust = format!(
        "[[origin]]\nurl = {https:?}\nca_file = {:?}\n",
        cert.cert.display().to_string()
    );
    let start = |name| builder(&etcd, name).reverse(&https).raw(&trust).start();
    let (a, b) = (start("a"), start("b"));
    wait_joined(&[&a, &b], 2).await;
    let client = direct_client();
    let mut through_owner = 0;
    for i in 0..8 {
        let path = format!("/t{i}");
        for node in [&a, &b] {
            // Clients name the site the same whichever node they reach.
            let got = get(
                &client,
                &node.reverse_url(&path),
                &[("host", "www.example.test")],
            )
            .await;
            assert_eq!((got.status.as_u16(), got.text()), (200, format!("t{i}")));
            let status = got.cache_status();
            if status.matches("weir-").count() > 1 || status.contains(", weir") {
                through_owner += 1;
            }
        }
    }
    // Each URL was fetched from the https origin once, by its owner.
    let mut fetched = answered(&front);
    for _ in 0..20 {
        if fetched >= 8.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        fetched = answered(&front);
    }
    assert_eq!(fetched, 8.0, "one TLS fetch per URL for the whole cluster");
    assert!(through_owner > 0, "no miss went through an owner");
}

/// Only the peer listener takes the origin from `Weir-Hop-Origin`: a client that sends
/// it to an ordinary listener gets the URL it asked for.
#[tokio::test]
async fn weir_hop_origin_means_nothing_outside_the_peer_listener() {
    let asked = TestOrigin::start();
    asked.route("/x", Reply::ok("asked"));
    let other = TestOrigin::start();
    other.route("/x", Reply::ok("other"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let got = send(
        &client,
        "GET",
        &asked.url("/x"),
        &[("weir-hop", "z"), ("weir-hop-origin", &other.base())],
        None,
    )
    .await;
    assert_eq!((got.status.as_u16(), got.text().as_str()), (200, "asked"));
    assert_eq!(other.count("/x"), 0);
    let seen = asked.last("/x").unwrap();
    assert!(
        !seen.has_header("weir-hop-origin"),
        "not sent on to the origin"
    );
}
