//! The timers of an exchange with an origin: how long its response may take, then how
//! long its body may leave without new data.
//!
//! An exchange has one timer for both ([`ExchangeTimer`], then [`IdleLimit`]), moved
//! lazily: data only notes when the limit now ends, and the timer is moved there when
//! it fires early. A timer made, armed and dropped for the response, another for the
//! body, and a reset for every chunk (the timer wheel's lock each time) cost a 1 KB
//! miss about 550 instructions more than one timer and a clock read per chunk
//! (callgrind, docs/benchmarks.md).

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// The deadline of an origin's response, on a timer the body's idle limit then reuses.
pub(super) struct ExchangeTimer(Pin<Box<Sleep>>);

impl ExchangeTimer {
    /// A deadline `after` from now; the timer is armed when first polled.
    pub(super) fn new(after: Duration) -> ExchangeTimer {
        ExchangeTimer(Box::pin(tokio::time::sleep(after)))
    }

    /// When the response's deadline passes.
    pub(super) fn deadline(&self) -> std::time::Instant {
        self.0.deadline().into_std()
    }

    /// `fut`'s output, or `None` when the deadline passes first.
    ///
    /// Cancel safety: dropping the returned future drops `fut`; the deadline stays.
    pub(super) async fn bound<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            match self.0.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// The body's idle limit, on the same timer. It counts from the first time the
    /// body has nothing ready, as a timer made then would.
    pub(super) fn into_idle(self, limit: Duration) -> IdleLimit {
        IdleLimit {
            limit,
            timer: self.0,
            due: None,
            counting: false,
        }
    }
}

/// The longest an origin may leave a body without new data, on its exchange's timer.
pub(super) struct IdleLimit {
    pub(super) limit: Duration,
    timer: Pin<Box<Sleep>>,
    /// When the limit ends, if later than the timer is set for.
    due: Option<Instant>,
    /// Whether the body has waited yet (the limit counts from then).
    counting: bool,
}

impl IdleLimit {
    /// Data arrived: the limit starts again.
    pub(super) fn data(&mut self) {
        if self.counting {
            self.due = Some(Instant::now() + self.limit);
        }
    }

    /// Nothing is ready: whether the limit has passed (registering `cx` if not).
    pub(super) fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !std::mem::replace(&mut self.counting, true) {
            let due = Instant::now() + self.limit;
            // Firing early is checked when it fires; firing late is not.
            if self.timer.deadline() > due {
                self.timer.as_mut().reset(due);
            } else {
                self.due = Some(due);
            }
        }
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            match self.due.take() {
                // Data came after the timer was set: the limit ends later.
                Some(due) if due > self.timer.deadline() => self.timer.as_mut().reset(due),
                _ => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_expired(idle: &mut IdleLimit) -> bool {
        let waker = std::task::Waker::noop();
        idle.expired(&mut Context::from_waker(waker))
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_limit_counts_from_the_last_data() {
        let timer = ExchangeTimer::new(Duration::from_secs(10));
        let mut idle = timer.into_idle(Duration::from_secs(10));
        assert!(!poll_expired(&mut idle));
        tokio::time::advance(Duration::from_secs(6)).await;
        idle.data();
        tokio::time::advance(Duration::from_secs(6)).await;
        // The timer set at 0 fired at 10; data came at 6: the limit ends at 16.
        assert!(!poll_expired(&mut idle), "ended 6 s after data");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!poll_expired(&mut idle));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(poll_expired(&mut idle), "not ended 11 s after data");
    }

    #[tokio::test(start_paused = true)]
    async fn the_response_deadline_then_the_idle_limit_share_a_timer() {
        let mut timer = ExchangeTimer::new(Duration::from_secs(5));
        assert_eq!(timer.bound(std::future::ready(7)).await, Some(7));
        let never = std::future::pending::<()>();
        let start = Instant::now();
        assert_eq!(timer.bound(never).await, None);
        assert_eq!(start.elapsed(), Duration::from_secs(5));

        // A shorter idle limit than what is left of the deadline moves the timer in.
        let timer = ExchangeTimer::new(Duration::from_secs(60));
        let mut idle = timer.into_idle(Duration::from_secs(2));
        assert!(!poll_expired(&mut idle));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            poll_expired(&mut idle),
            "the idle limit waited for the deadline"
        );

        // A longer one waits for the data it counts from.
        let timer = ExchangeTimer::new(Duration::from_secs(1));
        let mut idle = timer.into_idle(Duration::from_secs(4));
        assert!(!poll_expired(&mut idle));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!poll_expired(&mut idle), "ended at the response's deadline");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(poll_expired(&mut idle));

        // It counts from the body's first wait, not from when the response came.
        let timer = ExchangeTimer::new(Duration::from_secs(1));
        let mut idle = timer.into_idle(Duration::from_secs(4));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!poll_expired(&mut idle), "counted before the body waited");
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(poll_expired(&mut idle));
    }
}
