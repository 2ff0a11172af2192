//! The bound on what fills in flight hold in memory at once.
//!
//! A fill keeps the body it is receiving until it can store it (late clients joining
//! it need the start too). Many large fills at once could hold far more than the
//! memory tier itself, so their total is bounded: a fill that would go over it is
//! served to its clients as it arrives but not stored (counted), never failed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The bytes fills hold, against a limit. Shared by every fill of one cache.
#[derive(Debug)]
pub struct FillBudget {
    limit: u64,
    held: AtomicU64,
    passed: AtomicU64,
}

impl FillBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<FillBudget> {
        Arc::new(FillBudget {
            limit,
            held: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        })
    }

    /// Bytes held by fills now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Fills passed through uncached because they would have gone over the limit.
    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }

    /// A hold for one fill, holding nothing yet.
    pub fn hold(self: &Arc<Self>) -> FillHold {
        FillHold {
            budget: self.clone(),
            held: 0,
        }
    }
}

/// What one fill holds; given back when it is dropped or released.
#[derive(Debug)]
pub struct FillHold {
    budget: Arc<FillBudget>,
    held: u64,
}

impl FillHold {
    /// Takes `n` more bytes if the budget has room; when it has not, nothing is taken,
    /// the fill is counted as passed through, and `false` is returned.
    pub fn try_add(&mut self, n: u64) -> bool {
        let b = &self.budget;
        let mut now = b.held.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(n) > b.limit {
                b.passed.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            match b
                .held
                .compare_exchange_weak(now, now + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.held += n;
                    return true;
                }
                Err(actual) => now = actual,
            }
        }
    }

    /// Takes `n` more bytes whatever the budget says (a bounded batch on its way to
    /// disk, which must not stop a fill already being written there).
    pub fn add(&mut self, n: u64) {
        self.budget.held.fetch_add(n, Ordering::Relaxed);
        self.held += n;
    }

    /// Gives back everything held.
    pub fn release(&mut self) {
        self.budget.held.fetch_sub(self.held, Ordering::Relaxed);
        self.held = 0;
    }

    /// Bytes held by this fill.
    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for FillHold {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_stay_within_the_limit_and_are_given_back() {
        let budget = FillBudget::new(100);
        let mut a = budget.hold();
        let mut b = budget.hold();
        assert!(a.try_add(60));
        assert!(!b.try_add(50), "60 + 50 is over 100");
        assert_eq!(budget.passed(), 1);
        assert!(b.try_add(40));
        assert_eq!(budget.held(), 100);
        drop(a);
        assert_eq!(budget.held(), 40);
        b.add(200);
        assert_eq!(budget.held(), 240);
        b.release();
        assert_eq!(budget.held(), 0);
    }
}
