//! The metric types Weir encodes itself: fixed labelled series and an atomic
//! histogram; and the lock every figure read at scrape time is taken through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

pub(super) type Labels = Vec<(&'static str, &'static str)>;

/// A fixed set of labelled series, encoded in creation order. Unlike `Family` it has no
/// map to look labels up in: callers keep clones of the handles instead.
#[derive(Debug)]
pub(super) struct Series<M>(Vec<(Labels, M)>);

impl<M: Clone> Series<M> {
    pub(super) fn new(labels: impl IntoIterator<Item = Labels>, handles: &[M]) -> Series<M> {
        Series(labels.into_iter().zip(handles.iter().cloned()).collect())
    }
}

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Series<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in &self.0 {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

/// A histogram of durations updated with atomics only.
#[derive(Debug, Clone)]
pub(super) struct AtomicHistogram(Arc<HistogramInner>);

#[derive(Debug)]
struct HistogramInner {
    bounds: &'static [f64],
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    buckets: Box<[AtomicU64]>,
    /// Kept in integer nanoseconds so it can be a plain atomic add (584 years of headroom).
    sum_nanos: AtomicU64,
}

impl AtomicHistogram {
    pub(super) fn new(bounds: &'static [f64]) -> AtomicHistogram {
        AtomicHistogram(Arc::new(HistogramInner {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }))
    }

    pub(super) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let index = self.0.bounds.partition_point(|&bound| bound < seconds);
        self.0.buckets[index].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.0.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = &self.0;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        // Derived from the buckets so `_count` always equals the `+Inf` bucket.
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking cache source must not take the metrics endpoint down with it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
