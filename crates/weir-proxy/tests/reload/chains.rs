//! Which chain runs after a reload: order, enabling, refusals, transactions in flight.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::fixtures::{order, stamps, Gate, Holder};
use crate::helpers::{modules, start, FILE};
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use crate::support::{eventually, SOON};
use weir_api::http::StatusCode;

#[tokio::test]
async fn a_reload_reorders_enables_and_disables_modules() {
    let origin = TestOrigin::start();
    origin.route("/o/*", Reply::ok("ordered").cc("max-age=60"));
    let weir = start(&origin, stamps(), &modules(&["first", "second"])).await;

    let r = weir.get("/o/1").await;
    assert_eq!(r.text(), "ordered");
    assert_eq!(order(&r), ["first", "second"]);

    let summary = weir.reloaded(&modules(&["second", "first"]));
    assert!(summary.contains("[second, first]"), "{summary}");
    // The stored response and a new one alike: deliver headers is not stored.
    for path in ["/o/1", "/o/2"] {
        assert_eq!(order(&weir.get(path).await), ["second", "first"], "{path}");
    }

    // Disabled: gone from the chain and from the summary.
    let summary = weir.reloaded(&modules(&["first", "second\nenabled = false", "third"]));
    assert!(summary.contains("[first, third]"), "{summary}");
    assert_eq!(order(&weir.get("/o/1").await), ["first", "third"]);

    // Enabled again, in a new place.
    weir.reloaded(&modules(&["second\nenabled = true", "third", "first"]));
    assert_eq!(order(&weir.get("/o/1").await), ["second", "third", "first"]);

    // None at all.
    let summary = weir.reloaded("");
    assert!(summary.contains("[]"), "{summary}");
    let r = weir.get("/o/3").await;
    assert_eq!(r.text(), "ordered");
    assert!(order(&r).is_empty(), "{:?}", r.headers);

    assert_eq!(origin.count("/o/1"), 1);
    assert_eq!(origin.count("/o/2"), 1);
    assert_eq!(origin.count("/o/3"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn a_refused_reload_changes_nothing() {
    let origin = TestOrigin::start();
    origin.route("/x/*", Reply::ok("same").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let mut factories = stamps();
    factories.push(Holder::factory(&gate));
    let weir = start(&origin, factories, &modules(&["first", "second"])).await;
    assert_eq!(order(&weir.get("/x/0").await), ["first", "second"]);

    // An unknown module, after one that builds: the error names its line and key.
    let error = weir
        .reload(&modules(&["holder", "second", "fourth"]))
        .unwrap_err();
    let at = format!("{FILE}:{}: key `module[2].name`", weir.tail_line(10));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert!(error.contains("fourth"), "{error}");
    assert_eq!(order(&weir.get("/x/1").await), ["first", "second"]);

    // A setting the factory refuses.
    let error = weir
        .reload(&modules(&["second", "first\ncolour = \"red\""]))
        .unwrap_err();
    let at = format!("{FILE}:{}: key `module[1].colour`", weir.tail_line(7));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert_eq!(order(&weir.get("/x/2").await), ["first", "second"]);

    // A syntax error.
    let error = weir.reload("[[module]]\nname = second\n").unwrap_err();
    let at = format!("{FILE}:{}: key `module[0].name`", weir.tail_line(2));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert_eq!(order(&weir.get("/x/3").await), ["first", "second"]);

    // The holder built by the refused reload was dropped and its timers never ran.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gate.built.load(Ordering::SeqCst), 1);
    assert_eq!(gate.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(gate.ticks.load(Ordering::SeqCst), 0);
    assert_eq!(gate.once.load(Ordering::SeqCst), 0);

    for n in 0..4 {
        assert_eq!(origin.count(&format!("/x/{n}")), 1);
    }
    weir.stop().await;
}

#[tokio::test]
async fn a_transaction_in_flight_keeps_its_chain() {
    let origin = TestOrigin::start();
    origin.route("/held", Reply::ok("held").cc("no-store"));
    origin.route("/free/*", Reply::ok("free").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let mut factories = stamps();
    factories.push(Holder::factory(&gate));
    let weir = Arc::new(start(&origin, factories, &modules(&["first", "holder"])).await);

    let held = {
        let weir = weir.clone();
        tokio::spawn(async move { weir.get("/held").await })
    };
    eventually("the request to wait at request headers", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    // Without the holder: new requests do not wait and are not stamped by it.
    weir.reloaded(&modules(&["second"]));
    let r = weir.get("/free/1").await;
    assert_eq!(r.text(), "free");
    assert_eq!(order(&r), ["second"]);
    assert_eq!(r.header("x-holder"), None);
    assert_eq!(origin.count("/held"), 0, "still held");

    // Released, the held transaction finishes with the chain it started with.
    gate.release.add_permits(1);
    let r = tokio::time::timeout(SOON, held)
        .await
        .expect("the held request ends")
        .unwrap();
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "held"));
    assert_eq!(order(&r), ["first"]);
    assert_eq!(r.header("x-holder").as_deref(), Some("yes"));
    assert_eq!(origin.count("/held"), 1);
    assert_eq!(origin.count("/free/1"), 1);

    // A /held request now passes straight through the new chain.
    let r = tokio::time::timeout(SOON, weir.get("/held"))
        .await
        .expect("no holder: not held");
    assert_eq!(order(&r), ["second"]);
    assert_eq!(gate.entered.load(Ordering::SeqCst), 1);
    let Ok(weir) = Arc::try_unwrap(weir) else {
        panic!("the held request's task still has the proxy")
    };
    weir.stop().await;
}
