//! One origin's HTTP/1.1 connections as the pool keeps them: the idle ones and how
//! many are open. Below the shared state that holds it (`origins.rs`); taking and
//! giving back connections, which need that state, is in `h1.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
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
    /// The idle connections, in shards by worker (see [`Pool::shard`]).
    shards: Box<[Shard]>,
    /// Connections open (busy or idle), and the signal that one may be had.
    pub(super) counts: Arc<Counts>,
}

/// Some workers' idle connections, the most recently used last, and how many it keeps.
/// On cache lines of its own: a miss takes a connection and gives it back, and with
/// one list for every worker each of those took a lock another core had just written.
#[repr(align(128))]
struct Shard {
    idle: Mutex<Vec<Idle>>,
    max: usize,
}

/// Shards of a pool: one per core, as the per-core scheduler has one worker per core.
fn shard_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(64)))
}

impl Pool {
    /// A pool that keeps `max_idle` idle connections at most, shared out among its
    /// shards (the first ones get the remainder).
    pub(super) fn new(max_idle: usize) -> Pool {
        let n = shard_count();
        Pool {
            shards: (0..n)
                .map(|i| Shard {
                    idle: Mutex::new(Vec::new()),
                    max: max_idle / n + usize::from(i < max_idle % n),
                })
                .collect(),
            counts: Arc::default(),
        }
    }

    /// The shard of `worker`'s idle connections.
    fn shard(&self, worker: u16) -> usize {
        usize::from(worker) % self.shards.len()
    }

    /// Keeps `conn`, idle: in its worker's shard, else in another with room, else
    /// nowhere (it is closed).
    pub(super) fn give_back(&self, conn: Idle) {
        let own = self.shard(conn.worker);
        let mut conn = Some(conn);
        for i in (own..self.shards.len()).chain(0..own) {
            let shard = &self.shards[i];
            let mut idle = match i == own {
                true => lock(&shard.idle),
                // Another worker's: not waited for.
                false => match shard.idle.try_lock() {
                    Ok(idle) => idle,
                    Err(_) => continue,
                },
            };
            if idle.len() < shard.max {
                idle.extend(conn.take());
                return;
            }
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
        for shard in &self.shards {
            let mut idle = lock(&shard.idle);
            idle.retain_mut(|c| c.since.elapsed() < timeout && c.conn.is_usable());
        }
    }

    /// The idle connection a request on `worker` should take: the most recently used
    /// of that worker's, else (`Near::Any`) the most recently used of its shard, else
    /// of another shard.
    pub(super) fn take_idle(&self, worker: u16, near: Near) -> Option<Idle> {
        let own = self.shard(worker);
        {
            let mut idle = lock(&self.shards[own].idle);
            if let Some(at) = nearest(&idle, worker, near, |c| c.worker) {
                return Some(idle.remove(at));
            }
        }
        if near == Near::Only {
            return None;
        }
        (own + 1..self.shards.len())
            .chain(0..own)
            .find_map(|i| lock(&self.shards[i].idle).pop())
    }
}

/// A shard's lock: its list is whole even if a thread panicked holding it.
fn lock(idle: &Mutex<Vec<Idle>>) -> MutexGuard<'_, Vec<Idle>> {
    idle.lock().unwrap_or_else(|e| e.into_inner())
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
