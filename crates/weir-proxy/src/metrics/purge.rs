//! Purge counters, read from the cache at scrape time: the cache counts every
//! invalidation itself, whoever asked for it (PURGE, the admin API, a module, a write
//! through the proxy).

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use weir_cache::PurgeStats;

use super::encode::{lock, Series};

type Source = Arc<dyn Fn() -> PurgeStats + Send + Sync>;

/// Where the counters read from; set once the cache exists.
pub(super) type PurgeSource = Arc<Mutex<Option<Source>>>;

/// One counter whose value is a field of the cache's [`PurgeStats`].
#[derive(Clone)]
struct PurgeCounter {
    source: PurgeSource,
    pick: fn(&PurgeStats) -> u64,
}

impl std::fmt::Debug for PurgeCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PurgeCounter").finish_non_exhaustive()
    }
}

impl TypedMetric for PurgeCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for PurgeCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let source = lock(&self.source).clone();
        let value = source.map_or(0, |f| (self.pick)(&f()));
        encoder.encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// Registers `weir_cache_purged_objects_total{by}` and
/// `weir_cache_stores_refused_total`; returns the source they read.
pub(super) fn register(r: &mut Registry) -> PurgeSource {
    let source = PurgeSource::default();
    let counter = |pick| PurgeCounter {
        source: source.clone(),
        pick,
    };
    let counters = [
        counter(|s| s.by_url),
        counter(|s| s.by_prefix),
        counter(|s| s.by_tag),
        counter(|s| s.by_group),
    ];
    let labels = ["url", "prefix", "tag", "group"].map(|by| vec![("by", by)]);
    r.register(
        "cache_purged_objects",
        "Objects removed by invalidations, by what named them (url: PURGE, deletes, \
         writes through the proxy; prefix; tag; group: Cache-Group-Invalidation, PURGE and \
         the admin API by cache group)",
        Series::new(labels, &counters),
    );
    r.register(
        "cache_stores_refused",
        "Responses not stored because an invalidation applied to them during their fetch",
        counter(|s| s.refused_stores),
    );
    source
}
