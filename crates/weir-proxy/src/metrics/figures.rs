//! The counters as plain numbers, read at once (`Metrics::figures`), for the admin
//! status page: the same figures `/metrics` exposes, without a text format between.

use super::{CacheFigures, CacheOutcome, ErrorKind, Metrics, ProcessFigures};

/// What the metrics say now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Figures {
    /// Finished transactions by outcome, every listener mode together, in the order
    /// of [`CacheOutcome::ALL`].
    pub requests: [u64; CacheOutcome::ALL.len()],
    /// Request body bytes from clients.
    pub bytes_in: u64,
    /// Response body bytes to clients.
    pub bytes_out: u64,
    /// The part of `bytes_out` that came from the cache.
    pub bytes_out_cached: u64,
    /// Errors by kind, in the order of [`ErrorKind::ALL`].
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Open origin connections.
    pub origin_connections: i64,
    /// Open CONNECT tunnels and switched connections (WebSockets).
    pub tunnels: i64,
    /// The cache's tiers.
    pub cache: CacheFigures,
    /// The process: resident memory and its peak.
    pub process: ProcessFigures,
}

impl Metrics {
    /// Reads every figure the status page shows.
    pub(crate) fn figures(&self) -> Figures {
        let requests = std::array::from_fn(|o| self.requests.outcome_total(o));
        let cache = super::encode::lock(&self.cache_source)
            .clone()
            .map(|source| source())
            .unwrap_or_default();
        Figures {
            requests,
            bytes_in: self.requests.bytes(super::requests::Bytes::In),
            bytes_out: self.requests.bytes(super::requests::Bytes::Out),
            bytes_out_cached: self.requests.bytes(super::requests::Bytes::OutCached),
            errors: std::array::from_fn(|i| self.errors[i].get()),
            origin_connections: self.origin_open.get(),
            tunnels: self.tunnels_open.get(),
            cache,
            process: ProcessFigures::read(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::ListenMode;

    #[test]
    fn figures_add_the_modes_and_split_cached_bytes() {
        let m = Metrics::new();
        let ms = Duration::from_millis(1);
        m.request_done(ListenMode::Forward, CacheOutcome::Hit, ms, 0, 100);
        m.request_done(ListenMode::Reverse, CacheOutcome::Hit, ms, 0, 50);
        m.request_done(ListenMode::Reverse, CacheOutcome::Miss, ms, 7, 1000);
        m.error(ErrorKind::Forbidden);
        let f = m.figures();
        assert_eq!(f.requests[CacheOutcome::Hit as usize], 2);
        assert_eq!(f.requests[CacheOutcome::Miss as usize], 1);
        assert_eq!(
            (f.bytes_in, f.bytes_out, f.bytes_out_cached),
            (7, 1150, 150)
        );
        assert_eq!(f.errors[ErrorKind::Forbidden as usize], 1);
    }
}
