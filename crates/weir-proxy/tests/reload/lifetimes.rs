//! What a reload ends and what it keeps: module timers stop, counters keep counting.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::fixtures::{Counting, Gate, Holder};
use crate::helpers::{modules, start, Factory};
use crate::support::client::metric;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use crate::support::{eventually, SOON};

/// Ticks counted by `gate` stay the same for `window` (after a short settle).
async fn ticks_stop(gate: &Gate, window: Duration) -> usize {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = gate.ticks.load(Ordering::SeqCst);
    tokio::time::sleep(window).await;
    let after = gate.ticks.load(Ordering::SeqCst);
    assert_eq!(after, before, "the timer still fires");
    after
}

/// Ticks counted by `gate` grow by at least `n` within [`SOON`].
async fn ticks_grow(gate: &Gate, n: usize) {
    let from = gate.ticks.load(Ordering::SeqCst);
    eventually(&format!("{n} more ticks after {from}"), || {
        gate.ticks.load(Ordering::SeqCst) >= from + n
    })
    .await;
}

#[tokio::test]
async fn timers_start_with_the_module_and_stop_when_a_reload_unloads_it() {
    let origin = TestOrigin::start();
    origin.route("/held", Reply::ok("held").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let weir = Arc::new(start(&origin, vec![Holder::factory(&gate)], &modules(&["holder"])).await);
    ticks_grow(&gate, 5).await;
    eventually("the one-shot timer", || {
        gate.once.load(Ordering::SeqCst) == 1
    })
    .await;

    // Unloaded: no more ticks.
    weir.reloaded("");
    ticks_stop(&gate, Duration::from_millis(300)).await;
    assert_eq!(gate.dropped.load(Ordering::SeqCst), 1);

    // Loaded again: a new instance, with its own timers (the one-shot fires again).
    weir.reloaded(&modules(&["holder"]));
    ticks_grow(&gate, 5).await;
    eventually("the new one-shot timer", || {
        gate.once.load(Ordering::SeqCst) == 2
    })
    .await;

    // Unloaded while a transaction still uses it: its timers go on until that
    // transaction is over.
    let held = {
        let weir = weir.clone();
        tokio::spawn(async move { weir.get("/held").await })
    };
    eventually("the request to wait", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    weir.reloaded("");
    ticks_grow(&gate, 5).await;
    gate.release.add_permits(1);
    let r = tokio::time::timeout(SOON, held)
        .await
        .expect("the held request ends")
        .unwrap();
    assert_eq!(r.text(), "held");
    assert_eq!(r.header("x-holder").as_deref(), Some("yes"));
    eventually("the last holder to be dropped", || {
        gate.dropped.load(Ordering::SeqCst) == 2
    })
    .await;
    ticks_stop(&gate, Duration::from_millis(300)).await;
    assert_eq!(gate.built.load(Ordering::SeqCst), 2);
    assert_eq!(gate.once.load(Ordering::SeqCst), 2);
    assert_eq!(origin.count("/held"), 1);
    let Ok(weir) = Arc::try_unwrap(weir) else {
        panic!("the held request's task still has the proxy")
    };
    weir.stop().await;
}

#[tokio::test]
async fn a_module_counter_keeps_counting_across_reloads() {
    let origin = TestOrigin::start();
    origin.route("/c/*", Reply::ok("counted").cc("no-store"));
    let factories = vec![Factory::boxed("counting", |context| {
        Arc::new(Counting(
            context.counter("counting_requests", "requests the test module saw"),
        ))
    })];
    let weir = start(&origin, factories, &modules(&["counting"])).await;
    let name = "weir_module_counting_requests_total";
    weir.get("/c/1").await;
    weir.get("/c/2").await;
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(2.0));

    // Rebuilt by the reload, the module gets the same counter back.
    weir.reloaded(&modules(&["counting"]));
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(2.0));
    weir.get("/c/3").await;
    let text = weir.metrics().await;
    assert_eq!(metric(&text, name, &[]), Some(3.0), "{text}");
    assert_eq!(text.matches(&format!("\n{name} ")).count(), 1, "{text}");

    // Unloaded: the counter stays, and stops.
    weir.reloaded("");
    weir.get("/c/4").await;
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(3.0));
    for n in 1..=4 {
        assert_eq!(origin.count(&format!("/c/{n}")), 1);
    }
    weir.stop().await;
}
