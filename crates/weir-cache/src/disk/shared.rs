//! The state the disk tier's handle, its writer thread and its index rebuild share:
//! the index of the entries on disk, the writes in progress, the counters, and how an
//! entry is linked into the index or dropped from it.
//!
//! Its own file, below the tier, the writer and the rebuild, so that each of them
//! builds on it without reaching into the others.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http::HeaderName;

use super::index::{Entry, EntryMeta, Index};
use super::layout::object_path;
use crate::damage::DropDamaged;
use crate::invalidation::Invalidation;
use crate::key::{CacheKey, KeyHashing};
use crate::lock::lock;
use crate::object::CachedObject;
use crate::storage::VariantSet;

pub(super) struct Pending {
    pub(super) id: u64,
    pub(super) object: Arc<CachedObject>,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) writes: AtomicU64,
    pub(super) write_errors: AtomicU64,
    pub(super) writes_dropped: AtomicU64,
    pub(super) damaged: AtomicU64,
}

pub(crate) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) index: Index,
    /// Writes queued or in progress, by key: the id and object of the newest. Lookups
    /// find objects here until their file is complete. An invalidation removes the
    /// key, and a write whose id is no longer here is thrown away rather than made
    /// visible, so an invalidated response never comes back.
    pub(super) pending: Mutex<HashMap<CacheKey, Pending, KeyHashing>>,
    pub(super) next_id: AtomicU64,
    pub(super) counters: Counters,
    /// Whether the last write failed; failures are logged once per episode.
    pub(super) failing: AtomicBool,
    /// Whether any key made by a module's variant was indexed.
    pub(super) module_variants: AtomicBool,
    /// The index is being rebuilt from the files: new writes would take ids that old
    /// files may still hold, so nothing is written until it is done.
    pub(super) loading: AtomicBool,
    /// Invalidations that came while the index was rebuilt, which it must not undo.
    pub(super) missed: Mutex<Missed>,
    /// What the damage reports of bodies read from the files call: `drop_damaged`,
    /// through a weak reference to this (which owns it), so a report does not keep
    /// the tier alive.
    pub(super) damage_reports: Arc<DropDamaged>,
}

/// The invalidations made while the index is rebuilt: the rebuild links an entry only
/// if none applies to it. URLs in a set (writes through the proxy invalidate one URL
/// each, and may be many), the rest in a list.
#[derive(Default)]
pub(super) struct Missed {
    pub(super) urls: std::collections::HashSet<String>,
    pub(super) others: Vec<Invalidation>,
}

impl Missed {
    pub(super) fn applies(&self, url: &str, tags: &[String]) -> bool {
        self.urls.contains(url) || self.others.iter().any(|i| i.matches(url, tags))
    }
}

impl Shared {
    /// Counts a failed write (an entry's, or a fill's going to disk as it arrives); the
    /// first of a series is logged, until a write of the writer thread succeeds again.
    pub(super) fn write_failed(&self, e: &std::io::Error) {
        self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::error!(dir = %self.dir.display(), "disk cache: cannot write ({e}); responses are served but not stored on disk until writes succeed again");
        }
    }

    pub(super) fn pending(&self) -> MutexGuard<'_, HashMap<CacheKey, Pending, KeyHashing>> {
        lock(&self.pending)
    }

    /// Whether write `id` is still the one wanted for `key`.
    pub(super) fn is_pending(&self, key: &CacheKey, id: u64) -> bool {
        self.pending().get(key).is_some_and(|p| p.id == id)
    }

    pub(super) fn forget_pending(&self, key: &CacheKey, id: u64) {
        let mut pending = self.pending();
        if pending.get(key).is_some_and(|p| p.id == id) {
            pending.remove(key);
        }
    }

    pub(super) fn drop_damaged(&self, key: &CacheKey, id: u64, reason: &str) {
        self.counters.damaged.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key = %key, file = %object_path(&self.dir, id).display(), "disk cache: damaged entry dropped: {reason}");
        // Not indexed (found at startup) or already replaced: only the file goes.
        if !self.index.remove_file(key, id) {
            let _ = std::fs::remove_file(object_path(&self.dir, id));
        }
    }

    /// Makes a written file visible under `key`, replacing what was there, keeping the
    /// URL's variant list (`base`, `vary`) consistent.
    pub(super) fn link(
        &self,
        key: CacheKey,
        base: Option<CacheKey>,
        vary: Vec<HeaderName>,
        meta: EntryMeta,
    ) {
        if key.has_module_variant() {
            self.module_variants.store(true, Ordering::Relaxed);
        }
        let meta = Entry::Object(Arc::new(meta));
        let Some(base) = base else {
            if let Some(Entry::Variants(old)) = self.index.get(&key) {
                for k in std::mem::take(&mut *lock(&old.keys)) {
                    self.index.remove(&k);
                }
            }
            self.index.insert(key, meta);
            return;
        };
        let set = match self.index.get(&base) {
            Some(Entry::Variants(set)) if set.vary == vary => set,
            existing => {
                if let Some(Entry::Variants(old)) = existing {
                    for k in std::mem::take(&mut *lock(&old.keys)) {
                        self.index.remove(&k);
                    }
                }
                let set = Arc::new(VariantSet::new(vary));
                self.index.insert(base, Entry::Variants(set.clone()));
                set
            }
        };
        {
            let mut keys = lock(&set.keys);
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
        }
        self.index.insert(key, meta);
    }
}
