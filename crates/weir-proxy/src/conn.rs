//! What a transaction knows of its listener (`ListenerInfo`) and of its client's
//! connection (`ConnInfo`), as the accept layer sets them up. Vocabulary: it names
//! only configuration, routes and the connection setup.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::ListenMode;
use crate::route::Router;

/// What a listener does.
pub(crate) struct ListenerInfo {
    pub mode: ListenMode,
    pub allow: Vec<ipnet::IpNet>,
    pub connect_ports: Vec<u16>,
    pub router: Option<Router>,
    /// Clients that may PURGE (`[cache] purge_from`).
    pub purge_from: Vec<ipnet::IpNet>,
    /// What happens before HTTP: PROXY header, TLS, original destination.
    pub setup: crate::listener::Setup,
}

/// One client connection.
pub(crate) struct ConnInfo {
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
}
