//! The disk index's memory: charged to `[cache] memory`, bounded by its share of it.

use super::tests::{entry_files, key, object, request, temp_dir};
use crate::{Cache, CacheSettings, DiskSettings, Invalidation};

#[test]
fn the_index_keeps_to_its_share_of_memory_and_the_memory_tier_makes_room() {
    let dir = temp_dir();
    // 1 MiB of memory: the index may take half, however large the disk tier is.
    let memory = 1u64 << 20;
    let c = Cache::new(CacheSettings {
        max_memory_object_bytes: 4096,
        disk: Some(DiskSettings {
            path: dir.clone(),
            size_bytes: 1 << 30,
        }),
        ..CacheSettings::memory(memory, 8 << 20)
    });
    c.disk.as_ref().unwrap().wait_loaded();
    let req = request(&[]);
    let body = [b'x'; 100];
    for batch in 0..6 {
        for i in 0..1000 {
            let path = format!("/object-{batch}-{i}");
            assert!(c.store(&key(&path), &req, object(&req, &body, &[]), c.ticket()));
        }
        // The writer's queue is bounded: let it catch up.
        c.flush();
    }
    let stats = c.disk_stats().unwrap();
    assert_eq!(stats.writes, 6000);
    assert!(
        stats.index_memory <= memory / 2,
        "index memory {} over half of {memory}",
        stats.index_memory
    );
    // Many files of 100 bytes, far below the disk tier's size: the index's memory,
    // not the files' bytes, is what made it drop the least recently used ones.
    assert!(
        stats.entries > 1000 && stats.entries < 6000,
        "{} entries",
        stats.entries
    );
    assert!(stats.bytes < 6000 * 1024);
    // Every file that left the index left the disk.
    assert_eq!(entry_files(&dir).len() as u64, stats.entries);
    // The memory tier and the index together stay within the memory (one step of slack).
    assert!(
        c.size_bytes() + stats.index_memory <= memory + memory / 64,
        "memory tier {} + index {} over {memory}",
        c.size_bytes(),
        stats.index_memory
    );

    // Purged, the index gives its memory back, and the memory tier gets its room again.
    c.purge(Invalidation::Prefix("http://h/".into()));
    let stats = c.disk_stats().unwrap();
    assert_eq!((stats.entries, stats.index_memory, stats.bytes), (0, 0, 0));
    assert!(entry_files(&dir).is_empty());
    for i in 0..2000 {
        let path = format!("/again-{i}");
        c.store(&key(&path), &req, object(&req, &body, &[]), c.ticket());
        if i % 500 == 0 {
            c.flush();
        }
    }
    c.flush();
    let stats = c.disk_stats().unwrap();
    assert!(
        c.size_bytes() + stats.index_memory <= memory + memory / 64,
        "memory tier {} + index {} over {memory}",
        c.size_bytes(),
        stats.index_memory
    );
    assert!(
        c.size_bytes() > memory / 2,
        "the memory tier did not get its room back: {}",
        c.size_bytes()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
