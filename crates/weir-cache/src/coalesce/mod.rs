//! Request coalescing: concurrent misses for one key share one origin fetch.
//!
//! The fetch writes the response head and body chunks into a [`Flight`]; every client
//! waiting on that key reads them through its own [`FlightReader`] as they arrive.
//! While the response may still be stored, the flight keeps every chunk (the body
//! is bounded by the largest storable object, and a late reader needs the start).
//! Once it will not be stored, chunks every reader has passed are dropped and the
//! writer waits for slow readers, so a huge download is never held in memory.
//! When the last reader goes away the flight is abandoned and the fetch stops.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::key::{CacheKey, KeyHashing};
use crate::lock::lock;

mod chunks;
mod flight;
mod reader;
mod writer;
pub use flight::Flight;
pub use reader::FlightReader;
pub use writer::FlightWriter;

/// One shard of the table: the flights of the keys whose hash picks it.
type Shard<H> = Mutex<HashMap<CacheKey, Arc<Flight<H>>, KeyHashing>>;

/// Shards of the table. Every miss locks its key's shard twice (to join, to leave):
/// with one lock for the process, each of those took a cache line the other cores
/// had just written (the lock and the table behind it), on every miss of every
/// worker. A power of two.
const SHARDS: usize = 64;

/// The in-flight fetches, by key.
pub struct Coalescer<H> {
    shards: Box<[Shard<H>]>,
}

/// Which fetches a request may be answered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Any fetch in flight for its key (collapsed forwarding).
    Any,
    /// Only a fetch that begins after it arrived: a request that says `no-cache`
    /// (RFC 9111 §5.2.1.4) starts one, and later requests share that one.
    After,
    /// Its own fetch only: collapsed forwarding is off.
    Alone,
}

/// The result of [`Coalescer::join`].
pub enum Join<H> {
    /// No fetch was in flight: the caller must start one and write into this flight
    /// (and finish it: a writer dropped before that fails the flight).
    Leader(FlightWriter<H>, FlightReader<H>),
    /// A fetch is in flight: read it.
    Follower(FlightReader<H>),
}

impl<H: Clone> Default for Coalescer<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Clone> Coalescer<H> {
    /// No flights.
    pub fn new() -> Self {
        Coalescer {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// The shard that holds `key`'s flight: bits from the middle of the hash, which a
    /// shard's map does not use (its low bits pick a bucket, its top seven tell the keys
    /// of a group apart).
    fn shard(&self, key: &CacheKey) -> &Shard<H> {
        &self.shards[(key.hash_value() >> 32) as usize % SHARDS]
    }

    /// Joins the flight for `key`, or creates it (the caller is then the leader).
    /// `recheck` runs under the lock of the key's shard when there is no flight, so a
    /// fetch that just finished and stored its response is found instead of fetched
    /// again; when it returns `Some`, that value is returned and no flight is created.
    pub fn join<T>(
        &self,
        key: &CacheKey,
        recheck: impl FnOnce() -> Option<T>,
    ) -> Result<Join<H>, T> {
        self.join_as(key, Sharing::Any, recheck)
    }

    /// [`Coalescer::join`], sharing as `sharing` allows. With [`Sharing::After`] the
    /// new flight replaces the key's flight in the table (its readers read on) and no
    /// just-stored copy is rechecked; with [`Sharing::Alone`] it is not in the table.
    pub fn join_as<T>(
        &self,
        key: &CacheKey,
        sharing: Sharing,
        recheck: impl FnOnce() -> Option<T>,
    ) -> Result<Join<H>, T> {
        let mut flights = lock(self.shard(key));
        if sharing == Sharing::Alone {
            if let Some(found) = recheck() {
                return Err(found);
            }
            let flight = Arc::new(Flight::new());
            let reader = flight.reader().expect("a new flight accepts readers");
            return Ok(Join::Leader(FlightWriter::new(flight), reader));
        }
        // One lookup in the table for a miss (hashing a key is most of its cost).
        let slot = flights.entry(key.clone());
        if let Entry::Occupied(existing) = &slot {
            if sharing == Sharing::Any {
                if let Some(reader) = existing.get().reader() {
                    return Ok(Join::Follower(reader));
                }
            }
        }
        if sharing == Sharing::Any {
            if let Some(found) = recheck() {
                return Err(found);
            }
        }
        let flight = Arc::new(Flight::new());
        let reader = flight.reader().expect("a new flight accepts readers");
        match slot {
            Entry::Occupied(mut existing) => {
                existing.insert(flight.clone());
            }
            Entry::Vacant(vacant) => {
                vacant.insert(flight.clone());
            }
        }
        Ok(Join::Leader(FlightWriter::new(flight), reader))
    }

    /// Removes the flight for `key` if it is `flight` (new requests will not join it).
    pub fn leave(&self, key: &CacheKey, flight: &Arc<Flight<H>>) {
        let mut flights = lock(self.shard(key));
        // Looked up twice rather than through an entry, which takes its key by value:
        // a key's hash is kept in it, and a clone counts it (an atomic operation, and
        // another to drop it).
        if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            flights.remove(key);
        }
    }

    /// Removes the flights whose key `matches` from the table: their readers go on
    /// reading them, new requests start fetches of their own. For invalidations, so
    /// that no request that arrives after one is served what was fetched before it.
    pub fn detach(&self, matches: impl Fn(&CacheKey) -> bool) -> usize {
        let mut detached = 0;
        for shard in &self.shards {
            let mut flights = lock(shard);
            let before = flights.len();
            flights.retain(|key, _| !matches(key));
            detached += before - flights.len();
        }
        detached
    }

    /// Number of fetches in flight.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no fetch is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
