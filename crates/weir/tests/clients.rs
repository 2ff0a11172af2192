//! The built-in `clients` module through the `weir` binary: statistics per client
//! address (read back from `/admin/modules/clients` and `/metrics`), their bound under
//! many clients, and one test per limit. Clients come from distinct loopback
//! addresses (all of 127.0.0.0/8 is local on Linux), so each test is its own client.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::module_config::{check_module_error, reverse_with_modules};
use common::*;
use serde_json::Value;

/// A proxy in front of `origin` with the `clients` module configured by `settings`.
fn proxy_with(origin: &TestOrigin, settings: &str) -> Proxy {
    reverse_with_modules(
        &origin.base(),
        &format!("[[module]]\nname = \"clients\"\n{settings}\n"),
    )
}

/// A client whose connections come from `ip`.
fn client_from(ip: &str) -> reqwest::Client {
    direct_builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// The module's JSON report.
async fn report(proxy: &Proxy) -> Value {
    let url = format!("http://{}/admin/modules/clients", proxy.admin_addr());
    let r = get(&direct_client(), &url, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    serde_json::from_slice(&r.body).expect("the report is JSON")
}

/// The report's entry for client `ip`, waiting (bounded) for its log events: a
/// transaction is logged just after its body is sent.
async fn client_entry(proxy: &Proxy, ip: &str, requests: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = report(proxy).await;
        let entry = r["clients"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == ip)
            .cloned();
        match entry {
            Some(e) if e["requests"].as_u64() >= Some(requests) => return e,
            other if Instant::now() > deadline => panic!("{ip}: {other:?} in {r}"),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn metrics(proxy: &Proxy) -> String {
    get(
        &direct_client(),
        &format!("http://{}/metrics", proxy.admin_addr()),
        &[],
    )
    .await
    .text()
}

#[tokio::test]
async fn statistics_count_requests_bytes_hits_and_misses_per_client() {
    let origin = TestOrigin::start();
    origin.route("/cached", Reply::ok(vec![b'c'; 1000]).cc("max-age=60"));
    origin.route("/fresh", Reply::ok(vec![b'f'; 300]).cc("no-store"));
    let proxy = proxy_with(&origin, "");
    let client = client_from("127.0.0.2");
    for path in ["/cached", "/cached", "/fresh"] {
        assert_eq!(
            get(&client, &proxy.reverse_url(path), &[]).await.status,
            200
        );
    }
    let other = client_from("127.0.0.3");
    get(&other, &proxy.reverse_url("/fresh"), &[]).await;

    let e = client_entry(&proxy, "127.0.0.2", 3).await;
    assert_eq!(e["requests"], 3);
    assert_eq!(e["exact"], true);
    assert_eq!(e["hits"], 1);
    assert_eq!(e["misses"], 2);
    assert_eq!(e["bytes_out"], 2300);
    assert_eq!(e["denied"], 0);
    assert_eq!(client_entry(&proxy, "127.0.0.3", 1).await["bytes_out"], 300);

    let text = metrics(&proxy).await;
    assert_eq!(
        metric(
            &text,
            "weir_module_clients_top_client_requests",
            &[("client", "127.0.0.2")]
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "weir_module_clients_requests_total", &[]),
        Some(4.0)
    );
    let missing = format!("http://{}/admin/modules/nothing", proxy.admin_addr());
    assert_eq!(get(&direct_client(), &missing, &[]).await.status, 404);
}

#[tokio::test]
async fn statistics_stay_bounded_under_many_clients() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("x").cc("max-age=60"));
    let proxy = proxy_with(&origin, "top = 8");
    // Three busy clients, then 40 that come once each: more clients than entries.
    for n in 2..5 {
        let ip = format!("127.0.0.{n}");
        let client = client_from(&ip);
        for _ in 0..30 {
            get(&client, &proxy.reverse_url("/a"), &[]).await;
        }
    }
    for n in 1..=40 {
        get(
            &client_from(&format!("127.0.1.{n}")),
            &proxy.reverse_url("/a"),
            &[],
        )
        .await;
    }
    // The last client's log event is the last to land.
    let deadline = Instant::now() + Duration::from_secs(5);
    let r = loop {
        let r = report(&proxy).await;
        let total: u64 = r["clients"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["requests"].as_u64().unwrap())
            .sum();
        if total >= 130 || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let clients = &r["clients"];
    assert_eq!(clients["tracked"], 8, "{r}");
    assert_eq!(clients["entries"].as_array().unwrap().len(), 8);
    assert_eq!(
        clients["replaced"], 35,
        "40 light clients into 5 free entries"
    );
    for n in 2..5 {
        let e = client_entry(&proxy, &format!("127.0.0.{n}"), 30).await;
        assert_eq!(
            (e["requests"].as_u64(), e["exact"].as_bool()),
            (Some(30), Some(true))
        );
    }
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after_and_counts_it() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("x").cc("no-store"));
    let proxy = proxy_with(&origin, "rate = 0.5\nburst = 2");
    let client = client_from("127.0.0.4");
    for _ in 0..2 {
        assert_eq!(
            get(&client, &proxy.reverse_url("/r"), &[]).await.status,
            200
        );
    }
    let refused = get(&client, &proxy.reverse_url("/r"), &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after").as_deref(), Some("2"));
    assert_eq!(origin.count("/r"), 2, "a refused request is not forwarded");
    // Another client has its own bucket.
    assert_eq!(
        get(&client_from("127.0.0.5"), &proxy.reverse_url("/r"), &[])
            .await
            .status,
        200
    );

    let e = client_entry(&proxy, "127.0.0.4", 3).await;
    assert_eq!(
        (e["rate_limited"].as_u64(), e["denied"].as_u64()),
        (Some(1), Some(1))
    );
    let text = metrics(&proxy).await;
    assert_eq!(
        metric(&text, "weir_module_clients_rate_limited_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            "weir_module_clients_top_client_refused",
            &[("client", "127.0.0.4")]
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn the_daily_quota_refuses_once_the_bytes_are_used_until_the_reset() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok(vec![b'q'; 600]).cc("no-store"));
    let proxy = proxy_with(&origin, "quota = 1000\nquota_reset = \"00:00\"");
    let client = client_from("127.0.0.6");
    for n in 1..=2 {
        assert_eq!(
            get(&client, &proxy.reverse_url("/q"), &[]).await.status,
            200
        );
        // The bytes count once the response is logged.
        client_entry(&proxy, "127.0.0.6", n).await;
    }
    let refused = get(&client, &proxy.reverse_url("/q"), &[]).await;
    assert_eq!(refused.status, 429);
    assert!(
        refused.text().contains("Daily quota exhausted"),
        "{}",
        refused.text()
    );
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let to_midnight = 86_400 - now % 86_400;
    assert!(retry.abs_diff(to_midnight) <= 2, "{retry} vs {to_midnight}");
    let e = client_entry(&proxy, "127.0.0.6", 3).await;
    assert_eq!(
        (e["over_quota"].as_u64(), e["quota_used"].as_u64()),
        (Some(1), Some(1200))
    );
}

#[tokio::test]
async fn the_cap_on_requests_in_flight_refuses_the_one_over_and_frees_its_place() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::ok("slow")
            .cc("no-store")
            .delay(Duration::from_millis(800)),
    );
    origin.route("/quick", Reply::ok("quick").cc("no-store"));
    let proxy = proxy_with(&origin, "concurrent = 1");
    let client = client_from("127.0.0.7");
    let url = proxy.reverse_url("/slow");
    let first = tokio::spawn({
        let client = client.clone();
        async move { get(&client, &url, &[]).await.status }
    });
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.count("/slow") == 1)
            .await
    );
    let refused = get(&client, &proxy.reverse_url("/quick"), &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    assert_eq!(first.await.unwrap(), 200);
    client_entry(&proxy, "127.0.0.7", 2).await;
    assert_eq!(
        get(&client, &proxy.reverse_url("/quick"), &[]).await.status,
        200
    );
    let e = client_entry(&proxy, "127.0.0.7", 3).await;
    assert_eq!(
        (e["over_concurrency"].as_u64(), e["in_flight"].as_u64()),
        (Some(1), Some(0))
    );
}

#[tokio::test]
async fn bandwidth_shaping_holds_a_client_to_its_rate() {
    let origin = TestOrigin::start();
    origin.route("/big", Reply::ok(vec![b'b'; 200 * 1024]).cc("max-age=60"));
    let proxy = proxy_with(&origin, "bandwidth = \"100KiB\"");
    // Stored first by another client, so the measured one is a hit: shaping applies
    // to what the cache serves too.
    get(&client_from("127.0.0.8"), &proxy.reverse_url("/big"), &[]).await;
    let client = client_from("127.0.0.9");
    let started = Instant::now();
    let r = get(&client, &proxy.reverse_url("/big"), &[]).await;
    let took = started.elapsed();
    assert_eq!(r.body.len(), 200 * 1024);
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    // 200 KiB at 100 KiB/s, less the 10 KiB bucket: about 1.9 s.
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(took <= Duration::from_secs(4), "{took:?}");
    let e = client_entry(&proxy, "127.0.0.9", 1).await;
    assert!(e["shaped_ms"].as_u64().unwrap() >= 1500, "{e}");
}

/// Squid's delay pools slow CONNECT tunnels too: on a forward proxy, HTTPS is most of
/// what clients receive. What the server sends through the tunnel is shaped; the
/// tunnel's bytes are counted when it closes.
#[tokio::test]
async fn bandwidth_shaping_slows_a_tunnel_to_the_clients_rate() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .raw("[[module]]\nname = \"clients\"\nbandwidth = \"100KiB\"\n")
        .start();
    let (forward, port) = (proxy.forward_addr(), echo.port());
    let took = tokio::task::spawn_blocking(move || {
        let mut conn = RawConn::tunnel(forward, port);
        let started = Instant::now();
        // 200 KiB each way, 50 KiB at a time; only the echo's way back is shaped.
        let piece = vec![b't'; 50 * 1024];
        for _ in 0..4 {
            conn.send(&piece);
            assert_eq!(conn.read_bytes(piece.len()).expect("the echo"), piece);
        }
        started.elapsed()
    })
    .await
    .unwrap();
    // 200 KiB at 100 KiB/s, less the 10 KiB bucket: about 1.9 s.
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(took <= Duration::from_secs(6), "{took:?}");
    // Counted when the tunnel closed, with its bytes.
    let e = client_entry(&proxy, "127.0.0.1", 1).await;
    assert!(e["shaped_ms"].as_u64().unwrap() >= 1500, "{e}");
    assert_eq!(e["bytes_out"].as_u64(), Some(200 * 1024), "{e}");
}

