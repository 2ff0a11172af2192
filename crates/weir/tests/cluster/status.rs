//! The cluster on the admin status page: `/admin/status` carries this node's view of
//! the members, and the page in a real browser lists them.

use crate::common::browser::{chromium, dump_dom};
use crate::common::*;
use crate::harness::*;
use crate::need_etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_lists_the_members() {
    need_etcd!();
    let etcd = Etcd::start();
    let (a, b, c) = (node(&etcd, "a"), node(&etcd, "b"), node(&etcd, "c"));
    wait_joined(&[&a, &b, &c], 3).await;

    let url = format!("http://{}/admin/status", b.admin_addr());
    let got = send(&direct_client(), "GET", &url, &[], None).await;
    assert_eq!(got.status, 200);
    let status: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let cluster = &status["cluster"];
    assert_eq!(cluster["node"], "b", "{status}");
    assert_eq!(cluster["in_touch"], true);
    let members = cluster["members"].as_array().expect("members");
    let mut names: Vec<&str> = members.iter().filter_map(|m| m["node"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b", "c"]);
    let shares: f64 = members.iter().filter_map(|m| m["share"].as_f64()).sum();
    assert!((shares - 1.0).abs() < 0.01, "shares add up to {shares}");

    let Some(browser) = chromium() else {
        eprintln!("SKIPPED: the cluster on the status page in a browser: no chromium (./test.sh installs it)");
        return;
    };
    let page_url = format!("http://{}/", b.admin_addr());
    let dom = tokio::task::spawn_blocking(move || dump_dom(&browser, &page_url, 3000))
        .await
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let page = String::from_utf8_lossy(&dom.stdout);
    let table = &page[page.find("id=\"cluster\"").expect("the cluster table")..];
    let table = &table[..table.find("</table>").unwrap()];
    for name in ["a", "b", "c"] {
        assert!(
            table.contains(&format!("<td>{name}</td>")),
            "{name} missing: {table}"
        );
    }
    assert!(page.contains("this node: b"), "{page}");
    assert!(
        !page.contains("id=\"cluster-row\" hidden"),
        "the cluster row is hidden"
    );
}

#[tokio::test]
async fn without_a_cluster_the_status_has_none() {
    let proxy = Proxy::builder().forward().start();
    let url = format!("http://{}/admin/status", proxy.admin_addr());
    let got = send(&direct_client(), "GET", &url, &[], None).await;
    let status: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert!(status["cluster"].is_null(), "{status}");
    assert!(status["requests"].is_object());
}
