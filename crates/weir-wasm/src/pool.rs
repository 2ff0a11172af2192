//! A filter's idle instances, kept per thread.
//!
//! An instance goes back to the pool of the thread that logged its transaction, and
//! the next transaction on that thread takes it with its memory still in that core's
//! cache. With one pool for all threads, every callback's first touch of an instance
//! waited for its lines to come from the other core, and every thread took one lock.

use std::sync::{Mutex, MutexGuard};

use thread_local::ThreadLocal;

/// Idle instances (of `Vm`), per thread.
pub(crate) struct Pool<T: Send> {
    /// Boxed, so that moving an instance between the pool and a transaction moves a
    /// pointer.
    #[allow(clippy::vec_box)]
    idle: ThreadLocal<Mutex<Vec<Box<T>>>>,
    /// Idle instances kept per thread.
    per_thread: usize,
}

impl<T: Send> Pool<T> {
    /// A pool that keeps `size` idle instances, shared out among the cores the
    /// threads run on: at least one per thread, unless `size` is 0.
    pub fn new(size: usize) -> Pool<T> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Pool {
            idle: ThreadLocal::new(),
            per_thread: match size {
                0 => 0,
                _ => (size / cores).max(1),
            },
        }
    }

    /// An idle instance of this thread's, else another thread's (a cold cache costs
    /// far less than instantiating a new one).
    pub fn take(&self) -> Option<Box<T>> {
        if let Some(vm) = lock(self.idle.get_or_default()).pop() {
            return Some(vm);
        }
        self.idle
            .iter()
            .find_map(|pool| pool.try_lock().ok().and_then(|mut idle| idle.pop()))
    }

    /// Keeps `vm` for this thread's next transactions, or drops it when the thread
    /// keeps enough.
    pub fn give_back(&self, vm: Box<T>) {
        let mut idle = lock(self.idle.get_or_default());
        if idle.len() < self.per_thread {
            idle.push(vm);
        }
    }
}

/// A pool's lock: a pool is a plain list, whole even if a thread panicked holding it.
fn lock<T>(pool: &Mutex<T>) -> MutexGuard<'_, T> {
    pool.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_its_own_first_then_another_threads() {
        let pool = std::sync::Arc::new(Pool::new(64));
        pool.give_back(Box::new(1));
        let other = pool.clone();
        std::thread::spawn(move || other.give_back(Box::new(2)))
            .join()
            .unwrap();
        assert_eq!(pool.take().as_deref(), Some(&1), "this thread's own first");
        assert_eq!(pool.take().as_deref(), Some(&2), "then the other thread's");
        assert_eq!(pool.take(), None);
    }

    #[test]
    fn a_thread_keeps_its_share_and_none_with_size_zero() {
        let pool = Pool::new(1);
        pool.give_back(Box::new(1));
        pool.give_back(Box::new(2));
        assert_eq!(pool.take().as_deref(), Some(&1));
        assert_eq!(pool.take(), None, "one kept: the share is at least one");
        let none = Pool::new(0);
        none.give_back(Box::new(1));
        assert_eq!(none.take(), None);
    }
}
