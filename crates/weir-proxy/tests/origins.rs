//! Origins over TLS and HTTP/2, against real servers on 127.0.0.1: certificate checks
//! (a CA file, the system's roots, a wrong name, `tls_verify = false`), ALPN (h2 when
//! offered, else HTTP/1.1), h2c with prior knowledge, many requests sharing one HTTP/2
//! connection, the origin's stream limit, a reset stream, GOAWAY, and caching over h2.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::client::{direct_client, is_hit, metric, send, Fetched};
use support::h2_origin::{H2Origin, TestPki, Transport};
use weir_proxy::Server;

/// A reverse proxy in this process to one origin, with its admin listener.
struct Weir {
    server: Server,
    addr: SocketAddr,
    admin: SocketAddr,
    client: reqwest::Client,
}

impl Weir {
    /// `extra` is added to the configuration (`[[origin]]` sections, `[upstream]`).
    async fn start(origin: &str, extra: &str) -> Weir {
        let text_for = |admin: Option<SocketAddr>| {
            let admin = admin.expect("an admin listener");
            format!(
                "[server]\nworkers = 2\n\n[admin]\nlisten = \"{admin}\"\n\n\
                 [timeouts]\nshutdown_grace = \"1s\"\nconnect = \"3s\"\norigin_response = \"10s\"\n\n\
                 {extra}\n\n\
                 [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"reverse\"\norigin = \"{origin}\"\n"
            )
        };
        let (server, admin, _) =
            support::start_server("origins-test.toml", true, text_for, &[]).await;
        let addr = server.local_addrs()[0];
        Weir {
            server,
            addr,
            admin: admin.expect("an admin listener"),
            client: direct_client(),
        }
    }

    async fn get(&self, path: &str) -> Fetched {
        send(
            &self.client,
            "GET",
            &format!("http://{}{path}", self.addr),
            &[],
            None,
        )
        .await
    }

    async fn errors(&self, kind: &str) -> f64 {
        let url = format!("http://{}/metrics", self.admin);
        let text = send(&self.client, "GET", &url, &[], None).await.text();
        metric(&text, "weir_errors_total", &[("kind", kind)]).unwrap_or(0.0)
    }

    async fn stop(self) {
        self.server.shutdown().await;
    }
}

fn origin_section(url: &str, keys: &str) -> String {
    format!("[[origin]]\nurl = \"{url}\"\n{keys}\n")
}

