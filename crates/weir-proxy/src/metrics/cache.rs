//! The cache's figures (memory and disk tiers, fills), asked of the cache when metrics
//! are scraped rather than counted as they change.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::encode::lock;

/// The cache's figures, read when metrics are scraped.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheFigures {
    /// Bytes charged in the memory tier.
    pub memory_bytes: u64,
    /// Objects (and variant lists) in the memory tier.
    pub memory_objects: u64,
    /// The disk tier's counters (all zero without one).
    pub disk: weir_cache::DiskStats,
    /// Body bytes fills in flight hold in memory.
    pub fill_bytes: u64,
    /// Fills served but not stored because `[cache] fill_memory` was taken.
    pub fills_passed: u64,
}

pub(super) type CacheSource = Arc<dyn Fn() -> CacheFigures + Send + Sync>;

/// A gauge whose value is asked of the cache at scrape time.
struct CacheGauge {
    source: Arc<Mutex<Option<CacheSource>>>,
    pick: fn(&CacheFigures) -> u64,
    /// A running total (exposed as a counter) rather than a level.
    counter: bool,
}

impl std::fmt::Debug for CacheGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheGauge").finish_non_exhaustive()
    }
}

impl EncodeMetric for CacheGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // Clone the source out so a slow closure does not hold the lock.
        let source = lock(&self.source).clone();
        let value = source.map_or(0, |f| (self.pick)(&f()));
        if self.counter {
            encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&value, None)
        } else {
            encoder.encode_gauge(&value)
        }
    }

    fn metric_type(&self) -> MetricType {
        if self.counter {
            MetricType::Counter
        } else {
            MetricType::Gauge
        }
    }
}

/// Registers the `weir_cache_*` gauges and counters of the memory and disk tiers and of
/// fills; returns the source they read, empty until the cache exists.
pub(super) fn register(r: &mut Registry) -> Arc<Mutex<Option<CacheSource>>> {
    let cache_source: Arc<Mutex<Option<CacheSource>>> = Arc::default();
    let figure = |pick, counter| CacheGauge {
        source: cache_source.clone(),
        pick,
        counter,
    };
    r.register(
        "cache_bytes",
        "Bytes held by the memory tier",
        figure(|f| f.memory_bytes, false),
    );
    r.register(
        "cache_objects",
        "Objects held by the memory tier",
        figure(|f| f.memory_objects, false),
    );
    r.register(
        "cache_disk_bytes",
        "Bytes of the files in the disk tier",
        figure(|f| f.disk.bytes, false),
    );
    r.register(
        "cache_disk_entries",
        "Entries in the disk tier",
        figure(|f| f.disk.entries, false),
    );
    r.register(
        "cache_disk_index_bytes",
        "Memory taken by the disk tier's index, charged to [cache] memory (the memory tier holds that much less)",
        figure(|f| f.disk.index_memory, false),
    );
    r.register(
        "cache_disk_loading",
        "1 while the disk tier's index is rebuilt from its files at startup (it finds and stores nothing meanwhile)",
        figure(|f| u64::from(f.disk.loading), false),
    );
    r.register(
        "cache_disk_writes",
        "Entries written to the disk tier",
        figure(|f| f.disk.writes, true),
    );
    r.register(
        "cache_disk_write_errors",
        "Writes to the disk tier that failed (disk full, directory unwritable)",
        figure(|f| f.disk.write_errors, true),
    );
    r.register(
        "cache_disk_writes_dropped",
        "Writes skipped because the disk writer was too far behind, or the index was still being rebuilt",
        figure(|f| f.disk.writes_dropped, true),
    );
    r.register(
        "cache_disk_damaged",
        "Damaged disk entries found and dropped",
        figure(|f| f.disk.damaged, true),
    );

    r.register(
        "cache_fill_bytes",
        "Body bytes that fills in flight hold in memory (at most [cache] fill_memory)",
        figure(|f| f.fill_bytes, false),
    );
    r.register(
        "cache_fills_passed",
        "Responses served but not stored because [cache] fill_memory was taken by other fills",
        figure(|f| f.fills_passed, true),
    );
    cache_source
}
