//! The disk tier (restart, crash, unwritable directory) and serving stale copies
//! (RFC 5861), against the real binary, real origins and a real directory.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

const SOON: Duration = Duration::from_secs(10);

/// `[cache] disk` naming `dir`.
fn disk(dir: &std::path::Path) -> String {
    format!(
        "{{ path = {:?}, size = \"256MiB\" }}",
        dir.display().to_string()
    )
}

fn forward_with_disk(dir: &std::path::Path, options: &[(&str, &str)]) -> Proxy {
    let mut b = Proxy::builder()
        .forward()
        .option("cache", "disk", &disk(dir));
    for (k, v) in options {
        b = b.option("cache", k, v);
    }
    b.start()
}

fn metric_value(proxy: &Proxy, name: &str) -> f64 {
    metric(&proxy.metrics(), name, &[]).unwrap_or_else(|| panic!("no metric {name}"))
}

/// A body that names its path, so a body served for the wrong key is noticed too.
fn body_for(path: &str, len: usize) -> Vec<u8> {
    path.bytes()
        .chain(b"|".iter().copied())
        .cycle()
        .take(len)
        .collect()
}

#[tokio::test]
async fn a_restart_keeps_the_cache_and_large_bodies_stream_from_disk() {
    let origin = TestOrigin::start();
    origin.route("/small", Reply::ok("small body").cc("max-age=600"));
    origin.route("/large", Reply::stream(3 << 20).cc("max-age=600"));
    let dir = temp_dir("disk-restart");
    let options = [("max_memory_object", "64KiB")];

    let mut first = forward_with_disk(&dir, &options);
    let client = proxied_client(first.forward_addr());
    for path in ["/small", "/large"] {
        let r = get(&client, &origin.url(path), &[]).await;
        assert_eq!(r.status, 200);
        assert!(
            cs_has(&r.cache_status(), "stored", None),
            "{path}: {:?}",
            r.cache_status()
        );
    }
    // The large object lives on disk only, and is served from there while running.
    assert!(wait_until(SOON, || metric_value(
        &first,
        "weir_cache_disk_entries"
    ) >= 2.0));
    let r = get(&client, &origin.url("/large"), &[]).await;
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    assert!(r.body == pattern(3 << 20), "large body differs");
    first.terminate();
    assert!(first
        .exited(Duration::from_secs(15))
        .await
        .is_some_and(|s| s.success()));

    let second = Proxy::builder()
        .forward()
        .option("cache", "disk", &disk(&dir))
        .option("cache", "max_memory_object", "64KiB")
        .option("admin", "token", "secret")
        .start();
    // The admin API reads what only the disk holds: metadata, then the streamed body.
    let admin = direct_client();
    let auth = [("authorization", "Bearer secret")];
    let large = origin.url("/large");
    let q = format!("http://{}/admin/cache?url={large}", second.admin_addr());
    let r = get(&admin, &q, &auth).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains(&format!("{}", 3 << 20)), "{}", r.text());
    let r = get(
        &admin,
        &format!(
            "http://{}/admin/cache/body?url={large}",
            second.admin_addr()
        ),
        &auth,
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(3 << 20), "admin body differs");

    let client = proxied_client(second.forward_addr());
    let r = get(&client, &origin.url("/small"), &[]).await;
    assert_eq!(r.text(), "small body");
    assert!(
        is_hit(&r.cache_status()),
        "after restart: {:?}",
        r.cache_status()
    );
    let r = get(&client, &origin.url("/large"), &[]).await;
    assert!(
        is_hit(&r.cache_status()),
        "after restart: {:?}",
        r.cache_status()
    );
    assert!(
        r.body == pattern(3 << 20),
        "large body differs after restart"
    );
    assert_eq!((origin.count("/small"), origin.count("/large")), (1, 1));
    // Counted as disk hits (the small one was promoted to memory by its first read).
    let disk_hits = metric(
        &second.metrics(),
        "weir_requests_total",
        &[("cache", "disk_hit")],
    );
    assert!(disk_hits.is_some_and(|n| n >= 2.0), "{disk_hits:?}");
    assert!(metric_value(&second, "weir_cache_disk_entries") >= 2.0);
    // The index's memory is counted, and charged to the memory tier.
    assert!(metric_value(&second, "weir_cache_disk_index_bytes") >= 2.0 * 192.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn cache_groups_survive_a_restart_with_their_objects() {
    let origin = TestOrigin::start();
    let grouped = |group: &str| {
        Reply::ok(format!("in {group}"))
            .cc("max-age=600")
            .header("cache-groups", format!("\"{group}\""))
    };
    origin.route("/g", grouped("g"));
    origin.route("/h", grouped("h"));
    origin.route(
        "/form",
        Reply::ok("done").header("cache-group-invalidation", "\"g\""),
    );
    let dir = temp_dir("disk-groups");
    let mut first = forward_with_disk(&dir, &[]);
    let client = proxied_client(first.forward_addr());
    for path in ["/g", "/h"] {
        get(&client, &origin.url(path), &[]).await;
    }
    assert!(wait_until(SOON, || metric_value(
        &first,
        "weir_cache_disk_entries"
    ) >= 2.0));
    first.terminate();
    assert!(first.exited(Duration::from_secs(15)).await.is_some());

    let second = forward_with_disk(&dir, &[]);
    assert!(wait_until(SOON, || metric_value(
        &second,
        "weir_cache_disk_entries"
    ) >= 2.0));
    let client = proxied_client(second.forward_addr());
    let r = send(
        &client,
        "POST",
        &origin.url("/form"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(r.status, 200);
    let r = get(&client, &origin.url("/g"), &[]).await;
    assert!(
        !is_hit(&r.cache_status()),
        "its group was read back from disk: {:?}",
        r.cache_status()
    );
    let r = get(&client, &origin.url("/h"), &[]).await;
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    assert_eq!((origin.count("/g"), origin.count("/h")), (2, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_heavy_writes_never_serves_a_damaged_body() {
    const OBJECTS: usize = 400;
    let origin = TestOrigin::start();
    origin.route_fn("/obj/*", |r| {
        let n: usize = r
            .path
            .rsplit('/')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Reply::ok(body_for(&r.path, 1000 + n * 997 % 300_000)).cc("max-age=600")
    });
    let dir = temp_dir("disk-kill");
    let first = forward_with_disk(&dir, &[]);
    let client = proxied_client(first.forward_addr());
    let fetched = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let (client, fetched) = (client.clone(), fetched.clone());
        let base = origin.url("/obj/");
        tasks.push(tokio::spawn(async move {
            for i in (worker..OBJECTS).step_by(8) {
                if try_send(&client, "GET", &format!("{base}{i}"), &[], None)
                    .await
                    .is_err()
                {
                    return;
                }
                fetched.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // Kill in the middle of the writes.
    assert!(wait_until(Duration::from_secs(30), || fetched
        .load(Ordering::SeqCst)
        >= OBJECTS / 2));
    send_signal(first.pid(), "KILL");
    for t in tasks {
        let _ = t.await;
    }
    drop(first);

    let second = forward_with_disk(&dir, &[]);
    let client = proxied_client(second.forward_addr());
    let mut hits = 0;
    for i in 0..OBJECTS {
        let path = format!("/obj/{i}");
        let r = get(&client, &origin.url(&path), &[]).await;
        assert_eq!(r.status, 200, "{path}");
        let want = body_for(&path, 1000 + i * 997 % 300_000);
        assert!(
            r.body == want,
            "{path}: body differs ({} bytes, {:?})",
            r.body.len(),
            r.cache_status()
        );
        hits += usize::from(is_hit(&r.cache_status()));
    }
    assert!(hits > 0, "nothing written before the kill survived");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn damaged_entries_are_dropped_counted_and_refetched() {
    let origin = TestOrigin::start();
    origin.route_fn("/d/*", |r| {
        Reply::ok(body_for(&r.path, 20_000)).cc("max-age=600")
    });
    let dir = temp_dir("disk-damage");
    let mut first = forward_with_disk(&dir, &[]);
    let client = proxied_client(first.forward_addr());
    for p in ["/d/cut", "/d/flipped"] {
        get(&client, &origin.url(p), &[]).await;
    }
    first.terminate();
    assert!(first.exited(Duration::from_secs(15)).await.is_some());
    for sub in std::fs::read_dir(&dir).unwrap().flatten() {
        if sub.file_name() == "tmp" {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            let mut data = std::fs::read(f.path()).unwrap();
            if String::from_utf8_lossy(&data).contains("/d/cut") {
                data.truncate(data.len() - 5000);
            } else {
                let n = data.len();
                data[n - 10_000] ^= 0x20;
            }
            std::fs::write(f.path(), &data).unwrap();
        }
    }
    let second = forward_with_disk(&dir, &[]);
    let client = proxied_client(second.forward_addr());
    for p in ["/d/cut", "/d/flipped"] {
        let r = get(&client, &origin.url(p), &[]).await;
        assert!(r.body == body_for(p, 20_000), "{p}: damaged body served");
        assert!(!is_hit(&r.cache_status()), "{p}: {:?}", r.cache_status());
    }
    assert_eq!(metric_value(&second, "weir_cache_disk_damaged_total"), 2.0);
    assert_eq!((origin.count("/d/cut"), origin.count("/d/flipped")), (2, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_unwritable_disk_keeps_serving_and_storing_resumes() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("body").cc("max-age=600"));
    let dir = temp_dir("disk-unwritable");
    let proxy = forward_with_disk(&dir, &[]);
    let client = proxied_client(proxy.forward_addr());
    // The directory is replaced by a file: every write fails (even as root).
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "not a directory").unwrap();
    for (i, p) in ["/a", "/b"].into_iter().enumerate() {
        let r = get(&client, &origin.url(p), &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "body"), "{p}");
        let counted = wait_until(SOON, || {
            metric_value(&proxy, "weir_cache_disk_write_errors_total") >= (i + 1) as f64
        });
        assert!(
            counted,
            "write error {} not counted:\n{}",
            i + 1,
            proxy.metrics()
        );
    }
    // Still served, from memory.
    let r = get(&client, &origin.url("/a"), &[]).await;
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    assert_eq!(
        proxy.stderr_text().matches("cannot write").count(),
        1,
        "logged once"
    );

    std::fs::remove_file(&dir).unwrap();
    get(&client, &origin.url("/c"), &[]).await;
    assert!(
        wait_until(SOON, || metric_value(
            &proxy,
            "weir_cache_disk_writes_total"
        ) >= 1.0),
        "storing did not resume"
    );
    assert!(proxy.stderr_text().contains("writes succeed again"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An origin route whose body counts the requests it answered: `v1`, `v2`, ...
fn counting(origin: &TestOrigin, path: &str, cc: &'static str) {
    let n = Arc::new(AtomicUsize::new(0));
    origin.route_fn(path, move |_| {
        let v = n.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(format!("v{v}")).cc(cc)
    });
}

#[tokio::test]
async fn stale_while_revalidate_answers_at_once_and_refreshes_once() {
    let origin = TestOrigin::start();
    counting(&origin, "/swr", "max-age=1, stale-while-revalidate=30");
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    let url = origin.url("/swr");
    assert_eq!(get(&client, &url, &[]).await.text(), "v1");
    tokio::time::sleep(Duration::from_millis(1300)).await;

    // The origin is slow now: stale answers must not wait for it.
    origin.route_fn("/swr", {
        let n = Arc::new(AtomicUsize::new(1));
        move |_| {
            let v = n.fetch_add(1, Ordering::SeqCst) + 1;
            Reply::ok(format!("v{v}"))
                .cc("max-age=60, stale-while-revalidate=30")
                .delay(Duration::from_millis(500))
        }
    });
    let started = std::time::Instant::now();
    let answers = futures_util::future::join_all((0..5).map(|_| get(&client, &url, &[]))).await;
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );
    for r in &answers {
        assert_eq!(r.text(), "v1");
        let cs = r.cache_status();
        assert!(
            is_hit(&cs) && cs_has(&cs, "detail", Some("stale-while-revalidate")),
            "{cs:?}"
        );
    }
    assert!(origin.eventually(SOON, |o| o.count("/swr") == 2).await);
    // The refreshed copy replaces the stale one once the background fetch is done.
    let deadline = std::time::Instant::now() + SOON;
    let r = loop {
        let r = get(&client, &url, &[]).await;
        if r.text() == "v2" || std::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(r.text(), "v2");
    assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
    // One refresh, however many clients asked.
    assert_eq!(origin.count("/swr"), 2);
}

#[tokio::test]
async fn stale_if_error_serves_the_stale_copy_when_the_origin_fails() {
    let origin = TestOrigin::start();
    origin.route("/sie", Reply::ok("good").cc("max-age=1, stale-if-error=60"));
    origin.route("/plain", Reply::ok("good").cc("max-age=1"));
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    for p in ["/sie", "/plain"] {
        get(&client, &origin.url(p), &[]).await;
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    origin.route("/sie", Reply::status(503).body("down"));
    origin.route("/plain", Reply::status(503).body("down"));

    let r = get(&client, &origin.url("/sie"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "good"));
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "detail", Some("stale-if-error")) && cs_has(&cs, "fwd-status", Some("503")),
        "{cs:?}"
    );
    // Without the directive (and with the default setting of 0), the error passes.
    let r = get(&client, &origin.url("/plain"), &[]).await;
    assert_eq!(r.status, 503);

    // An unreachable origin counts as an error too.
    let sie = origin.url("/sie");
    drop(origin);
    let r = get(&client, &sie, &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "good"));
    assert!(cs_has(&r.cache_status(), "detail", Some("stale-if-error")));
}

#[tokio::test]
async fn stale_if_error_can_be_set_for_responses_that_do_not_say() {
    let origin = TestOrigin::start();
    origin.route("/plain", Reply::ok("good").cc("max-age=1"));
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "stale_if_error", "1m")
        .start();
    let client = proxied_client(proxy.forward_addr());
    get(&client, &origin.url("/plain"), &[]).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    origin.route("/plain", Reply::status(500).body("down"));
    let r = get(&client, &origin.url("/plain"), &[]).await;
    assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "good"));
    // Counted when the transaction ends, which may be just after the client has read
    // the answer.
    let counted = || {
        metric(
            &proxy.metrics(),
            "weir_requests_total",
            &[("cache", "stale_on_error")],
        )
    };
    assert!(
        wait_until(SOON, || counted() == Some(1.0)),
        "{:?}",
        counted()
    );
}
