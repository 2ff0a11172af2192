//! Owners: one origin fetch for the cluster, an owner killed under load, local copies.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::harness::*;
use crate::need_etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_url_through_every_node_is_one_origin_fetch() {
    need_etcd!();
    let etcd = Etcd::start();
    let (a, b, c) = (node(&etcd, "a"), node(&etcd, "b"), node(&etcd, "c"));
    wait_joined(&[&a, &b, &c], 3).await;
    let origin = TestOrigin::start();
    for i in 0..12 {
        origin.route(
            &format!("/u{i}"),
            Reply::ok(format!("u{i}"))
                .cc("max-age=600")
                .delay(Duration::from_millis(200)),
        );
    }
    // Concurrent misses at three nodes, for twelve URLs (so every node owns some).
    let mut tasks = Vec::new();
    for i in 0..12 {
        for n in [&a, &b, &c] {
            let client = proxied_client(n.forward_addr());
            let url = origin.url(&format!("/u{i}"));
            tasks.push(tokio::spawn(async move {
                send(&client, "GET", &url, &[], None).await
            }));
        }
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let got = t.await.unwrap();
        assert_eq!(got.status, 200);
        assert_eq!(got.text(), format!("u{}", i / 3));
    }
    for i in 0..12 {
        assert_eq!(origin.count(&format!("/u{i}")), 1, "/u{i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_killed_under_load_loses_no_request() {
    need_etcd!();
    let etcd = Etcd::start();
    let (mut a, b, c) = (node(&etcd, "a"), node(&etcd, "b"), node(&etcd, "c"));
    wait_joined(&[&a, &b, &c], 3).await;
    let origin = TestOrigin::start();
    origin.route(
        "/*",
        Reply::ok("x")
            .cc("no-cache")
            .delay(Duration::from_millis(20)),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for n in [&b, &c] {
        for k in 0..4 {
            let client = proxied_client(n.forward_addr());
            let base = origin.url("/");
            let stop = stop.clone();
            load.push(tokio::spawn(async move {
                let (mut ok, mut failed) = (0, Vec::new());
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let url = format!("{base}k{k}-{}", i % 16);
                    match try_send(&client, "GET", &url, &[], None).await {
                        Ok(r) if r.status == 200 && r.text() == "x" => ok += 1,
                        Ok(r) => failed.push(format!(
                            "{url}: {} {} {:?}",
                            r.status,
                            r.text(),
                            r.header("cache-status")
                        )),
                        Err(e) => failed.push(format!("{url}: {e:?}")),
                    }
                }
                (ok, failed)
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.signal("KILL");
    let _ = a.wait_exit(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(LEASE * 1000 + 1000)).await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for t in load {
        let (ok, failed) = t.await.unwrap();
        assert!(
            failed.is_empty(),
            "{} failed: {:?}",
            failed.len(),
            &failed[..failed.len().min(5)]
        );
        total += ok;
    }
    assert!(total > 50, "only {total} requests");
    wait_joined(&[&b, &c], 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_local_copies_a_non_owner_keeps_nothing() {
    need_etcd!();
    let etcd = Etcd::start();
    let none = |name| {
        builder(&etcd, name)
            .option("cluster", "local_copies", "none")
            .start()
    };
    let (a, b) = (none("a"), none("b"));
    wait_joined(&[&a, &b], 2).await;
    let (origin, fetches) = counting_origin();
    let url = origin.url("/obj");
    // The node whose answer has another node's entry is the non-owner.
    let first = get_via(&a, &url).await;
    let non_owner = if first.cache_status().starts_with("weir-b") {
        &a
    } else {
        &b
    };
    for _ in 0..3 {
        let got = get_via(non_owner, &url).await;
        let status = got.cache_status();
        assert!(status.contains(", weir; fwd=miss"), "{status}");
        assert!(!status.ends_with("stored"), "{status}");
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the owner kept it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_killed_in_the_middle_of_a_body_loses_no_byte() {
    need_etcd!();
    let etcd = Etcd::start();
    let (a, mut b) = (node(&etcd, "a"), node(&etcd, "b"));
    wait_joined(&[&a, &b], 2).await;
    let origin = TestOrigin::start();
    // Sixteen chunks of 64 KiB, a tenth of a second apart.
    const LEN: u64 = 1 << 20;
    let client = proxied_client(a.forward_addr());
    for i in 0..16 {
        let path = format!("/big{i}");
        origin.route(
            &path,
            Reply::stream(LEN)
                .chunk_delay(Duration::from_millis(100))
                .cc("max-age=600")
                .header("etag", "\"v1\""),
        );
        let mut response = client.get(origin.url(&path)).send().await.unwrap();
        let status = response.headers()["cache-status"]
            .to_str()
            .unwrap()
            .to_string();
        // A non-owner's answer starts with the owner's entry; for a URL `a` owns,
        // try the next.
        if !status.starts_with("weir-b") {
            continue;
        }
        let mut body = response
            .chunk()
            .await
            .unwrap()
            .expect("a first chunk")
            .to_vec();
        b.signal("KILL");
        let _ = b.wait_exit(Duration::from_secs(5));
        while let Some(chunk) = response.chunk().await.expect("the body goes on") {
            body.extend_from_slice(&chunk);
        }
        assert_eq!(body.len() as u64, LEN, "{status}");
        assert!(
            body == pattern(LEN as usize),
            "the bytes are the origin's, in order"
        );
        // The owner's fetch, then the rest asked of the origin by `a`.
        assert_eq!(origin.count(&path), 2);
        let again = origin.last(&path).unwrap();
        assert!(
            again.has_header("range"),
            "the rest is asked for as a range"
        );
        return;
    }
    panic!("`b` owned none of sixteen URLs");
}
