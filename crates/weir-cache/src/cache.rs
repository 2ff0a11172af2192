//! The cache facade: lookups that resolve Vary variants and freshness, stores, and
//! invalidation.

use std::sync::Arc;
use std::time::SystemTime;

use http::request;

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
    settings: CacheSettings,
}

impl Cache {
    /// A cache with a memory tier sized by `settings`.
    pub fn new(settings: CacheSettings) -> Cache {
        Cache {
            storage: Box::new(MemoryStorage::new(settings.memory_bytes)),
            settings,
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

    /// Stores a complete response to `request` under the URL key `key`, as a variant
    /// when it carries `Vary`. Returns whether it was stored.
    pub fn store(&self, key: &CacheKey, request: &request::Parts, object: CachedObject) -> bool {
        if object.varies_on_everything()
            || object.body.len() as u64 > self.settings.max_object_bytes
        {
            return false;
        }
        let object = Arc::new(object);
        if object.vary.is_empty() {
            if let Some(StoredItem::Variants(old)) = self.storage.get(key) {
                self.remove_variants(&old);
            }
            self.storage.insert(key.clone(), StoredItem::Object(object));
            return true;
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
        true
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
    }

    fn remove_variants(&self, set: &VariantSet) {
        let keys = std::mem::take(&mut *set.keys.lock().unwrap_or_else(|e| e.into_inner()));
        for k in keys {
            self.storage.remove(&k);
        }
    }

    /// Bytes charged in the memory tier.
    pub fn size_bytes(&self) -> u64 {
        self.storage.size_bytes()
    }

    /// Number of objects (and variant lists) stored.
    pub fn object_count(&self) -> u64 {
        self.storage.item_count()
    }
}
