//! Content-management errors: unknown objects, bad URLs, unstorable responses, dead origins.

use crate::control::with_control;
use crate::support;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;

#[tokio::test]
async fn content_errors_are_reported() {
    let origin = TestOrigin::start();
    origin.route("/private", Reply::ok("private").cc("no-store"));
    let weir = with_control().await;
    let unknown = origin.url("/unknown");

    for op in ["query", "validate", "delete", "read"] {
        assert_eq!(
            weir.control(op, &unknown, &[]).await,
            "error=NotFound",
            "{op}"
        );
    }
    assert_eq!(
        weir.control("expire", &unknown, &[("x-ttl", "10")]).await,
        "error=NotFound"
    );
    // None of these asked the origin.
    assert_eq!(origin.total(), 0);

    for bad in ["ftp://127.0.0.1/x", "not-a-url", "https://127.0.0.1/x"] {
        for op in ["query", "fetch", "delete"] {
            let answer = weir.control(op, bad, &[]).await;
            assert_eq!(answer, format!("error=BadUrl({bad:?})"), "{op} {bad}");
        }
    }

    // no-store may not be injected: nothing is stored, a client GET goes to the origin.
    let private = origin.url("/private");
    let args = [
        ("x-status", "200"),
        ("x-cache-control", "no-store"),
        ("x-body", "secret"),
    ];
    assert_eq!(
        weir.control("inject", &private, &args).await,
        "error=NotStorable"
    );
    assert_eq!(weir.control("query", &private, &[]).await, "error=NotFound");
    let r = weir.get(&private).await;
    assert_eq!(r.text(), "private");
    assert_eq!(origin.count("/private"), 1);
    // Fetching it: the origin is asked, and the answer may not be stored.
    assert_eq!(
        weir.control("fetch", &private, &[]).await,
        "error=NotStorable"
    );
    assert_eq!(origin.count("/private"), 2);

    // An origin nobody listens on.
    let dead = format!("http://127.0.0.1:{}/dead", support::free_addr().port());
    let answer = weir.control("fetch", &dead, &[]).await;
    assert!(answer.starts_with("error=Origin("), "{answer}");
    weir.stop().await;
}
