//! The cache facade: lookups that resolve Vary variants and freshness, stores, and
//! invalidation.

use std::sync::Arc;
use std::time::SystemTime;

use http::request;

use crate::disk::{DiskSettings, DiskStats, DiskTier};
use crate::key::CacheKey;
use crate::object::CachedObject;
use crate::policy::Freshness;
use crate::storage::{MemoryStorage, Storage, StoredItem, VariantSet};

/// Cache sizing and policy settings.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Size of the memory tier in bytes (bodies and metadata).
    pub memory_bytes: u64,
    /// Responses with larger bodies are not stored.
    pub max_object_bytes: u64,
    /// Heuristic freshness as a fraction of the time since Last-Modified.
    pub heuristic_fraction: f32,
    /// With a disk tier, larger objects are kept on disk only (and streamed from it).
    /// Without one, every object up to `max_object_bytes` is kept in memory.
    pub max_memory_object_bytes: u64,
    /// The disk tier, if any.
    pub disk: Option<DiskSettings>,
    /// `stale-while-revalidate` for responses that do not say.
    pub stale_while_revalidate: std::time::Duration,
    /// `stale-if-error` for responses that do not say.
    pub stale_if_error: std::time::Duration,
}

impl CacheSettings {
    /// A memory-only cache of `memory_bytes`, storing objects up to `max_object_bytes`.
    pub fn memory(memory_bytes: u64, max_object_bytes: u64) -> CacheSettings {
        CacheSettings {
            memory_bytes,
            max_object_bytes,
            heuristic_fraction: 0.1,
            max_memory_object_bytes: max_object_bytes,
            disk: None,
            stale_while_revalidate: std::time::Duration::ZERO,
            stale_if_error: std::time::Duration::ZERO,
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A stored response that may be served as is.
    Fresh(Arc<CachedObject>),
    /// A stored response that must be validated first.
    Stale(Arc<CachedObject>),
    /// Nothing stored for this request's URL and variant.
    Miss,
}

/// The HTTP cache.
pub struct Cache {
    storage: Box<dyn Storage>,
    disk: Option<DiskTier>,
    settings: CacheSettings,
}

impl Cache {
    /// A cache with a memory tier sized by `settings`, and a disk tier when it names
    /// one. Opening the disk tier reads the header of every entry file (blocking).
    pub fn new(settings: CacheSettings) -> Cache {
        Cache {
            storage: Box::new(MemoryStorage::new(settings.memory_bytes)),
            disk: settings.disk.as_ref().map(DiskTier::open),
            settings,
        }
    }

    /// Whether there is a disk tier to look in after a memory miss.
    pub fn has_disk(&self) -> bool {
        self.disk.is_some()
    }

    /// The largest body the memory tier keeps.
    fn memory_object_limit(&self) -> u64 {
        if self.disk.is_some() {
            self.settings.max_memory_object_bytes
        } else {
            self.settings.max_object_bytes
        }
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// Finds the stored response for `request` (whose URL key is `key`) and says whether
    /// it is fresh for that request at `now`.
    pub fn lookup(&self, key: &CacheKey, request: &request::Parts, now: SystemTime) -> Lookup {
        let object = match self.storage.get(key) {
            None => return Lookup::Miss,
            Some(StoredItem::Object(o)) => o,
            Some(StoredItem::Variants(set)) => {
                let vkey = key.variant(&set.vary, &request.headers);
                match self.storage.get(&vkey) {
                    Some(StoredItem::Object(o)) => o,
                    _ => return Lookup::Miss,
                }
            }
        };
        match object.freshness(request, now) {
            Freshness::Fresh => Lookup::Fresh(object),
            Freshness::Stale => Lookup::Stale(object),
        }
    }

    /// Looks in the disk tier, after [`Cache::lookup`] found nothing in memory. A body
    /// small enough for the memory tier is read whole, checked and promoted there;
    /// a larger one is returned as an open file to stream.
    pub async fn lookup_disk(
        &self,
        key: &CacheKey,
        request: &request::Parts,
        now: SystemTime,
    ) -> Lookup {
        let Some(disk) = &self.disk else {
            return Lookup::Miss;
        };
        let Some(found) = disk.find(key, &request.headers) else {
            return Lookup::Miss;
        };
        let Some(object) = disk.read(found, self.memory_object_limit()).await else {
            return Lookup::Miss;
        };
        if object
            .body
            .in_memory()
            .is_some_and(|b| b.len() as u64 <= self.memory_object_limit())
        {
            self.insert_memory(key, request, object.clone());
        }
        match object.freshness(request, now) {
            Freshness::Fresh => Lookup::Fresh(object),
            Freshness::Stale => Lookup::Stale(object),
        }
    }

    /// Stores a complete response to `request` under the URL key `key`, as a variant
    /// when it carries `Vary`: in memory when it is small enough, and on disk when
    /// there is a disk tier (written in the background). Returns whether it was stored.
    pub fn store(&self, key: &CacheKey, request: &request::Parts, object: CachedObject) -> bool {
        if object.varies_on_everything() || object.body.len() > self.settings.max_object_bytes {
            return false;
        }
        let object = Arc::new(object);
        let fits_memory =
            object.body.in_memory().is_some() && object.body.len() <= self.memory_object_limit();
        if fits_memory {
            self.insert_memory(key, request, object.clone());
        } else {
            // An older copy in memory must not outlive the new one stored on disk.
            let vkey = self.storage_key(key, request, &object);
            self.storage.remove(&vkey);
        }
        if let Some(disk) = &self.disk {
            let vkey = self.storage_key(key, request, &object);
            let base = (!object.vary.is_empty()).then(|| key.clone());
            disk.write(vkey, base, object);
        }
        true
    }

    /// The key `object` is stored under: `key`, or its variant for `request`.
    fn storage_key(
        &self,
        key: &CacheKey,
        request: &request::Parts,
        object: &CachedObject,
    ) -> CacheKey {
        if object.vary.is_empty() {
            key.clone()
        } else {
            key.variant(&object.vary, &request.headers)
        }
    }

    fn insert_memory(&self, key: &CacheKey, request: &request::Parts, object: Arc<CachedObject>) {
        if object.vary.is_empty() {
            if let Some(StoredItem::Variants(old)) = self.storage.get(key) {
                self.remove_variants(&old);
            }
            self.storage.insert(key.clone(), StoredItem::Object(object));
            return;
        }
        let set = match self.storage.get(key) {
            Some(StoredItem::Variants(set)) if set.vary == object.vary => set,
            existing => {
                if let Some(StoredItem::Variants(old)) = existing {
                    self.remove_variants(&old);
                }
                let set = Arc::new(VariantSet::new(object.vary.clone()));
                self.storage
                    .insert(key.clone(), StoredItem::Variants(set.clone()));
                set
            }
        };
        let vkey = key.variant(&set.vary, &request.headers);
        {
            let mut keys = set.keys.lock().unwrap_or_else(|e| e.into_inner());
            if !keys.contains(&vkey) {
                keys.push(vkey.clone());
            }
        }
        self.storage.insert(vkey, StoredItem::Object(object));
    }

    /// Every object stored for the URL key `key` (one per Vary variant).
    pub fn objects(&self, key: &CacheKey) -> Vec<Arc<CachedObject>> {
        self.entries(key).into_iter().map(|(_, o)| o).collect()
    }

    /// Replaces every object stored for `key` (all variants) with `update(object)`.
    /// Returns how many were replaced.
    pub fn update(&self, key: &CacheKey, update: impl Fn(&CachedObject) -> CachedObject) -> usize {
        let entries = self.entries(key);
        for (k, o) in &entries {
            self.storage
                .insert(k.clone(), StoredItem::Object(Arc::new(update(o))));
        }
        entries.len()
    }

    fn entries(&self, key: &CacheKey) -> Vec<(CacheKey, Arc<CachedObject>)> {
        match self.storage.get(key) {
            None => Vec::new(),
            Some(StoredItem::Object(o)) => vec![(key.clone(), o)],
            Some(StoredItem::Variants(set)) => {
                let keys = set.keys.lock().unwrap_or_else(|e| e.into_inner()).clone();
                keys.into_iter()
                    .filter_map(|k| match self.storage.get(&k) {
                        Some(StoredItem::Object(o)) => Some((k, o)),
                        _ => None,
                    })
                    .collect()
            }
        }
    }

    /// Removes every stored response for the URL key `key`, all variants included.
    pub fn invalidate(&self, key: &CacheKey) {
        if let Some(StoredItem::Variants(set)) = self.storage.get(key) {
            self.remove_variants(&set);
        }
        self.storage.remove(key);
        if let Some(disk) = &self.disk {
            disk.invalidate(key);
        }
    }

    fn remove_variants(&self, set: &VariantSet) {
        let keys = std::mem::take(&mut *set.keys.lock().unwrap_or_else(|e| e.into_inner()));
        for k in keys {
            self.storage.remove(&k);
        }
    }

    /// Removes every object, in both tiers, whose key and tags satisfy `pred` (writes to
    /// disk still in progress included). Walks every key: for purges by prefix or tag.
    /// Returns how many objects were removed from memory and from disk.
    pub fn invalidate_where(&self, pred: &dyn Fn(&CacheKey, &[String]) -> bool) -> (usize, usize) {
        let mut doomed = Vec::new();
        self.storage.for_each(&mut |key, tags| {
            if pred(key, tags) {
                doomed.push(key.clone());
            }
        });
        for key in &doomed {
            self.storage.remove(key);
        }
        let on_disk = self.disk.as_ref().map_or(0, |d| d.invalidate_where(pred));
        (doomed.len(), on_disk)
    }

    /// Calls `visit` with every key stored in either tier and its tags (a key in both
    /// tiers is visited twice).
    pub fn for_each(&self, visit: &mut dyn FnMut(&CacheKey, &[String])) {
        self.storage.for_each(visit);
        if let Some(disk) = &self.disk {
            disk.for_each(visit);
        }
    }

    /// Bytes charged in the memory tier.
    pub fn size_bytes(&self) -> u64 {
        self.storage.size_bytes()
    }

    /// Number of objects (and variant lists) stored in the memory tier.
    pub fn object_count(&self) -> u64 {
        self.storage.item_count()
    }

    /// The disk tier's counters, when there is one.
    pub fn disk_stats(&self) -> Option<DiskStats> {
        self.disk.as_ref().map(DiskTier::stats)
    }

    /// Waits until every disk write queued so far has finished (for a clean shutdown,
    /// and for tests). Blocks the calling thread.
    pub fn flush(&self) {
        if let Some(disk) = &self.disk {
            disk.flush();
        }
    }
}
