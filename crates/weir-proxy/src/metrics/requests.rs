//! What every finished transaction adds to the metrics, counted per thread:
//! `weir_requests_total`, `weir_request_duration_seconds` and the body bytes; and, as
//! often, `weir_origin_connections_reused_total`.
//!
//! Every transaction adds to these, on whichever worker thread finishes it. As shared
//! atomics, each addition was a locked instruction on a cache line the other cores
//! had just written, so it waited for the line to come over, five times per request.
//! Each thread now adds to its own lines with a plain load and store (it is their
//! only writer; they are atomics so that a scrape on another thread reads whole
//! values), and a scrape sums the threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use thread_local::ThreadLocal;

use super::CacheOutcome;
use crate::config::ListenMode;

/// Upper bounds of the request-duration buckets, in seconds.
pub(super) const DURATION_BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// The listener modes counted apart, in the order of their series.
pub(super) const MODES: [ListenMode; 3] = [
    ListenMode::Forward,
    ListenMode::Reverse,
    ListenMode::Transparent,
];
const OUTCOMES: usize = CacheOutcome::ALL.len();

/// `mode`'s place in [`MODES`].
fn mode_index(mode: ListenMode) -> usize {
    match mode {
        ListenMode::Forward => 0,
        ListenMode::Reverse => 1,
        ListenMode::Transparent => 2,
    }
}

/// The body bytes counted.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bytes {
    /// Request bodies from clients.
    In = 0,
    /// Response bodies to clients.
    Out = 1,
    /// The part of `Out` that came from the cache.
    OutCached = 2,
}

/// One thread's counts. On cache lines of their own: two threads' counts are
/// neighbours in `ThreadLocal`'s buckets.
#[repr(align(128))]
#[derive(Debug, Default)]
struct ThreadCounts {
    requests: [[AtomicU64; OUTCOMES]; MODES.len()],
    /// Per outcome, per bucket (not cumulative; the last one is `+Inf`).
    buckets: [[AtomicU64; DURATION_BUCKETS.len() + 1]; OUTCOMES],
    /// Per outcome, in nanoseconds (584 years of headroom).
    nanos: [AtomicU64; OUTCOMES],
    bytes: [AtomicU64; 3],
    /// Requests sent on a reused origin connection: one per miss, which a counter
    /// shared by the workers made move between cores.
    origin_reused: AtomicU64,
}

