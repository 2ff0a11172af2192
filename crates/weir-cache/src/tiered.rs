//! The cache facade's disk-tier calls: lookups after a memory miss, objects for the
//! content manager, counters, and flushing at shutdown.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use http::request;

use crate::cache::{Cache, Lookup};
use crate::disk::{DiskStats, DiskTier};
use crate::key::CacheKey;
use crate::policy::Freshness;
use crate::spill::Spill;

/// The most the disk index's memory may drift from what the memory tier gave up for it.
const BALANCE_STEP: u64 = 1 << 20;

impl Cache {
    /// Whether there is a disk tier to look in after a memory miss.
    pub fn has_disk(&self) -> bool {
        self.disk.is_some()
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
        let limit = self.memory_object_limit();
        let Some(object) = disk.read(found, limit).await else {
            return Lookup::Miss;
        };
        if object
            .body
            .in_memory()
            .is_some_and(|b| b.len() as u64 <= limit)
        {
            self.insert_memory(key, request, object.clone());
            self.balance_memory();
        }
        match object.freshness(request, now) {
            Freshness::Fresh => Lookup::Fresh(object),
            Freshness::Stale => Lookup::Stale(object),
        }
    }

    /// A file of the disk tier for a fill too large for the memory tier to be written
    /// to as it arrives; `None` without a disk tier, while its index is being rebuilt,
    /// or when no file can be made (the response is then not stored).
    pub fn spill(&self) -> Option<Spill> {
        self.disk.as_ref().and_then(DiskTier::spill)
    }

    /// Gives the memory tier's room to the disk tier's index as it grows, and back as
    /// it shrinks, so that the two stay within `[cache] memory` together. In steps, so
    /// that a store pays one atomic load when nothing changes.
    pub(crate) fn balance_memory(&self) {
        let Some(disk) = &self.disk else {
            return;
        };
        let now = disk.index_memory();
        let taken = self.index_charge.load(Ordering::Relaxed);
        let memory = self.settings().memory_bytes;
        if now.abs_diff(taken) < (memory / 64).min(BALANCE_STEP) {
            return;
        }
        if self
            .index_charge
            .compare_exchange(taken, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.storage.set_capacity(memory.saturating_sub(now).max(1));
        }
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
            self.balance_memory();
        }
    }
}
