//! What a transaction knows of its listener (`ListenerInfo`, with the connection
//! `Setup` the listener asks of the accept layer) and of its client's connection
//! (`ConnInfo`). Vocabulary: it names only configuration, routes, the listener's TLS
//! certificates and the framing guard's report.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::ListenMode;
use crate::engine::Engine;
use crate::listener::tls::TlsListener;
use crate::route::Router;

/// What a listener does.
pub(crate) struct ListenerInfo {
    pub mode: ListenMode,
    pub allow: Vec<ipnet::IpNet>,
    pub connect_ports: Vec<u16>,
    /// Forward mode: the ports plain requests may go to.
    pub safe_ports: Vec<std::ops::RangeInclusive<u16>>,
    pub router: Option<Router>,
    /// Clients that may PURGE (`[cache] purge_from`).
    pub purge_from: Vec<ipnet::IpNet>,
    /// The storage policy obeys targeted cache-control fields (RFC 9213).
    pub targeted_fields: bool,
    /// What happens before HTTP: PROXY header, TLS, original destination.
    pub setup: Setup,
    /// The cluster's peer listener: a peer's request for an `https://` URL is fetched
    /// over TLS (other forward listeners want a CONNECT tunnel for those).
    pub peers: bool,
}

impl ListenerInfo {
    /// What modules see of this listener.
    pub fn api_view(&self, tls: bool) -> weir_api::Listener {
        weir_api::Listener {
            mode: match self.mode {
                ListenMode::Forward => weir_api::ListenerMode::Forward,
                ListenMode::Reverse => weir_api::ListenerMode::Reverse,
                ListenMode::Transparent => weir_api::ListenerMode::Transparent,
            },
            tls,
        }
    }
}

/// One client connection.
pub(crate) struct ConnInfo {
    /// The listener's engine. A transaction reaches it through its connection: the
    /// engine's reference count is shared by every worker thread, and one taken per
    /// request made each request wait for that count's cache line from the other
    /// core; the connection's count only its own requests touch.
    pub engine: Arc<Engine>,
    /// The client: the peer, or the address a PROXY header gave.
    pub client: SocketAddr,
    /// Transparent listeners: where the client meant to connect before the kernel
    /// redirected it.
    pub original_dst: Option<SocketAddr>,
    pub allowed: bool,
    pub listener: Arc<ListenerInfo>,
    /// What the framing guard saw on this connection (HTTP/1 only).
    pub framing: Arc<crate::framing::FramingReport>,
    /// Requests received so far on this connection (HTTP/1 requests arrive in order).
    pub requests: std::sync::atomic::AtomicU64,
    /// 1xx responses from origins for the request this HTTP/1.1 connection is
    /// answering, written to the client ahead of hyper's output.
    pub interim: crate::interim::Interim,
}

/// How a listener's connections are set up before HTTP.
pub(crate) struct Setup {
    /// Read a PROXY header first.
    pub proxy_protocol: bool,
    /// Terminate TLS with these certificates.
    pub tls: Option<Arc<TlsListener>>,
    /// Look up the original destination (transparent listeners).
    pub transparent: bool,
    /// Bound on the PROXY header and the TLS handshake together.
    pub handshake_timeout: Duration,
}
