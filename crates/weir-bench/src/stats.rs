//! Latency histograms and medians.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Request latencies in microseconds, 1 µs to 10 min, 3 significant digits.
pub struct Latencies(Histogram<u64>);

impl Latencies {
    pub fn new() -> Latencies {
        Latencies(Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"))
    }

    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, 600_000_000);
        self.0.saturating_record(us);
    }

    /// The `q` quantile (0..=1), in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// The mean, in milliseconds (0 when empty).
    pub fn mean_ms(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.mean() / 1000.0
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
