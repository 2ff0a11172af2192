//! Prometheus metrics, served by the admin listener at `/metrics`.
//!
//! Every labelled series is created up front and its handle kept in an array indexed by
//! the label enums, so recording an event is an atomic add: no label hashing, no
//! allocation, no lock. What every transaction adds (`requests.rs`: its count,
//! duration and bytes) is counted per thread, and summed when read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::config::ListenMode;

mod cache;
mod cluster;
mod encode;
mod figures;
mod labels;
mod listener;
mod module_events;
mod process;
mod purge;
mod reports;
mod requests;

pub use cache::CacheFigures;
pub use labels::{Alpn, CacheOutcome, ErrorKind, Refusal};
pub(crate) use module_events::{ModuleEvents, ModuleFigures, ThreadCounts};
pub use process::ProcessFigures;

use cache::CacheSource;
use encode::{lock, Series};
use requests::{Bytes, RequestCounts, MODES};

/// The process's metrics. Hot-path methods neither allocate nor look labels up.
pub struct Metrics {
    registry: Registry,
    /// Finished transactions: counts, durations, body bytes.
    requests: RequestCounts,
    errors: [Counter; ErrorKind::ALL.len()],
    origin_open: Gauge,
    origins: Gauge,
    origin_opened: Counter,
    tunnels_open: Gauge,
    tunnels_idle_closed: Counter,
    cache_source: Arc<Mutex<Option<CacheSource>>>,
    purge_source: purge::PurgeSource,
    cluster_source: cluster::ClusterSource,
    listener: listener::ListenerCounters,
    module_failures: prometheus_client::metrics::family::Family<Vec<(String, String)>, Counter>,
    module_body_refused: Counter,
    /// Counters modules registered: (metric name, help, counter).
    module_counters: Mutex<Vec<(String, String, weir_api::Counter)>>,
    /// What administration modules published.
    reports: reports::Reports,
    /// Calls of each module at each event, and their time.
    module_events: module_events::ModuleEventTable,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics, all zero.
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("weir");

        let requests = RequestCounts::default();
        let labels = MODES.iter().flat_map(|mode| {
            let mode = mode.as_str();
            CacheOutcome::ALL.map(|o| vec![("mode", mode), ("cache", o.as_str())])
        });
        let series: Vec<_> = (0..MODES.len())
            .flat_map(|m| (0..CacheOutcome::ALL.len()).map(move |o| (m, o)))
            .map(|(m, o)| requests.requests_metric(m, o))
            .collect();
        r.register(
            "requests",
            "Finished client transactions",
            Series::new(labels, &series),
        );

        let labels = CacheOutcome::ALL.map(|o| vec![("cache", o.as_str())]);
        let durations: Vec<_> = (0..CacheOutcome::ALL.len())
            .map(|o| requests.duration_metric(o))
            .collect();
        r.register_with_unit(
            "request_duration",
            "Time from request arrival to the end of the response",
            Unit::Seconds,
            Series::new(labels, &durations),
        );

        let bytes = [
            ("bytes_in", "Request body bytes from clients", Bytes::In),
            ("bytes_out", "Response body bytes to clients", Bytes::Out),
            (
                "bytes_out_cached",
                "Response body bytes to clients that came from the cache (hits, revalidated and stale copies)",
                Bytes::OutCached,
            ),
        ];
        for (name, help, which) in bytes {
            r.register(name, help, requests.bytes_metric(which));
        }

        let errors: [Counter; ErrorKind::ALL.len()] = Default::default();
        let labels = ErrorKind::ALL.map(|k| vec![("kind", k.as_str())]);
        r.register("errors", "Errors by kind", Series::new(labels, &errors));

        let origin_open = add(&mut r, "origin_connections_open", "Open origin connections");
        let origins = add(
            &mut r,
            "origins",
            "Origins whose connection pools are kept: with a request or a connection open, or named by an [[origin]] section",
        );
        let origin_opened = add(
            &mut r,
            "origin_connections_opened",
            "Origin connections opened",
        );
        r.register(
            "origin_connections_reused",
            "Requests sent on a reused keep-alive origin connection",
            requests.origin_reused_metric(),
        );

        let tunnels_open = add(
            &mut r,
            "tunnels_open",
            "CONNECT tunnels and switched connections (WebSockets) open now",
        );
        let tunnels_idle_closed = add(
            &mut r,
            "tunnels_idle_closed",
            "CONNECT tunnels and switched connections closed after [timeouts] tunnel_idle without a byte either way",
        );

        let cache_source = cache::register(&mut r);

        let purge_source = purge::register(&mut r);
        let listener = listener::ListenerCounters::register(&mut r);

