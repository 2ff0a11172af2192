//! A module's counters in `/metrics`, and its log fields in the access log.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::control::with_control;
use crate::helpers::{start, Factory};
use crate::support::client::{is_hit, metric};
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use crate::support::SOON;
use weir_api::{Event, Events, Flow, Module, ModuleContext, RequestHead, Txn};

#[tokio::test]
async fn a_module_counter_is_exported_and_counts() {
    let origin = TestOrigin::start();
    let weir = with_control().await;
    let calls = |text: &str| metric(text, "weir_module_control_calls_total", &[]);
    let text = weir.metrics().await;
    assert_eq!(calls(&text), Some(0.0), "registered when built:\n{text}");
    for n in 1..=3 {
        weir.control("query", &origin.url("/x"), &[]).await;
        let text = weir.metrics().await;
        assert_eq!(calls(&text), Some(n as f64), "{text}");
    }
    assert!(
        weir.metrics()
            .await
            .contains("# TYPE weir_module_control_calls counter"),
        "typed as a counter"
    );
    weir.stop().await;
}

/// Adds the log field `mod=x y` to every transaction.
struct Tagger;

impl Module for Tagger {
    fn name(&self) -> &str {
        "tagger"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        txn.log_field("mod", "x y");
        Flow::Continue
    }
}

fn tagger(_: &ModuleContext) -> Arc<dyn Module> {
    Arc::new(Tagger)
}

/// The lines of `path` that contain `needle`, waiting (bounded) until there are
/// `count` of them.
async fn log_lines(path: &PathBuf, needle: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + SOON;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{count} lines with {needle:?} not logged within {SOON:?}; the log:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn log_fields_end_the_access_log_line() {
    let origin = TestOrigin::start();
    origin.route("/logged", Reply::ok("logged").cc("max-age=60"));
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "weir-content-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let weir = start(
        vec![Factory {
            name: "tagger",
            build: tagger,
        }],
        Some(&log),
    )
    .await;
    let url = origin.url("/logged");
    assert_eq!(weir.get(&url).await.text(), "logged"); // miss
    assert!(is_hit(&weir.get(&url).await.cache_status())); // hit
    let lines = log_lines(&log, "/logged", 2).await;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for line in &lines {
        assert!(line.ends_with(" mod=x%20y"), "{line:?}");
    }
    assert!(lines[0].contains("TCP_MISS/200"), "{}", lines[0]);
    assert!(lines[1].contains("TCP_MEM_HIT/200"), "{}", lines[1]);
    assert_eq!(origin.count("/logged"), 1);
    weir.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
