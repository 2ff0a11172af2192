//! Fills and memory: a response too large for the memory tier goes to disk as it
//! arrives, and what fills in flight hold at once is bounded by `[cache] fill_memory`.
//! Against the real binary, a real origin and a real directory.

mod common;

use std::time::Duration;

use common::*;

/// Checks that `chunk`, found at `offset` of a generated body, is the pattern there.
fn check_pattern(offset: u64, chunk: &[u8]) {
    for (i, b) in chunk.iter().enumerate() {
        let want = ((offset + i as u64) % 251) as u8;
        assert_eq!(*b, want, "byte {} of the body differs", offset + i as u64);
    }
}

/// Reads the whole body of `url` through `client`, checking it against the pattern;
/// returns its length and the response's `Cache-Status`.
async fn read_checked(client: &reqwest::Client, url: &str) -> (u64, String) {
    let mut resp = client.get(url).send().await.expect("request");
    assert_eq!(resp.status(), 200);
    let status = resp
        .headers()
        .get("cache-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut received = 0u64;
    while let Some(chunk) = resp.chunk().await.expect("body") {
        check_pattern(received, &chunk);
        received += chunk.len() as u64;
    }
    (received, status)
}

/// The paths in `dir`.
fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn inode(path: &std::path::Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).expect("stat"))
}

/// The smallest object for which the large-fill test still means something: far
/// more than the memory tier and the 64 MiB the process may hold beyond it.
const SMALLEST_LARGE_OBJECT: u64 = 256 << 20;

