//! The per-key limits: a token bucket for the request rate, a debt bucket for the
//! bandwidth (Squid's delay pools), a daily byte quota and a count of requests in
//! flight. Pure arithmetic on a key's state, given the time, so it is tested without
//! waiting.

use std::time::{Duration, Instant};

/// A key's limit state, kept in its table entry.
#[derive(Debug, Default)]
pub(crate) struct LimitState {
    requests: Bucket,
    bandwidth: Bucket,
    /// The quota period `quota_used` belongs to.
    quota_period: u64,
    pub quota_used: u64,
    pub in_flight: u32,
}

/// A token bucket, full when first used.
#[derive(Debug, Default)]
struct Bucket {
    tokens: f64,
    refilled: Option<Instant>,
}

impl Bucket {
    fn refill(&mut self, rate: f64, burst: f64, now: Instant) {
        self.tokens = match self.refilled {
            None => burst,
            Some(then) => {
                (self.tokens + rate * now.saturating_duration_since(then).as_secs_f64()).min(burst)
            }
        };
        self.refilled = Some(now);
    }
}

impl LimitState {
    /// Takes a request from the rate bucket; `Err(seconds)` to wait for the next one
    /// when it is empty.
    pub(crate) fn take_request(&mut self, rate: f64, burst: f64, now: Instant) -> Result<(), u64> {
        self.requests.refill(rate, burst, now);
        if self.requests.tokens >= 1.0 {
            self.requests.tokens -= 1.0;
            Ok(())
        } else {
            Err((((1.0 - self.requests.tokens) / rate).ceil() as u64).max(1))
        }
    }

    /// How long to hold back `bytes` of body so the key's long-run rate stays under
    /// `rate` bytes per second. The bucket goes into debt: chunks sent together (one
    /// client's parallel downloads) queue up behind each other.
    pub(crate) fn shape(&mut self, bytes: usize, rate: f64, burst: f64, now: Instant) -> Duration {
        self.bandwidth.refill(rate, burst, now);
        self.bandwidth.tokens -= bytes as f64;
        if self.bandwidth.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.bandwidth.tokens / rate)
        }
    }

    /// Bytes used in `period`, a new period starting from zero.
    pub(crate) fn quota_used_in(&mut self, period: u64) -> u64 {
        if self.quota_period != period {
            self.quota_period = period;
            self.quota_used = 0;
        }
        self.quota_used
    }

    /// Adds `bytes` to the quota used in `period`.
    pub(crate) fn use_quota(&mut self, bytes: u64, period: u64) {
        self.quota_used = self.quota_used_in(period).saturating_add(bytes);
    }
}

const DAY: u64 = 24 * 60 * 60;

/// The quota period (a day starting at `reset` seconds after midnight UTC) that the
/// Unix time `now` falls in.
pub(crate) fn quota_period(now: u64, reset: u64) -> u64 {
    (now + DAY - reset) / DAY
}

/// Seconds from `now` until the next quota reset.
pub(crate) fn until_reset(now: u64, reset: u64) -> u64 {
    (quota_period(now, reset) + 1) * DAY + reset - DAY - now
}
