//! The services a module gets from its `ModuleContext`, in one process: content
//! management over the real cache (query, fetch, validate, set_expiry, delete,
//! inject, read), background work (`spawn`), counters in `/metrics`; and the log
//! fields a module adds, in the access log file.
//!
//! A test module, `control`, keeps the context it was built with and answers
//! requests for `http://control/<op>?<url>` itself, at request headers: it makes the
//! content-management call in a `Flow::wait` future and replies with the result. The
//! tests drive it with a real client through a forward listener (so the cache names
//! objects by the origin URLs the content manager is given), next to ordinary
//! requests to a real origin, and assert what the clients saw and how often the
//! origin was asked.
#![cfg(feature = "modules")]

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::client::{cs_has, is_hit, metric, proxied_client, send, Fetched};
use support::origin::TestOrigin;
use support::reply::{pattern, Reply};
use support::SOON;
use weir_api::http::{HeaderMap, HeaderValue, StatusCode};
use weir_api::{
    BytesBody, ContentError, Decision, Event, Events, Flow, Module, ModuleContext, ModuleFactory,
    ObjectInfo, RequestHead, Settings, SettingsError, Txn,
};
use weir_proxy::Server;

// ---------------------------------------------------------------------------------
// The harness: a forward proxy in this process, with modules built here.

/// Builds a module with the context the engine gives it.
struct Factory {
    name: &'static str,
    build: fn(&ModuleContext) -> Arc<dyn Module>,
}

impl ModuleFactory for Factory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        if !settings.is_empty() {
            return Err(SettingsError {
                key: None,
                message: "test modules take no settings".into(),
            });
        }
        Ok((self.build)(context))
    }
}

/// A proxy running in this process: one forward listener.
struct Weir {
    server: Server,
    admin: SocketAddr,
    client: reqwest::Client,
}

/// Starts a forward proxy (and an admin listener) with `factories`, one
/// `[[module]]` each, writing its access log to `access_log` when given.
async fn start(factories: Vec<Factory>, access_log: Option<&PathBuf>) -> Weir {
    let log = access_log.map_or("off".to_string(), |p| p.display().to_string());
    let names: Vec<&'static str> = factories.iter().map(|f| f.name).collect();
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        let mut text = format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\n\n[log]\naccess = {log:?}\n\n\
         [timeouts]\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n\n"
        );
        for name in &names {
            text.push_str(&format!("[[module]]\nname = {name:?}\n\n"));
        }
        text
    };
    let factories: Vec<Box<dyn ModuleFactory>> = factories
        .into_iter()
        .map(|f| Box::new(f) as Box<dyn ModuleFactory>)
        .collect();
    let (server, admin, _) =
        support::start_server("content-test.toml", true, text_for, &factories).await;
    let admin = admin.expect("an admin listener");
    let addr = server.local_addrs()[0];
    Weir {
        server,
        admin,
        client: proxied_client(addr),
    }
}

impl Weir {
    /// `GET url` through the proxy.
    async fn get(&self, url: &str) -> Fetched {
        send(&self.client, "GET", url, &[], None).await
    }

    /// Asks `control` for `op` on `url`, with `headers` as the call's arguments;
    /// returns its answer (`status=... size=... ttl=... variants=...`, `ok`, or
    /// `error=<ContentError>`).
    async fn control(&self, op: &str, url: &str, headers: &[(&str, &str)]) -> String {
        let r = self.control_response(op, url, headers).await;
        assert_eq!(r.status, StatusCode::OK, "{op} {url}: {}", r.text());
        r.text()
    }

    async fn control_response(&self, op: &str, url: &str, headers: &[(&str, &str)]) -> Fetched {
        let control = format!("http://control/{op}?{url}");
        send(&self.client, "GET", &control, headers, None).await
    }

