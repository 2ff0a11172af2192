//! What the in-process tests share: the origin server, clients and replies of the
//! binary's test harness (`crates/weir/tests/common`), and bounded waiting.
#![allow(dead_code)]

use std::time::{Duration, Instant};

pub mod h2_origin;
#[cfg(feature = "modules")]
pub mod modules;

#[allow(unused_imports, unused_macros)]
#[path = "../../../weir/tests/common/client.rs"]
pub mod client;
// `origin.rs` finds `reply.rs` as its sibling (`super::reply`).
#[path = "../../../weir/tests/common/origin.rs"]
pub mod origin;
#[allow(unused_imports)]
#[path = "../../../weir/tests/common/raw.rs"]
pub mod raw;
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

/// A free port on 127.0.0.1, found by binding port 0 and letting it go.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
}

/// Starts a server on the configuration `text_for(admin)` names (`file` in errors),
/// with an admin listener on a free port when `admin` is set. A port found free can be
/// taken by a test running in parallel before the server binds it, so a failure to
/// listen is retried on another port (five attempts).
pub async fn start_server(
    file: &str,
    admin: bool,
    text_for: impl Fn(Option<std::net::SocketAddr>) -> String,
    factories: &[Box<dyn weir_api::ModuleFactory>],
) -> (weir_proxy::Server, Option<std::net::SocketAddr>, String) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let admin = admin.then(free_addr);
        let text = text_for(admin);
        let mut config = weir_proxy::Config::parse(&text, file)
            .unwrap_or_else(|e| panic!("{e}\nconfiguration:\n{text}"));
        // Tests share no disk: a disk tier only where a test asks for one.
        if !text.contains("disk") {
            config.cache.disk = weir_proxy::config::DiskConfig::Off;
        }
        match weir_proxy::Server::start_with_modules(config, factories).await {
            Ok(server) => return (server, admin, text),
            Err(e) if attempt < 5 && e.to_string().contains("cannot listen") => continue,
            Err(e) => panic!("start: {e}\nconfiguration:\n{text}"),
        }
    }
}