        let module_failures = prometheus_client::metrics::family::Family::default();
        r.register(
            "module_failures",
            "Module callbacks that panicked, by module",
            module_failures.clone(),
        );

        let module_body_refused = add(
            &mut r,
            "module_body_refused",
            "Bodies a module wanted whole that passed unheld: [limits] module_body_total was taken",
        );

        Metrics {
            module_counters: Mutex::new(Vec::new()),
            reports: Default::default(),
            module_events: Default::default(),
            module_failures,
            module_body_refused,
            registry: r,
            requests,
            errors,
            origin_open,
            origins,
            origin_opened,
            tunnels_open,
            tunnels_idle_closed,
            cache_source,
            purge_source,
            cluster_source: Default::default(),
            listener,
        }
    }

    /// One finished transaction.
    pub fn request_done(
        &self,
        mode: ListenMode,
        outcome: CacheOutcome,
        elapsed: Duration,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        self.requests
            .add(mode, outcome, elapsed, bytes_in, bytes_out);
    }

    /// The module counters in the text exposition format.
    fn encode_module_counters(&self) -> String {
        use std::fmt::Write as _;
        let counters = self
            .module_counters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (name, help, counter) in counters.iter() {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}_total {}\n",
                counter.get()
            );
        }
        out
    }

    /// A body passed unheld because `[limits] module_body_total` was taken.
    pub(crate) fn module_body_refused(&self) {
        self.module_body_refused.inc();
    }

    /// A module's callback panicked (rare: the label lookup is acceptable here).
    pub fn module_failed(&self, module: &str) {
        self.module_failures
            .get_or_create(&vec![("module".to_string(), module.to_string())])
            .inc();
    }

    /// One error of this kind.
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind as usize].inc();
    }

    /// A client connection closed before HTTP, for this reason.
    pub fn connection_refused(&self, why: Refusal) {
        self.listener.refused(why);
    }

    /// A TLS handshake on a client listener completed.
    pub fn tls_handshake(&self, alpn: Alpn) {
        self.listener.handshake(alpn);
    }

    /// A new connection to an origin was opened.
    pub fn origin_connection_opened(&self) {
        self.origin_open.inc();
        self.origin_opened.inc();
    }

    /// A connection to an origin was closed.
    pub fn origin_connection_closed(&self) {
        self.origin_open.dec();
    }

    /// A tunnel (CONNECT or a protocol switch) opened; it counts as open until the
    /// returned guard is dropped.
    pub(crate) fn tunnel_opened(&self) -> impl Drop + '_ {
        struct Open<'a>(&'a Gauge);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        self.tunnels_open.inc();
        Open(&self.tunnels_open)
    }

    /// A tunnel was closed after `[timeouts] tunnel_idle` of silence.
    pub(crate) fn tunnel_idle_closed(&self) {
        self.tunnels_idle_closed.inc();
    }

    /// How many origins' connection pools are kept now.
    pub fn set_origins(&self, count: usize) {
        self.origins.set(count as i64);
    }

    /// A request reused an idle keep-alive connection to an origin.
    pub fn origin_connection_reused(&self) {
        self.requests.origin_reused();
    }

    /// The current size of the cache, read when metrics are scraped.
    ///
    /// The closure returns `(bytes, objects)`. A later call replaces the earlier source.
    pub fn set_cache_source(&self, source: Box<dyn Fn() -> CacheFigures + Send + Sync>) {
        *lock(&self.cache_source) = Some(Arc::from(source));
    }

    /// The cache's purge counts, read when metrics are scraped. A later call replaces
    /// the earlier source.
    pub fn set_purge_source(&self, source: Box<dyn Fn() -> weir_cache::PurgeStats + Send + Sync>) {
        *lock(&self.purge_source) = Some(Arc::from(source));
    }

    /// This node's cluster figures, read when metrics are scraped (with `[cluster]`).
    pub fn set_cluster_source(&self, source: Box<dyn Fn() -> weir_cluster::Figures + Send + Sync>) {
        *lock(&self.cluster_source) = Some(Arc::from(source));
    }

    /// The Prometheus text exposition of every metric.
    ///
    /// This is the OpenMetrics text format (ending in `# EOF`), to be served as
    /// [`OPENMETRICS_CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail, and our own metrics never return errors.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        let mut more = self.encode_module_counters();
        self.module_events.encode(&mut more);
        self.reports.encode(&mut more);
        process::encode(&mut more);
        cluster::encode(&self.cluster_source, &mut more);
        if !more.is_empty() {
            // OpenMetrics ends with "# EOF"; the module counters go before it.
            let end = out.rfind("# EOF").unwrap_or(out.len());
            out.insert_str(end, &more);
        }
        out
    }
}

