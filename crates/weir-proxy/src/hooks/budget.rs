//! How many body bytes modules may hold whole at once, over every transaction
//! (`[limits] module_body_total`).
//!
//! `[limits] module_body` bounds one message; without a bound on their sum, many
//! clients sending large bodies through a module that wants them whole (an ICAP
//! REQMOD service, a transcoder) could make the proxy hold `module_body` per
//! transaction. A message that would go over the total is handled as one over
//! `module_body`: the module gets what was read, marked truncated, and the rest passes
//! on unchanged.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// The shared allowance, in KiB.
pub(crate) struct HeldBudget {
    kib: Arc<Semaphore>,
}

/// Room taken from a [`HeldBudget`] for one message's held bytes; given back on drop.
#[derive(Default)]
pub(crate) struct Room {
    permit: Option<OwnedSemaphorePermit>,
    kib: u32,
}

impl HeldBudget {
    /// An allowance of `bytes` in all.
    pub(crate) fn new(bytes: u64) -> HeldBudget {
        let kib = (bytes / 1024).min(Semaphore::MAX_PERMITS as u64) as usize;
        HeldBudget {
            kib: Arc::new(Semaphore::new(kib)),
        }
    }

    /// Whether a message may hold `bytes` in all: no more than `limit`
    /// (`[limits] module_body`), and room for them in the allowance (taken into
    /// `room`).
    pub(crate) fn admits(
        &self,
        room: &mut Room,
        bytes: u64,
        limit: u64,
        metrics: &Metrics,
    ) -> bool {
        bytes <= limit && self.cover(room, bytes, metrics)
    }

    /// Grows `room` to cover `bytes` held in all, without waiting. `false` (and the
    /// refusal counted) when the allowance has no more.
    fn cover(&self, room: &mut Room, bytes: u64, metrics: &Metrics) -> bool {
        let needed = bytes.div_ceil(1024).min(u32::MAX as u64) as u32;
        if needed <= room.kib {
            return true;
        }
        match self.kib.clone().try_acquire_many_owned(needed - room.kib) {
            Ok(more) => {
                match &mut room.permit {
                    Some(p) => p.merge(more),
                    None => room.permit = Some(more),
                }
                room.kib = needed;
                true
            }
            Err(_) => {
                metrics.module_body_refused();
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_share_the_allowance_and_give_it_back() {
        let metrics = Metrics::new();
        let budget = HeldBudget::new(10 * 1024);
        let (mut a, mut b) = (Room::default(), Room::default());
        assert!(budget.cover(&mut a, 6 * 1024, &metrics));
        assert!(budget.cover(&mut a, 6 * 1024 + 1, &metrics), "7 KiB");
        assert!(!budget.cover(&mut b, 4 * 1024, &metrics), "3 KiB left");
        assert!(budget.cover(&mut b, 3 * 1024, &metrics));
        drop(a);
        assert!(budget.cover(&mut b, 10 * 1024, &metrics));
        assert!(metrics
            .encode()
            .contains("weir_module_body_refused_total 1"));
    }
}
