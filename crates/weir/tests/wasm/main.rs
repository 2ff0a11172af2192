//! proxy-wasm filters (`[[module]] name = "wasm"`) through the `weir` binary: filters
//! written in WebAssembly text and compiled here, loaded by a running proxy in front
//! of a real origin.

mod callouts;
#[path = "../common/mod.rs"]
mod common;
mod fields;
mod filters;
mod sdk;

use std::path::Path;
use std::time::Duration;

use common::module_config::{check_module_error, reverse_with_modules};
use common::*;

/// A `[[module]]` section loading `path`, with `extra` lines.
fn section(path: &Path, extra: &str) -> String {
    format!(
        "[[module]]\nname = \"wasm\"\npath = {:?}\n{extra}\n",
        path.display().to_string()
    )
}

/// The value of the sample `name` on the admin listener's `/metrics` (0 if absent).
fn metric(proxy: &Proxy, name: &str) -> u64 {
    proxy
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test]
async fn a_filter_adds_headers_both_ways() {
    let dir = temp_dir("wasm-headers");
    let wasm = filters::write(&dir, "headers", filters::HEADERS);
    let origin = TestOrigin::start();
    origin.route("/a", Reply::ok("hello").cc("max-age=60"));
    let proxy = reverse_with_modules(
        &origin.base(),
        &section(&wasm, "configuration = \"from-config\""),
    );
    let client = direct_client();
    for round in 0..3 {
        let r = get(&client, &proxy.reverse_url("/a?q=1"), &[]).await;
        assert_eq!(r.status, 200, "round {round}");
        assert_eq!(r.text(), "hello");
        assert_eq!(r.header_all("x-wasm-out"), ["yes"], "round {round}");
        assert_eq!(r.header("x-path").as_deref(), Some("/a?q=1"));
        assert_eq!(r.header("x-config").as_deref(), Some("from-config"));
        assert_eq!(
            r.header("x-stub").as_deref(),
            Some("12"),
            "unknown imports answer Unimplemented"
        );
        if round > 0 {
            assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        }
    }
    let seen = origin.last("/a").unwrap();
    assert_eq!(seen.header_all("x-wasm-in"), ["yes"]);
    assert_eq!(origin.count("/a"), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn response_and_log_callbacks_read_the_request_headers() {
    let dir = temp_dir("wasm-late");
    let wasm = filters::write(&dir, "late", filters::LATE);
    let origin = TestOrigin::start();
    origin.route("/l", Reply::ok("late").cc("max-age=60"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    let client = direct_client();
    for round in 0..3 {
        let value = format!("r{round}");
        let r = get(&client, &proxy.reverse_url("/l"), &[("x-req", &value)]).await;
        assert_eq!(r.status, 200, "round {round}");
        assert_eq!(r.header("x-req-echo"), Some(value), "round {round}");
        assert_eq!(
            r.header("x-late-write").as_deref(),
            Some("ok"),
            "a late write answers Ok and the filter reads it back"
        );
        if round > 0 {
            assert!(is_hit(&r.cache_status()), "{}", r.cache_status());
        }
    }
    let seen = origin.last("/l").unwrap();
    assert_eq!(seen.header("x-req").as_deref(), Some("r0"));
    assert!(seen.header("x-late-write").is_none());
    assert_eq!(origin.count("/l"), 1);

    // proxy_on_done reads the request too, in the entry that ends the stream; a trap
    // there is named by its callback.
    let r = get(&client, &proxy.reverse_url("/l"), &[("x-trap-done", "1")]).await;
    assert_eq!(
        r.status, 200,
        "the end of the stream comes after the response"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while metric(&proxy, "weir_module_wasm_failures_total") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            proxy.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stderr = proxy.stderr_text();
    assert!(stderr.contains("failed in proxy_on_done"), "{stderr}");
    let after = get(&client, &proxy.reverse_url("/l"), &[("x-req", "again")]).await;
    assert_eq!(after.header("x-req-echo").as_deref(), Some("again"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn filters_that_cannot_read_heads_pass_the_request_line_on() {
    let dir = temp_dir("wasm-blind");
    let origin = TestOrigin::start();
    origin.route("/b", Reply::ok("blind").cc("max-age=60"));
    for add in [true, false] {
        let wasm = dir.join(format!("blind-{add}.wasm"));
        std::fs::write(&wasm, wat::parse_str(filters::blind(add)).unwrap()).unwrap();
        let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
        let client = direct_client();
        for round in 0..2 {
            let url = proxy.reverse_url(&format!("/b?add={add}"));
            let r = get(&client, &url, &[]).await;
            assert_eq!(r.status, 200, "{add} {round}");
            assert_eq!(r.text(), "blind", "{add} {round}");
            let out = r.header("x-wasm-out");
            assert_eq!(out.as_deref(), add.then_some("1"), "{add} {round}");
        }
        let seen = origin.last("/b").unwrap();
        assert_eq!(
            (seen.method.as_str(), seen.uri.as_str()),
            ("GET", &*format!("/b?add={add}"))
        );
        assert_eq!(seen.header("x-wasm-in").as_deref(), add.then_some("1"));
    }
    assert_eq!(origin.count("/b"), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_filter_answers_with_a_local_response() {
    let dir = temp_dir("wasm-deny");
    let wasm = filters::write(&dir, "deny", filters::DENY);
    let origin = TestOrigin::start();
    origin.route("/p", Reply::ok("page"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    let client = direct_client();
    let denied = get(&client, &proxy.reverse_url("/p"), &[("x-deny", "1")]).await;
    assert_eq!(denied.status, 403);
    assert_eq!(denied.text(), "denied by wasm");
    assert_eq!(denied.header("x-why").as_deref(), Some("wasm"));
    assert_eq!(origin.count("/p"), 0);
    let allowed = get(&client, &proxy.reverse_url("/p"), &[]).await;
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.text(), "page");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_filter_rewrites_the_origin_body_before_it_is_stored() {
    let dir = temp_dir("wasm-body");
    let wasm = filters::write(&dir, "shout", filters::SHOUT);
    let origin = TestOrigin::start();
    origin.route("/t", Reply::ok("quiet words").cc("max-age=60"));
    let proxy = reverse_with_modules(
        &origin.base(),
        &section(&wasm, "response = \"origin\"\nresponse_body = true"),
    );
    let client = direct_client();
    for _ in 0..2 {
        let r = get(&client, &proxy.reverse_url("/t"), &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "QUIET WORDS!");
    }
    assert_eq!(origin.count("/t"), 1, "the changed body was stored");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_filter_rewrites_the_request_body() {
    let dir = temp_dir("wasm-request-body");
    let wasm = filters::write(&dir, "shout", &filters::shout_request());
    let origin = TestOrigin::start();
    origin.route("/post", Reply::echo());
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, "request_body = true"));
    let client = direct_client();
    let r = send(
        &client,
        "POST",
        &proxy.reverse_url("/post"),
        &[],
        Some(b"some words".to_vec()),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "SOME WORDS!", "the origin got the filtered body");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_trap_an_overrun_or_a_memory_limit_fails_only_that_transaction() {
    let dir = temp_dir("wasm-misbehave");
    let wasm = filters::write(&dir, "misbehave", filters::MISBEHAVE);
    let origin = TestOrigin::start();
    origin.route("/m", Reply::ok("fine"));
    let proxy = reverse_with_modules(
        &origin.base(),
        &section(&wasm, "memory_limit_mib = 1\ndeadline_ms = 50"),
    );
    let client = direct_client();
    for (header, timeout) in [("x-trap", 0), ("x-spin", 1), ("x-grow", 0)] {
        let before = metric(&proxy, "weir_module_wasm_timeouts_total");
        let started = std::time::Instant::now();
        let r = get(&client, &proxy.reverse_url("/m"), &[(header, "1")]).await;
        assert_eq!(r.status, 500, "{header}");
        assert!(started.elapsed() < Duration::from_secs(5), "{header}");
        assert_eq!(
            metric(&proxy, "weir_module_wasm_timeouts_total"),
            before + timeout,
            "{header}"
        );
        // A trap or an overrun in the entry that also creates the context is named by
        // the callback it was in; the deadline covers that entry.
        let named = match header {
            "x-spin" => "failed in proxy_on_request_headers: the callback ran past its deadline",
            _ => "failed in proxy_on_request_headers",
        };
        let stderr = proxy.stderr_text();
        assert!(stderr.contains(named), "{header}: {stderr}");
        // The next transaction gets a fresh instance.
        let ok = get(&client, &proxy.reverse_url("/m"), &[]).await;
        assert_eq!(ok.status, 200, "after {header}");
        assert_eq!(ok.header("x-wasm-out").as_deref(), Some("ok"));
    }
    assert_eq!(metric(&proxy, "weir_module_wasm_failures_total"), 3);
    let failures = proxy.metrics();
    assert!(
        failures.contains("weir_module_failures_total{module=\"wasm\"} 3"),
        "{failures}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_optional_filter_that_fails_is_passed_by() {
    let dir = temp_dir("wasm-optional");
    let wasm = filters::write(&dir, "misbehave", filters::MISBEHAVE);
    let origin = TestOrigin::start();
    origin.route("/m", Reply::ok("fine"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, "optional = true"));
    let client = direct_client();
    let r = get(&client, &proxy.reverse_url("/m"), &[("x-trap", "1")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "fine");
    assert_eq!(metric(&proxy, "weir_module_wasm_failures_total"), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_filter_steers_the_cache() {
    let dir = temp_dir("wasm-cache");
    let wasm = filters::write(&dir, "cache", filters::CACHE);
    let origin = TestOrigin::start();
    // Not storable by its own headers: the filter's TTL makes it so.
    origin.route("/c", Reply::ok("cached").cc("max-age=0"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    let client = direct_client();
    let url = proxy.reverse_url("/c");
    let lookup = |r: &Fetched| r.header("x-lookup").unwrap_or_default();

    assert_eq!(lookup(&get(&client, &url, &[]).await), "miss");
    assert_eq!(lookup(&get(&client, &url, &[]).await), "fresh");
    assert_eq!(origin.count("/c"), 1);
    // A variant is an object of its own.
    assert_eq!(
        lookup(&get(&client, &url, &[("x-variant", "b")]).await),
        "miss"
    );
    assert_eq!(
        lookup(&get(&client, &url, &[("x-variant", "b")]).await),
        "fresh"
    );
    assert_eq!(origin.count("/c"), 2);
    // Skipping.
    assert_eq!(
        lookup(&get(&client, &url, &[("x-skip", "1")]).await),
        "bypass"
    );
    assert_eq!(origin.count("/c"), 3);
    // Invalidation by tag: both stored objects carry it.
    let purged = get(&client, &url, &[("x-purge", "wasm-tag")]).await;
    assert_eq!(purged.status, 200);
    assert_eq!(purged.text(), "2");
    assert_eq!(lookup(&get(&client, &url, &[]).await), "miss");
    assert_eq!(origin.count("/c"), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn ticks_shared_data_metrics_and_properties() {
    let dir = temp_dir("wasm-ticks");
    let wasm = filters::write(&dir, "ticks", filters::TICKS);
    let origin = TestOrigin::start();
    origin.route("/t", Reply::ok("t"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    let client = direct_client();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let r = loop {
        let r = get(&client, &proxy.reverse_url("/t"), &[]).await;
        if r.header("x-ticked").is_some() || std::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        r.header("x-ticked").as_deref(),
        Some("yes"),
        "a tick set shared data"
    );
    assert_eq!(r.header("x-method").as_deref(), Some("GET"));
    let source = r.header("x-source").unwrap_or_default();
    assert!(source.starts_with("127.0.0.1:"), "{source}");
    assert!(metric(&proxy, "weir_module_wasm_ticks_total") > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_reload_swaps_the_filter_without_dropping_a_transaction_in_flight() {
    let dir = temp_dir("wasm-reload");
    let wasm = filters::write(&dir, "version", &filters::version("one"));
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::ok("slow").delay(Duration::from_millis(1500)),
    );
    origin.route("/fast", Reply::ok("fast"));
    let proxy = reverse_with_modules(&origin.base(), &section(&wasm, ""));
    let client = direct_client();
    let fast = get(&client, &proxy.reverse_url("/fast"), &[]).await;
    assert_eq!(fast.header("x-version").as_deref(), Some("one"));

    let slow_url = proxy.reverse_url("/slow");
    let slow_client = client.clone();
    let in_flight = tokio::spawn(async move { get(&slow_client, &slow_url, &[]).await });
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.count("/slow") == 1)
            .await
    );
    filters::write(&dir, "version", &filters::version("two"));
    let reloads = |p: &Proxy| p.stderr_text().matches("reloaded modules on").count();
    let before = reloads(&proxy);
    proxy.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while reloads(&proxy) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            proxy.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fast = get(&client, &proxy.reverse_url("/fast"), &[]).await;
    assert_eq!(fast.header("x-version").as_deref(), Some("two"));

    let slow = in_flight.await.unwrap();
    assert_eq!(slow.status, 200);
    assert_eq!(slow.text(), "slow");
    assert_eq!(
        slow.header("x-version").as_deref(),
        Some("one"),
        "finished by the filter it started with"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_names_a_missing_or_invalid_filter() {
    let message = check_module_error(
        "[[module]]\nname = \"wasm\"\npath = \"/nonexistent/filter.wasm\"\n",
        7,
        "module[0].path",
    );
    assert!(
        message.contains("cannot read `/nonexistent/filter.wasm`"),
        "{message}"
    );

    let dir = temp_dir("wasm-check");
    let junk = dir.join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let message = check_module_error(&section(&junk, ""), 7, "module[0].path");
    assert!(message.contains("not a WebAssembly module"), "{message}");

    let plain = dir.join("plain.wasm");
    std::fs::write(&plain, wat::parse_str("(module)").unwrap()).unwrap();
    let message = check_module_error(&section(&plain, ""), 7, "module[0].path");
    assert!(message.contains("not a proxy-wasm filter"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}
