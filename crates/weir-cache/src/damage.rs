//! Telling the disk tier that a body read from one of its files turned out damaged,
//! so that it drops the entry.
//!
//! Its own file, below the stored body: a body in a file carries a report to the tier
//! that holds the file, and the tier (which holds bodies) sits above the body. The body
//! knows the tier only as the function that drops a damaged entry, [`DropDamaged`].

use std::sync::Weak;

use crate::key::CacheKey;

/// Drops entry `id` under `key`, found damaged for `reason` (the disk tier's own).
/// Boxed so that a report holds a thin pointer to it: a report lives in every body
/// read from a file, and stored objects are sized by what they hold.
pub(crate) type DropDamaged = Box<dyn Fn(&CacheKey, u64, &str) + Send + Sync>;

/// Reports a damaged entry found while its body was read.
#[derive(Clone)]
pub(crate) struct DamageReport {
    tier: Weak<DropDamaged>,
    key: CacheKey,
    id: u64,
}

impl DamageReport {
    /// For entry `id` under `key`, to the tier's `tier` (gone with the tier).
    pub(crate) fn new(tier: Weak<DropDamaged>, key: CacheKey, id: u64) -> DamageReport {
        DamageReport { tier, key, id }
    }

    /// For a body that is not an entry (yet): nothing to drop.
    pub(crate) fn none() -> DamageReport {
        DamageReport {
            tier: Weak::new(),
            key: CacheKey::for_url("", "", ""),
            id: 0,
        }
    }

    pub(crate) fn report(&self, reason: &str) {
        if let Some(drop_damaged) = self.tier.upgrade() {
            drop_damaged(&self.key, self.id, reason);
        }
    }
}
