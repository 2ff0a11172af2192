//! A panicking module fails only its own transaction.

use std::time::Duration;

use crate::support::client::{cs_has, metric};
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::StatusCode;
use weir_api::{Decision, Event, Events, Flow, Module, RequestHead, Txn};

/// Panics at request headers when `x-panic` names it, or in its wait future when
/// `x-panic-wait` does; otherwise does nothing.
struct Panicker {
    name: &'static str,
}

fn boom(what: &str) -> Decision {
    panic!("{what}: a test module panics on purpose")
}

impl Module for Panicker {
    fn name(&self) -> &str {
        self.name
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        let named = |header: &str| r.headers.get(header).is_some_and(|v| v == self.name);
        if named("x-panic") {
            boom("request_headers");
        }
        if named("x-panic-wait") {
            return Flow::wait(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                boom("wait future")
            });
        }
        Flow::Continue
    }
}

#[tokio::test]
async fn a_panicking_module_fails_only_its_transaction() {
    let origin = TestOrigin::start();
    origin.route("/p/*", Reply::ok("fine"));
    let weir = Setup::new(&origin)
        .module("fragile", Panicker { name: "fragile" })
        .module_with("spare", Panicker { name: "spare" }, "optional = true")
        .admin()
        .start()
        .await;
    let failures = |text: &str, module: &str| {
        metric(text, "weir_module_failures_total", &[("module", module)]).unwrap_or(0.0)
    };

    for (n, header) in ["x-panic", "x-panic-wait"].into_iter().enumerate() {
        let n = n as f64 + 1.0;
        // A module that is not optional: 500, with a reason naming it.
        let r = weir
            .get_with(&format!("/p/{header}-fragile"), &[(header, "fragile")])
            .await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{header}");
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("text/plain")),
            "{:?}",
            r.headers
        );
        assert!(r.text().contains("fragile"), "{header}: {}", r.text());
        assert!(
            cs_has(&r.cache_status(), "detail", Some("module-error")),
            "{}",
            r.cache_status()
        );
        assert_eq!(origin.count(&format!("/p/{header}-fragile")), 0);

        // The process goes on serving.
        let r = weir.get(&format!("/p/after-{header}")).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.text(), "fine");

        // An optional module: the transaction passes through as if it were absent.
        let r = weir
            .get_with(&format!("/p/{header}-spare"), &[(header, "spare")])
            .await;
        assert_eq!(r.status, StatusCode::OK, "{header}: {}", r.text());
        assert_eq!(r.text(), "fine");
        assert_eq!(origin.count(&format!("/p/{header}-spare")), 1);

        let text = weir.metrics().await;
        assert_eq!(failures(&text, "fragile"), n, "{text}");
        assert_eq!(failures(&text, "spare"), n, "{text}");
    }
    weir.stop().await;
}
