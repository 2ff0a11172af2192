//! The admin listener's live status page: the page itself (embedded, guarded by the
//! token for browsers too) and the figures it polls, which follow the traffic.

mod support;

use std::net::SocketAddr;

use serde_json::Value;
use support::client::{direct_client, proxied_client, send, Fetched};
use support::origin::TestOrigin;
use support::reply::Reply;
use weir_proxy::Server;

const TOKEN: &str = "status-t0ken";
/// `admin:status-t0ken`, as a browser sends it.
const BASIC: &str = "Basic YWRtaW46c3RhdHVzLXQwa2Vu";

async fn start() -> (Server, SocketAddr) {
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"{TOKEN}\"\n\n\
             [cache]\nmemory = \"32MiB\"\nmax_object = \"1MiB\"\ndisk = \"off\"\n\n\
             [timeouts]\nshutdown_grace = \"1s\"\n\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n"
        )
    };
    let (server, admin, _) = support::start_server("status-test.toml", true, text_for, &[]).await;
    (server, admin.expect("an admin listener"))
}

async fn status(admin: SocketAddr) -> Value {
    let r = send(
        &direct_client(),
        "GET",
        &format!("http://{admin}/admin/status"),
        &[("authorization", BASIC)],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

fn page(r: &Fetched) {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert!(r
        .header("content-security-policy")
        .unwrap()
        .contains("default-src 'none'"));
    assert!(r.text().contains("<title>Weir status</title>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_needs_the_token_as_bearer_or_basic_password() {
    let (server, admin) = start().await;
    let client = direct_client();
    let url = format!("http://{admin}/");
    let r = send(&client, "GET", &url, &[], None).await;
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").unwrap().starts_with("Basic"));
    let wrong = "Basic YWRtaW46d3Jvbmc="; // admin:wrong
    let r = send(&client, "GET", &url, &[("authorization", wrong)], None).await;
    assert_eq!(r.status, 401);
    page(&send(&client, "GET", &url, &[("authorization", BASIC)], None).await);
    let bearer = format!("Bearer {TOKEN}");
    page(
        &send(
            &client,
            "GET",
            &url,
            &[("authorization", bearer.as_str())],
            None,
        )
        .await,
    );
    let r = send(
        &client,
        "GET",
        &format!("http://{admin}/admin/status"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 401);
    // The probes stay open.
    let r = send(
        &client,
        "GET",
        &format!("http://{admin}/healthz"),
        &[],
        None,
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "ok\n"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_figures_follow_the_traffic() {
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("x".repeat(1000)).cc("max-age=60"));
    let (server, admin) = start().await;
    let before = status(admin).await;
    assert_eq!(before["requests"]["total"], 0);
    assert_eq!(before["memory"]["cache_configured"], 32 << 20);
    assert_eq!(before["disk"]["configured"], 0);
    assert!(before["memory"]["resident"].as_u64().unwrap() > 0);
    let client = proxied_client(server.local_addrs()[0]);
    for _ in 0..3 {
        let r = send(&client, "GET", &origin.url("/page"), &[], None).await;
        assert_eq!(r.status, 200);
    }
    let after = status(admin).await;
    assert_eq!(after["requests"]["total"], 3);
    assert_eq!(after["requests"]["by_outcome"]["miss"], 1);
    assert_eq!(after["requests"]["from_cache"], 2);
    assert_eq!(after["bytes"]["out"], 3000);
    assert_eq!(after["bytes"]["out_from_cache"], 2000);
    assert!(after["memory"]["cache"].as_u64().unwrap() >= 1000);
    assert_eq!(after["memory"]["cache_objects"], 1);
    assert!(after["uptime_seconds"].as_f64().unwrap() > 0.0);
    server.shutdown().await;
}
