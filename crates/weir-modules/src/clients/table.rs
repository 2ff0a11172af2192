//! A Space-Saving table (Metwally, Agrawal, El Abbadi, 2005): at most `capacity`
//! entries whatever the number of keys seen. A new key takes the place of the entry
//! with the fewest requests and inherits its count as a possible overestimate
//! (`error`), so the busiest keys keep exact counts (`error == 0` for every key that
//! entered the table before it filled) and any key with more than total/capacity
//! requests is guaranteed to be in it.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use super::limits::LimitState;

/// What is counted of one client or user.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Finished requests, including those inherited on entering a full table.
    pub requests: u64,
    /// How many of `requests` may belong to keys this entry replaced.
    pub error: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub hits: u64,
    pub misses: u64,
    pub denied: u64,
    pub rate_limited: u64,
    pub over_quota: u64,
    pub over_concurrency: u64,
    /// Total delay bandwidth shaping added to this key's responses.
    pub shaped_ms: u64,
}

/// One tracked key.
#[derive(Debug)]
pub(crate) struct Entry<K> {
    pub key: K,
    pub figures: Figures,
    pub limits: LimitState,
}

/// The bounded table.
#[derive(Debug)]
pub(crate) struct Table<K> {
    capacity: usize,
    index: HashMap<K, usize>,
    entries: Vec<Entry<K>>,
    /// Keys that replaced another (the table was full).
    replaced: u64,
}

impl<K: Hash + Eq + Clone> Table<K> {
    pub(crate) fn new(capacity: usize) -> Table<K> {
        Table {
            capacity: capacity.max(1),
            index: HashMap::new(),
            entries: Vec::new(),
            replaced: 0,
        }
    }

    /// The entry of `key`, made (replacing the least busy when full) if missing.
    pub(crate) fn entry<Q>(&mut self, key: &Q, owned: impl FnOnce() -> K) -> &mut Entry<K>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(&i) = self.index.get(key) {
            return &mut self.entries[i];
        }
        let key = owned();
        if self.entries.len() < self.capacity {
            self.index.insert(key.clone(), self.entries.len());
            self.entries.push(Entry {
                key,
                figures: Figures::default(),
                limits: LimitState::default(),
            });
            return self.entries.last_mut().expect("just pushed");
        }
        // A linear scan: replacements happen only once the table is full, and a
        // scan of a few thousand counters costs less than keeping them sorted on
        // every request.
        let least = (0..self.entries.len())
            .min_by_key(|&i| self.entries[i].figures.requests)
            .expect("capacity is at least one");
        let floor = self.entries[least].figures.requests;
        let old = self.entries[least].key.clone();
        self.index.remove::<K>(&old);
        self.index.insert(key.clone(), least);
        self.replaced += 1;
        self.entries[least] = Entry {
            key,
            figures: Figures {
                requests: floor,
                error: floor,
                ..Figures::default()
            },
            limits: LimitState::default(),
        };
        &mut self.entries[least]
    }

    /// Entries tracked now (never more than the capacity).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Keys that entered by replacing another.
    pub(crate) fn replaced(&self) -> u64 {
        self.replaced
    }

    /// The `n` busiest entries, by requests, busiest first.
    pub(crate) fn top(&self, n: usize) -> Vec<&Entry<K>> {
        let mut all: Vec<&Entry<K>> = self.entries.iter().collect();
        all.sort_by_key(|e| std::cmp::Reverse(e.figures.requests));
        all.truncate(n);
        all
    }
}
