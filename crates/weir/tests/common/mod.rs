//! The integration-test harness: a programmable origin server, the `weir` binary run on
//! a generated configuration, and clients (reqwest, raw TCP, curl).
//!
//! Everything listens on 127.0.0.1 only, on ephemeral ports, and every wait is bounded.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod browser;
mod builder;
mod client;
mod echo;
pub mod module_config;
mod origin;
mod process;
mod proxy;
mod raw;
pub mod reload_config;
mod reply;
pub mod tls;

pub use builder::ProxyBuilder;
pub use client::*;
pub use echo::EchoServer;
pub use origin::TestOrigin;
pub use process::{
    free_port, proc_status_kib, run_weir, send_signal, temp_dir, wait_for_port, TempDir, WEIR,
};
pub use proxy::Proxy;
pub use raw::{chunked_post, raw_exchange, try_raw_exchange, RawConn, RawResponse};
pub use reply::{pattern, BodySpec, Recorded, Reply, CHUNK};

use std::time::{Duration, SystemTime};

/// An HTTP date `secs_ago` seconds in the past (negative: in the future).
pub fn http_date(secs_ago: i64) -> String {
    let now = SystemTime::now();
    let t = if secs_ago >= 0 {
        now - Duration::from_secs(secs_ago as u64)
    } else {
        now + Duration::from_secs(secs_ago.unsigned_abs())
    };
    httpdate::fmt_http_date(t)
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
