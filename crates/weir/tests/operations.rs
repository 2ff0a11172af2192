//! Running the proxy: graceful shutdown on SIGTERM/SIGINT, the access log, metrics.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

/// Whether a new client can still get a response from `addr` (within ~1 s).
fn serves_new_connections(addr: std::net::SocketAddr, origin: &TestOrigin) -> bool {
    let Ok(mut conn) = RawConn::try_connect(addr) else {
        return false;
    };
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.url("/late"),
        origin.addr()
    );
    if conn.try_send(req.as_bytes()).is_err() || !conn.has_data_within(Duration::from_secs(1)) {
        return false;
    }
    conn.read_final(false).is_ok_and(|r| r.status == 200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_requests_then_exits_zero() {
    let origin = TestOrigin::start();
    origin.route(
        "/slow",
        Reply::ok("finished").delay(Duration::from_millis(2000)),
    );
    origin.route("/late", Reply::ok("late").cc("no-store"));
    let mut proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/slow");
    let in_flight = tokio::spawn(async move { try_send(&client, "GET", &url, &[], None).await });
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.count("/slow") == 1)
            .await,
        "the slow request did not reach the origin"
    );
    let signalled = Instant::now();
    proxy.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let addr = proxy.forward_addr();
    let (still_serving, origin) = tokio::task::spawn_blocking(move || {
        let serving = serves_new_connections(addr, &origin);
        (serving, origin)
    })
    .await
    .unwrap();
    assert!(
        !still_serving,
        "new requests were still served after SIGTERM"
    );

    let r = in_flight
        .await
        .unwrap()
        .expect("the in-flight request must complete");
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "finished"));
    let status = proxy
        .exited(Duration::from_secs(8))
        .await
        .expect("weir did not exit after SIGTERM");
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(6),
        "exit took {:?}: it should follow the last transaction, not the whole grace period",
        signalled.elapsed()
    );
    assert_eq!(origin.count("/slow"), 1);
    assert_eq!(origin.count("/late"), 0);
}

#[test]
fn sigint_stops_the_proxy_with_exit_zero() {
    let mut proxy = Proxy::forward();
    proxy.signal("INT");
    let status = proxy
        .wait_exit(Duration::from_secs(5))
        .expect("weir did not exit after SIGINT");
    assert_eq!(status.code(), Some(0), "exit status after SIGINT: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_grace_bounds_the_wait_for_in_flight_requests() {
    let origin = TestOrigin::start();
    origin.route(
        "/endless",
        Reply::ok("never in time").delay(Duration::from_secs(20)),
    );
    let mut proxy = Proxy::builder()
        .forward()
        .option("timeouts", "shutdown_grace", "1s")
        .start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/endless");
    let in_flight = tokio::spawn(async move { try_send(&client, "GET", &url, &[], None).await });
    assert!(
        origin
            .eventually(Duration::from_secs(5), |o| o.count("/endless") == 1)
            .await
    );
    let signalled = Instant::now();
    proxy.terminate();
    let status = proxy
        .exited(Duration::from_secs(6))
        .await
        .expect("weir did not exit within the grace period (1 s) plus slack");
    let took = signalled.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "exit took {took:?} with shutdown_grace = 1s"
    );
    assert!(
        took >= Duration::from_millis(900),
        "exit after {took:?}: it did not wait for the grace period"
    );
    assert_eq!(status.code(), Some(0), "exit status: {status}");
    // The abandoned client gets an error or an error status, not the origin's answer.
    if let Ok(Ok(Ok(r))) = tokio::time::timeout(Duration::from_secs(5), in_flight).await {
        assert_ne!(r.text(), "never in time");
    }
    assert_eq!(origin.count("/endless"), 1);
}

/// Makes a miss then a hit through a proxy logging to a file, stops it (flushing the
/// log), and returns the log's lines and the URL requested.
async fn logged_transactions(format: &'static str) -> (Vec<String>, String, TestOrigin) {
    let origin = TestOrigin::start();
    origin.route(
        "/logged",
        Reply::ok("hello access log")
            .cc("max-age=60")
            .header("content-type", "text/plain"),
    );
    let mut proxy = Proxy::builder().forward().access_log(format).start();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/logged");
    let headers = [
        ("user-agent", "weir-test-agent/1.0"),
        ("referer", "http://referer.example/page"),
    ];
    assert_eq!(get(&client, &url, &headers).await.status, 200);
    assert_eq!(get(&client, &url, &headers).await.status, 200);
    drop(client);
    proxy.terminate();
    proxy
        .exited(Duration::from_secs(10))
        .await
        .expect("weir did not exit");
    let text = std::fs::read_to_string(proxy.access_log_path()).unwrap_or_else(|e| {
        panic!(
            "no access log at {}: {e}",
            proxy.access_log_path().display()
        )
    });
    let lines: Vec<String> = text
        .lines()
        .filter(|l| l.contains(&url))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 2, "two lines for {url} in:\n{text}");
    (lines, url, origin)
}

