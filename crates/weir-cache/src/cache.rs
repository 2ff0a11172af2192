//! The cache facade: lookups that resolve Vary variants and freshness, stores, and
//! invalidation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use http::{request, HeaderName};

use crate::budget::FillBudget;
use crate::disk::{DiskLimits, DiskSettings, DiskTier};
use crate::freshness::{Heuristic, PolicyOptions};
use crate::invalidation::{Invalidation, Invalidations, Ticket, RETAIN_AT_MOST, RETAIN_FOR};
use crate::key::CacheKey;
use crate::lock::lock;
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
    /// The longest heuristic lifetime, unless a refresh rule says otherwise.
    pub heuristic_max: std::time::Duration,
    /// Never store a response that sets a cookie.
    pub refuse_set_cookie: bool,
    /// Concurrent misses for one key share one origin fetch (collapsed forwarding).
    pub collapse: bool,
    /// Targeted cache-control fields (RFC 9213) obeyed, most specific first, when a
    /// transaction obeys them (see [`CacheSettings::policy_options`]).
    pub targeted_fields: Vec<HeaderName>,
    /// Response headers whose values become the stored object's invalidation tags
    /// (lowercase names; see [`crate::DEFAULT_TAG_HEADERS`]).
    pub tag_headers: Vec<HeaderName>,
    /// With a disk tier, larger objects are kept on disk only (and streamed from it).
    /// Without one, every object up to `max_object_bytes` is kept in memory.
    pub max_memory_object_bytes: u64,
    /// The disk tier, if any.
    pub disk: Option<DiskSettings>,
    /// `stale-while-revalidate` for responses that do not say.
    pub stale_while_revalidate: std::time::Duration,
    /// `stale-if-error` for responses that do not say.
    pub stale_if_error: std::time::Duration,
    /// Bytes that fills in flight may hold in memory at once (see [`FillBudget`]).
    pub fill_memory_bytes: u64,
    /// After a range miss, the whole object is fetched in the background (besides
    /// keeping the origin's 206 as a part). `false`: only the parts are kept.
    pub range_fill_whole: bool,
}

impl CacheSettings {
    /// A memory-only cache of `memory_bytes`, storing objects up to `max_object_bytes`.
    pub fn memory(memory_bytes: u64, max_object_bytes: u64) -> CacheSettings {
        CacheSettings {
            memory_bytes,
            max_object_bytes,
            ..CacheSettings::default()
        }
    }
}

impl CacheSettings {
    /// The storage policy's options, for a transaction that obeys targeted fields
    /// (`targeted`, e.g. on a reverse-proxy listener) or not.
    pub fn policy_options(&self, targeted: bool) -> PolicyOptions<'_> {
        PolicyOptions {
            heuristic: Heuristic {
                fraction: self.heuristic_fraction,
                min: std::time::Duration::ZERO,
                max: self.heuristic_max,
            },
            targeted_fields: if targeted { &self.targeted_fields } else { &[] },
            refuse_set_cookie: self.refuse_set_cookie,
        }
    }
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            memory_bytes: 256 << 20,
            max_object_bytes: 64 << 20,
            heuristic_fraction: 0.1,
            heuristic_max: crate::freshness::HEURISTIC_MAX,
            refuse_set_cookie: true,
            collapse: true,
            targeted_fields: vec![HeaderName::from_static(crate::targeted::CDN_CACHE_CONTROL)],
            tag_headers: crate::tags::DEFAULT_TAG_HEADERS
                .iter()
                .map(|n| HeaderName::from_static(n))
                .collect(),
            max_memory_object_bytes: 1 << 20,
            disk: None,
            stale_while_revalidate: std::time::Duration::ZERO,
            stale_if_error: std::time::Duration::ZERO,
            fill_memory_bytes: 32 << 20,
            range_fill_whole: true,
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

/// Called with every invalidation, after it is recorded and before its objects are
/// removed (the engine detaches fetches in flight that it applies to).
pub type InvalidationListener = Box<dyn Fn(&Invalidation) + Send + Sync>;

