//! Live reload of modules through the `weir` binary: the configuration file is
//! rewritten between steps and reloaded with SIGHUP or `POST /admin/reload`. Also the
//! built-in `preload` module (a timer, background fetches, module counters), which
//! a reload stops.
//!
//! Each test asserts what the clients saw and how often the origin was asked. A
//! SIGHUP is answered in weir's log (stderr): each test waits, bounded, for the
//! `reloaded modules` or `reload refused` line it causes.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::reload_config::Reloadable;
use common::*;

/// How long a test waits for something that should happen at once.
const SOON: Duration = Duration::from_secs(5);

fn add_headers(value: &str) -> String {
    format!("[[module]]\nname = \"add-headers\"\nvalue = {value:?}\n")
}

fn body_copy(value: &str) -> String {
    format!("[[module]]\nname = \"body-copy\"\nvalue = {value:?}\n")
}

/// `POST /admin/reload`: the status and the body.
async fn admin_reload(proxy: &Proxy) -> (u16, String) {
    let url = format!("http://{}/admin/reload", proxy.admin_addr());
    let r = send(&direct_client(), "POST", &url, &[], None).await;
    (r.status.as_u16(), r.text())
}

/// Lines of weir's log saying a reload was applied, and refused.
fn reload_lines(proxy: &Proxy) -> (usize, usize) {
    let log = proxy.stderr_text();
    (
        log.matches("reloaded modules on").count(),
        log.matches("reload refused").count(),
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Reloaded,
    Refused,
}

/// Sends SIGHUP and waits until weir logs the reload it caused, which must be
/// `expected`.
async fn hup(proxy: &Proxy, expected: Verdict) {
    let (done, refused) = reload_lines(proxy);
    proxy.signal("HUP");
    let deadline = Instant::now() + SOON;
    loop {
        let (d, r) = reload_lines(proxy);
        if d > done || r > refused {
            let verdict = if d > done {
                Verdict::Reloaded
            } else {
                Verdict::Refused
            };
            assert_eq!(verdict, expected, "weir's log:\n{}", proxy.stderr_text());
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no reload logged within {SOON:?} of SIGHUP; log:\n{}",
            proxy.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The names of the `x-weir-*` headers of a response.
fn weir_headers(r: &Fetched) -> Vec<String> {
    let mut names: Vec<String> = r
        .headers
        .keys()
        .map(|n| n.as_str().to_string())
        .filter(|n| n.starts_with("x-weir-"))
        .collect();
    names.sort();
    names
}

/// The names of the `x-weir-*` headers the origin got.
fn weir_headers_seen(seen: &Recorded) -> Vec<String> {
    seen.headers
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| n.starts_with("x-weir-"))
        .collect()
}

/// A response and the request the origin got, both stamped by `add-headers` or
/// `body-copy` with `value` at each of the four header events.
fn check_stamped(r: &Fetched, seen: &Recorded, value: &str) {
    for name in ["x-weir-out-1", "x-weir-out-2"] {
        assert_eq!(r.header_all(name), [value], "{name}: {:?}", r.headers);
    }
    for name in ["x-weir-in-1", "x-weir-in-2"] {
        assert_eq!(seen.header_all(name), [value], "{name}: {:?}", seen.headers);
    }
}

// ---------------------------------------------------------------------------------
// Loading, unloading and changing modules.

#[tokio::test]
async fn sighup_and_admin_reload_swap_the_modules() {
    let origin = TestOrigin::start();
    origin.route("/r/*", Reply::ok("body").cc("max-age=60"));
    let w = Reloadable::start(&origin.base(), "off", &add_headers("add"));
    let client = direct_client();
    let url = |path: &str| w.proxy.reverse_url(path);

    let r = get(&client, &url("/r/1"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "body"));
    check_stamped(&r, &origin.last("/r/1").unwrap(), "add");

    // Without modules (SIGHUP).
    w.rewrite("");
    hup(&w.proxy, Verdict::Reloaded).await;
    let r = get(&client, &url("/r/2"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "body"));
    assert_eq!(weir_headers(&r), Vec::<String>::new(), "{:?}", r.headers);
    let seen = origin.last("/r/2").unwrap();
    assert_eq!(weir_headers_seen(&seen), Vec::<String>::new());
    // The response stored under add-headers keeps the header added at response
    // headers (it was stored with it), but nothing adds x-weir-out-2 any more.
    let hit = get(&client, &url("/r/1"), &[]).await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert_eq!(weir_headers(&hit), ["x-weir-out-1"], "{:?}", hit.headers);
    assert_eq!(hit.header_all("x-weir-out-1"), ["add"]);

    // body-copy (POST /admin/reload).
    w.rewrite(&body_copy("copy"));
    let (status, summary) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{summary}");
    assert!(summary.contains("body-copy"), "{summary}");
    assert!(!summary.contains("add-headers"), "{summary}");
    let r = get(&client, &url("/r/3"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "body"));
    check_stamped(&r, &origin.last("/r/3").unwrap(), "copy");
    let hit = get(&client, &url("/r/3"), &[]).await;
    assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
    assert_eq!(hit.text(), "body");
    assert_eq!(hit.header_all("x-weir-out-2"), ["copy"]);

    for path in ["/r/1", "/r/2", "/r/3"] {
        assert_eq!(origin.count(path), 1, "{path}");
    }
}

/// A request through `w` is still stamped by the first configuration's add-headers.
async fn still_old(w: &Reloadable, client: &reqwest::Client, origin: &TestOrigin, path: &str) {
    let r = get(client, &w.proxy.reverse_url(path), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "still"));
    check_stamped(&r, &origin.last(path).unwrap(), "old");
    assert_eq!(origin.count(path), 1);
}

#[tokio::test]
async fn a_bad_file_is_refused_and_the_running_modules_stay() {
    let origin = TestOrigin::start();
    origin.route("/b/*", Reply::ok("still").cc("no-store"));
    let mut w = Reloadable::start(&origin.base(), "off", &add_headers("old"));
    let client = direct_client();
    let path = w.proxy.config_path().display().to_string();
    still_old(&w, &client, &origin, "/b/1").await;

    // An unknown module name (line 2 of the tail: `name = ...`).
    w.rewrite("[[module]]\nname = \"no-such-module\"\n");
    let (status, text) = admin_reload(&w.proxy).await;
    assert_eq!(status, 422, "{text}");
    let at = format!("{path}:{}: key `module[0].name`", w.tail_line(2));
    assert!(text.contains(&at), "expected {at:?} in {text:?}");
    assert!(text.contains("no-such-module"), "{text}");
    still_old(&w, &client, &origin, "/b/2").await;

    // A TOML syntax error (line 3 of the tail: `value = unquoted`).
    w.rewrite("[[module]]\nname = \"add-headers\"\nvalue = unquoted\n");
    let (status, text) = admin_reload(&w.proxy).await;
    assert_eq!(status, 422, "{text}");
    let at = format!("{path}:{}: key `module[0].value`", w.tail_line(3));
    assert!(text.contains(&at), "expected {at:?} in {text:?}");
    still_old(&w, &client, &origin, "/b/3").await;

    // SIGHUP on the same bad file, then on the unknown module: refused, the process
    // lives on and serves as before.
    hup(&w.proxy, Verdict::Refused).await;
    assert!(w.proxy.is_running(), "{}", w.proxy.stderr_text());
    still_old(&w, &client, &origin, "/b/4").await;
    w.rewrite("[[module]]\nname = \"no-such-module\"\n");
    hup(&w.proxy, Verdict::Refused).await;
    assert!(w.proxy.is_running(), "{}", w.proxy.stderr_text());
    still_old(&w, &client, &origin, "/b/5").await;

    // A good file reloads after all that.
    w.rewrite(&add_headers("new"));
    let (status, text) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{text}");
    let r = get(&client, &w.proxy.reverse_url("/b/new"), &[]).await;
    check_stamped(&r, &origin.last("/b/new").unwrap(), "new");
}

#[tokio::test]
async fn enabled_false_unloads_a_module_and_true_brings_it_back() {
    let origin = TestOrigin::start();
    origin.route("/e/*", Reply::ok("e").cc("no-store"));
    let w = Reloadable::start(&origin.base(), "off", &add_headers("on"));
    let client = direct_client();
    let r = get(&client, &w.proxy.reverse_url("/e/1"), &[]).await;
    check_stamped(&r, &origin.last("/e/1").unwrap(), "on");

    w.rewrite(&format!("{}enabled = false\n", add_headers("off")));
    let (status, summary) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{summary}");
    assert!(!summary.contains("add-headers"), "{summary}");
    let r = get(&client, &w.proxy.reverse_url("/e/2"), &[]).await;
    assert_eq!(r.text(), "e");
    assert_eq!(weir_headers(&r), Vec::<String>::new(), "{:?}", r.headers);
    assert_eq!(
        weir_headers_seen(&origin.last("/e/2").unwrap()),
        Vec::<String>::new()
    );

    w.rewrite(&format!("{}enabled = true\n", add_headers("again")));
    hup(&w.proxy, Verdict::Reloaded).await;
    let r = get(&client, &w.proxy.reverse_url("/e/3"), &[]).await;
    check_stamped(&r, &origin.last("/e/3").unwrap(), "again");
    for p in ["/e/1", "/e/2", "/e/3"] {
        assert_eq!(origin.count(p), 1, "{p}");
    }
}

// ---------------------------------------------------------------------------------
// Reloads never drop what is in flight.

/// 20 MiB, sent in 64 KiB chunks 8 ms apart: about 2.6 s.
const SLOW_LEN: u64 = 20 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_in_flight_survives_four_reloads() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::stream(SLOW_LEN)
            .chunk_delay(Duration::from_millis(8))
            .cc("no-store"),
    );
    origin.route("/after", Reply::ok("after").cc("no-store"));
    let w = Reloadable::start(&origin.base(), "off", &body_copy("one"));

    // The download, checked byte by byte as it arrives.
    let received = Arc::new(AtomicU64::new(0));
    let url = w.proxy.reverse_url("/slow");
    let counter = received.clone();
    let download = tokio::spawn(async move {
        let client = direct_builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let mut resp = client.get(&url).send().await.expect("the download starts");
        let head = (resp.status().as_u16(), resp.headers().clone());
        let mut offset = 0u64;
        let mut wrong = None;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    for (i, b) in chunk.iter().enumerate() {
                        let at = offset + i as u64;
                        if wrong.is_none() && *b != (at % 251) as u8 {
                            wrong = Some(at);
                        }
                    }
                    offset += chunk.len() as u64;
                    counter.store(offset, Ordering::SeqCst);
                }
                Ok(None) => return (head, offset, wrong, None),
                Err(e) => return (head, offset, wrong, Some(e.to_string())),
            }
        }
    });
    let deadline = Instant::now() + SOON;
    while received.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the download did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Four reloads, each changing the modules: two by SIGHUP, two by the admin API.
    let steps = [
        add_headers("two"),
        body_copy("three"),
        String::new(),
        add_headers("four"),
    ];
    for (i, tail) in steps.iter().enumerate() {
        w.rewrite(tail);
        if i % 2 == 0 {
            hup(&w.proxy, Verdict::Reloaded).await;
        } else {
            let (status, text) = admin_reload(&w.proxy).await;
            assert_eq!(status, 200, "{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at_last_reload = received.load(Ordering::SeqCst);
    assert!(
        at_last_reload < SLOW_LEN,
        "the download was over before the reloads: the test proves nothing"
    );

    let ((status, headers), len, wrong, error) =
        tokio::time::timeout(Duration::from_secs(60), download)
            .await
            .expect("the download ends")
            .expect("the download task");
    assert_eq!(error, None, "the download failed after {len} bytes");
    assert_eq!(status, 200);
    assert_eq!(len, SLOW_LEN, "bytes received");
    assert_eq!(wrong, None, "first wrong byte");
    // The transaction kept the chain it started with.
    assert_eq!(
        headers.get("x-weir-out-2").map(|v| v.as_bytes()),
        Some(&b"one"[..]),
        "{headers:?}"
    );
    assert_eq!(origin.count("/slow"), 1);
    assert_eq!(origin.completed("/slow"), 1);
    assert_eq!(origin.aborted("/slow"), 0);

    // A new transaction has the last configuration's modules.
    let r = get(&direct_client(), &w.proxy.reverse_url("/after"), &[]).await;
    check_stamped(&r, &origin.last("/after").unwrap(), "four");
}

/// One request on a kept-alive connection, reading the response.
fn exchange(conn: &mut RawConn, proxy: &Proxy, path: &str) -> RawResponse {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n",
        proxy.reverse_addr()
    );
    conn.send(request.as_bytes());
    conn.read_response(false)
        .unwrap_or_else(|e| panic!("GET {path} on the kept-alive connection: {e}"))
}

#[tokio::test]
async fn a_kept_alive_connection_is_served_after_reloads() {
    let origin = TestOrigin::start();
    origin.route("/k/*", Reply::ok("kept").cc("no-store"));
    let w = Reloadable::start(&origin.base(), "off", &add_headers("before"));
    let mut conn = RawConn::connect(w.proxy.reverse_addr());

    let r = exchange(&mut conn, &w.proxy, "/k/1");
    assert_eq!((r.status, r.text().as_str()), (200, "kept"));
    assert_eq!(r.header_all("x-weir-out-2"), ["before"]);
    assert_eq!(r.header("connection"), None, "kept alive: {:?}", r.headers);

    // The admin API, then the next request on the same connection.
    w.rewrite(&add_headers("after-admin"));
    let (status, text) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{text}");
    let r = exchange(&mut conn, &w.proxy, "/k/2");
    assert_eq!((r.status, r.text().as_str()), (200, "kept"));
    assert_eq!(
        r.header_all("x-weir-out-2"),
        ["after-admin"],
        "{:?}",
        r.headers
    );
    assert_eq!(
        origin.last("/k/2").unwrap().header_all("x-weir-in-1"),
        ["after-admin"]
    );

    // SIGHUP to no modules, then again on the same connection.
    w.rewrite("");
    hup(&w.proxy, Verdict::Reloaded).await;
    let r = exchange(&mut conn, &w.proxy, "/k/3");
    assert_eq!((r.status, r.text().as_str()), (200, "kept"));
    assert!(
        r.headers
            .iter()
            .all(|(n, _)| !n.to_ascii_lowercase().starts_with("x-weir-")),
        "{:?}",
        r.headers
    );
    for p in ["/k/1", "/k/2", "/k/3"] {
        assert_eq!(origin.count(p), 1, "{p}");
    }
}

// ---------------------------------------------------------------------------------
// preload: a timer, background fetches and counters, stopped by a reload.

const FETCHED: &str = "weir_module_preload_fetched_total";
const FAILED: &str = "weir_module_preload_failed_total";

/// The preload counters in `/metrics` (None while absent).
fn preload_counters(proxy: &Proxy) -> (Option<f64>, Option<f64>) {
    let text = proxy.metrics();
    (metric(&text, FETCHED, &[]), metric(&text, FAILED, &[]))
}

/// Polls `/metrics` until `cond` holds on (fetched, failed), or panics.
async fn counters_until(proxy: &Proxy, what: &str, cond: impl Fn(f64, f64) -> bool) -> (f64, f64) {
    let deadline = Instant::now() + SOON;
    loop {
        if let (Some(fetched), Some(failed)) = preload_counters(proxy) {
            if cond(fetched, failed) {
                return (fetched, failed);
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; /metrics:\n{}",
            proxy.metrics()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn preload_fills_the_cache_counts_and_stops_when_unloaded() {
    let origin = TestOrigin::start();
    origin.route("/warm", Reply::ok("warm").cc("max-age=60"));
    // Always stale, with a validator: each round asks the origin again.
    origin.route_fn("/tick", |req| {
        if req.header("if-none-match").as_deref() == Some("\"t\"") {
            Reply::status(304).cc("max-age=0").header("etag", "\"t\"")
        } else {
            Reply::ok("tick").cc("max-age=0").header("etag", "\"t\"")
        }
    });
    let warm = origin.url("/warm");
    let tick = origin.url("/tick");
    // Nothing listens there.
    let dead = format!("http://127.0.0.1:{}/dead", free_port());
    let preload = format!(
        "[[module]]\nname = \"preload\"\nurls = [{warm:?}, {tick:?}, {dead:?}]\nevery = 1\n"
    );
    let w = Reloadable::start(&origin.base(), "off", &preload);
    let started = Instant::now();

    // In the cache without any client request.
    assert!(
        origin
            .eventually(Duration::from_millis(1500), |o| o.count("/warm") >= 1)
            .await,
        "/warm was not preloaded within 1.5 s of the start (origin saw {:?})",
        origin
            .requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    );
    let client = proxied_client(w.proxy.forward_addr());
    let r = get(&client, &warm, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "warm"));
    assert!(is_hit(&r.cache_status()), "{}", r.cache_status());

    // The counters: both present, and both increasing round after round.
    let (fetched, failed) =
        counters_until(&w.proxy, "a first round", |f, x| f >= 2.0 && x >= 1.0).await;
    counters_until(&w.proxy, "later rounds", |f, x| {
        f >= fetched + 2.0 && x >= failed + 1.0
    })
    .await;
    // A fresh copy is left alone; a stale one is asked for again each round.
    assert_eq!(origin.count("/warm"), 1, "fresh: not fetched again");
    assert!(origin.count("/tick") >= 2, "{}", origin.count("/tick"));
    let tick_seen = origin.last("/tick").unwrap();
    assert_eq!(tick_seen.header("if-none-match").as_deref(), Some("\"t\""));
    eprintln!(
        "{:?} after the start: /tick asked {} times",
        started.elapsed(),
        origin.count("/tick")
    );

    // A reload without preload stops its timer.
    w.rewrite("");
    let (status, text) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("preload"), "{text}");
    // A round that had started may finish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ticks, counters) = (origin.count("/tick"), preload_counters(&w.proxy));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(origin.count("/tick"), ticks, "the origin is still asked");
    assert_eq!(preload_counters(&w.proxy), counters);
    assert_eq!(origin.count("/warm"), 1);
}
