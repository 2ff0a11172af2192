//! The disk tier: one file per object under a directory, an in-memory index of what is
//! there (key, file, size, tags; never headers or bodies), and a writer thread.
//!
//! The design follows nginx's proxy cache rather than a log-structured store: a file
//! per object lets a large body be streamed from disk and lets a crash damage at most
//! the file being written (written under a temporary name, then renamed into place).
//! The index is rebuilt at startup by reading each file's header, so the cache
//! survives restarts. Size is bounded by evicting the least recently used files.

mod fill;
mod format;
mod index;
mod layout;
mod scan;
mod shared;
mod writer;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::BytesMut;
use http::HeaderMap;

use crate::adapted::Adapted;
use crate::body::{Body, FileBody};
use crate::damage::DamageReport;
use crate::invalidation::Invalidation;
use crate::key::CacheKey;
use crate::lock::lock;
use crate::object::CachedObject;
use index::{Entry, EntryMeta, Index};
use layout::object_path;
use shared::{Counters, Missed, Pending, Shared};

pub(crate) use format::Damage;

/// Where the disk tier lives and how large it may grow.
#[derive(Debug, Clone)]
pub struct DiskSettings {
    /// The directory (created when missing).
    pub path: PathBuf,
    /// Total size of the files at most; least recently used ones are removed beyond it.
    pub size_bytes: u64,
}

/// Counters of the disk tier, for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskStats {
    /// Bytes of the entries indexed.
    pub bytes: u64,
    /// Entries indexed (objects and variant lists).
    pub entries: u64,
    /// Memory the index takes, charged to the memory tier's size.
    pub index_memory: u64,
    /// Entries written.
    pub writes: u64,
    /// Writes that failed (disk full, directory unwritable).
    pub write_errors: u64,
    /// Writes skipped because the writer was too far behind.
    pub writes_dropped: u64,
    /// Entries found damaged (at startup or when read) and dropped.
    pub damaged: u64,
    /// Whether the index is still being rebuilt from the files (at startup): until it
    /// is, the tier finds and stores nothing.
    pub loading: bool,
}

/// What the rest of the cache sets for the disk tier's index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DiskLimits {
    /// `[cache] memory`: the index takes at most a share of it.
    pub(crate) memory: u64,
    /// The largest object stored.
    pub(crate) largest_file: u64,
}

/// The disk tier.
pub(crate) struct DiskTier {
    shared: Arc<Shared>,
    writer: writer::Writer,
}

impl DiskTier {
    /// Opens the tier at `settings.path` and rebuilds the index from the files there on
    /// a thread of its own, so the proxy serves (from memory and the origins) while it
    /// runs. Entries that an invalidation made meanwhile applies to are not brought
    /// back ([`DiskTier::note`]). A directory that cannot be used is logged; writes
    /// are retried later.
    pub(crate) fn open(settings: &DiskSettings, limits: DiskLimits) -> DiskTier {
        Self::open_with(settings, limits, Arc::new(std::sync::Barrier::new(1)))
    }

    /// [`DiskTier::open`], the rebuild linking nothing before `start` is passed (tests
    /// hold it to make invalidations during a rebuild).
    fn open_with(
        settings: &DiskSettings,
        limits: DiskLimits,
        start: Arc<std::sync::Barrier>,
    ) -> DiskTier {
        let dir = settings.path.clone();
        let index = Index::new(
            dir.clone(),
            settings.size_bytes,
            limits.largest_file,
            limits.memory / index::MEMORY_SHARE_DIVISOR,
        );
        let shared = Arc::new_cyclic(|me: &Weak<Shared>| {
            let me = me.clone();
            Shared {
                dir,
                index,
                pending: Mutex::new(HashMap::default()),
                next_id: AtomicU64::new(1),
                counters: Counters::default(),
                failing: AtomicBool::new(false),
                module_variants: AtomicBool::new(false),
                loading: AtomicBool::new(true),
                missed: Mutex::new(Missed::default()),
                damage_reports: Arc::new(Box::new(move |key, id, reason| {
                    if let Some(shared) = me.upgrade() {
                        shared.drop_damaged(key, id, reason);
                    }
                })),
            }
        });
        tracing::info!(dir = %shared.dir.display(), "disk cache: rebuilding the index in the background");
        let scanned = shared.clone();
        let scan = move || scan::rebuild(&scanned, &start);
        let spawned = std::thread::Builder::new()
            .name("weir-disk-scan".into())
            .spawn(scan.clone());
        if let Err(e) = spawned {
            tracing::warn!("disk cache: cannot start the index rebuild thread ({e}); rebuilding before going on");
            scan();
        }
        let writer = writer::Writer::start(shared.clone());
        DiskTier { shared, writer }
    }