/// The HTTP cache.
pub struct Cache {
    pub(crate) storage: Box<dyn Storage>,
    pub(crate) disk: Option<DiskTier>,
    /// The disk index's memory last taken from the memory tier's size.
    pub(crate) index_charge: AtomicU64,
    settings: CacheSettings,
    pub(crate) invalidations: Invalidations,
    /// The keys stored with a module's variant, by URL, so that invalidating a URL
    /// reaches them without walking the whole cache. Stale keys are harmless (removing
    /// a missing key does nothing) and are swept when the index grows.
    pub(crate) module_variants: Mutex<ModuleVariants>,
    pub(crate) listener: OnceLock<InvalidationListener>,
    pub(crate) stats: crate::purge_stats::Counters,
    fills: Arc<FillBudget>,
    /// Taken while a URL's parts are read and replaced (see `parts.rs`).
    pub(crate) parts_lock: Mutex<()>,
    /// Some part of an object was kept since the cache started: until then a store
    /// need not look for parts to drop (a key made, hashed and looked up per miss).
    pub(crate) parts_kept: AtomicBool,
}

#[derive(Default)]
pub(crate) struct ModuleVariants {
    pub(crate) by_url: HashMap<Box<str>, Vec<CacheKey>>,
    /// Swept when `by_url` reaches this many URLs.
    sweep_at: usize,
}

const MODULE_VARIANT_SWEEP: usize = 4096;

impl Cache {
    /// A cache with a memory tier sized by `settings`, and a disk tier when it names
    /// one. The disk tier's index is rebuilt from its files in the background
    /// ([`DiskStats::loading`](crate::DiskStats::loading) until it is done); meanwhile the disk tier finds nothing
    /// and stores nothing, and the memory tier works as usual.
    pub fn new(settings: CacheSettings) -> Cache {
        let limits = DiskLimits {
            memory: settings.memory_bytes,
            largest_file: settings.max_object_bytes,
        };
        // With a disk tier the memory tier may shrink to half its size as the disk
        // index grows (see `tiered.rs`): its shards are sized for the largest object
        // to fit that half.
        let shrinks = if settings.disk.is_some() { 2 } else { 1 };
        Cache {
            storage: Box::new(MemoryStorage::new(
                settings.memory_bytes,
                largest_memory_object(&settings).saturating_mul(shrinks),
            )),
            disk: settings.disk.as_ref().map(|d| DiskTier::open(d, limits)),
            index_charge: AtomicU64::new(0),
            invalidations: Invalidations::new(RETAIN_FOR, RETAIN_AT_MOST),
            module_variants: Mutex::default(),
            listener: OnceLock::new(),
            stats: Default::default(),
            fills: FillBudget::new(settings.fill_memory_bytes),
            parts_lock: Mutex::new(()),
            parts_kept: AtomicBool::new(false),
            settings,
        }
    }

    /// The bound on what fills hold in memory, shared by every fill of this cache.
    pub fn fill_budget(&self) -> &Arc<FillBudget> {
        &self.fills
    }

    /// The invalidation sequence number now. A fetch takes one before it looks the
    /// cache up and passes it to [`Cache::store`], which refuses its response if an
    /// invalidation since then applies to it.
    pub fn ticket(&self) -> Ticket {
        self.invalidations.ticket()
    }

