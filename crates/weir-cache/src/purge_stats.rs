//! What purges removed and what stores they refused: the counters and their totals.
//!
//! Its own file because the cache counts refused stores and the purges count what
//! they remove, and the purges are built on the cache.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::invalidation::Invalidation;

/// Objects removed by invalidations, by kind, and responses not stored because an
/// invalidation happened during their fetch. Totals since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeStats {
    /// Objects removed by URL (purges, deletes, writes through the proxy).
    pub by_url: u64,
    /// Objects removed by URL prefix.
    pub by_prefix: u64,
    /// Objects removed by tag.
    pub by_tag: u64,
    /// Objects removed by cache group (RFC 9875).
    pub by_group: u64,
    /// Responses refused by [`Cache::store`](crate::Cache::store) because of an invalidation during their
    /// fetch.
    pub refused_stores: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) by_url: AtomicU64,
    pub(crate) by_prefix: AtomicU64,
    pub(crate) by_tag: AtomicU64,
    pub(crate) by_group: AtomicU64,
    pub(crate) refused: AtomicU64,
}

impl Counters {
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn removed(&self, what: &Invalidation, n: usize) {
        let counter = match what {
            Invalidation::Url(_) => &self.by_url,
            Invalidation::Prefix(_) => &self.by_prefix,
            Invalidation::Tag(_) => &self.by_tag,
            Invalidation::Groups { .. } => &self.by_group,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}