impl Metrics {
    /// Where the engine counts the calls of the module named `name`.
    pub(crate) fn module_events(&self, name: &str) -> std::sync::Arc<ModuleEvents> {
        self.module_events.of(name)
    }

    /// Every module's calls and time, by event: (module, [(event, calls, seconds)]).
    pub(crate) fn module_event_figures(&self) -> Vec<ModuleFigures> {
        self.module_events.read()
    }

    /// The JSON an administration module published as `name`.
    pub(crate) fn module_report(&self, name: &str) -> Option<String> {
        self.reports.json(name)
    }
}

impl weir_api::MetricsRegistry for Metrics {
    fn publish(&self, name: &str, report: std::sync::Weak<dyn weir_api::AdminReport>) {
        self.reports.publish(name, report);
    }

    fn counter(&self, name: &str, help: &str) -> weir_api::Counter {
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let metric = format!("weir_module_{clean}");
        let mut counters = lock(&self.module_counters);
        if let Some((_, _, c)) = counters.iter().find(|(n, ..)| *n == metric) {
            return c.clone();
        }
        let help: String = help.chars().filter(|c| !c.is_control()).collect();
        let counter = weir_api::Counter::default();
        counters.push((metric, help, counter.clone()));
        counter
    }
}

/// The content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Registers a fresh metric and returns a handle sharing its value.
fn add<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The value of the sample whose name and labels end with `series`.
    fn line_value(text: &str, series: &str) -> Option<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .find(|(name, _)| name.ends_with(series.trim_end()))
            .map(|(_, value)| value.to_string())
    }

    fn assert_values(text: &str, expected: &[(&str, &str)]) {
        for (prefix, value) in expected {
            let found = line_value(text, prefix);
            assert_eq!(found.as_deref(), Some(*value), "{prefix} in\n{text}");
        }
    }

    #[test]
    fn counters_move_and_are_encoded() {
        let m = Metrics::new();
        for (mode, outcome, elapsed, bytes_in, bytes_out) in [
            (ListenMode::Reverse, CacheOutcome::Hit, 3_000, 10, 2000),
            (ListenMode::Reverse, CacheOutcome::Hit, 120_000_000, 0, 5),
            (ListenMode::Forward, CacheOutcome::Miss, 50, 0, 0),
        ] {
            let elapsed = Duration::from_micros(elapsed);
            m.request_done(mode, outcome, elapsed, bytes_in, bytes_out);
        }
        m.error(ErrorKind::OriginTimeout);
        m.origin_connection_opened();
        m.origin_connection_opened();
        m.origin_connection_closed();
        m.origin_connection_reused();

        let text = m.encode();
        assert_values(
            &text,
            &[
                (r#"weir_requests_total{mode="reverse",cache="hit"}"#, "2"),
                (r#"weir_requests_total{mode="forward",cache="miss"}"#, "1"),
                (r#"weir_requests_total{mode="forward",cache="tunnel"}"#, "0"),
                ("weir_bytes_in_total ", "10"),
                ("weir_bytes_out_total ", "2005"),
                (r#"weir_errors_total{kind="origin_timeout"}"#, "1"),
                (r#"weir_errors_total{kind="client_aborted"}"#, "0"),
                ("weir_origin_connections_open ", "1"),
                ("weir_origin_connections_opened_total ", "2"),
                ("weir_origin_connections_reused_total ", "1"),
                (r#"weir_request_duration_seconds_count{cache="hit"}"#, "2"),
                (
                    r#"weir_request_duration_seconds_sum{cache="hit"}"#,
                    "120.003",
                ),
                (r#"_seconds_bucket{le="0.005",cache="hit"}"#, "1"),
                (r#"_seconds_bucket{le="60.0",cache="hit"}"#, "1"),
                (r#"_seconds_bucket{le="+Inf",cache="hit"}"#, "2"),
                (r#"_seconds_bucket{le="0.0001",cache="miss"}"#, "1"),
            ],
        );
        assert!(text.contains("# TYPE weir_request_duration_seconds histogram"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn cache_source_is_read_at_encode_time() {
        let m = Metrics::new();
        let zero = [("weir_cache_bytes ", "0"), ("weir_cache_objects ", "0")];
        assert_values(&m.encode(), &zero);

        let size = Arc::new(AtomicU64::new(100));
        let s = size.clone();
        m.set_cache_source(Box::new(move || CacheFigures {
            memory_bytes: s.load(Ordering::Relaxed),
            memory_objects: 7,
            ..Default::default()
        }));
        assert_values(&m.encode(), &[("weir_cache_bytes ", "100")]);
        size.store(4096, Ordering::Relaxed);
        let now = [("weir_cache_bytes ", "4096"), ("weir_cache_objects ", "7")];
        assert_values(&m.encode(), &now);
    }
}
