//! Fills that went to disk as they arrived, stored: the fill's file becomes the entry.

use std::os::unix::fs::MetadataExt;
use std::time::SystemTime;

use http::{response, HeaderMap, StatusCode};

use super::tests::{entry_files, key, read_all, request, temp_dir};
use crate::{Body, Cache, CacheSettings, CachedObject, DiskSettings, Lookup, StoragePolicy};

fn cache(dir: &std::path::Path) -> Cache {
    let c = Cache::new(CacheSettings {
        max_memory_object_bytes: 1 << 16,
        disk: Some(DiskSettings {
            path: dir.to_path_buf(),
            size_bytes: 64 << 20,
        }),
        ..CacheSettings::memory(1 << 20, 8 << 20)
    });
    c.disk.as_ref().unwrap().wait_loaded();
    c
}

fn pattern(from: usize, len: usize) -> Vec<u8> {
    (from..from + len).map(|i| (i % 251) as u8).collect()
}

/// A fresh response of `body`, for `req`.
fn object(req: &http::request::Parts, body: Body) -> CachedObject {
    let mut headers = HeaderMap::new();
    headers.insert("cache-control", "max-age=600".parse().unwrap());
    headers.insert("content-type", "video/mp4".parse().unwrap());
    let mut parts: response::Parts = http::Response::new(()).into_parts().0;
    parts.headers = headers.clone();
    let policy = StoragePolicy::new(req, &parts, SystemTime::now(), 0.1);
    CachedObject::new(StatusCode::OK, &headers, body, policy)
}

/// A fill on disk of `len` bytes of the pattern, not finished.
async fn spilled(c: &Cache, len: usize) -> crate::Spill {
    let mut spill = c.spill().expect("a disk tier takes fills");
    spill.append(vec![pattern(0, len).into()]).await.unwrap();
    spill
}

/// The files in the tier's temporary directory.
fn temporary(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_fill_on_disk_becomes_the_entry_without_a_copy_and_survives_a_restart() {
    let dir = temp_dir();
    let req = request(&[]);
    let (chunk, chunks) = (700_000usize, 4usize);
    let inode;
    {
        let c = cache(&dir);
        let mut spill = c.spill().expect("a disk tier takes fills");
        for i in 0..chunks {
            spill
                .append(vec![pattern(i * chunk, chunk).into()])
                .await
                .unwrap();
        }
        // A late reader reads the body, not the room before it.
        let late = spill.file().read_at(chunk as u64 - 3, 6).await.unwrap();
        assert_eq!(late.as_ref(), &pattern(chunk - 3, 6)[..]);
        let files = temporary(&dir);
        assert_eq!(
            files.len(),
            1,
            "the fill's file is in tmp/ while it is written"
        );
        inode = std::fs::metadata(&files[0]).unwrap().ino();

        let object = object(&req, spill.finish());
        assert!(c.store(&key("/film"), &req, object, c.ticket()));
        c.flush();
        assert_eq!(c.disk_stats().unwrap().writes, 1);
        let entries = entry_files(&dir);
        assert_eq!(entries.len(), 1);
        assert_eq!(
            std::fs::metadata(&entries[0]).unwrap().ino(),
            inode,
            "the entry is a copy of the fill's file"
        );
        assert!(
            temporary(&dir).is_empty(),
            "the fill's name is left in tmp/"
        );
    }
    // Read back after a restart (the index rebuilt from the file), byte for byte.
    let c = cache(&dir);
    let now = SystemTime::now();
    let Lookup::Fresh(found) = c.lookup_disk(&key("/film"), &req, now).await else {
        panic!("the stored fill is not found after a restart");
    };
    assert_eq!(found.headers["content-type"], "video/mp4");
    let body = read_all(&found.body).await.unwrap();
    assert_eq!(body, pattern(0, chunk * chunks));
    assert_eq!(
        std::fs::metadata(&entry_files(&dir)[0]).unwrap().ino(),
        inode
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_fill_on_disk_that_is_not_stored_leaves_no_file() {
    let dir = temp_dir();
    let c = cache(&dir);
    let spill = spilled(&c, 100_000).await;
    let reader = spill.file();
    let body = spill.finish();
    assert_eq!(temporary(&dir).len(), 1);
    // The name goes with its last holder.
    drop(body);
    assert_eq!(
        temporary(&dir).len(),
        1,
        "removed while a reader still reads it"
    );
    drop(reader);
    assert!(temporary(&dir).is_empty());
    assert!(entry_files(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_fill_stored_twice_becomes_one_entry_and_one_copy() {
    let dir = temp_dir();
    let req = request(&[]);
    let c = cache(&dir);
    let spill = spilled(&c, 300_000).await;
    let inode = std::fs::metadata(&temporary(&dir)[0]).unwrap().ino();
    let body = spill.finish();
    // The same body under two keys, as a response stored again after a revalidation
    // shares its body: the first store takes the file, the second copies it.
    assert!(c.store(&key("/a"), &req, object(&req, body.clone()), c.ticket()));
    assert!(c.store(&key("/b"), &req, object(&req, body), c.ticket()));
    c.flush();
    assert_eq!(c.disk_stats().unwrap().writes, 2);
    let inodes: Vec<u64> = entry_files(&dir)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().ino())
        .collect();
    assert_eq!(inodes.len(), 2);
    assert_eq!(inodes.iter().filter(|&&i| i == inode).count(), 1);
    drop(c);
    let c = cache(&dir);
    for path in ["/a", "/b"] {
        let Lookup::Fresh(found) = c.lookup_disk(&key(path), &req, SystemTime::now()).await else {
            panic!("{path} is not found after a restart");
        };
        let read = read_all(&found.body).await.unwrap();
        assert_eq!(read, pattern(0, 300_000), "{path}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
