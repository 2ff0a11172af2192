//! A cluster of three Weir nodes over a real etcd (the `etcd` binary, Debian's
//! `etcd-server`, started by each test on loopback ports of its own): acknowledged
//! purges, a node stopped during a purge, etcd stopped and restarted, and the
//! `[cluster]` checks of `weir check`. Without `etcd` installed the tests say SKIPPED.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// The lease the tests' nodes hold: short, so that a stopped node is out quickly.
const LEASE: u64 = 2;

/// A real etcd on loopback, stopped and its data removed on drop.
struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client: u16,
    peer: u16,
}

impl Etcd {
    fn available() -> bool {
        Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn start() -> Etcd {
        let mut etcd = Etcd {
            child: None,
            dir: temp_dir("etcd"),
            client: free_port(),
            peer: free_port(),
        };
        etcd.run();
        etcd
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client)
    }

    /// Starts (or starts again) the etcd process on the same ports and data.
    fn run(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let child = Command::new("etcd")
            .arg("--name")
            .arg("t")
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &self.url()])
            .args(["--advertise-client-urls", &self.url()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("t={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let addr: SocketAddr = format!("127.0.0.1:{}", self.client).parse().unwrap();
        assert!(
            wait_for_port(addr, Duration::from_secs(10)),
            "etcd did not start"
        );
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn node(etcd: &Etcd, name: &str) -> Proxy {
    builder(etcd, name).start()
}

fn builder(etcd: &Etcd, name: &str) -> ProxyBuilder {
    Proxy::builder()
        .forward()
        .option("cluster", "etcd", &format!("[\"{}\"]", etcd.url()))
        .option("cluster", "node", name)
        .option(
            "cluster",
            "peer_addr",
            &format!("127.0.0.1:{}", free_port()),
        )
        .option("cluster", "lease", &format!("\"{LEASE}s\""))
}

async fn cluster_status(proxy: &Proxy) -> serde_json::Value {
    let url = format!("http://{}/admin/cluster", proxy.admin_addr());
    let got = send(&direct_client(), "GET", &url, &[], None).await;
    serde_json::from_slice(&got.body).expect("JSON from /admin/cluster")
}

/// Waits until every node sees `n` members and is in touch.
async fn wait_joined(nodes: &[&Proxy], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    'again: while Instant::now() < deadline {
        for node in nodes {
            let s = cluster_status(node).await;
            if s["members"].as_array().map_or(0, Vec::len) != n || s["in_touch"] != true {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue 'again;
            }
        }
        return;
    }
    panic!("the nodes did not join: {}", cluster_status(nodes[0]).await);
}

/// An origin whose `/obj` says which fetch it is, fresh for ten minutes.
fn counting_origin() -> (TestOrigin, Arc<AtomicUsize>) {
    let origin = TestOrigin::start();
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    origin.route_fn("/obj", move |_| {
        let i = m.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("version {i}")).cc("max-age=600")
    });
    (origin, n)
}

async fn get_via(proxy: &Proxy, url: &str) -> Fetched {
    send(&proxied_client(proxy.forward_addr()), "GET", url, &[], None).await
}

macro_rules! need_etcd {
    () => {
        if !Etcd::available() {
            eprintln!("SKIPPED: no etcd (Debian package etcd-server)");
            return;
        }
    };
}

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

    let purged = send(&proxied_client(a.forward_addr()), "PURGE", &url, &[], None).await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    let ack = purged
        .header("weir-cluster-ack")
        .expect("an acknowledgment");
    assert!(ack.contains("members=3"), "{ack}");

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
    assert!(
        [200, 404].contains(&purged.status.as_u16()),
        "{}",
        purged.text()
    );
    let ack = purged
        .header("weir-cluster-ack")
        .expect("an acknowledgment");
    assert!(ack.contains("members=2"), "{ack}");
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

#[test]
fn weir_check_names_the_cluster_key_at_fault() {
    let dir = temp_dir("cluster-check");
    let path = dir.join("weir.toml");
    let cases = [
        ("etcd = [\"127.0.0.1:2379\"]", "cluster.etcd[0]"),
        ("node = \"a b\"", "cluster.node"),
        ("lease = \"1.5s\"", "cluster.lease"),
        ("purge_ack_wait = \"1s\"", "cluster.purge_ack_wait"),
        ("local_copies = \"some\"", "cluster.local_copies"),
    ];
    for (line, key) in cases {
        let mut fields = vec![
            ("etcd", "etcd = [\"http://127.0.0.1:2379\"]"),
            ("node", "node = \"a\""),
            ("lease", "lease = \"3s\""),
            ("purge_ack_wait", "purge_ack_wait = \"5s\""),
            ("local_copies", "local_copies = \"all\""),
        ];
        let name = line.split(' ').next().unwrap();
        fields.retain(|(n, _)| *n != name);
        let mut text = String::from("[cluster]\npeer_addr = \"127.0.0.1:7946\"\n");
        for (_, f) in &fields {
            text.push_str(f);
            text.push('\n');
        }
        text.push_str(line);
        text.push('\n');
        std::fs::write(&path, &text).unwrap();
        let out = run_weir(
            &["check", "--config", path.to_str().unwrap()],
            Duration::from_secs(10),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text} passed");
        assert!(
            err.contains(&format!(":7: key `{key}`")),
            "{text}\n---\n{err}"
        );
    }
    std::fs::write(
        &path,
        "[cluster]\netcd = [\"http://127.0.0.1:2379\"]\nnode = \"a\"\npeer_addr = \"127.0.0.1:7946\"\n",
    )
    .unwrap();
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

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
async fn a_node_restarted_with_its_disk_tier_applies_what_it_missed() {
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
    let purged = send(&proxied_client(a.forward_addr()), "PURGE", &url, &[], None).await;
    assert!(
        purged.header("weir-cluster-ack").is_some(),
        "{}",
        purged.text()
    );
    let c = with_disk();
    wait_joined(&[&a, &c], 2).await;
    let before = fetches.load(Ordering::SeqCst);
    let got = get_via(&c, &url).await;
    assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
    assert_ne!(got.text(), "version 1");
    assert!(fetches.load(Ordering::SeqCst) > before || got.cache_status().starts_with("weir-a"));
    drop(c);
    let _ = std::fs::remove_dir_all(&disk);
}
