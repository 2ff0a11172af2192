//! The state the senders share: every origin's connections (`Upstream`) and one
//! origin's settings and pools (`Origin`). Below the senders (`h1.rs`, `h2.rs` and the
//! dispatch in `mod.rs`), which take this state; above the pools' own data
//! (`h1_pool.rs`, `h2_pool.rs`) and the TLS settings.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use thread_local::ThreadLocal;

use super::error::UpstreamError;
use super::origin_addr::OriginAddr;
use super::tls::TlsConfigs;
use super::{h1_pool, h2_pool};
use crate::config::{OriginProtocol, UpstreamConfig};
use crate::metrics::Metrics;

/// All origins' connections.
pub(crate) struct Upstream {
    /// The origins in use or used lately. An origin that nothing holds any more (no
    /// request, no connection open or idle) is forgotten at the next sweep, unless an
    /// `[[origin]]` section names it: a forward proxy meets new hosts without end, and
    /// what it keeps per host must not grow with them.
    pub(super) origins: Mutex<HashMap<OriginAddr, Arc<Origin>>>,
    /// The origins this thread asked for lately: most requests find theirs here,
    /// without taking the lock every worker shares or hashing the name with SipHash.
    /// Weak, so that these do not keep an origin from being forgotten; an entry whose
    /// origin was forgotten is dropped when next looked up.
    pub(super) recent: ThreadLocal<RefCell<RecentOrigins>>,
    /// `[[origin]]` sections, by origin.
    pub(super) configured: HashMap<OriginAddr, Configured>,
    /// TLS trusting the system's roots, read once, for `https://` origins without a
    /// `ca_file`.
    pub(super) system_tls: OnceLock<Result<Arc<TlsConfigs>, String>>,
    pub(super) settings: UpstreamConfig,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
    /// `[timeouts] origin_body_idle`.
    pub(super) body_idle: Duration,
    pub(super) metrics: Arc<Metrics>,
}

/// A thread's recent origins: at most [`RECENT_ORIGINS`], emptied when full. Small, so
/// a fast hasher with a random seed is enough against names chosen to collide.
pub(super) type RecentOrigins = HashMap<OriginAddr, Weak<Origin>, foldhash::fast::RandomState>;

/// See [`Upstream::recent`].
pub(super) const RECENT_ORIGINS: usize = 64;

pub(super) struct Configured {
    pub(super) protocol: OriginProtocol,
    /// `None`: the system's roots.
    pub(super) tls: Option<Arc<TlsConfigs>>,
}

/// One origin: its settings and its connections.
pub(super) struct Origin {
    pub(super) addr: OriginAddr,
    pub(super) protocol: OriginProtocol,
    /// `https://` origins: the TLS settings, or why there are none.
    pub(super) tls: Option<Result<Arc<TlsConfigs>, String>>,
    /// What an `auto` origin over TLS chose by ALPN: [`UNKNOWN`], [`HTTP1`] or [`HTTP2`].
    pub(super) learned: AtomicU8,
    /// One connection at a time finds out what an `auto` origin speaks.
    pub(super) probe: tokio::sync::Mutex<()>,
    pub(super) h1: h1_pool::Pool,
    pub(super) h2: h2_pool::Pool,
}

pub(super) const UNKNOWN: u8 = 0;
pub(super) const HTTP1: u8 = 1;
pub(super) const HTTP2: u8 = 2;

/// How a request is sent.
pub(super) enum Dispatch {
    Http1,
    Http2,
    /// An `auto` origin over TLS whose choice is not known yet.
    Probe,
}

impl Origin {
    pub(super) fn dispatch(&self) -> Dispatch {
        match (self.tls.is_some(), self.protocol) {
            (_, OriginProtocol::Http1) | (false, OriginProtocol::Auto) => Dispatch::Http1,
            (_, OriginProtocol::Http2) => Dispatch::Http2,
            (true, OriginProtocol::Auto) => match self.learned.load(Ordering::Acquire) {
                HTTP1 => Dispatch::Http1,
                HTTP2 => Dispatch::Http2,
                _ => Dispatch::Probe,
            },
        }
    }

    /// After a failed connection, an `auto` origin's protocol is found out again: the
    /// origin may have changed what it offers.
    pub(super) fn forget_protocol_after(&self, e: &UpstreamError) {
        if self.protocol == OriginProtocol::Auto && matches!(e, UpstreamError::Tls(_)) {
            self.learned.store(UNKNOWN, Ordering::Release);
        }
    }
}
