//! Acknowledged purges: applied everywhere once answered; a stopped node, etcd
//! stopped and restarted, a node restarted with its disk tier.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::harness::*;
use crate::need_etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_acknowledged_at_one_node_is_a_miss_at_every_node() {
    need_etcd!();
    let etcd = Etcd::start();
    let (a, b, c) = (node(&etcd, "a"), node(&etcd, "b"), node(&etcd, "c"));
    wait_joined(&[&a, &b, &c], 3).await;
    let (origin, fetches) = counting_origin();
    let url = origin.url("/obj");
    for n in [&a, &b, &c] {
        get_via(n, &url).await;
        let again = get_via(n, &url).await;
        assert!(is_hit(&again.cache_status()), "{}", again.cache_status());
    }
    let before = fetches.load(Ordering::SeqCst);

    let purged = purge_via(&a, &url).await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    assert_acknowledged(&purged, 3);

    // No sleep: acknowledged means applied everywhere. No node serves the old copy
    // (the second may hit the new one its owner fetched for the first).
    for n in [&b, &c] {
        let got = get_via(n, &url).await;
        assert_eq!(got.text(), "version 2", "{}", got.cache_status());
    }
    // One fetch for the cluster: the owner's, which the other node's miss joined.
    assert_eq!(fetches.load(Ordering::SeqCst), before + 1);

    // Through the admin API too (a prefix purge at c), and the status says who acked.
    let admin = format!("http://{}/admin/purge", c.admin_addr());
    let body = format!("{{\"prefix\": \"{}\"}}", origin.url("/"));
    let got = send(&direct_client(), "POST", &admin, &[], Some(body.into())).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert!(got.header("weir-cluster-ack").is_some());
    let got = get_via(&a, &url).await;
    assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
    let status = cluster_status(&a).await;
    assert!(
        status["purges_acknowledged"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert!(status["purge_ack_ms_p50"].is_number(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_delays_a_purge_by_its_lease_at_most_and_then_revalidates() {
    need_etcd!();
    let etcd = Etcd::start();
    let (a, b, c) = (node(&etcd, "a"), node(&etcd, "b"), node(&etcd, "c"));
    wait_joined(&[&a, &b, &c], 3).await;
    let (origin, fetches) = counting_origin();
    let url = origin.url("/obj");
    get_via(&c, &url).await;
    assert!(is_hit(&get_via(&c, &url).await.cache_status()));

    c.signal("STOP");
    let started = Instant::now();
    let purged = send(&proxied_client(a.forward_addr()), "PURGE", &url, &[], None).await;
    let took = started.elapsed();
    c.signal("CONT");
    // 200 when a owns the URL (it stored it for c), 404 when it does not.
    assert_acknowledged(&purged, 2);
    assert!(
        took <= Duration::from_secs(LEASE) + Duration::from_millis(1500),
        "the purge waited {took:?}"
    );

    // At once after SIGCONT: c does not serve what it had.
    let before = fetches.load(Ordering::SeqCst);
    let got = get_via(&c, &url).await;
    assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
    assert_ne!(got.text(), "version 1");
    assert_eq!(fetches.load(Ordering::SeqCst), before + 1);
    // And it comes back.
    wait_joined(&[&a, &b, &c], 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_etcd_nodes_revalidate_and_purges_fail_then_they_recover() {
    need_etcd!();
    let mut etcd = Etcd::start();
    let (a, b) = (node(&etcd, "a"), node(&etcd, "b"));
    wait_joined(&[&a, &b], 2).await;
    let (origin, fetches) = counting_origin();
    let url = origin.url("/obj");
    get_via(&a, &url).await;
    assert!(is_hit(&get_via(&a, &url).await.cache_status()));

    etcd.stop();
    tokio::time::sleep(Duration::from_millis(LEASE * 1000 + 500)).await;
    let status = cluster_status(&a).await;
    assert_eq!(status["in_touch"], false, "{status}");
    let before = fetches.load(Ordering::SeqCst);
    let got = get_via(&a, &url).await;
    assert!(
        cs_has(&got.cache_status(), "cluster", Some("out-of-touch")),
        "{}",
        got.cache_status()
    );
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        before + 1,
        "validated at the origin"
    );
    let purged = send(&proxied_client(b.forward_addr()), "PURGE", &url, &[], None).await;
    assert_eq!(purged.status, 504, "{}", purged.text());
    // The purge's write to etcd is retried until its own acknowledgment wait is over,
    // up to one retry (200 ms) after the 504. An etcd back before then may still take
    // it, and every node would apply it: allowed, but not what this test checks.
    tokio::time::sleep(Duration::from_secs(1)).await;

    etcd.run();
    wait_joined(&[&a, &b], 2).await;
    let got = get_via(&a, &url).await;
    assert!(is_hit(&got.cache_status()), "{}", got.cache_status());
    let purged = send(&proxied_client(b.forward_addr()), "PURGE", &url, &[], None).await;
    assert!(
        purged.header("weir-cluster-ack").is_some(),
        "{}",
        purged.text()
    );
    let got = get_via(&a, &url).await;
    assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_with_its_disk_tier_applies_what_it_missed() {
    restarted_with_disk(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_missed_purges_were_compacted_away_revalidates_what_it_had() {
    restarted_with_disk(true).await;
}

async fn restarted_with_disk(compact: bool) {
    need_etcd!();
    let etcd = Etcd::start();
    let disk = temp_dir("cluster-disk");
    let with_disk = || {
        builder(&etcd, "c")
            .option(
                "cache",
                "disk",
                &format!(
                    "{{ path = {:?}, size = \"64MiB\" }}",
                    disk.display().to_string()
                ),
            )
            .start()
    };
    let (a, mut c) = (node(&etcd, "a"), with_disk());
    wait_joined(&[&a, &c], 2).await;
    let (origin, fetches) = counting_origin();
    let url = origin.url("/obj");
    get_via(&c, &url).await;
    assert!(is_hit(&get_via(&c, &url).await.cache_status()));
    c.terminate();
    assert!(c.wait_exit(Duration::from_secs(10)).is_some());
    drop(c);
    // c left on its way out (its lease revoked): the purge waits for nobody.
    let started = Instant::now();
    let purged = send(&proxied_client(a.forward_addr()), "PURGE", &url, &[], None).await;
    let ack = purged.header("weir-cluster-ack").unwrap_or_default();
    assert!(ack.contains("members=1"), "{ack} {}", purged.text());
    assert!(started.elapsed() < Duration::from_secs(1));
    if compact {
        // etcd forgets everything before the purge's revision: c cannot catch up.
        let revision = ack
            .split(';')
            .next()
            .unwrap()
            .trim_start_matches("revision=");
        let body = format!("{{\"revision\": \"{revision}\"}}");
        let url = format!("{}/v3/kv/compaction", etcd.url());
        let got = send(&direct_client(), "POST", &url, &[], Some(body.into())).await;
        assert_eq!(got.status, 200, "{}", got.text());
    }
    let c = with_disk();
    wait_joined(&[&a, &c], 2).await;
    let before = fetches.load(Ordering::SeqCst);
    let got = get_via(&c, &url).await;
    assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
    assert_ne!(got.text(), "version 1");
    assert!(fetches.load(Ordering::SeqCst) > before || got.cache_status().starts_with("weir-a"));
    if compact {
        assert!(
            c.stderr_text().contains("revalidating everything stored"),
            "{}",
            c.stderr_text()
        );
    }
    drop(c);
    let _ = std::fs::remove_dir_all(&disk);
}
