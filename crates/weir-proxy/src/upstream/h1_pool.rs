//! One origin's HTTP/1.1 connections as the pool keeps them: the idle ones and how
//! many are open. Below the shared state that holds it (`origins.rs`); taking and
//! giving back connections, which need that state, is in `h1.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::h1_conn::{Counts, H1Conn, Place};

/// An idle connection, since when it idles, and the worker whose requests used it
/// last (see `crate::worker`).
pub(super) struct Idle {
    pub(super) conn: H1Conn,
    pub(super) since: Instant,
    pub(super) worker: u16,
}

/// One origin's HTTP/1.1 connections.
pub(super) struct Pool {
    /// The most recently used last.
    pub(super) idle: Mutex<Vec<Idle>>,
    /// Connections open (busy or idle), and the signal that one may be had.
    pub(super) counts: Arc<Counts>,
    pub(super) max_idle: usize,
}

impl Pool {
    pub(super) fn new(max_idle: usize) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            counts: Arc::default(),
            max_idle,
        }
    }

    /// How many connections are open.
    pub(super) fn open(&self) -> usize {
        self.counts.open.load(Ordering::Acquire)
    }

    /// A place for one more connection when fewer than `most` are open.
    pub(super) fn try_reserve(&self, most: usize) -> Option<Place> {
        let open = self.open();
        (open < most
            && self
                .counts
                .open
                .compare_exchange(open, open + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok())
        .then(|| Place(self.counts.clone()))
    }

    /// A place for one more connection, whatever the limit (the connection that
    /// finds out which protocol an `auto` origin speaks, or a retry's).
    pub(super) fn reserve(&self) -> Place {
        self.counts.open.fetch_add(1, Ordering::AcqRel);
        Place(self.counts.clone())
    }

    /// Closes idle connections older than `timeout`, or that the origin closed.
    pub(super) fn close_expired_idle(&self, timeout: Duration) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain_mut(|c| c.since.elapsed() < timeout && c.conn.is_usable());
    }

    /// The idle connection a request on `worker` should take: the most recently used
    /// of that worker's, else (`Near::Any`) the most recently used of all.
    pub(super) fn take_idle(&self, worker: u16, near: Near) -> Option<Idle> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        nearest(&idle, worker, near, |c| c.worker).map(|at| idle.remove(at))
    }
}
/// Whose idle connections a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Near {
    /// Only its own worker's.
    Only,
    /// Its own worker's first, else any.
    Any,
}

/// Where in `idle` (most recently used last) the connection for a request on `worker`
/// is: the last one of that worker's, else with `Near::Any` the last one.
fn nearest<T>(idle: &[T], worker: u16, near: Near, worker_of: impl Fn(&T) -> u16) -> Option<usize> {
    let own = idle.iter().rposition(|c| worker_of(c) == worker);
    match near {
        Near::Only => own,
        Near::Any => own.or(idle.len().checked_sub(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::{nearest, Near};

    #[test]
    fn a_request_takes_its_own_workers_connection_first() {
        let idle = [(1, "a"), (2, "b"), (1, "c"), (2, "d")];
        let worker = |c: &(u16, &str)| c.0;
        assert_eq!(
            nearest(&idle, 1, Near::Only, worker),
            Some(2),
            "the last of worker 1's"
        );
        assert_eq!(nearest(&idle, 2, Near::Any, worker), Some(3));
        // None of its own: nothing, or the most recently used of all.
        assert_eq!(nearest(&idle, 3, Near::Only, worker), None);
        assert_eq!(nearest(&idle, 3, Near::Any, worker), Some(3));
        assert_eq!(nearest(&idle[..0], 1, Near::Any, worker), None);
        // Work stealing: every connection and request is worker 0's, so the pool is
        // last in, first out as before.
        let shared = [(0, "a"), (0, "b")];
        assert_eq!(nearest(&shared, 0, Near::Only, worker), Some(1));
    }
}