#[test]
fn check_names_file_line_and_key_of_a_bad_limit() {
    let message = check_module_error(
        "[[module]]\nname = \"clients\"\nrate = 5\nquota = \"1GiB\"\nquota_reset = \"24:00\"\n",
        9,
        "module[0].quota_reset",
    );
    assert_eq!(message, "`24:00` is not a time of day as \"HH:MM\" (UTC)");
}

/// The report's entry for `user`, once it has `requests` logged.
async fn user_entry(proxy: &Proxy, user: &str, requests: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = report(proxy).await;
        let entry = r["users"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == user)
            .cloned();
        match entry {
            Some(e) if e["requests"].as_u64() >= Some(requests) => return e,
            other if Instant::now() > deadline => panic!("{user}: {other:?} in {r}"),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test]
async fn limits_by_user_follow_the_user_the_access_module_verified() {
    use base64::Engine as _;
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("x").cc("no-store"));
    let dir = TempDir::new("clients-users");
    let hash = |pw: &str| {
        bcrypt::hash_with_salt(pw, 4, [7; 16])
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY)
    };
    let users = dir.path().join("users.htpasswd");
    std::fs::write(
        &users,
        format!("ann:{}\nbob:{}\n", hash("ann-pw"), hash("bob-pw")),
    )
    .unwrap();
    let proxy = reverse_with_modules(
        &origin.base(),
        &format!(
            "[[module]]\nname = \"access\"\nhtpasswd = {:?}\n\n\
             [[module]]\nname = \"clients\"\nby = \"user\"\nrate = 0.5\nburst = 1\n",
            users.display().to_string()
        ),
    );
    let as_user = |user: &str| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{user}-pw"));
        format!("Basic {token}")
    };
    // One address, two users: each user has a bucket of their own.
    let client = client_from("127.0.0.11");
    let url = proxy.reverse_url("/u");
    let ann = as_user("ann");
    assert_eq!(
        get(&client, &url, &[("authorization", &ann)]).await.status,
        200
    );
    assert_eq!(
        get(&client, &url, &[("authorization", &ann)]).await.status,
        429
    );
    let bob = as_user("bob");
    assert_eq!(
        get(&client, &url, &[("authorization", &bob)]).await.status,
        200
    );

    let e = user_entry(&proxy, "ann", 2).await;
    assert_eq!(
        (e["requests"].as_u64(), e["rate_limited"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(user_entry(&proxy, "bob", 1).await["rate_limited"], 0);
    assert_eq!(client_entry(&proxy, "127.0.0.11", 3).await["requests"], 3);
    let text = metrics(&proxy).await;
    assert_eq!(
        metric(
            &text,
            "weir_module_clients_top_user_requests",
            &[("user", "ann")]
        ),
        Some(2.0),
        "{text}"
    );
}
