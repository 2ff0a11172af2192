//! Storage tiers behind one small trait, so the engine never depends on the crate that
//! implements a tier (moka for memory today; the disk tier comes later).

use std::sync::{Arc, Mutex};

use http::HeaderName;

use crate::key::CacheKey;
use crate::object::CachedObject;
use crate::part_set::PartSet;

/// What a key maps to: an object, or, for a URL whose responses carry `Vary`, the list
/// of headers to build the variant key from.
#[derive(Debug, Clone)]
pub enum StoredItem {
    /// A complete response.
    Object(Arc<CachedObject>),
    /// The URL's responses vary on these request headers; each variant has its own key.
    Variants(Arc<VariantSet>),
    /// The 206 responses kept of a URL's object, under the URL's parts key.
    Parts(Arc<PartSet>),
}

impl StoredItem {
    fn weight(&self) -> u32 {
        match self {
            StoredItem::Object(o) => o.weight(),
            StoredItem::Variants(v) => 256 + 64 * v.vary.len() as u32,
            StoredItem::Parts(p) => p.weight(),
        }
    }
}

/// The variants of one URL.
#[derive(Debug)]
pub struct VariantSet {
    /// Request headers that select a variant.
    pub vary: Vec<HeaderName>,
    /// Keys of the variants stored so far, so they can be invalidated together.
    pub(crate) keys: Mutex<Vec<CacheKey>>,
}

impl VariantSet {
    pub(crate) fn new(vary: Vec<HeaderName>) -> VariantSet {
        VariantSet {
            vary,
            keys: Mutex::new(Vec::new()),
        }
    }
}

/// A storage tier. Implementations are safe to call from many threads at once and
/// never block on I/O in `get` (the memory tier) or document that they may.
pub trait Storage: Send + Sync + 'static {
    /// The item stored under `key`.
    fn get(&self, key: &CacheKey) -> Option<StoredItem>;
    /// Stores `item` under `key`, replacing what was there.
    fn insert(&self, key: CacheKey, item: StoredItem);
    /// Removes what is stored under `key`.
    fn remove(&self, key: &CacheKey);
    /// Bytes charged for everything stored (bodies and metadata).
    fn size_bytes(&self) -> u64;
    /// Number of items stored.
    fn item_count(&self) -> u64;
    /// Calls `visit` with every stored key and the invalidation tags of the object under
    /// it (none for a variant list). For purges by prefix or tag, which are rare: it may
    /// walk the whole tier.
    fn for_each(&self, visit: &mut dyn FnMut(&CacheKey, &[String]));
}

/// The memory tier: a concurrent map bounded by total weight, with TinyLFU admission
/// and LRU eviction (moka).
pub struct MemoryStorage {
    map: moka::sync::Cache<CacheKey, StoredItem>,
}

impl MemoryStorage {
    /// A memory tier holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> MemoryStorage {
        let map = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(|k: &CacheKey, v: &StoredItem| v.weight().saturating_add(k.len() as u32))
            .build();
        MemoryStorage { map }
    }
}

impl Storage for MemoryStorage {
    fn get(&self, key: &CacheKey) -> Option<StoredItem> {
        self.map.get(key)
    }

    fn insert(&self, key: CacheKey, item: StoredItem) {
        self.map.insert(key, item);
    }

    fn remove(&self, key: &CacheKey) {
        self.map.invalidate(key);
    }

    fn size_bytes(&self) -> u64 {
        // Eviction runs in batches; settle it so the reported size is the real one.
        self.map.run_pending_tasks();
        self.map.weighted_size()
    }

    fn item_count(&self) -> u64 {
        self.map.run_pending_tasks();
        self.map.entry_count()
    }

    fn for_each(&self, visit: &mut dyn FnMut(&CacheKey, &[String])) {
        for (key, item) in self.map.iter() {
            match &item {
                StoredItem::Object(o) => visit(&key, &o.tags),
                StoredItem::Variants(_) => visit(&key, &[]),
                StoredItem::Parts(p) => visit(&key, &p.head.tags),
            }
        }
    }
}