/// Adds `n` to a count only this thread writes.
#[inline(always)]
fn add(count: &AtomicU64, n: u64) {
    count.store(
        count.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Every thread's counts of finished transactions.
#[derive(Debug, Clone, Default)]
pub(super) struct RequestCounts(Arc<ThreadLocal<ThreadCounts>>);

impl RequestCounts {
    /// Counts one finished transaction.
    #[inline]
    pub fn add(
        &self,
        mode: ListenMode,
        outcome: CacheOutcome,
        elapsed: Duration,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        let counts = self.0.get_or_default();
        let o = outcome as usize;
        add(&counts.requests[mode_index(mode)][o], 1);
        let seconds = elapsed.as_secs_f64();
        let bucket = DURATION_BUCKETS.partition_point(|&bound| bound < seconds);
        add(&counts.buckets[o][bucket], 1);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        add(&counts.nanos[o], nanos);
        if bytes_in > 0 {
            add(&counts.bytes[Bytes::In as usize], bytes_in);
        }
        if bytes_out > 0 {
            add(&counts.bytes[Bytes::Out as usize], bytes_out);
            if outcome.from_cache() {
                add(&counts.bytes[Bytes::OutCached as usize], bytes_out);
            }
        }
    }

    /// Counts one request sent on a reused origin connection.
    #[inline]
    pub fn origin_reused(&self) {
        add(&self.0.get_or_default().origin_reused, 1);
    }

    /// The counter of requests sent on reused origin connections, for the registry.
    pub fn origin_reused_metric(&self) -> CountMetric {
        CountMetric(self.clone(), Count::OriginReused)
    }

    fn sum(&self, pick: impl Fn(&ThreadCounts) -> &AtomicU64) -> u64 {
        self.0
            .iter()
            .map(|counts| pick(counts).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Transactions finished with `outcome` on listeners of mode `mode`.
    pub fn requests(&self, mode: usize, outcome: usize) -> u64 {
        self.sum(|c| &c.requests[mode][outcome])
    }

    /// Transactions finished with `outcome`, every listener mode together.
    pub fn outcome_total(&self, outcome: usize) -> u64 {
        (0..MODES.len()).map(|m| self.requests(m, outcome)).sum()
    }

    /// Body bytes of one kind.
    pub fn bytes(&self, which: Bytes) -> u64 {
        self.sum(|c| &c.bytes[which as usize])
    }

    /// One series of `weir_requests_total`, for the registry.
    pub fn requests_metric(&self, mode: usize, outcome: usize) -> CountMetric {
        CountMetric(self.clone(), Count::Requests(mode, outcome))
    }

    /// One of the byte counters, for the registry.
    pub fn bytes_metric(&self, which: Bytes) -> CountMetric {
        CountMetric(self.clone(), Count::Bytes(which))
    }

    /// The duration histogram of one outcome, for the registry.
    pub fn duration_metric(&self, outcome: usize) -> DurationMetric {
        DurationMetric(self.clone(), outcome)
    }
}

#[derive(Debug, Clone, Copy)]
enum Count {
    Requests(usize, usize),
    Bytes(Bytes),
    OriginReused,
}

/// A counter of [`RequestCounts`] as the registry encodes it.
#[derive(Debug, Clone)]
pub(super) struct CountMetric(RequestCounts, Count);

impl TypedMetric for CountMetric {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for CountMetric {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let value = match self.1 {
            Count::Requests(mode, outcome) => self.0.requests(mode, outcome),
            Count::Bytes(which) => self.0.bytes(which),
            Count::OriginReused => self.0.sum(|c| &c.origin_reused),
        };
        encoder.encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// The duration histogram of one outcome as the registry encodes it.
#[derive(Debug, Clone)]
pub(super) struct DurationMetric(RequestCounts, usize);

impl TypedMetric for DurationMetric {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DurationMetric {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let o = self.1;
        let buckets: Vec<(f64, u64)> = DURATION_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .enumerate()
            .map(|(i, bound)| (bound, self.0.sum(|c| &c.buckets[o][i])))
            .collect();
        // Derived from the buckets so `_count` always equals the `+Inf` bucket.
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.0.sum(|c| &c.nanos[o]) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counts = RequestCounts::default();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counts = counts.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let ms = Duration::from_millis(2);
                        counts.add(ListenMode::Reverse, CacheOutcome::Hit, ms, 3, 10);
                        counts.add(ListenMode::Reverse, CacheOutcome::Miss, ms, 0, 5);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counts.requests(1, CacheOutcome::Hit as usize), 4000);
        assert_eq!(counts.requests(1, CacheOutcome::Miss as usize), 4000);
        assert_eq!(counts.requests(0, CacheOutcome::Hit as usize), 0);
        assert_eq!(counts.bytes(Bytes::In), 12_000);
        assert_eq!(counts.bytes(Bytes::Out), 60_000);
        assert_eq!(counts.bytes(Bytes::OutCached), 40_000);
        // 2 ms falls in the bucket bounded by 2.5 ms.
        let bucket = DURATION_BUCKETS.iter().position(|&b| b == 0.0025).unwrap();
        let hit = CacheOutcome::Hit as usize;
        assert_eq!(counts.sum(|c| &c.buckets[hit][bucket]), 4000);
        assert_eq!(counts.sum(|c| &c.nanos[hit]), 4000 * 2_000_000);
    }
}