fn tls_origin(pki: &TestPki, names: &[&str], alpn: &[&'static str]) -> H2Origin {
    H2Origin::start(
        Transport::Tls {
            leaf: pki.leaf(names),
            alpn: alpn.to_vec(),
        },
        256,
    )
}

#[tokio::test]
async fn ca_file_verifies_and_alpn_picks_h2() {
    let pki = TestPki::new("alpn-h2");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["h2", "http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!("ca_file = {:?}", pki.ca_file().display().to_string()),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    for _ in 0..3 {
        let r = weir.get("/a").await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-origin-version").as_deref(), Some("HTTP/2.0"));
    }
    assert_eq!(origin.version_of("/a"), Some(http::Version::HTTP_2));
    assert_eq!(
        origin.connections(),
        1,
        "three requests share one h2 connection"
    );
    weir.stop().await;
}

#[tokio::test]
async fn alpn_falls_back_to_http1() {
    let pki = TestPki::new("alpn-h1");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!("ca_file = {:?}", pki.ca_file().display().to_string()),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    for _ in 0..3 {
        let r = weir.get("/b").await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(origin.version_of("/b"), Some(http::Version::HTTP_11));
    assert_eq!(
        origin.connections(),
        1,
        "the HTTP/1.1 connection is kept alive"
    );
    weir.stop().await;
}

#[tokio::test]
async fn protocol_http1_ignores_h2_offered() {
    let pki = TestPki::new("force-h1");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["h2", "http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!(
            "protocol = \"http1\"\nca_file = {:?}",
            pki.ca_file().display().to_string()
        ),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    assert_eq!(weir.get("/c").await.status, 200);
    assert_eq!(origin.version_of("/c"), Some(http::Version::HTTP_11));
    weir.stop().await;
}

#[tokio::test]
async fn untrusted_certificate_is_a_counted_502() {
    let pki = TestPki::new("untrusted");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["h2", "http/1.1"]);
    // No ca_file: the system's roots do not include the test CA.
    let weir = Weir::start(&origin.base(), "").await;
    let r = weir.get("/d").await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(
        r.text().contains("TLS") || r.text().contains("certificate"),
        "a short reason: {}",
        r.text()
    );
    assert_eq!(origin.requests(), 0);
    assert_eq!(weir.errors("origin_tls").await, 1.0);
    weir.stop().await;
}

#[tokio::test]
async fn wrong_name_is_a_502_even_with_the_ca_file() {
    let pki = TestPki::new("wrong-name");
    let origin = tls_origin(&pki, &["other.example"], &["h2", "http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!("ca_file = {:?}", pki.ca_file().display().to_string()),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    let r = weir.get("/e").await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("TLS handshake"), "{}", r.text());
    assert_eq!(origin.requests(), 0);
    assert_eq!(weir.errors("origin_tls").await, 1.0);
    weir.stop().await;
}

#[tokio::test]
async fn tls_verify_false_accepts_any_certificate() {
    let pki = TestPki::new("no-verify");
    let origin = tls_origin(&pki, &["other.example"], &["h2", "http/1.1"]);
    let extra = origin_section(&origin.base(), "tls_verify = false");
    let weir = Weir::start(&origin.base(), &extra).await;
    let r = weir.get("/f").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(origin.version_of("/f"), Some(http::Version::HTTP_2));
    weir.stop().await;
}

#[tokio::test]
async fn h2c_with_prior_knowledge_and_http1_by_default() {
    let h2c = H2Origin::start(Transport::Clear, 256);
    let extra = origin_section(&h2c.base(), "protocol = \"http2\"");
    let weir = Weir::start(&h2c.base(), &extra).await;
    assert_eq!(weir.get("/g").await.status, 200);
    assert_eq!(h2c.version_of("/g"), Some(http::Version::HTTP_2));
    weir.stop().await;

    // Without a section, a clear-text origin gets HTTP/1.1.
    let plain = H2Origin::start(Transport::Clear, 256);
    let weir = Weir::start(&plain.base(), "").await;
    assert_eq!(weir.get("/g").await.status, 200);
    assert_eq!(plain.version_of("/g"), Some(http::Version::HTTP_11));
    weir.stop().await;
}

/// Sends `paths` at once; the statuses in order.
async fn burst(weir: &Weir, paths: Vec<String>) -> Vec<u16> {
    let mut tasks = Vec::new();
    for p in paths {
        let url = format!("http://{}{p}", weir.addr);
        let client = weir.client.clone();
        tasks.push(tokio::spawn(async move {
            send(&client, "GET", &url, &[], None).await.status.as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses
}

#[tokio::test]
async fn concurrent_requests_share_one_h2_connection() {
    let origin = H2Origin::start(Transport::Clear, 256);
    let extra = origin_section(&origin.base(), "protocol = \"http2\"");
    let weir = Weir::start(&origin.base(), &extra).await;
    let paths = (0..50).map(|i| format!("/slow/{i}")).collect();
    let started = std::time::Instant::now();
    let statuses = burst(&weir, paths).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(origin.connections(), 1, "50 streams on one connection");
    assert!(origin.max_in_flight() >= 40, "{}", origin.max_in_flight());
    // 50 slow answers one after another would take 15 s.
    assert!(started.elapsed() < Duration::from_secs(5));
    weir.stop().await;
}

#[tokio::test]
async fn the_origins_stream_limit_opens_more_connections() {
    let origin = H2Origin::start(Transport::Clear, 5);
    let extra = format!(
        "[upstream]\nmax_h2_connections_per_origin = 3\n\n{}",
        origin_section(&origin.base(), "protocol = \"http2\"")
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    // One request first, so that Weir has read the origin's SETTINGS.
    assert_eq!(weir.get("/warm").await.status, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let statuses = burst(&weir, (0..15).map(|i| format!("/slow/{i}")).collect()).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(origin.connections(), 3, "15 streams at 5 per connection");
    assert!(origin.max_in_flight() <= 15);
    weir.stop().await;
}

#[tokio::test]
async fn a_reset_stream_fails_only_its_own_request() {
    let origin = H2Origin::start(Transport::Clear, 256);
    let extra = origin_section(&origin.base(), "protocol = \"http2\"");
    let weir = Weir::start(&origin.base(), &extra).await;
    let mut paths: Vec<String> = (0..10).map(|i| format!("/slow/{i}")).collect();
    paths.insert(5, "/reset".into());
    let statuses = burst(&weir, paths).await;
    assert_eq!(statuses[5], 502, "{statuses:?}");
    let others: Vec<u16> = statuses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, s)| *s)
        .collect();
    assert!(others.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(origin.connections(), 1, "the connection survives the reset");
    assert_eq!(weir.errors("origin_protocol").await, 1.0);
    weir.stop().await;
}

#[tokio::test]
async fn after_goaway_new_requests_use_a_new_connection() {
    let pki = TestPki::new("goaway");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["h2", "http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!("ca_file = {:?}", pki.ca_file().display().to_string()),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    assert_eq!(weir.get("/goaway").await.status, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..5 {
        let r = weir.get(&format!("/after/{i}")).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(origin.connections(), 2);
    assert_eq!(origin.version_of("/after/4"), Some(http::Version::HTTP_2));
    weir.stop().await;
}

#[tokio::test]
async fn caching_over_h2_hits_after_a_miss() {
    let pki = TestPki::new("cache");
    let origin = tls_origin(&pki, &["127.0.0.1"], &["h2", "http/1.1"]);
    let extra = origin_section(
        &origin.base(),
        &format!("ca_file = {:?}", pki.ca_file().display().to_string()),
    );
    let weir = Weir::start(&origin.base(), &extra).await;
    let first = weir.get("/cached/x").await;
    assert_eq!(first.status, 200);
    assert!(!is_hit(&first.cache_status()), "{}", first.cache_status());
    let second = weir.get("/cached/x").await;
    assert!(is_hit(&second.cache_status()), "{}", second.cache_status());
    assert_eq!(second.text(), first.text());
    assert_eq!(origin.requests(), 1);
    assert_eq!(origin.version_of("/cached/x"), Some(http::Version::HTTP_2));
    weir.stop().await;
}
