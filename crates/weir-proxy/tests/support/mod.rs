//! What the in-process tests share: the origin server, clients and replies of the
//! binary's test harness (`crates/weir/tests/common`), and bounded waiting.
#![allow(dead_code)]

use std::time::{Duration, Instant};

#[allow(unused_imports, unused_macros)]
#[path = "../../../weir/tests/common/client.rs"]
pub mod client;
// `origin.rs` finds `reply.rs` as its sibling (`super::reply`).
#[path = "../../../weir/tests/common/origin.rs"]
pub mod origin;
#[path = "../../../weir/tests/common/reply.rs"]
pub mod reply;

/// How long a test waits for something that should happen at once.
pub const SOON: Duration = Duration::from_secs(5);

/// Polls `cond` every 10 ms until it holds, or panics after [`SOON`] saying `what`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + SOON;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
