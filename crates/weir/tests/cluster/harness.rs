//! The cluster tests' parts: a real etcd, nodes, and what they are asked.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;

/// The lease the tests' nodes hold: short, so that a stopped node is out quickly.
pub(crate) const LEASE: u64 = 2;

/// A real etcd on loopback, stopped and its data removed on drop.
pub(crate) struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client: u16,
    peer: u16,
    /// Certificate and key of an `https://` client port.
    tls: Option<(PathBuf, PathBuf)>,
}

impl Etcd {
    pub(crate) fn available() -> bool {
        Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub(crate) fn start() -> Etcd {
        Etcd::start_with(None)
    }

    /// An etcd whose client port speaks TLS with this certificate and key.
    pub(crate) fn start_tls(cert: PathBuf, key: PathBuf) -> Etcd {
        Etcd::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(PathBuf, PathBuf)>) -> Etcd {
        let mut etcd = Etcd {
            child: None,
            dir: temp_dir("etcd"),
            client: free_port(),
            peer: free_port(),
            tls,
        };
        etcd.run();
        etcd
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client)
    }

    /// Starts (or starts again) the etcd process on the same ports and data.
    pub(crate) fn run(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let mut command = Command::new("etcd");
        if let Some((cert, key)) = &self.tls {
            command
                .arg("--cert-file")
                .arg(cert)
                .arg("--key-file")
                .arg(key);
        }
        let child = command
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

    pub(crate) fn stop(&mut self) {
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

pub(crate) fn node(etcd: &Etcd, name: &str) -> Proxy {
    builder(etcd, name).start()
}

pub(crate) fn builder(etcd: &Etcd, name: &str) -> ProxyBuilder {
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

pub(crate) async fn cluster_status(proxy: &Proxy) -> serde_json::Value {
    let url = format!("http://{}/admin/cluster", proxy.admin_addr());
    let got = send(&direct_client(), "GET", &url, &[], None).await;
    serde_json::from_slice(&got.body).expect("JSON from /admin/cluster")
}

/// Waits until every node sees `n` members and is in touch.
pub(crate) async fn wait_joined(nodes: &[&Proxy], n: usize) {
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
pub(crate) fn counting_origin() -> (TestOrigin, Arc<AtomicUsize>) {
    let origin = TestOrigin::start();
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    origin.route_fn("/obj", move |_| {
        let i = m.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("version {i}")).cc("max-age=600")
    });
    (origin, n)
}

/// A PURGE of `url` at `proxy`.
pub(crate) async fn purge_via(proxy: &Proxy, url: &str) -> Fetched {
    send(
        &proxied_client(proxy.forward_addr()),
        "PURGE",
        url,
        &[],
        None,
    )
    .await
}

/// Asserts that `purged` was answered (200 when the node held the URL, 404 when it did
/// not) once `members` members had acknowledged it.
pub(crate) fn assert_acknowledged(purged: &Fetched, members: usize) {
    assert!(
        [200, 404].contains(&purged.status.as_u16()),
        "{}",
        purged.text()
    );
    let ack = purged
        .header("weir-cluster-ack")
        .expect("an acknowledgment");
    assert!(ack.contains(&format!("members={members}")), "{ack}");
}

pub(crate) async fn get_via(proxy: &Proxy, url: &str) -> Fetched {
    send(&proxied_client(proxy.forward_addr()), "GET", url, &[], None).await
}

#[macro_export]
macro_rules! need_etcd {
    () => {
        if !$crate::harness::Etcd::available() {
            eprintln!("SKIPPED: no etcd (Debian package etcd-server)");
            return;
        }
    };
}
