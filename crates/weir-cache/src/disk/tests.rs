//! The disk tier against a real directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use bytes::Bytes;
use http::{request, response, HeaderMap, StatusCode};

use crate::{
    Body, Cache, CacheKey, CacheSettings, CachedObject, DiskSettings, Lookup, StoragePolicy,
};

pub(super) fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "weir-disk-unit-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A cache on `dir`, once its index is rebuilt.
fn cache(dir: &std::path::Path, memory_object: u64) -> Cache {
    let c = loading_cache(dir, memory_object);
    c.disk.as_ref().unwrap().wait_loaded();
    c
}

/// A cache on `dir`, at once.
fn loading_cache(dir: &std::path::Path, memory_object: u64) -> Cache {
    Cache::new(CacheSettings {
        max_memory_object_bytes: memory_object,
        disk: Some(DiskSettings {
            path: dir.to_path_buf(),
            size_bytes: 64 << 20,
        }),
        ..CacheSettings::memory(1 << 20, 8 << 20)
    })
}

pub(super) fn request(headers: &[(&str, &str)]) -> request::Parts {
    let mut b = http::Request::get("http://h/x");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

pub(super) fn object(req: &request::Parts, body: &[u8], extra: &[(&str, &str)]) -> CachedObject {
    let mut headers = HeaderMap::new();
    headers.insert("cache-control", "max-age=600".parse().unwrap());
    headers.insert("content-type", "text/plain".parse().unwrap());
    for (k, v) in extra {
        headers.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let mut r = http::Response::new(()).into_parts().0;
    r.headers = headers.clone();
    let parts: response::Parts = r;
    let policy = StoragePolicy::new(req, &parts, SystemTime::now(), 0.1);
    CachedObject::new(
        StatusCode::OK,
        &headers,
        Bytes::copy_from_slice(body),
        policy,
    )
}

pub(super) fn key(path: &str) -> CacheKey {
    CacheKey::for_url("http", "h", path)
}

pub(super) async fn read_all(body: &Body) -> Result<Vec<u8>, std::io::Error> {
    let mut r = body.reader();
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().await {
        out.extend_from_slice(&c?);
    }
    Ok(out)
}

fn fresh(l: Lookup) -> std::sync::Arc<CachedObject> {
    match l {
        Lookup::Fresh(o) => o,
        other => panic!("expected a fresh hit, got {other:?}"),
    }
}

#[tokio::test]
async fn survives_a_restart_and_streams_large_bodies() {
    let dir = temp_dir();
    let req = request(&[]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    {
        let c = cache(&dir, 1 << 16);
        assert!(c.store(
            &key("/small"),
            &req,
            object(&req, b"small body", &[]),
            c.ticket()
        ));
        assert!(c.store(&key("/big"), &req, object(&req, &big, &[]), c.ticket()));
        c.flush();
        assert_eq!(c.disk_stats().unwrap().writes, 2);
        // Too large for the memory tier: on disk only.
        assert!(matches!(
            c.lookup(&key("/big"), &req, SystemTime::now()),
            Lookup::Miss
        ));
    }
    let c = cache(&dir, 1 << 16);
    let now = SystemTime::now();
    assert!(matches!(c.lookup(&key("/small"), &req, now), Lookup::Miss));
    let small = fresh(c.lookup_disk(&key("/small"), &req, now).await);
    assert_eq!(small.body.in_memory().unwrap().as_ref(), b"small body");
    assert_eq!(small.headers["content-type"], "text/plain");
    // Promoted: the next lookup is answered from memory.
    assert!(matches!(
        c.lookup(&key("/small"), &req, now),
        Lookup::Fresh(_)
    ));

    let large = fresh(c.lookup_disk(&key("/big"), &req, now).await);
    assert!(large.body.in_memory().is_none(), "a large body is streamed");
    assert_eq!(read_all(&large.body).await.unwrap(), big);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn variants_survive_a_restart() {
    let dir = temp_dir();
    let gz = request(&[("accept-encoding", "gzip")]);
    let plain = request(&[]);
    {
        let c = cache(&dir, 1 << 16);
        let vary = [("vary", "accept-encoding")];
        c.store(&key("/v"), &gz, object(&gz, b"zipped", &vary), c.ticket());
        c.store(
            &key("/v"),
            &plain,
            object(&plain, b"plain", &vary),
            c.ticket(),
        );
        c.flush();
    }
    let c = cache(&dir, 1 << 16);
    let now = SystemTime::now();
    let a = fresh(c.lookup_disk(&key("/v"), &gz, now).await);
    let b = fresh(c.lookup_disk(&key("/v"), &plain, now).await);
    assert_eq!(a.body.in_memory().unwrap().as_ref(), b"zipped");
    assert_eq!(b.body.in_memory().unwrap().as_ref(), b"plain");
    c.invalidate(&key("/v"));
    assert!(matches!(
        c.lookup_disk(&key("/v"), &gz, now).await,
        Lookup::Miss
    ));
    assert!(matches!(
        c.lookup_disk(&key("/v"), &plain, now).await,
        Lookup::Miss
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

pub(super) fn entry_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in std::fs::read_dir(dir).unwrap().flatten() {
        if sub.file_name() == "tmp" || !sub.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            files.push(f.path());
        }
    }
    files
}

#[tokio::test]
async fn damaged_entries_are_dropped_and_counted() {
    let dir = temp_dir();
    let req = request(&[]);
    {
        let c = cache(&dir, 1 << 16);
        c.store(
            &key("/truncated"),
            &req,
            object(&req, &[b'a'; 5000], &[]),
            c.ticket(),
        );
        c.store(
            &key("/flipped"),
            &req,
            object(&req, &[b'b'; 5000], &[]),
            c.ticket(),
        );
        c.flush();
    }
    // A stray temporary file, as a crash mid-write leaves.
    std::fs::write(dir.join("tmp").join("00000000000000ff"), b"partial").unwrap();
    for f in entry_files(&dir) {
        let data = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&data);
        if text.contains("/truncated") {
            std::fs::write(&f, &data[..data.len() - 10]).unwrap();
        } else {
            let mut data = data;
            let n = data.len();
            data[n - 100] ^= 0xff;
            std::fs::write(&f, &data).unwrap();
        }
    }
    let c = cache(&dir, 1 << 16);
    // The truncated file is found by its size when the index is rebuilt.
    assert_eq!(c.disk_stats().unwrap().damaged, 1);
    assert_eq!(std::fs::read_dir(dir.join("tmp")).unwrap().count(), 0);
    let now = SystemTime::now();
    assert!(matches!(
        c.lookup_disk(&key("/truncated"), &req, now).await,
        Lookup::Miss
    ));
    // The flipped byte is found by the body's checksum when it is read.
    assert!(matches!(
        c.lookup_disk(&key("/flipped"), &req, now).await,
        Lookup::Miss
    ));
    assert_eq!(c.disk_stats().unwrap().damaged, 2);
    assert!(entry_files(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn entries_of_an_older_format_are_dropped_quietly() {
    let dir = temp_dir();
    let req = request(&[]);
    {
        let c = cache(&dir, 1 << 16);
        c.store(&key("/old"), &req, object(&req, b"old", &[]), c.ticket());
        c.flush();
    }
    for f in entry_files(&dir) {
        let mut data = std::fs::read(&f).unwrap();
        data[..8].copy_from_slice(b"WEIRDSK1");
        std::fs::write(&f, &data).unwrap();
    }
    let c = cache(&dir, 1 << 16);
    let stats = c.disk_stats().unwrap();
    assert_eq!((stats.entries, stats.damaged), (0, 0));
    assert!(entry_files(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_damaged_streamed_body_ends_in_an_error() {
    let dir = temp_dir();
    let req = request(&[]);
    let big = vec![b'z'; 200_000];
    {
        let c = cache(&dir, 1024);
        c.store(&key("/big"), &req, object(&req, &big, &[]), c.ticket());
        c.flush();
    }
    let f = entry_files(&dir).pop().unwrap();
    let mut data = std::fs::read(&f).unwrap();
    let n = data.len();
    data[n - 1] = b'y';
    std::fs::write(&f, &data).unwrap();
    let c = cache(&dir, 1024);
    let o = fresh(c.lookup_disk(&key("/big"), &req, SystemTime::now()).await);
    assert!(read_all(&o.body).await.is_err());
    assert_eq!(c.disk_stats().unwrap().damaged, 1);
    assert!(matches!(
        c.lookup_disk(&key("/big"), &req, SystemTime::now()).await,
        Lookup::Miss
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_unwritable_directory_is_counted_and_writes_resume() {
    let dir = temp_dir();
    let req = request(&[]);
    let c = cache(&dir, 1 << 16);
    // The directory is replaced by a file: every write fails.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    c.store(&key("/a"), &req, object(&req, b"a", &[]), c.ticket());
    c.flush();
    let stats = c.disk_stats().unwrap();
    assert_eq!((stats.writes, stats.write_errors), (0, 1));
    // Still served from memory.
    assert!(matches!(
        c.lookup(&key("/a"), &req, SystemTime::now()),
        Lookup::Fresh(_)
    ));
    std::fs::remove_file(&dir).unwrap();
    c.store(&key("/b"), &req, object(&req, b"b", &[]), c.ticket());
    c.flush();
    assert_eq!(c.disk_stats().unwrap().writes, 1);
    assert_eq!(entry_files(&dir).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn invalidation_wins_over_a_queued_write_and_eviction_removes_files() {
    let dir = temp_dir();
    let req = request(&[]);
    let c = cache(&dir, 1 << 16);
    c.store(&key("/gone"), &req, object(&req, b"x", &[]), c.ticket());
    c.invalidate(&key("/gone"));
    c.flush();
    assert!(matches!(
        c.lookup_disk(&key("/gone"), &req, SystemTime::now()).await,
        Lookup::Miss
    ));
    assert!(entry_files(&dir).is_empty());

    // A replacement removes the old file.
    c.store(&key("/r"), &req, object(&req, b"one", &[]), c.ticket());
    c.flush();
    c.store(&key("/r"), &req, object(&req, b"two", &[]), c.ticket());
    c.flush();
    assert_eq!(entry_files(&dir).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn purges_reach_the_disk_tier_after_a_restart() {
    use crate::Invalidation;
    let dir = temp_dir();
    let req = request(&[]);
    {
        let c = cache(&dir, 16);
        for (path, tag) in [
            ("/a/1", "red"),
            ("/a/2", "blue"),
            ("/b/1", "red"),
            ("/b/2", "green"),
        ] {
            let o = object(&req, b"body of some length", &[("surrogate-key", tag)]);
            assert!(c.store(&key(path), &req, o, c.ticket()));
        }
        c.flush();
    }
    // Nothing is in memory now: every answer below comes from the disk tier.
    let c = cache(&dir, 16);
    let objects = c.objects(&key("/b/2"));
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].tags, ["green"]);
    assert_eq!(objects[0].body.len(), 19);
    assert_eq!(c.purge(Invalidation::Tag("red".into())), 2);
    assert_eq!(c.purge(Invalidation::Prefix("http://h/a/".into())), 1);
    assert_eq!(c.invalidate(&key("/b/2")), 1);
    let now = SystemTime::now();
    for path in ["/a/1", "/a/2", "/b/1", "/b/2"] {
        assert!(
            matches!(c.lookup_disk(&key(path), &req, now).await, Lookup::Miss),
            "{path}"
        );
    }
    assert!(entry_files(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn what_modules_changed_survives_a_restart_and_a_304_refresh() {
    let dir = temp_dir();
    let req = request(&[]);
    let mut origin = HeaderMap::new();
    origin.insert("etag", "\"o1\"".parse().unwrap());
    origin.insert("content-type", "image/png".parse().unwrap());
    let stored = object(
        &req,
        b"a transcoded body",
        &[("etag", "W/\"o1-tc\""), ("content-type", "image/jpeg")],
    );
    let adapted = crate::OriginFields::of(&origin).adapted(&stored.headers);
    assert!(adapted.is_some());
    {
        let c = cache(&dir, 1 << 16);
        let object = stored.with_adapted(adapted.clone());
        assert!(c.store(&key("/img"), &req, object, c.ticket()));
        c.flush();
    }
    let c = cache(&dir, 1 << 16);
    let now = SystemTime::now();
    let back = fresh(c.lookup_disk(&key("/img"), &req, now).await);
    assert_eq!(back.adapted(), adapted.as_ref());

    // Validated with the origin's tag; the origin's 304 refreshes it without putting
    // back its own type or tag.
    let mut validation = HeaderMap::new();
    back.add_validators(&mut validation);
    assert_eq!(validation["if-none-match"], "\"o1\"");
    let mut not_modified = http::Response::new(()).into_parts().0;
    not_modified.status = StatusCode::NOT_MODIFIED;
    not_modified.headers = origin.clone();
    not_modified
        .headers
        .insert("cache-control", "max-age=60".parse().unwrap());
    let refreshed = back
        .refreshed(&req, &not_modified, now, &Default::default())
        .unwrap();
    assert_eq!(refreshed.headers["content-type"], "image/jpeg");
    assert_eq!(refreshed.headers["etag"], "W/\"o1-tc\"");
    assert_eq!(refreshed.headers["cache-control"], "max-age=60");
    assert_eq!(refreshed.adapted(), adapted.as_ref());
    // A 304 about another representation of the origin's is still refused.
    not_modified
        .headers
        .insert("etag", "\"o2\"".parse().unwrap());
    assert!(back
        .refreshed(&req, &not_modified, now, &Default::default())
        .is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The index is rebuilt on a thread of its own while the proxy serves: until it is
/// done the tier finds and stores nothing, and an entry that an invalidation made
/// meanwhile applies to is not brought back (its file goes).
#[tokio::test]
async fn the_rebuild_runs_behind_and_does_not_undo_a_purge() {
    let dir = temp_dir();
    let req = request(&[]);
    {
        let c = cache(&dir, 1 << 16);
        for path in ["/kept", "/purged", "/tagged", "/grouped"] {
            let tags = if path == "/tagged" {
                vec!["t1".to_string()]
            } else {
                vec![]
            };
            let groups: &[(&str, &str)] = if path == "/grouped" {
                &[("cache-groups", "\"g\"")]
            } else {
                &[]
            };
            let o = object(&req, b"body", groups).with_tags(tags);
            assert!(c.store(&key(path), &req, o, c.ticket()));
        }
        c.flush();
        assert_eq!(c.disk_stats().unwrap().writes, 4);
    }
    let settings = DiskSettings {
        path: dir.clone(),
        size_bytes: 64 << 20,
    };
    // The rebuild has read the files and waits to link them.
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let limits = super::DiskLimits {
        memory: 64 << 20,
        largest_file: 1 << 20,
    };
    let tier = super::DiskTier::open_with(&settings, limits, start.clone());
    assert!(tier.stats().loading);
    assert!(tier.find(&key("/kept"), &HeaderMap::new()).is_none());
    let object = std::sync::Arc::new(object(&req, b"new", &[]));
    tier.write(key("/new"), None, object);
    assert_eq!(
        tier.stats().writes_dropped,
        1,
        "nothing is written while loading"
    );
    tier.note(&crate::Invalidation::Url(key("/purged").url().to_string()));
    tier.note(&crate::Invalidation::Tag("t1".into()));
    // The group's membership was read back from the file.
    tier.note(&crate::Invalidation::Groups {
        origin: key("/").url().trim_end_matches('/').to_string(),
        names: vec!["g".into()],
    });
    start.wait();
    tier.wait_loaded();
    let stats = tier.stats();
    assert!(!stats.loading);
    assert_eq!(stats.entries, 1);
    assert!(tier.find(&key("/kept"), &HeaderMap::new()).is_some());
    for gone in ["/purged", "/tagged", "/grouped", "/new"] {
        assert!(tier.find(&key(gone), &HeaderMap::new()).is_none(), "{gone}");
    }
    assert_eq!(
        entry_files(&dir).len(),
        1,
        "the purged entries' files are gone"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