    /// Sets the function told of every invalidation (once; later calls are ignored).
    pub fn on_invalidate(&self, listener: InvalidationListener) {
        let _ = self.listener.set(listener);
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// The largest body the memory tier keeps: larger ones are stored on disk only
    /// (a fill goes there as it arrives, see [`Cache::spill`]), or not at all.
    pub fn memory_object_limit(&self) -> u64 {
        largest_memory_object(&self.settings)
    }

    /// The objects of `key` on disk, when none is in memory: headers are read from
    /// their files (blocking), bodies stay there to be streamed.
    pub(crate) fn disk_objects(&self, key: &CacheKey) -> Vec<(CacheKey, Arc<CachedObject>)> {
        self.disk
            .as_ref()
            .map(|d| d.load_all(key))
            .unwrap_or_default()
    }

    /// Finds the stored response for `request` (whose URL key is `key`) and says whether
    /// it is fresh for that request at `now`.
    pub fn lookup(&self, key: &CacheKey, request: &request::Parts, now: SystemTime) -> Lookup {
        let object = match self.storage.get(key) {
            None | Some(StoredItem::Parts(_)) => return Lookup::Miss,
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
    /// when it carries `Vary`, with the tags of its tag headers and its `Cache-Groups`
    /// added to its own.
    /// Returns whether it was stored: not when an invalidation since `ticket` applies
    /// to it.
    pub fn store(
        &self,
        key: &CacheKey,
        request: &request::Parts,
        object: CachedObject,
        ticket: Ticket,
    ) -> bool {
        if object.varies_on_everything() || object.body.len() > self.settings.max_object_bytes {
            return false;
        }
        let tags = self.object_tags(&object.headers);
        let object = Arc::new(object.add_tags(tags));
        let Some(_permit) = self.invalidations.permit(ticket, key.url(), &object.tags) else {
            self.stats.refused();
            return false;
        };
        // The complete object makes the parts kept of it useless.
        if self.parts_kept.load(Ordering::Relaxed) {
            self.storage.remove(&key.parts());
        }
        if key.has_module_variant() {
            self.index_module_variant(key);
        }
        let fits_memory =
            object.body.in_memory().is_some() && object.body.len() <= self.memory_object_limit();
        if fits_memory {
            self.insert_memory(key, request, object.clone());
        } else {
            // An older copy in memory must not outlive the new one stored on disk.
            self.storage.remove(&storage_key(key, request, &object));
        }
        if let Some(disk) = &self.disk {
            let base = (!object.vary.is_empty()).then(|| key.clone());
            disk.write(storage_key(key, request, &object), base, object);
            self.balance_memory();
        }
        true
    }

    /// The invalidation tags a response's fields give it: its tag headers' values and
    /// its `Cache-Groups`.
    pub(crate) fn object_tags(&self, headers: &http::HeaderMap) -> Vec<String> {
        // Most responses carry none of these fields: one pass over the few names a
        // response has costs less than looking each field up (about 450 instructions
        // a miss).
        let tag_headers = &self.settings.tag_headers;
        let groups = &crate::groups::CACHE_GROUPS;
        if !headers
            .keys()
            .any(|n| n == groups || tag_headers.contains(n))
        {
            return Vec::new();
        }
        let mut tags = crate::tags::from_headers(headers, tag_headers);
        tags.extend(
            crate::groups::group_names(headers, groups)
                .iter()
                .map(|g| crate::groups::group_tag(g)),
        );
        tags
    }

    /// Puts `object` in the memory tier under `key`, or under its variant key, keeping
    /// the URL's variant list consistent.
    pub(crate) fn insert_memory(
        &self,
        key: &CacheKey,
        request: &request::Parts,
        object: Arc<CachedObject>,
    ) {
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
            let mut keys = lock(&set.keys);
            if !keys.contains(&vkey) {
                keys.push(vkey.clone());
            }
        }
        self.storage.insert(vkey, StoredItem::Object(object));
    }

    /// Every object stored for the URL key `key`: one per Vary variant, then those
    /// stored with a module's variant.
    pub fn objects(&self, key: &CacheKey) -> Vec<Arc<CachedObject>> {
        self.url_entries(key).into_iter().map(|(_, o)| o).collect()
    }

    /// Replaces every object stored for `key` (all variants) with `update(object)`.
    /// Returns how many were replaced; an object an invalidation is removing is not.
    pub fn update(&self, key: &CacheKey, update: impl Fn(&CachedObject) -> CachedObject) -> usize {
        let ticket = self.ticket();
        let mut replaced = 0;
        for (k, o) in self.url_entries(key) {
            let new = Arc::new(update(&o));
            if let Some(_permit) = self.invalidations.permit(ticket, k.url(), &new.tags) {
                if let Some(disk) = &self.disk {
                    let base = (!new.vary.is_empty()).then(|| k.strip_vary(new.vary.len()));
                    disk.write(k.clone(), base, new.clone());
                }
                self.storage.insert(k, StoredItem::Object(new));
                replaced += 1;
            }
        }
        replaced
    }

    /// The entries of `key` and of its module variants.
    pub(crate) fn url_entries(&self, key: &CacheKey) -> Vec<(CacheKey, Arc<CachedObject>)> {
        let mut all = self.entries(key);
        for k in self.module_variant_keys(key.url(), false) {
            all.extend(self.entries(&k));
        }
        if all.is_empty() {
            all = self.disk_objects(key);
        }
        all
    }

    pub(crate) fn index_module_variant(&self, key: &CacheKey) {
        let mut index = lock(&self.module_variants);
        let keys = index.by_url.entry(key.url().into()).or_default();
        if !keys.contains(key) {
            keys.push(key.clone());
        }
        if index.by_url.len() >= index.sweep_at.max(MODULE_VARIANT_SWEEP) {
            let storage = &self.storage;
            index.by_url.retain(|_, keys| {
                keys.retain(|k| storage.get(k).is_some() || storage.get(&k.parts()).is_some());
                !keys.is_empty()
            });
            // What is left is live: sweep again only when the index has doubled.
            index.sweep_at = 2 * index.by_url.len();
        }
    }

    /// The module-variant keys indexed for `url`, removed from the index if `take`.
    pub(crate) fn module_variant_keys(&self, url: &str, take: bool) -> Vec<CacheKey> {
        let mut index = lock(&self.module_variants);
        if take {
            index.by_url.remove(url).unwrap_or_default()
        } else {
            index.by_url.get(url).cloned().unwrap_or_default()
        }
    }

    pub(crate) fn entries(&self, key: &CacheKey) -> Vec<(CacheKey, Arc<CachedObject>)> {
        match self.storage.get(key) {
            None | Some(StoredItem::Parts(_)) => Vec::new(),
            Some(StoredItem::Object(o)) => vec![(key.clone(), o)],
            Some(StoredItem::Variants(set)) => {
                let keys = lock(&set.keys).clone();
                keys.into_iter()
                    .filter_map(|k| match self.storage.get(&k) {
                        Some(StoredItem::Object(o)) => Some((k, o)),
                        _ => None,
                    })
                    .collect()
            }
        }
    }

    /// Removes what is stored under `key` (a variant list with its variants). Returns
    /// how many objects went.
    pub(crate) fn remove_key(&self, key: &CacheKey) -> usize {
        let mut removed = match self.storage.get(key) {
            None | Some(StoredItem::Parts(_)) => 0,
            Some(StoredItem::Object(_)) => 1,
            Some(StoredItem::Variants(set)) => self.remove_variants(&set),
        };
        self.storage.remove(key);
        // Parts count as one object: a PURGE that finds only them found something.
        let parts = key.parts();
        if self.storage.get(&parts).is_some() {
            removed += 1;
            self.storage.remove(&parts);
        }
        let on_disk = self.disk.as_ref().map_or(0, |d| d.invalidate(key));
        removed.max(on_disk)
    }

    fn remove_variants(&self, set: &VariantSet) -> usize {
        let keys = std::mem::take(&mut *lock(&set.keys));
        let mut removed = 0;
        for k in keys {
            if let Some(StoredItem::Object(_)) = self.storage.get(&k) {
                removed += 1;
            }
            self.storage.remove(&k);
        }
        removed
    }

    /// Bytes charged in the memory tier.
    pub fn size_bytes(&self) -> u64 {
        self.storage.size_bytes()
    }

    /// Number of objects (and variant lists) stored in the memory tier.
    pub fn object_count(&self) -> u64 {
        self.storage.item_count()
    }
}

/// What [`Cache::memory_object_limit`] will say, before there is a cache.
fn largest_memory_object(settings: &CacheSettings) -> u64 {
    if settings.disk.is_some() {
        settings.max_memory_object_bytes
    } else {
        settings.max_object_bytes
    }
}

/// The key `object` is stored under: `key`, or its variant for `request`.
fn storage_key(key: &CacheKey, request: &request::Parts, object: &CachedObject) -> CacheKey {
    if object.vary.is_empty() {
        key.clone()
    } else {
        key.variant(&object.vary, &request.headers)
    }
}