    /// Records an invalidation that is about to be carried out, so that an index
    /// rebuild in progress does not link what it applies to (its removal from the
    /// index cannot reach entries not linked yet). Nothing once the index is built.
    pub(crate) fn note(&self, what: &Invalidation) {
        // Every write through the proxy invalidates: no lock once the index is built.
        if !self.shared.loading.load(Ordering::Acquire) {
            return;
        }
        let mut missed = lock(&self.shared.missed);
        // Checked again under the lock, which the end of the rebuild takes too.
        if !self.shared.loading.load(Ordering::Acquire) {
            return;
        }
        match what {
            Invalidation::Url(url) => {
                missed.urls.insert(url.clone());
            }
            other => missed.others.push(other.clone()),
        }
    }

    /// Waits (blocking) until the index rebuild is done.
    #[cfg(test)]
    pub(crate) fn wait_loaded(&self) {
        while self.shared.loading.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The entry `request_headers` selects for the URL key `key`: an object still
    /// being written, or the key it is stored under and its file.
    pub(crate) fn find(&self, key: &CacheKey, request_headers: &HeaderMap) -> Option<Found> {
        let pending = |k: &CacheKey| {
            self.shared
                .pending()
                .get(k)
                .map(|p| Found::Writing(p.object.clone()))
        };
        if let Some(f) = pending(key) {
            return Some(f);
        }
        match self.shared.index.get(key)? {
            Entry::Object(meta) => Some(Found::Stored {
                key: key.clone(),
                meta,
            }),
            Entry::Variants(set) => {
                let vkey = key.variant(&set.vary, request_headers);
                if let Some(f) = pending(&vkey) {
                    return Some(f);
                }
                match self.shared.index.get(&vkey)? {
                    Entry::Object(meta) => Some(Found::Stored { key: vkey, meta }),
                    Entry::Variants(_) => None,
                }
            }
        }
    }

    /// Reads a found entry: its body too when it is at most `load_limit` bytes, else
    /// an open file to stream it from. Runs on a blocking thread.
    pub(crate) async fn read(&self, found: Found, load_limit: u64) -> Option<Arc<CachedObject>> {
        let (key, id) = match found {
            Found::Writing(object) => return Some(object),
            Found::Stored { key, meta } => (key, meta.id),
        };
        let shared = self.shared.clone();
        let read = {
            let shared = Arc::downgrade(&shared);
            let key = key.clone();
            move || read_entry(shared, key, id, load_limit)
        };
        let result = match tokio::runtime::Handle::try_current() {
            Ok(h) => h
                .spawn_blocking(read)
                .await
                .unwrap_or_else(|e| Err(Damage::Bad(e.to_string()))),
            Err(_) => read(),
        };
        match result {
            Ok(object) => Some(Arc::new(object)),
            Err(Damage::Gone) => None,
            Err(Damage::Bad(reason)) => {
                shared.drop_damaged(&key, id, &reason);
                None
            }
            Err(Damage::Outdated) => {
                shared.drop_damaged(&key, id, "written by an older Weir");
                None
            }
        }
    }

    /// Queues `object` to be written under `key` (a variant of `base` when it varies).
    /// Returns at once; the entry becomes visible when the file is complete.
    pub(crate) fn write(&self, key: CacheKey, base: Option<CacheKey>, object: Arc<CachedObject>) {
        if self.shared.loading.load(Ordering::Acquire) {
            self.shared
                .counters
                .writes_dropped
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.pending().insert(
            key.clone(),
            Pending {
                id,
                object: object.clone(),
            },
        );
        if let Err(job) = self.writer.send(writer::Job {
            id,
            key,
            base,
            object,
        }) {
            self.shared.forget_pending(&job.key, id);
            self.shared
                .counters
                .writes_dropped
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes `key`, its variants and its module variants, including writes in
    /// progress. Returns how many objects were removed.
    pub(crate) fn invalidate(&self, key: &CacheKey) -> usize {
        let prefix = format!("{}\0", key.as_str());
        let related = |k: &CacheKey| k == key || k.as_str().starts_with(&prefix);
        let mut removed = 0;
        self.shared.pending().retain(|k, _| {
            let gone = related(k);
            removed += usize::from(gone);
            !gone
        });
        match self.shared.index.get(key) {
            Some(Entry::Variants(set)) => {
                for k in std::mem::take(&mut *lock(&set.keys)) {
                    removed += usize::from(self.shared.index.remove(&k));
                }
                self.shared.index.remove(key);
            }
            Some(Entry::Object(_)) => {
                self.shared.index.remove(key);
                removed += 1;
            }
            None => {}
        }
        // Keys a module's variant made are found by walking the index, only when some
        // were ever stored (rare: most modules vary by a request header instead).
        if self.shared.module_variants.load(Ordering::Relaxed) {
            let module_prefix = format!("{}\0~", key.as_str());
            removed += self.invalidate_where(&|k, _| k.as_str().starts_with(&module_prefix));
        }
        removed
    }

    /// Removes every entry (and write in progress) whose key and tags satisfy `pred`.
    /// Returns how many objects were removed.
    pub(crate) fn invalidate_where(&self, pred: &dyn Fn(&CacheKey, &[String]) -> bool) -> usize {
        self.shared
            .pending()
            .retain(|k, p| !pred(k, &p.object.tags));
        let mut doomed = Vec::new();
        for (key, entry) in self.shared.index.iter() {
            let tags: &[String] = match &entry {
                Entry::Object(m) => &m.tags,
                Entry::Variants(_) => &[],
            };
            if pred(&key, tags) {
                doomed.push((key, matches!(entry, Entry::Object(_))));
            }
        }
        for (key, _) in &doomed {
            self.shared.index.remove(key);
        }
        doomed.iter().filter(|(_, object)| *object).count()
    }

    /// The objects stored for the URL key `key` (each Vary variant), headers read from
    /// their files (blocking), bodies left there.
    pub(crate) fn load_all(&self, key: &CacheKey) -> Vec<(CacheKey, Arc<CachedObject>)> {
        let keys = match self.shared.index.get(key) {
            None => return Vec::new(),
            Some(Entry::Object(_)) => vec![key.clone()],
            Some(Entry::Variants(set)) => lock(&set.keys).clone(),
        };
        keys.into_iter()
            .filter_map(|k| match self.shared.index.get(&k)? {
                Entry::Object(m) => {
                    let weak = Arc::downgrade(&self.shared);
                    let object = read_entry(weak, k.clone(), m.id, 0).ok()?;
                    Some((k, Arc::new(object)))
                }
                Entry::Variants(_) => None,
            })
            .collect()
    }

    /// Waits until every write queued so far is on disk (or has failed).
    pub(crate) fn flush(&self) {
        self.writer.flush();
    }

    /// Memory the index takes now.
    pub(crate) fn index_memory(&self) -> u64 {
        self.shared.index.memory()
    }

    pub(crate) fn stats(&self) -> DiskStats {
        let s = &self.shared;
        DiskStats {
            bytes: s.index.file_bytes(),
            entries: s.index.len(),
            index_memory: s.index.memory(),
            writes: s.counters.writes.load(Ordering::Relaxed),
            write_errors: s.counters.write_errors.load(Ordering::Relaxed),
            writes_dropped: s.counters.writes_dropped.load(Ordering::Relaxed),
            damaged: s.counters.damaged.load(Ordering::Relaxed),
            loading: s.loading.load(Ordering::Acquire),
        }
    }
}

/// What a lookup selected.
pub(crate) enum Found {
    /// An object whose file is still being written.
    Writing(Arc<CachedObject>),
    /// A file, under the key the object is stored under (a variant key when it varies).
    Stored { key: CacheKey, meta: Arc<EntryMeta> },
}

fn read_entry(
    shared: Weak<Shared>,
    key: CacheKey,
    id: u64,
    load_limit: u64,
) -> Result<CachedObject, Damage> {
    let (dir, damage_reports) = match shared.upgrade() {
        Some(s) => (s.dir.clone(), Arc::downgrade(&s.damage_reports)),
        None => return Err(Damage::Gone),
    };
    let mut file = File::open(object_path(&dir, id))?;
    let file_len = file.metadata()?.len();
    let (meta, body_at) = format::read_head(&mut file, file_len)?;
    if meta.key != key.as_str() {
        return Err(Damage::Bad("the file holds another key".into()));
    }
    let body = if meta.body_len <= load_limit {
        use std::io::Read;
        let mut buf = BytesMut::zeroed(meta.body_len as usize);
        file.read_exact(&mut buf)?;
        if crc32fast::hash(&buf) != meta.body_crc {
            return Err(Damage::Bad("the body does not match its checksum".into()));
        }
        Body::Memory(buf.freeze())
    } else {
        Body::File(FileBody {
            file: Arc::new(file),
            offset: body_at,
            len: meta.body_len,
            crc: meta.body_crc,
            damage: DamageReport::new(damage_reports, key, id),
            temp_name: None,
        })
    };
    let adapted = Adapted::from_parts(&meta.adapted_fields, meta.adapted_origin);
    Ok(
        CachedObject::new(meta.status, &meta.headers, body, meta.policy)
            .with_tags(meta.tags)
            .with_adapted(adapted),
    )
}

#[cfg(test)]
mod fill_tests;
#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod tests;
