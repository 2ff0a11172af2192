//! The admin content API against a real origin, in one process: the bearer token,
//! query, body, inject, delete, purge, preload, validate and expiry, and the answers
//! to bad input, unknown paths and wrong methods.

mod support;

use std::net::SocketAddr;

use serde_json::Value;
use support::client::{cs_has, direct_client, is_hit, proxied_client, send, Fetched};
use support::origin::TestOrigin;
use support::reply::Reply;
use weir_proxy::Server;

const TOKEN: &str = "t0ken-for-tests";

struct Weir {
    server: Server,
    admin: SocketAddr,
    client: reqwest::Client,
    direct: reqwest::Client,
}

async fn start() -> Weir {
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"{TOKEN}\"\n\n\
             [timeouts]\nshutdown_grace = \"1s\"\n\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n"
        )
    };
    let (server, admin, _) = support::start_server("admin-test.toml", true, text_for, &[]).await;
    let addr = server.local_addrs()[0];
    Weir {
        server,
        admin: admin.expect("an admin listener"),
        client: proxied_client(addr),
        direct: direct_client(),
    }
}

/// Percent-encodes a URL for the `url` query parameter.
fn encode(url: &str) -> String {
    url.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Weir {
    /// An admin request with the token.
    async fn admin(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Fetched {
        let bearer = format!("Bearer {TOKEN}");
        let mut all = vec![("authorization", bearer.as_str())];
        all.extend_from_slice(headers);
        let url = format!("http://{}{path}", self.admin);
        let body = (!body.is_empty()).then(|| body.as_bytes().to_vec());
        send(&self.direct, method, &url, &all, body).await
    }

    /// An admin request on the object `url`'s endpoint `path`.
    async fn on(&self, method: &str, path: &str, url: &str, body: &str) -> Fetched {
        self.admin(method, &format!("{path}?url={}", encode(url)), &[], body)
            .await
    }

    async fn get(&self, url: &str) -> Fetched {
        send(&self.client, "GET", url, &[], None).await
    }
}

fn json(r: &Fetched) -> Value {
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json"),
        "{}",
        r.text()
    );
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_the_admin_endpoints_only() {
    let weir = start().await;
    let base = format!("http://{}", weir.admin);
    for path in [
        "/admin/cache?url=http%3A%2F%2Fh%2F",
        "/admin/reload",
        "/admin/nope",
    ] {
        let url = format!("{base}{path}");
        let r = send(&weir.direct, "GET", &url, &[], None).await;
        assert_eq!(r.status, 401, "{path}");
        assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
        let r = send(
            &weir.direct,
            "GET",
            &url,
            &[("authorization", "Bearer wrong")],
            None,
        )
        .await;
        assert_eq!(r.status, 401, "{path}");
        assert!(json(&r)["error"].as_str().unwrap().contains("token"));
    }
    for path in ["/metrics", "/healthz"] {
        let r = send(&weir.direct, "GET", &format!("{base}{path}"), &[], None).await;
        assert_eq!(r.status, 200, "{path}");
    }
    let r = weir.admin("GET", "/admin/nope", &[], "").await;
    assert_eq!(r.status, 404);
    json(&r);
    weir.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_read_delete_and_purge() {
    let origin = TestOrigin::start();
    origin.route(
        "/a",
        Reply::ok("hello")
            .cc("max-age=300")
            .header("content-type", "text/x-test")
            .header("surrogate-key", "k1 k2")
            .header("vary", "accept-language"),
    );
    let weir = start().await;
    let url = origin.url("/a");
    let r = weir.on("GET", "/admin/cache", &url, "").await;
    assert_eq!(r.status, 404);
    assert_eq!(json(&r)["error"], "not in the cache");
    weir.get(&url).await;
    send(
        &weir.client,
        "GET",
        &url,
        &[("accept-language", "fr")],
        None,
    )
    .await;

    let info = json(&weir.on("GET", "/admin/cache", &url, "").await);
    assert_eq!(info["status"], 200);
    assert_eq!(info["size"], 5);
    assert_eq!(info["freshness"], "fresh");
    assert!(info["ttl"].as_u64().unwrap() > 290, "{info}");
    assert_eq!(info["variants"], 2);
    assert_eq!(info["tags"], serde_json::json!(["k1", "k2"]));
    let headers = info["headers"].as_array().unwrap();
    assert!(
        headers.contains(&serde_json::json!(["content-type", "text/x-test"])),
        "{info}"
    );

    let body = weir.on("GET", "/admin/cache/body", &url, "").await;
    assert_eq!(body.status, 200);
    assert_eq!(body.text(), "hello");
    assert_eq!(body.header("content-type").as_deref(), Some("text/x-test"));

    let r = weir.on("DELETE", "/admin/cache", &url, "").await;
    assert_eq!(json(&r)["purged"], 2, "both variants");
    assert_eq!(
        weir.on("DELETE", "/admin/cache", &url, "").await.status,
        404
    );
    weir.get(&url).await;
    assert_eq!(origin.count("/a"), 3, "deleted: the origin is asked again");

    let body = format!(r#"{{"url": "{url}"}}"#);
    let r = weir.admin("POST", "/admin/purge", &[], &body).await;
    assert_eq!(json(&r), serde_json::json!({"by": "url", "purged": 1}));
    for bad in [
        r#"{"url": "http://h/", "tag": "x"}"#,
        r#"{}"#,
        r#"{"tag": ""}"#,
        r#"{"prefix": "ftp://h/"}"#,
        r#"{"nope": 1}"#,
        "not json",
    ] {
        let r = weir.admin("POST", "/admin/purge", &[], bad).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert!(json(&r)["error"].is_string());
    }
    let r = weir.admin("GET", "/admin/purge", &[], "").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow").as_deref(), Some("POST"));
    let r = weir
        .admin("PATCH", "/admin/cache?url=http%3A%2F%2Fh%2F", &[], "")
        .await;
    assert_eq!(r.header("allow").as_deref(), Some("GET, PUT, DELETE"));
    assert_eq!(weir.admin("GET", "/admin/cache", &[], "").await.status, 400);
    assert_eq!(
        weir.on("GET", "/admin/cache", "https://h/", "")
            .await
            .status,
        400
    );
    weir.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_serves_without_the_origin() {
    let origin = TestOrigin::start();
    let weir = start().await;
    let url = origin.url("/injected");
    let headers = [
        ("content-type", "application/x-made"),
        ("cache-control", "max-age=120"),
        ("surrogate-key", "made"),
        ("etag", "\"v1\""),
        ("user-agent", "not-stored"),
    ];
    let path = format!("/admin/cache?url={}&status=203", encode(&url));
    let r = weir.admin("PUT", &path, &headers, "made here").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let info = json(&r);
    assert_eq!(info["status"], 203);
    assert_eq!(info["tags"], serde_json::json!(["made"]));

    let r = weir.get(&url).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!((r.status.as_u16(), r.text().as_str()), (203, "made here"));
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/x-made")
    );
    assert_eq!(r.header("etag").as_deref(), Some("\"v1\""));
    assert!(r.header("user-agent").is_none());
    assert_eq!(origin.total(), 0, "the origin was never asked");

    let r = weir
        .admin("PUT", &path, &[("cache-control", "no-store")], "x")
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = weir
        .admin(
            "PUT",
            &path.replace("status=203", "status=99"),
            &headers,
            "x",
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    weir.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preload_validate_and_expiry() {
    let origin = TestOrigin::start();
    origin.route(
        "/p",
        Reply::ok("preloaded")
            .cc("max-age=60")
            .header("etag", "\"e\""),
    );
    origin.route("/private", Reply::ok("mine").cc("private"));
    let weir = start().await;
    let url = origin.url("/p");
    let body = format!(
        r#"{{"urls": ["{url}", "{}", "https://x/"]}}"#,
        origin.url("/private")
    );
    let r = json(&weir.admin("POST", "/admin/preload", &[], &body).await);
    assert_eq!(
        (r["stored"].as_u64(), r["failed"].as_u64()),
        (Some(1), Some(2)),
        "{r}"
    );
    assert_eq!(r["results"][0]["object"]["size"], 9);
    assert!(r["results"][1]["error"]
        .as_str()
        .unwrap()
        .contains("may not be stored"));
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/p"), 1);
    let r = weir
        .admin("POST", "/admin/preload", &[], r#"{"urls": []}"#)
        .await;
    assert_eq!(r.status, 400);

    let r = weir
        .on("POST", "/admin/cache/expiry", &url, r#"{"ttl": 0}"#)
        .await;
    let info = json(&r);
    assert_eq!(
        (info["freshness"].as_str(), info["ttl"].as_u64()),
        (Some("stale"), Some(0))
    );
    let r = weir.get(&url).await;
    assert!(
        cs_has(&r.cache_status(), "fwd", Some("stale")),
        "{}",
        r.cache_status()
    );

    let later = httpdate::fmt_http_date(
        std::time::SystemTime::now() + std::time::Duration::from_secs(1000),
    );
    let body = format!(r#"{{"expires": "{later}"}}"#);
    let info = json(&weir.on("POST", "/admin/cache/expiry", &url, &body).await);
    let ttl = info["ttl"].as_u64().unwrap();
    assert!((990..=1000).contains(&ttl), "{info}");
    for bad in [
        r#"{"ttl": -1}"#,
        r#"{"ttl": 1, "expires": 2}"#,
        r#"{"expires": "soon"}"#,
    ] {
        assert_eq!(
            weir.on("POST", "/admin/cache/expiry", &url, bad)
                .await
                .status,
            400,
            "{bad}"
        );
    }

    let before = origin.count("/p");
    let r = weir.on("POST", "/admin/cache/validate", &url, "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(origin.count("/p"), before + 1);
    let asked = origin.last("/p").unwrap();
    assert_eq!(asked.header("if-none-match").as_deref(), Some("\"e\""));
    let missing = origin.url("/never");
    assert_eq!(
        weir.on("POST", "/admin/cache/validate", &missing, "")
            .await
            .status,
        404
    );
    weir.server.shutdown().await;
}
