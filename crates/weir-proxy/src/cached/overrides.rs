//! What a transaction's modules asked of the cache (`Txn::cache`), applied to a
//! response stored in the client's own transaction rather than by a fill: a POST's
//! answer that names its target, the whole object an origin sent for a range miss,
//! the part its 206 carried.
//! `skip` stores nothing, the time to live replaces the response's freshness, and the
//! tags go with the object, as a fill applies them from its own transaction
//! (`fetch.rs`). The variant is already in the key both are stored under.

use std::time::SystemTime;

use weir_api::CacheOverrides;
use weir_cache::{CachedObject, StoragePolicy};

use crate::modules::txn::ModTxn;

/// The overrides of `txn`, when it has modules (a plain borrow, which a future may
/// hold across an await where the transaction could not be).
pub(crate) fn of(txn: Option<&ModTxn>) -> Option<&CacheOverrides> {
    txn.map(|t| t.txn.cache_overrides())
}

/// Whether a module asked that this transaction's response not be stored.
pub(super) fn skipped(overrides: Option<&CacheOverrides>) -> bool {
    overrides.is_some_and(|o| o.skip)
}

/// `policy` with a module's time to live, when one was set.
pub(super) fn policy(
    overrides: Option<&CacheOverrides>,
    policy: StoragePolicy,
    now: SystemTime,
) -> StoragePolicy {
    match overrides.and_then(|o| o.ttl) {
        Some(ttl) => policy.with_time_to_live(now, ttl),
        None => policy,
    }
}

/// `object` with the tags modules attached, when they did.
pub(super) fn tagged(overrides: Option<&CacheOverrides>, object: CachedObject) -> CachedObject {
    match overrides {
        Some(o) if !o.tags.is_empty() => object.with_tags(o.tags.clone()),
        _ => object,
    }
}