#[tokio::test]
async fn access_log_in_squid_format() {
    let (lines, url, origin) = logged_transactions("squid").await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for (i, line) in lines.iter().enumerate() {
        // time.ms elapsed client action/code size method URL ident hierarchy/from type
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() >= 10, "squid line has {} fields: {line}", f.len());
        let (secs, millis) = f[0]
            .split_once('.')
            .unwrap_or_else(|| panic!("time: {line}"));
        assert_eq!(millis.len(), 3, "time has milliseconds: {line}");
        let t: f64 = f[0].parse().unwrap();
        assert!(
            secs.parse::<u64>().is_ok() && (now - t).abs() < 120.0,
            "time: {line}"
        );
        assert!(f[1].parse::<u64>().is_ok(), "elapsed ms: {line}");
        assert_eq!(f[2], "127.0.0.1", "client: {line}");
        let (action, code) = f[3]
            .split_once('/')
            .unwrap_or_else(|| panic!("action/code: {line}"));
        assert_eq!(code, "200", "{line}");
        assert!(action.starts_with("TCP_"), "{line}");
        if i == 0 {
            assert_eq!(action, "TCP_MISS", "first request: {line}");
        } else {
            assert!(action.contains("HIT"), "second request: {line}");
        }
        let size: u64 = f[4].parse().unwrap_or_else(|_| panic!("size: {line}"));
        assert!(size >= "hello access log".len() as u64, "size: {line}");
        assert_eq!(f[5], "GET", "{line}");
        assert_eq!(f[6], url, "{line}");
        assert_eq!(f[7], "-", "ident: {line}");
        assert!(f[8].contains('/'), "hierarchy/from: {line}");
        assert_eq!(f[9], "text/plain", "content type: {line}");
    }
    assert!(
        lines[0].contains("HIER_DIRECT/"),
        "a miss went direct: {}",
        lines[0]
    );
    assert_eq!(origin.count("/logged"), 1);
}

#[tokio::test]
async fn access_log_in_combined_format() {
    let (lines, url, origin) = logged_transactions("combined").await;
    for line in &lines {
        // 127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET URL HTTP/1.1" 200 16 "referer" "agent"
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        let (date, rest) = line["127.0.0.1 - - [".len()..]
            .split_once("] ")
            .unwrap_or_else(|| panic!("date: {line}"));
        assert_eq!(
            date.len(),
            "10/Oct/2000:13:55:36 -0700".len(),
            "date {date:?}: {line}"
        );
        assert_eq!(&date[2..3], "/", "{line}");
        assert_eq!(
            rest,
            format!(
                "\"GET {url} HTTP/1.1\" 200 16 \"http://referer.example/page\" \"weir-test-agent/1.0\""
            ),
            "{line}"
        );
    }
    assert_eq!(origin.count("/logged"), 1);
}

#[tokio::test]
async fn access_log_to_stdout() {
    let origin = TestOrigin::start();
    origin.route("/out", Reply::ok("to stdout"));
    let mut proxy = Proxy::builder()
        .forward()
        .option("log", "access", "stdout")
        .option("log", "format", "combined")
        .start();
    let client = proxied_client(proxy.forward_addr());
    get(&client, &origin.url("/out"), &[]).await;
    proxy.terminate();
    proxy
        .exited(Duration::from_secs(10))
        .await
        .expect("weir did not exit");
    let out = proxy.stdout_text();
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("\"GET {} HTTP/1.1\" 200 9", origin.url("/out")))),
        "stdout:\n{out}"
    );
    assert_eq!(origin.count("/out"), 1);
}

