//! Storage tiers behind one small trait, so the engine never depends on the crate that
//! implements a tier.

use std::sync::{Arc, Mutex};

use http::HeaderName;

use crate::key::{CacheKey, KeyHashing};
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
    /// Changes the bytes it may hold, evicting what no longer fits. Tiers of a fixed
    /// size ignore it.
    fn set_capacity(&self, _bytes: u64) {}
}

/// The memory tier: a concurrent map bounded by total weight (quick_cache: sharded
/// hash tables with CLOCK-Pro-style eviction and admission of keys seen again).
///
/// Not moka, which the memory tier used before: every moka eviction left a tombstone in
/// its hash table, rebuilt whenever they reached a tenth of it, and under steady churn
/// (a miss evicting an object) that rebuilding and allocating new tables took about a
/// tenth of the process's CPU. quick_cache removes entries in place and evicts inside
/// `insert`, so its totals are always settled. Its keys carry their own hash, made with
/// std's randomly keyed SipHash when the key is made (see [`CacheKey`]; the crate's fast
/// default hasher is turned off in Cargo.toml): clients choose the URLs, and must not be
/// able to aim them at one hash chain or shard.
pub struct MemoryStorage {
    map: quick_cache::sync::Cache<CacheKey, StoredItem, EntryWeight, KeyHashing>,
}

/// Each entry is charged its measured cost plus its key (see docs/architecture.md,
/// "Memory accounting").
#[derive(Clone)]
struct EntryWeight;

impl quick_cache::Weighter<CacheKey, StoredItem> for EntryWeight {
    fn weight(&self, key: &CacheKey, item: &StoredItem) -> u64 {
        u64::from(item.weight()) + key.len() as u64
    }
}

/// A guess at the size of an entry, for the number of keys remembered after eviction
/// (half as many as entries), which lets an evicted object that is asked for again
/// come back as a frequent one.
const TYPICAL_ENTRY: u64 = 4096;

/// The share of the capacity for entries asked for again since they were stored; the
/// rest holds new ones until they are. quick_cache's default (0.97) suits workloads
/// ruled by frequency; web traffic asks again mostly for what is recent, and in the
/// PolyMix-style benchmark with a full tier (docs/benchmarks.md) 0.97 lost 1.6 points
/// of hit ratio to moka's TinyLFU, 0.8 lost 0.4 and 0.5 lost none.
const HOT_SHARE: f64 = 0.5;

impl MemoryStorage {
    /// A memory tier holding at most `capacity` bytes, for items weighing up to
    /// `largest_item` bytes.
    pub fn new(capacity: u64, largest_item: u64) -> MemoryStorage {
        let items = (capacity / TYPICAL_ENTRY).clamp(1, 1 << 24);
        let options = map_options(capacity, largest_item, items);
        let map = quick_cache::sync::Cache::with_options(
            options,
            EntryWeight,
            Default::default(),
            Default::default(),
        );
        MemoryStorage { map }
    }
}

/// quick_cache's options for a map of `capacity` weight, items up to `largest_item`
/// and about `items` entries (which sets how many evicted keys it remembers), with
/// `HOT_SHARE` for the entries asked for again. Shared with the disk tier's index.
pub(crate) fn map_options(capacity: u64, largest_item: u64, items: u64) -> quick_cache::Options {
    quick_cache::OptionsBuilder::new()
        .weight_capacity(capacity)
        .estimated_items_capacity(items as usize)
        .shards(shard_count(capacity, largest_item))
        .hot_allocation(HOT_SHARE)
        .build()
        .expect("weight and item capacity are set")
}

/// Each shard is a capacity of its own and refuses an item larger than its hot share
/// (half of it), so the largest item must fit a shard's hot share twice over; more
/// shards, up to four per core, only spread contention between worker threads.
fn shard_count(capacity: u64, largest_item: u64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let fit = capacity / largest_item.max(1).saturating_mul(4);
    let most = (4 * cores as u64).min(fit).max(1);
    // A power of two at most `most` (quick_cache rounds the count up otherwise).
    1 << (63 - most.leading_zeros())
}

impl Storage for MemoryStorage {
    fn get(&self, key: &CacheKey) -> Option<StoredItem> {
        self.map.get(key)
    }

    fn insert(&self, key: CacheKey, item: StoredItem) {
        self.map.insert(key, item);
    }

    fn remove(&self, key: &CacheKey) {
        self.map.remove(key);
    }

    fn size_bytes(&self) -> u64 {
        self.map.weight()
    }

    fn item_count(&self) -> u64 {
        self.map.len() as u64
    }

    fn set_capacity(&self, bytes: u64) {
        self.map.set_capacity(bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_item_fits_a_shards_hot_share_twice() {
        let mib = 1 << 20;
        assert_eq!(shard_count(256 * mib, 64 * mib), 1);
        assert_eq!(shard_count(256 * mib, 32 * mib), 2);
        assert_eq!(shard_count(mib, mib), 1);
        let n = shard_count(256 * mib, mib) as u64;
        assert!(n >= 1 && n.is_power_of_two() && 256 * mib / n >= 4 * mib);
    }
}
