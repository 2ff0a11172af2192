//! The disk tier's index: which file holds each key. It is bounded twice: by the bytes
//! of its files (the disk tier's size) and by the memory the index itself takes, which
//! is charged to `[cache] memory` (the memory tier gives up as much as the index holds).
//!
//! Every way an entry leaves the index (evicted, replaced, refused, removed) deletes its
//! file: a replacement is always written to a new file, never over the old one.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::layout::object_path;
use crate::key::{CacheKey, KeyHashing};
use crate::storage::{map_options, VariantSet};

/// What a key maps to in the index.
#[derive(Clone)]
pub(super) enum Entry {
    Object(Arc<EntryMeta>),
    Variants(Arc<VariantSet>),
}

/// A file of the disk tier.
pub(crate) struct EntryMeta {
    pub(super) id: u64,
    pub(super) file_len: u64,
    pub(super) tags: Vec<String>,
}

/// What an index entry costs in memory besides its key's and tags' bytes: the map's
/// slot and hash-table entry, the key's and the file record's allocations with their
/// reference counts, and the allocator's rounding. Measured as resident memory per
/// file over 200,000 files of 1 KB (docs/benchmarks.md, "The disk tier's index").
pub(super) const ENTRY_MEMORY: u64 = 192;

/// The share of `[cache] memory` the index may take at most; the rest stays for the
/// memory tier. Beyond it the disk tier drops its least recently used files even
/// before its size is reached.
pub(super) const MEMORY_SHARE_DIVISOR: u64 = 2;

/// The memory `entry` is charged under `key`. Fixed for an entry's lifetime (a variant
/// list is charged for its header names, not for the variant keys it collects), so
/// what is added when it goes in is what is taken away when it goes.
fn memory_of(key: &CacheKey, entry: &Entry) -> u64 {
    let own = match entry {
        Entry::Object(m) => m.tags.iter().map(|t| t.len() as u64 + 24).sum::<u64>(),
        Entry::Variants(v) => 256 + 64 * v.vary.len() as u64,
    };
    ENTRY_MEMORY + key.len() as u64 + own
}

/// The weight bounding the index: a file's bytes, or, for small files, the entry's
/// memory scaled so that the index's memory stays within its share when the files'
/// bytes do not bound it first.
#[derive(Clone)]
struct IndexWeight {
    /// The disk tier's size over the index's memory budget (at least 1).
    scale: u64,
}

impl quick_cache::Weighter<CacheKey, Entry> for IndexWeight {
    fn weight(&self, key: &CacheKey, entry: &Entry) -> u64 {
        let file = match entry {
            Entry::Object(m) => m.file_len,
            Entry::Variants(_) => 0,
        };
        (file + key.len() as u64).max(memory_of(key, entry).saturating_mul(self.scale))
    }
}

/// Collects what leaves the map during an insert, to be settled outside its lock.
#[derive(Clone)]
struct Collect;

impl quick_cache::Lifecycle<CacheKey, Entry> for Collect {
    type RequestState = Vec<(CacheKey, Entry)>;

    fn on_evict(&self, gone: &mut Self::RequestState, key: CacheKey, entry: Entry) {
        gone.push((key, entry));
    }
}

/// A guess at the size of a file, for the number of evicted keys remembered.
const TYPICAL_FILE: u64 = 32 << 10;

/// The index, its files' bytes and the memory it is charged.
pub(super) struct Index {
    map: quick_cache::sync::Cache<CacheKey, Entry, IndexWeight, KeyHashing, Collect>,
    dir: PathBuf,
    file_bytes: AtomicU64,
    memory: AtomicU64,
}

impl Index {
    /// An index of files under `dir` adding up to `disk_bytes` at most, whose largest
    /// file is `largest_file` bytes, taking at most `memory_budget` bytes of memory.
    pub(super) fn new(
        dir: PathBuf,
        disk_bytes: u64,
        largest_file: u64,
        memory_budget: u64,
    ) -> Index {
        let disk_bytes = disk_bytes.max(1);
        let scale = disk_bytes.div_ceil(memory_budget.max(1)).max(1);
        let items = (disk_bytes / TYPICAL_FILE).clamp(1, 1 << 22);
        let options = map_options(disk_bytes, largest_file, items);
        Index {
            map: quick_cache::sync::Cache::with_options(
                options,
                IndexWeight { scale },
                Default::default(),
                Collect,
            ),
            dir,
            file_bytes: AtomicU64::new(0),
            memory: AtomicU64::new(0),
        }
    }

    pub(super) fn get(&self, key: &CacheKey) -> Option<Entry> {
        self.map.get(key)
    }

    /// Indexes `entry` under `key`; what it replaces, and what has to go to make room,
    /// is removed with its file.
    pub(super) fn insert(&self, key: CacheKey, entry: Entry) {
        self.count_in(&key, &entry);
        let mut gone = Vec::new();
        self.map.insert_with_lifecycle(key, entry, &mut gone);
        for (key, entry) in gone {
            self.forget(&key, entry);
        }
    }

    /// Removes `key` and its file. Returns whether it was there.
    pub(super) fn remove(&self, key: &CacheKey) -> bool {
        match self.map.remove(key) {
            Some((key, entry)) => {
                self.forget(&key, entry);
                true
            }
            None => false,
        }
    }

    /// Removes `key` and its file if the file is `id`.
    pub(super) fn remove_file(&self, key: &CacheKey, id: u64) -> bool {
        let is_it = |e: &Entry| matches!(e, Entry::Object(m) if m.id == id);
        match self.map.remove_if(key, is_it) {
            Some((key, entry)) => {
                self.forget(&key, entry);
                true
            }
            None => false,
        }
    }

    /// Every key and entry (a copy of each, taken shard by shard).
    pub(super) fn iter(&self) -> impl Iterator<Item = (CacheKey, Entry)> + '_ {
        self.map.iter()
    }

    /// Entries indexed (objects and variant lists).
    pub(super) fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Bytes of the files indexed.
    pub(super) fn file_bytes(&self) -> u64 {
        self.file_bytes.load(Ordering::Relaxed)
    }

    /// Memory the index is charged.
    pub(super) fn memory(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    fn count_in(&self, key: &CacheKey, entry: &Entry) {
        if let Entry::Object(m) = entry {
            self.file_bytes.fetch_add(m.file_len, Ordering::Relaxed);
        }
        self.memory
            .fetch_add(memory_of(key, entry), Ordering::Relaxed);
    }

    fn forget(&self, key: &CacheKey, entry: Entry) {
        self.memory
            .fetch_sub(memory_of(key, &entry), Ordering::Relaxed);
        if let Entry::Object(m) = entry {
            self.file_bytes.fetch_sub(m.file_len, Ordering::Relaxed);
            let _ = std::fs::remove_file(object_path(&self.dir, m.id));
        }
    }
}