    /// The text of the admin listener's `/metrics`.
    async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        let m = send(&support::client::direct_client(), "GET", &url, &[], None).await;
        assert_eq!(m.status, StatusCode::OK, "{}", m.text());
        m.text()
    }

    async fn stop(self) {
        drop(self.client);
        self.server.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------
// `control`: content management on request.

/// Answers `http://control/<op>?<url>` with the result of the content-management
/// call `op` on `url`; arguments come in request headers (`x-ttl` in seconds for
/// `expire`; `x-status`, `x-cache-control` and `x-body` for `inject`). Counts each call
/// in `weir_module_control_calls_total`. Other requests pass.
struct Control {
    context: ModuleContext,
    calls: weir_api::Counter,
}

fn control(context: &ModuleContext) -> Arc<dyn Module> {
    Arc::new(Control {
        context: context.clone(),
        calls: context.counter("control_calls", "content-management calls made on request"),
    })
}

/// `status=200 size=5 ttl=59 variants=1` (ttl in whole seconds, rounded down).
fn describe(info: &ObjectInfo) -> String {
    format!(
        "status={} size={} ttl={} variants={}",
        info.status.as_u16(),
        info.size,
        info.time_to_live.as_secs(),
        info.variants
    )
}

fn answer<T>(result: Result<T, ContentError>, ok: impl FnOnce(T) -> String) -> String {
    match result {
        Ok(v) => ok(v),
        Err(e) => format!("error={e:?}"),
    }
}

impl Module for Control {
    fn name(&self) -> &str {
        "control"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if r.uri.host() != Some("control") {
            return Flow::Continue;
        }
        self.calls.inc();
        let op = r.uri.path().trim_start_matches('/').to_string();
        let url = r.uri.query().unwrap_or("").to_string();
        let arg = |name: &str| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let (ttl, status, cc, body) = (
            arg("x-ttl"),
            arg("x-status"),
            arg("x-cache-control"),
            arg("x-body"),
        );
        let content = self.context.content().clone();
        let context = self.context.clone();
        Flow::wait(async move {
            let text = match op.as_str() {
                "query" => answer(content.query(&url), |i| describe(&i)),
                "fetch" => answer(content.fetch(&url).await, |i| describe(&i)),
                "validate" => answer(content.validate(&url).await, |i| describe(&i)),
                "expire" => {
                    let ttl = Duration::from_secs(ttl.parse().expect("x-ttl"));
                    answer(content.set_expiry(&url, ttl), |()| "ok".into())
                }
                "delete" => answer(content.delete(&url), |()| "ok".into()),
                "inject" => {
                    let mut headers = HeaderMap::new();
                    headers.insert(
                        "cache-control",
                        HeaderValue::from_str(&cc).expect("x-cache-control"),
                    );
                    let status = StatusCode::from_u16(status.parse().expect("x-status")).unwrap();
                    let stored = content
                        .inject(&url, status, headers, BytesBody::boxed(body))
                        .await;
                    answer(stored, |i| describe(&i))
                }
                "read" => match content.read(&url) {
                    // The stored body itself, with what is known of it in a header.
                    Ok(mut stored) => {
                        let mut all = Vec::new();
                        while let Some(chunk) = stored.body.next_chunk().await {
                            all.extend_from_slice(&chunk);
                        }
                        let mut reply = weir_api::Reply::text(StatusCode::OK, "");
                        reply.body = all.into();
                        reply.headers.insert(
                            "x-info",
                            HeaderValue::from_str(&describe(&stored.info)).unwrap(),
                        );
                        return Decision::Respond(reply);
                    }
                    Err(e) => format!("error={e:?}"),
                },
                // Starts a fetch in the background and answers at once.
                "spawn-fetch" => {
                    let content = content.clone();
                    let spawned = context.spawn(async move {
                        let _ = content.fetch(&url).await;
                    });
                    format!("spawned={spawned}")
                }
                other => format!("no such op {other}"),
            };
            Decision::Respond(weir_api::Reply::text(StatusCode::OK, text))
        })
    }
}

/// The number after `name=` in a `control` answer.
fn field(answer: &str, name: &str) -> u64 {
    answer
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number `{name}` in {answer:?}"))
}

async fn with_control() -> Weir {
    start(
        vec![Factory {
            name: "control",
            build: control,
        }],
        None,
    )
    .await
}

/// An origin whose `path` answers 200 `body` with ETag "v1" and `max-age`, and
/// 304 to a request that has it (counting nothing else: the origin counts requests).
fn validating_route(origin: &TestOrigin, path: &str, body: &'static str, max_age: u32) {
    origin.route_fn(path, move |req| {
        let cc = format!("max-age={max_age}");
        if req.header("if-none-match").as_deref() == Some("\"v1\"") {
            Reply::status(304).cc(&cc).header("etag", "\"v1\"")
        } else {
            Reply::ok(body).cc(&cc).header("etag", "\"v1\"")
        }
    });
}

// ---------------------------------------------------------------------------------
// fetch, query, read.

#[tokio::test]
async fn fetch_preloads_and_the_next_get_is_a_hit() {
    let origin = TestOrigin::start();
    origin.route("/pre", Reply::ok("preloaded").cc("max-age=60"));
    let big = pattern(100_000);
    origin.route("/big", Reply::ok(big.clone()).cc("max-age=60"));
    let weir = with_control().await;
    let url = origin.url("/pre");

    let info = weir.control("fetch", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "{info}");
    assert_eq!(origin.count("/pre"), 1);

    let r = weir.get(&url).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "preloaded");
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/pre"), 1, "the hit did not ask the origin");

    // A second fetch of a fresh copy leaves it alone.
    let again = weir.control("fetch", &url, &[]).await;
    assert!(again.starts_with("status=200 size=9 "), "{again}");
    assert_eq!(origin.count("/pre"), 1);

    // query and read agree with what is stored.
    let info = weir.control("query", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(info.ends_with(" variants=1"), "{info}");
    let big_url = origin.url("/big");
    weir.control("fetch", &big_url, &[]).await;
    let read = weir.control_response("read", &big_url, &[]).await;
    assert!(read.body == big, "read: {} bytes", read.body.len());
    let info = read.header("x-info").unwrap();
    assert!(info.starts_with("status=200 size=100000 "), "{info}");
    assert_eq!(origin.count("/big"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn query_shows_size_ttl_and_variants() {
    let origin = TestOrigin::start();
    origin.route_fn("/vary", |req| {
        let v = req.header("x-v").unwrap_or_else(|| "none".into());
        Reply::ok(format!("for {v}"))
            .cc("max-age=100")
            .header("vary", "x-v")
    });
    let weir = with_control().await;
    let url = origin.url("/vary");
    for v in ["a", "b"] {
        let r = send(&weir.client, "GET", &url, &[("x-v", v)], None).await;
        assert_eq!(r.text(), format!("for {v}"));
    }
    assert_eq!(origin.count("/vary"), 2);
    let info = weir.control("query", &url, &[]).await;
    assert!(info.starts_with("status=200 size=5 "), "{info}");
    let ttl = field(&info, "ttl");
    assert!((95..=100).contains(&ttl), "{info}");
    assert_eq!(field(&info, "variants"), 2, "{info}");
    weir.stop().await;
}

#[tokio::test]
async fn spawned_background_work_fetches_into_the_cache() {
    let origin = TestOrigin::start();
    origin.route(
        "/later",
        Reply::ok("later")
            .cc("max-age=60")
            .delay(Duration::from_millis(200)),
    );
    let weir = with_control().await;
    let url = origin.url("/later");
    let started = Instant::now();
    let answer = weir.control("spawn-fetch", &url, &[]).await;
    assert_eq!(answer, "spawned=true");
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "answered before the fetch ended: {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + SOON;
    while weir.control("query", &url, &[]).await.starts_with("error=") {
        assert!(
            Instant::now() < deadline,
            "the spawned fetch stored nothing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = weir.get(&url).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "later");
    assert_eq!(origin.count("/later"), 1);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// validate, set_expiry, delete.

#[tokio::test]
async fn validate_sends_a_conditional_request_and_refreshes_the_ttl() {
    let origin = TestOrigin::start();
    validating_route(&origin, "/val", "validated", 60);
    let weir = with_control().await;
    let url = origin.url("/val");
    assert_eq!(weir.get(&url).await.text(), "validated");
    assert_eq!(origin.count("/val"), 1);

    assert_eq!(weir.control("expire", &url, &[("x-ttl", "0")]).await, "ok");
    let info = weir.control("query", &url, &[]).await;
    assert_eq!(field(&info, "ttl"), 0, "{info}");

    let info = weir.control("validate", &url, &[]).await;
    assert!(info.starts_with("status=200 size=9 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "refreshed: {info}");
    assert_eq!(origin.count("/val"), 2);
    let seen = origin.last("/val").unwrap();
    assert_eq!(seen.header("if-none-match").as_deref(), Some("\"v1\""));
    let info = weir.control("query", &url, &[]).await;
    assert!(field(&info, "ttl") >= 55, "{info}");

    // Validating a fresh copy asks the origin all the same.
    weir.control("validate", &url, &[]).await;
    assert_eq!(origin.count("/val"), 3);
    assert!(origin.last("/val").unwrap().has_header("if-none-match"));

    let r = weir.get(&url).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "validated");
    assert_eq!(origin.count("/val"), 3);
    weir.stop().await;
}

#[tokio::test]
async fn set_expiry_makes_the_next_get_revalidate_or_stay_fresh() {
    let origin = TestOrigin::start();
    validating_route(&origin, "/exp", "expiring", 60);
    validating_route(&origin, "/short", "short", 1);
    let weir = with_control().await;
    let url = origin.url("/exp");
    assert_eq!(weir.get(&url).await.text(), "expiring");

    // Zero: stale at once; the next client GET is a conditional request.
    assert_eq!(weir.control("expire", &url, &[("x-ttl", "0")]).await, "ok");
    let r = weir.get(&url).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text(), "expiring");
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert!(
        cs_has(&r.cache_status(), "fwd", Some("stale")),
        "{}",
        r.cache_status()
    );
    assert!(
        cs_has(&r.cache_status(), "fwd-status", Some("304")),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count("/exp"), 2);
    let seen = origin.last("/exp").unwrap();
    assert_eq!(seen.header("if-none-match").as_deref(), Some("\"v1\""));
    // The 304 made it fresh again.
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/exp"), 2);

    // Longer than the origin said: a max-age=1 response is still fresh after 1.5 s.
    let short = origin.url("/short");
    assert_eq!(weir.get(&short).await.text(), "short");
    assert_eq!(
        weir.control("expire", &short, &[("x-ttl", "60")]).await,
        "ok"
    );
    let info = weir.control("query", &short, &[]).await;
    assert!(field(&info, "ttl") >= 55, "{info}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = weir.get(&short).await;
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(r.text(), "short");
    assert_eq!(origin.count("/short"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn delete_makes_the_next_get_a_miss() {
    let origin = TestOrigin::start();
    origin.route("/del", Reply::ok("deleted").cc("max-age=60"));
    let weir = with_control().await;
    let url = origin.url("/del");
    weir.get(&url).await;
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/del"), 1);

    assert_eq!(weir.control("delete", &url, &[]).await, "ok");
    assert_eq!(weir.control("query", &url, &[]).await, "error=NotFound");
    let r = weir.get(&url).await;
    assert_eq!(r.text(), "deleted");
    assert!(!is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.count("/del"), 2);
    // Stored again by that miss.
    assert!(is_hit(&weir.get(&url).await.cache_status()));
    assert_eq!(origin.count("/del"), 2);
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// inject.

#[tokio::test]
async fn an_injected_response_is_a_hit_without_the_origin() {
    let origin = TestOrigin::start();
    let weir = with_control().await;
    let url = origin.url("/inj");
    let args = [
        ("x-status", "200"),
        ("x-cache-control", "max-age=60"),
        ("x-body", "injected"),
    ];
    let info = weir.control("inject", &url, &args).await;
    assert!(info.starts_with("status=200 size=8 "), "{info}");
    assert!(field(&info, "ttl") >= 55, "{info}");

    for _ in 0..2 {
        let r = weir.get(&url).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.text(), "injected");
        assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        assert_eq!(r.header("cache-control").as_deref(), Some("max-age=60"));
    }
    let read = weir.control_response("read", &url, &[]).await;
    assert_eq!(read.text(), "injected");
    assert!(read
        .header("x-info")
        .unwrap()
        .starts_with("status=200 size=8 "));
    assert_eq!(origin.total(), 0, "the origin was never asked");

    // Another status is stored as it is.
    let gone = origin.url("/gone");
    let args = [
        ("x-status", "404"),
        ("x-cache-control", "max-age=60"),
        ("x-body", "not here"),
    ];
    let info = weir.control("inject", &gone, &args).await;
    assert!(info.starts_with("status=404 size=8 "), "{info}");
    let r = weir.get(&gone).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.text(), "not here");
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
    assert_eq!(origin.total(), 0, "the origin was never asked");
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Errors.

#[tokio::test]
async fn content_errors_are_reported() {
    let origin = TestOrigin::start();
    origin.route("/private", Reply::ok("private").cc("no-store"));
    let weir = with_control().await;
    let unknown = origin.url("/unknown");

    for op in ["query", "validate", "delete", "read"] {
        assert_eq!(
            weir.control(op, &unknown, &[]).await,
            "error=NotFound",
            "{op}"
        );
    }
    assert_eq!(
        weir.control("expire", &unknown, &[("x-ttl", "10")]).await,
        "error=NotFound"
    );
    // None of these asked the origin.
    assert_eq!(origin.total(), 0);

    for bad in ["ftp://127.0.0.1/x", "not-a-url", "https://127.0.0.1/x"] {
        for op in ["query", "fetch", "delete"] {
            let answer = weir.control(op, bad, &[]).await;
            assert_eq!(answer, format!("error=BadUrl({bad:?})"), "{op} {bad}");
        }
    }

    // no-store may not be injected: nothing is stored, a client GET goes to the origin.
    let private = origin.url("/private");
    let args = [
        ("x-status", "200"),
        ("x-cache-control", "no-store"),
        ("x-body", "secret"),
    ];
    assert_eq!(
        weir.control("inject", &private, &args).await,
        "error=NotStorable"
    );
    assert_eq!(weir.control("query", &private, &[]).await, "error=NotFound");
    let r = weir.get(&private).await;
    assert_eq!(r.text(), "private");
    assert_eq!(origin.count("/private"), 1);
    // Fetching it: the origin is asked, and the answer may not be stored.
    assert_eq!(
        weir.control("fetch", &private, &[]).await,
        "error=NotStorable"
    );
    assert_eq!(origin.count("/private"), 2);

    // An origin nobody listens on.
    let dead = format!("http://127.0.0.1:{}/dead", support::free_addr().port());
    let answer = weir.control("fetch", &dead, &[]).await;
    assert!(answer.starts_with("error=Origin("), "{answer}");
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Counters.

#[tokio::test]
async fn a_module_counter_is_exported_and_counts() {
    let origin = TestOrigin::start();
    let weir = with_control().await;
    let calls = |text: &str| metric(text, "weir_module_control_calls_total", &[]);
    let text = weir.metrics().await;
    assert_eq!(calls(&text), Some(0.0), "registered when built:\n{text}");
    for n in 1..=3 {
        weir.control("query", &origin.url("/x"), &[]).await;
        let text = weir.metrics().await;
        assert_eq!(calls(&text), Some(n as f64), "{text}");
    }
    assert!(
        weir.metrics()
            .await
            .contains("# TYPE weir_module_control_calls counter"),
        "typed as a counter"
    );
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Log fields.

/// Adds the log field `mod=x y` to every transaction.
struct Tagger;

impl Module for Tagger {
    fn name(&self) -> &str {
        "tagger"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        txn.log_field("mod", "x y");
        Flow::Continue
    }
}

fn tagger(_: &ModuleContext) -> Arc<dyn Module> {
    Arc::new(Tagger)
}

/// The lines of `path` that contain `needle`, waiting (bounded) until there are
/// `count` of them.
async fn log_lines(path: &PathBuf, needle: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + SOON;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{count} lines with {needle:?} not logged within {SOON:?}; the log:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn log_fields_end_the_access_log_line() {
    let origin = TestOrigin::start();
    origin.route("/logged", Reply::ok("logged").cc("max-age=60"));
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "weir-content-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let weir = start(
        vec![Factory {
            name: "tagger",
            build: tagger,
        }],
        Some(&log),
    )
    .await;
    let url = origin.url("/logged");
    assert_eq!(weir.get(&url).await.text(), "logged"); // miss
    assert!(is_hit(&weir.get(&url).await.cache_status())); // hit
    let lines = log_lines(&log, "/logged", 2).await;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for line in &lines {
        assert!(line.ends_with(" mod=x%20y"), "{line:?}");
    }
    assert!(lines[0].contains("TCP_MISS/200"), "{}", lines[0]);
    assert!(lines[1].contains("TCP_MEM_HIT/200"), "{}", lines[1]);
    assert_eq!(origin.count("/logged"), 1);
    weir.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