#[tokio::test]
async fn metrics_expose_the_documented_names_and_move() {
    let origin = TestOrigin::start();
    origin.route("/m", Reply::ok("metered").cc("max-age=60"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let before = proxy.metrics();
    let count = |text: &str, cache: &str| {
        metric(
            text,
            "weir_requests_total",
            &[("mode", "forward"), ("cache", cache)],
        )
        .unwrap_or(0.0)
    };

    origin.route("/m-uncached", Reply::ok("metered again").cc("no-store"));
    get(&client, &origin.url("/m"), &[]).await;
    get(&client, &origin.url("/m"), &[]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    get(&client, &origin.url("/m-uncached"), &[]).await;
    let dead = format!("http://127.0.0.1:{}/x", free_port());
    assert_eq!(get(&client, &dead, &[]).await.status, 502);
    // A transaction is counted once its last byte is written, which may be just after
    // the client has read it: wait (bounded) until all four are.
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        let m = proxy.metrics();
        let done = metric(&m, "weir_request_duration_seconds_count", &[]).unwrap_or(0.0);
        if done >= 4.0 || Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    for name in [
        "weir_requests_total",
        "weir_request_duration_seconds",
        "weir_bytes_in_total",
        "weir_bytes_out_total",
        "weir_errors_total",
        "weir_origin_connections_open",
        "weir_origin_connections_opened_total",
        "weir_origin_connections_reused_total",
        "weir_cache_bytes",
        "weir_cache_objects",
    ] {
        assert!(
            after
                .lines()
                .any(|l| !l.starts_with('#') && l.starts_with(name)),
            "/metrics has no sample for {name}:\n{after}"
        );
    }
    assert_eq!(
        count(&after, "miss") - count(&before, "miss"),
        2.0,
        "misses"
    );
    assert_eq!(count(&after, "hit") - count(&before, "hit"), 1.0, "hits");
    let out = metric(&after, "weir_bytes_out_total", &[]).unwrap_or(0.0)
        - metric(&before, "weir_bytes_out_total", &[]).unwrap_or(0.0);
    assert!(
        out >= 2.0 * "metered".len() as f64,
        "bytes out moved by {out}"
    );
    let errors = metric(
        &after,
        "weir_errors_total",
        &[("kind", "origin_unreachable")],
    )
    .unwrap_or(0.0);
    assert_eq!(
        errors, 1.0,
        "weir_errors_total{{kind=\"origin_unreachable\"}}"
    );
    let durations = metric(&after, "weir_request_duration_seconds_count", &[]).unwrap_or(0.0);
    assert!(
        durations >= 4.0,
        "weir_request_duration_seconds_count = {durations}"
    );
    assert!(metric(&after, "weir_origin_connections_opened_total", &[]).unwrap_or(0.0) >= 1.0);
    assert!(
        metric(&after, "weir_origin_connections_reused_total", &[]).unwrap_or(0.0) >= 1.0,
        "two sequential fetches from one origin reuse its connection"
    );
    assert!(metric(&after, "weir_cache_objects", &[]).unwrap_or(0.0) >= 1.0);
    assert!(metric(&after, "weir_cache_bytes", &[]).unwrap_or(0.0) >= "metered".len() as f64);
    let resp = proxy.metrics_response();
    let ct = resp.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain") || ct.starts_with("application/openmetrics-text"),
        "Content-Type {ct:?}"
    );
    assert_eq!(origin.count("/m"), 1);
}

#[tokio::test]
async fn complete_responses_are_not_counted_as_client_aborted() {
    let origin = TestOrigin::start();
    origin.route("/ca/*", Reply::ok("cacheable body").cc("max-age=60"));
    origin.route("/ns/*", Reply::ok("uncached body").cc("no-store"));
    origin.route("/post", Reply::ok("posted"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let requests = |text: &str| metric(text, "weir_requests_total", &[]).unwrap_or(0.0);
    let aborted = |text: &str| {
        metric(text, "weir_errors_total", &[("kind", "client_aborted")]).unwrap_or(0.0)
    };
    let before = proxy.metrics();

    // 10 requests read to the end: 3 stored misses, 4 hits, 2 uncached misses, 1 POST.
    for i in 0..3 {
        let r = get(&client, &origin.url(&format!("/ca/{i}")), &[]).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "cacheable body")
        );
        assert_eq!(r.header("content-length").as_deref(), Some("14"));
    }
    for i in [0, 1, 2, 0] {
        let r = get(&client, &origin.url(&format!("/ca/{i}")), &[]).await;
        assert_eq!(r.text(), "cacheable body");
        assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    }
    for i in 0..2 {
        let r = get(&client, &origin.url(&format!("/ns/{i}")), &[]).await;
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "uncached body")
        );
    }
    let r = send(
        &client,
        "POST",
        &origin.url("/post"),
        &[],
        Some(b"payload".to_vec()),
    )
    .await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "posted"));
    assert_eq!(origin.total(), 6, "3 + 2 misses and the POST");

    // A transaction is recorded when its response body is dropped: wait for all 10.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = proxy.metrics();
    while requests(&after) - requests(&before) < 10.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        after = proxy.metrics();
    }
    assert_eq!(
        requests(&after) - requests(&before),
        10.0,
        "weir_requests_total moved by {}",
        requests(&after) - requests(&before)
    );
    assert_eq!(
        aborted(&after),
        0.0,
        "weir_errors_total{{kind=\"client_aborted\"}} after 10 complete requests:\n{}",
        after
            .lines()
            .filter(|l| l.starts_with("weir_errors_total"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
