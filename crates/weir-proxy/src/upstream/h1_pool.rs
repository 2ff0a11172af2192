//! One origin's HTTP/1.1 connections as the pool keeps them: the idle ones and how
//! many are open. Below the shared state that holds it (`origins.rs`); taking and
//! giving back connections, which need that state, is in `h1.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::client::conn::http1;
use tokio::sync::Notify;

use crate::body::request::RequestBody;

/// An idle connection: its sender, since when it idles, and the worker whose event
/// loop runs its task (see `crate::worker`).
pub(super) struct Idle {
    pub(super) sender: http1::SendRequest<RequestBody>,
    pub(super) since: Instant,
    pub(super) worker: u16,
}

/// One origin's HTTP/1.1 connections.
pub(super) struct Pool {
    /// The most recently used last.
    pub(super) idle: Mutex<Vec<Idle>>,
    /// Connections open (busy or idle).
    pub(super) open: AtomicUsize,
    /// Signalled when a connection goes idle or closes: a waiting request may proceed.
    pub(super) available: Notify,
    pub(super) max_idle: usize,
}

impl Pool {
    pub(super) fn new(max_idle: usize) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            available: Notify::new(),
            max_idle,
        }
    }

    /// Closes idle connections older than `timeout`.
    pub(super) fn close_expired_idle(&self, timeout: Duration) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|c| !c.sender.is_closed() && c.since.elapsed() < timeout);
    }

    pub(super) fn connection_gone(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.available.notify_one();
    }

    /// The idle connection a request on `worker` should take: the most recently used
    /// of those whose task runs on that worker, else (`Near::Any`) the most recently
    /// used of all.
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
