//! Taking a mutex whether or not a thread panicked while holding it.
//!
//! Its own file because the disk tier, the coalescer and the cache's own maps (variant
//! keys, module variants) all lock this way, each from several files.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, going on with the data a panicking holder left: every state behind
/// these locks is valid between statements.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
