//! The metric type Weir encodes itself: fixed labelled series; and the lock every
//! figure read at scrape time is taken through.

use std::sync::Mutex;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking cache source must not take the metrics endpoint down with it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
