//! etcd with its authentication on: nodes authenticate as a user whose password is in
//! a file; a node with a wrong password, or none, stays out of the cluster.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::harness::*;
use crate::need_etcd;

/// A call to etcd's JSON gateway.
async fn etcd_call(etcd: &Etcd, path: &str, body: Value) -> Value {
    let got = send(
        &direct_client(),
        "POST",
        &format!("{}{path}", etcd.url()),
        &[("content-type", "application/json")],
        Some(body.to_string().into_bytes()),
    )
    .await;
    assert_eq!(got.status, 200, "{path}: {}", got.text());
    serde_json::from_slice(&got.body).expect("JSON from etcd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_authenticate_to_etcd_and_a_wrong_password_stays_out() {
    need_etcd!();
    let etcd = Etcd::start();
    // `etcdctl user add root`, `role add root`, `user grant-role root root`,
    // `auth enable`, through the gateway.
    etcd_call(
        &etcd,
        "/v3/auth/user/add",
        json!({"name": "root", "password": "s3cret"}),
    )
    .await;
    etcd_call(&etcd, "/v3/auth/role/add", json!({"name": "root"})).await;
    etcd_call(
        &etcd,
        "/v3/auth/user/grant",
        json!({"user": "root", "role": "root"}),
    )
    .await;
    etcd_call(&etcd, "/v3/auth/enable", json!({})).await;

    let dir = TempDir::new("cluster-auth");
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    std::fs::write(&good, "s3cret\n").unwrap();
    std::fs::write(&bad, "guess\n").unwrap();
    let as_root = |name, password: &std::path::Path| {
        builder(&etcd, name)
            .option("cluster", "etcd_user", "root")
            .option(
                "cluster",
                "etcd_password_file",
                &password.display().to_string(),
            )
            .start()
    };
    let (a, b) = (as_root("a", &good), as_root("b", &good));
    wait_joined(&[&a, &b], 2).await;

    // The log and the acknowledgments go through etcd too.
    let (origin, _) = counting_origin();
    let url = origin.url("/obj");
    assert_eq!(get_via(&a, &url).await.status, 200);
    assert_acknowledged(&purge_via(&b, &url).await, 2);

    // A wrong password, and none at all: etcd refuses them, and they stay out.
    let wrong = as_root("c", &bad);
    let anonymous = node(&etcd, "d");
    tokio::time::sleep(Duration::from_secs(2)).await;
    for outsider in [&wrong, &anonymous] {
        let status = cluster_status(outsider).await;
        assert_eq!(status["in_touch"], false, "{status}");
    }
    let seen = cluster_status(&a).await;
    assert_eq!(seen["members"].as_array().map(Vec::len), Some(2), "{seen}");
}

/// etcd over TLS: nodes that trust its certificate (`etcd_ca_file`) join; one that
/// checks it against the system's roots stays out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_reach_etcd_over_tls_when_they_trust_it() {
    need_etcd!();
    let dir = TempDir::new("cluster-etcd-tls");
    let cert = crate::common::tls::make_cert(dir.path(), "etcd", &["127.0.0.1", "localhost"]);
    let etcd = Etcd::start_tls(cert.cert.clone(), cert.key.clone());
    let ca = cert.cert.display().to_string();
    let trusting = |name| {
        builder(&etcd, name)
            .option("cluster", "etcd_ca_file", &ca)
            .start()
    };
    let (a, b) = (trusting("a"), trusting("b"));
    wait_joined(&[&a, &b], 2).await;
    let (origin, _) = counting_origin();
    let url = origin.url("/obj");
    assert_eq!(get_via(&a, &url).await.status, 200);
    assert_acknowledged(&purge_via(&b, &url).await, 2);

    let distrusting = node(&etcd, "c");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = cluster_status(&distrusting).await;
    assert_eq!(status["in_touch"], false, "{status}");
}
