//! One origin's HTTP/1.1 connections as the pool keeps them: the idle ones and how
//! many are open. Below the shared state that holds it (`origins.rs`); taking and
//! giving back connections, which need that state, is in `h1.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::client::conn::http1;
use tokio::sync::Notify;

use crate::body::request::RequestBody;

/// One origin's HTTP/1.1 connections.
pub(super) struct Pool {
    pub(super) idle: Mutex<Vec<(http1::SendRequest<RequestBody>, Instant)>>,
    /// Connections open (busy or idle).
    pub(super) open: AtomicUsize,
    /// Signalled when a connection goes idle or closes: a waiting request may proceed.
    pub(super) available: Notify,
    pub(super) max_idle: usize,
}

impl Pool {
    pub(super) fn new(max_idle: usize) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            available: Notify::new(),
            max_idle,
        }
    }

    /// Closes idle connections older than `timeout`.
    pub(super) fn close_expired_idle(&self, timeout: Duration) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|(s, since)| !s.is_closed() && since.elapsed() < timeout);
    }

    pub(super) fn connection_gone(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.available.notify_one();
    }
}