/// `wanted`, or a smaller power of two when the file system of `dir` has no room
/// for it (with room to spare: the disk tier's files are written as they come):
/// machines that run the tests are not always given gigabytes of free space.
fn size_for_free_space(dir: &std::path::Path, wanted: u64) -> u64 {
    let stat = nix::sys::statvfs::statvfs(dir).expect("statvfs of the temporary directory");
    let free = stat.blocks_available() as u64 * stat.fragment_size() as u64;
    let room = |len: u64| len + (512 << 20) <= free;
    let mut len = wanted;
    while !room(len) && len / 2 >= SMALLEST_LARGE_OBJECT {
        len /= 2;
    }
    assert!(
        room(len),
        "{} has {} MiB free: too little for a {} MiB fill to disk",
        dir.display(),
        free >> 20,
        len >> 20
    );
    if len != wanted {
        eprintln!(
            "{} has {} MiB free: filling {} MiB instead of {} MiB",
            dir.display(),
            free >> 20,
            len >> 20,
            wanted >> 20
        );
    }
    len
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_larger_than_memory_goes_to_disk_as_it_arrives() {
    let dir = temp_dir("fills-large");
    // 1 GiB by default; WEIR_TEST_LARGE_BYTES sets another size.
    let wanted: u64 = std::env::var("WEIR_TEST_LARGE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    let len = size_for_free_space(&dir, wanted);
    let origin = TestOrigin::start();
    origin.route("/large", Reply::stream(len).cc("max-age=600"));
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "memory", "\"16MiB\"")
        .option("cache", "max_object", "\"2GiB\"")
        .option(
            "cache",
            "disk",
            &format!(
                "{{ path = {:?}, size = \"3GiB\" }}",
                dir.display().to_string()
            ),
        )
        .start();
    let client = proxied_builder(proxy.forward_addr())
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let url = origin.url("/large");

    // A second client joins while the fill is under way: it reads the start back
    // from the fill's file, the rest as it arrives.
    let first = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { read_checked(&client, &url).await }
    });
    assert!(
        wait_until(Duration::from_secs(30), || {
            metric(&proxy.metrics(), "weir_cache_fill_bytes", &[]).is_some_and(|b| b > 0.0)
                || origin.count("/large") == 1
        }),
        "the fill did not start"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The file the fill goes to (past the memory tier's 16 MiB by now).
    let mut fill_file = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            fill_file = files_in(&dir.join("tmp")).first().map(|f| inode(f));
            fill_file.is_some()
        }),
        "the fill has no file in tmp/"
    );
    let (late_len, late_status) = read_checked(&client, &url).await;
    let (first_len, first_status) = first.await.unwrap();
    assert_eq!((first_len, late_len), (len, len));
    assert!(cs_has(&first_status, "stored", None), "{first_status}");
    assert!(!late_status.is_empty());
    assert_eq!(origin.count("/large"), 1, "the late client fetched again");

    let peak = proxy.peak_rss_kib();
    eprintln!(
        "{len} bytes filled to disk; proxy peak RSS {} MiB",
        peak / 1024
    );
    // The memory tier plus 64 MiB, and well under the object itself.
    assert!(
        peak < 16 * 1024 + 64 * 1024 && peak * 1024 < len / 2,
        "peak RSS {peak} KiB: the body was held in memory"
    );

    // Stored on disk, read back byte for byte.
    assert!(
        wait_until(Duration::from_secs(120), || {
            metric(&proxy.metrics(), "weir_cache_disk_entries", &[]) == Some(1.0)
        }),
        "the object never reached the disk tier"
    );
    // Written once: the fill's file became the entry, and nothing is left in tmp/.
    let entries: Vec<_> = files_in(&dir)
        .iter()
        .filter(|d| d.is_dir() && !d.ends_with("tmp"))
        .flat_map(|d| files_in(d))
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(Some(inode(&entries[0])), fill_file, "the body was copied");
    assert!(files_in(&dir.join("tmp")).is_empty());
    let (again, status) = read_checked(&client, &url).await;
    assert_eq!(again, len);
    assert!(is_hit(&status), "{status}");
    assert_eq!(origin.count("/large"), 1);
    assert_eq!(
        metric(&proxy.metrics(), "weir_cache_fill_bytes", &[]),
        Some(0.0),
        "a finished fill still holds memory"
    );
    // A gibibyte per run is not left behind in the temporary directory.
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_fills_at_once_stay_within_fill_memory() {
    const LEN: u64 = 6 << 20;
    const FILLS: usize = 6;
    let origin = TestOrigin::start();
    for i in 0..FILLS {
        // Slow enough that the fills overlap.
        origin.route(
            &format!("/big{i}"),
            Reply::stream(LEN)
                .cc("max-age=600")
                .chunk_delay(Duration::from_millis(8)),
        );
    }
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "disk", "\"off\"")
        .option("cache", "memory", "\"128MiB\"")
        .option("cache", "max_object", "\"8MiB\"")
        .option("cache", "fill_memory", "\"8MiB\"")
        .start();
    let client = proxied_builder(proxy.forward_addr())
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();

    let fills: Vec<_> = (0..FILLS)
        .map(|i| {
            let (client, url) = (client.clone(), origin.url(&format!("/big{i}")));
            tokio::spawn(async move { read_checked(&client, &url).await })
        })
        .collect();
    // Sampled while they run: never more than the bound.
    let mut most = 0.0f64;
    while !fills.iter().all(|f| f.is_finished()) {
        if let Some(held) = metric(&proxy.metrics(), "weir_cache_fill_bytes", &[]) {
            most = most.max(held);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut stored = 0;
    for f in fills {
        let (len, status) = f.await.unwrap();
        assert_eq!(len, LEN, "a client got a cut body");
        if cs_has(&status, "stored", None) {
            stored += 1;
        }
    }
    assert!(most > 0.0, "no fill was ever held");
    assert!(
        most <= (8 << 20) as f64,
        "fills held {most} bytes, over 8 MiB"
    );
    let passed = metric(&proxy.metrics(), "weir_cache_fills_passed_total", &[]).unwrap();
    eprintln!("{stored} fills stored, {passed} passed through, most held {most}");
    assert!(passed >= 1.0, "six 6 MiB fills at once all fit in 8 MiB?");

    // Those stored are hits; those passed through were not stored.
    let mut hits = 0;
    for i in 0..FILLS {
        let (len, status) = read_checked(&client, &origin.url(&format!("/big{i}"))).await;
        assert_eq!(len, LEN);
        if is_hit(&status) {
            hits += 1;
            assert_eq!(origin.count(&format!("/big{i}")), 1);
        }
    }
    assert!(hits >= 1, "no fill was stored");
    assert_eq!(
        FILLS - hits,
        passed as usize,
        "fills passed vs misses again"
    );
    assert_eq!(
        metric(&proxy.metrics(), "weir_cache_fill_bytes", &[]),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_fill_to_disk_leaves_nothing_behind() {
    let origin = TestOrigin::start();
    origin.route(
        "/abandoned",
        Reply::stream(16 << 20)
            .cc("max-age=600")
            .chunk_delay(Duration::from_millis(5)),
    );
    let tmp = TempDir::new("fills-abandoned");
    let dir = tmp.path().to_path_buf();
    let proxy = Proxy::builder()
        .forward()
        .option("cache", "max_memory_object", "\"256KiB\"")
        .option(
            "cache",
            "disk",
            &format!(
                "{{ path = {:?}, size = \"256MiB\" }}",
                dir.display().to_string()
            ),
        )
        .start();
    let client = proxied_client(proxy.forward_addr());
    let mut resp = client
        .get(origin.url("/abandoned"))
        .send()
        .await
        .expect("request");
    let mut received = 0u64;
    while received < (2 << 20) {
        let chunk = resp.chunk().await.expect("body").expect("more body");
        check_pattern(received, &chunk);
        received += chunk.len() as u64;
    }
    // The fill is on disk by now (past max_memory_object), in a file of tmp/.
    let named = |dir: &std::path::Path| -> usize {
        std::fs::read_dir(dir.join("tmp")).map_or(0, |d| d.count())
    };
    assert_eq!(named(&dir), 1, "the fill's file is not in tmp/");
    let open_fill_files = |pid: u32| -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .filter(|t| t.to_string_lossy().contains("/tmp/fill-"))
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(open_fill_files(proxy.pid()), 1, "the fill is not on disk");
    drop(resp);
    drop(client);
    assert!(
        origin
            .eventually(Duration::from_secs(10), |o| o.aborted("/abandoned") == 1)
            .await,
        "the origin fetch went on after its only client left"
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            metric(&proxy.metrics(), "weir_cache_fill_bytes", &[]) == Some(0.0)
        }),
        "the abandoned fill still holds memory"
    );
    let metrics = proxy.metrics();
    assert_eq!(metric(&metrics, "weir_cache_disk_entries", &[]), Some(0.0));
    assert_eq!(
        metric(&metrics, "weir_cache_disk_writes_total", &[]),
        Some(0.0)
    );
    assert!(
        wait_until(Duration::from_secs(10), || open_fill_files(proxy.pid())
            == 0),
        "the abandoned fill's file is still open"
    );
    assert_eq!(named(&dir), 0, "the abandoned fill's file is left in tmp/");
}
