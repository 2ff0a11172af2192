//! The live status page: `GET /` on the admin listener serves one HTML page (its
//! styles, script and charts all embedded, nothing fetched from elsewhere), which polls
//! `GET /admin/status` once a second and draws the figures in the browser.

use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::json::reply as json_reply;
use super::response::{full, AdminBody};
use crate::metrics::{CacheOutcome, ErrorKind, Metrics};

/// The page, built into the binary.
const PAGE: &str = include_str!("status.html");

/// The page may run its own inline script and styles and talk to this listener only.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// What the status figures are measured against.
pub(crate) struct StatusFacts {
    /// When the proxy started.
    pub started: Instant,
    /// `[cache] memory`, bytes.
    pub memory: u64,
    /// The disk tier's `size`, bytes; 0 without a disk tier.
    pub disk: u64,
}

/// `GET /`: the page.
pub(super) fn page() -> Response<AdminBody> {
    let mut response = full(
        StatusCode::OK,
        "text/html; charset=utf-8",
        Bytes::from_static(PAGE.as_bytes()),
    );
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `GET /admin/status`: the figures now, as JSON. Totals only: the page takes the
/// differences between two polls for rates.
/// With `[cluster]`, this node's view of the cluster (as `GET /admin/cluster` gives
/// it) is in `cluster`; without, `cluster` is null.
pub(super) fn snapshot(
    metrics: &Metrics,
    facts: &StatusFacts,
    cluster: Option<&weir_cluster::Cluster>,
) -> Response<AdminBody> {
    let mut figures = figures(metrics, facts);
    figures["cluster"] = cluster.map_or(Value::Null, weir_cluster::Cluster::status);
    json_reply(StatusCode::OK, figures)
}

fn figures(metrics: &Metrics, facts: &StatusFacts) -> Value {
    let f = metrics.figures();
    let mut requests = Map::new();
    let mut from_cache = 0;
    for (outcome, n) in CacheOutcome::ALL.iter().zip(f.requests) {
        requests.insert(outcome.as_str().into(), n.into());
        if outcome.from_cache() {
            from_cache += n;
        }
    }
    let errors: Map<String, Value> = ErrorKind::ALL
        .iter()
        .zip(f.errors)
        .map(|(kind, n)| (kind.as_str().to_string(), n.into()))
        .collect();
    json!({
        "uptime_seconds": facts.started.elapsed().as_secs_f64(),
        "requests": {
            "total": f.requests.iter().sum::<u64>(),
            "from_cache": from_cache,
            "by_outcome": requests,
        },
        "bytes": {
            "in": f.bytes_in,
            "out": f.bytes_out,
            "out_from_cache": f.bytes_out_cached,
        },
        "errors": {
            "total": f.errors.iter().sum::<u64>(),
            "by_kind": errors,
        },
        "memory": {
            "resident": f.process.resident,
            "resident_peak": f.process.resident_peak,
            "cache": f.cache.memory_bytes,
            "cache_objects": f.cache.memory_objects,
            "cache_configured": facts.memory,
            "fills": f.cache.fill_bytes,
        },
        "disk": {
            "bytes": f.cache.disk.bytes,
            "entries": f.cache.disk.entries,
            "configured": facts.disk,
            "loading": f.cache.disk.loading,
        },
        "origin_connections": f.origin_connections,
        "tunnels": f.tunnels,
        "modules": modules(metrics),
    })
}

/// Each module's calls and time by event (the time estimated from one call in 64).
fn modules(metrics: &Metrics) -> Value {
    metrics
        .module_event_figures()
        .into_iter()
        .map(|(name, events)| {
            let events: Map<String, Value> = events
                .into_iter()
                .map(|(event, calls, seconds)| {
                    let figures = json!({ "calls": calls, "seconds": seconds });
                    (event.name().to_string(), figures)
                })
                .collect();
            json!({ "name": name, "events": events })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::ListenMode;

    #[test]
    fn the_figures_add_up() {
        let m = Metrics::new();
        let ms = Duration::from_millis(1);
        m.request_done(ListenMode::Forward, CacheOutcome::Hit, ms, 0, 10);
        m.request_done(ListenMode::Forward, CacheOutcome::Miss, ms, 0, 30);
        let facts = StatusFacts {
            started: Instant::now(),
            memory: 64 << 20,
            disk: 0,
        };
        let v = figures(&m, &facts);
        assert_eq!(v["requests"]["total"], 2);
        assert_eq!(v["requests"]["from_cache"], 1);
        assert_eq!(v["requests"]["by_outcome"]["miss"], 1);
        assert_eq!(v["bytes"]["out_from_cache"], 10);
        assert_eq!(v["memory"]["cache_configured"], 64 << 20);
        assert_eq!(v["modules"], json!([]));
        let events = m.module_events("m").this_thread();
        let timing = events.start(weir_api::Event::RequestHeaders);
        events.end(weir_api::Event::RequestHeaders, timing);
        let v = figures(&m, &facts);
        assert_eq!(v["modules"][0]["name"], "m");
        assert_eq!(v["modules"][0]["events"]["request_headers"]["calls"], 1);
        assert!(v["modules"][0]["events"]["request_headers"]["seconds"].is_f64());
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for needle in ["http://", "https://", "src=\"//", "@import"] {
            assert!(!PAGE.contains(needle), "the page names {needle}");
        }
        let r = page();
        assert!(r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'"));
    }
}
