//! Which worker the current thread is, for what keeps an affinity to it.
//!
//! With the per-core scheduler each worker thread runs its own event loop, and a task
//! woken from another thread costs that thread an `eventfd` write and the worker a
//! wake-up: a pooled origin connection, whose task runs on the worker that opened it,
//! is best taken again by a request on that same worker. With work stealing every
//! thread drives every task, and all of them are worker 0.

use std::cell::Cell;

thread_local! {
    static CURRENT: Cell<u16> = const { Cell::new(0) };
}

/// Names the current thread's worker (from 1; 0 is any thread of a shared runtime).
pub(crate) fn set_current(worker: u16) {
    CURRENT.with(|c| c.set(worker));
}

/// The current thread's worker: 0 unless [`set_current`] named it.
#[inline]
pub(crate) fn current() -> u16 {
    CURRENT.with(Cell::get)
}
