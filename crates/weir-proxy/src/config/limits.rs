//! How much and how long: `[limits]` on what clients and modules may send or hold,
//! `[timeouts]`, and `[upstream]` (the origin connection pools).

use serde::Deserialize;

use super::units::{ByteSize, Seconds};

/// `[limits]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request header section (request line and headers); larger gets 431.
    pub max_request_header: ByteSize,
    /// Largest request body; larger gets 413.
    pub max_request_body: ByteSize,
    /// Largest body a module may ask to receive whole (`Txn::whole_body`); a larger
    /// one passes through unchanged.
    pub module_body: ByteSize,
    /// The most body bytes modules may hold whole at once, over all transactions; a
    /// body that would go over it passes as one over `module_body` does.
    pub module_body_total: ByteSize,
    /// Longest a module's `Flow::Wait` future may take; after it, the module has
    /// failed (a 500, or pass-through when it is optional).
    pub module_wait: Seconds,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_request_header: ByteSize(32 << 10),
            max_request_body: ByteSize(1 << 30),
            module_body: ByteSize(16 << 20),
            module_body_total: ByteSize(256 << 20),
            module_wait: Seconds::from_secs(30.0),
        }
    }
}

/// `[timeouts]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsConfig {
    /// Connecting to an origin.
    pub connect: Seconds,
    /// A client connection's PROXY protocol header and TLS handshake must be done
    /// within this, counted from the accept.
    pub client_handshake: Seconds,
    /// Waiting for an origin's response header after the request was sent; 504 after.
    pub origin_response: Seconds,
    /// The longest an origin may pause in the middle of a response body; the body is
    /// then cut (and the connection closed).
    pub origin_body_idle: Seconds,
    /// A keep-alive client connection with nothing in flight is closed after this.
    pub client_idle: Seconds,
    /// The longest a client may pause while sending a request body; the request then
    /// fails with 408 and the connection is closed.
    pub client_body_idle: Seconds,
    /// A CONNECT tunnel or a switched connection (a WebSocket) over which neither side
    /// sent anything for this long is closed.
    pub tunnel_idle: Seconds,
    /// On SIGTERM/SIGINT, how long in-flight transactions may take to finish.
    pub shutdown_grace: Seconds,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            connect: Seconds::from_secs(5.0),
            client_handshake: Seconds::from_secs(10.0),
            origin_response: Seconds::from_secs(60.0),
            origin_body_idle: Seconds::from_secs(60.0),
            client_idle: Seconds::from_secs(60.0),
            client_body_idle: Seconds::from_secs(60.0),
            tunnel_idle: Seconds::from_secs(900.0),
            shutdown_grace: Seconds::from_secs(10.0),
        }
    }
}

/// `[upstream]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Connections open to one origin at most (busy and idle); further requests wait.
    pub max_connections_per_origin: usize,
    /// Idle keep-alive connections kept per origin.
    pub max_idle_per_origin: usize,
    /// An idle keep-alive connection is closed after this (also an HTTP/2 connection
    /// with no stream open).
    pub idle_timeout: Seconds,
    /// HTTP/2 connections open to one origin at most. Each carries as many concurrent
    /// streams as the origin allows; another is opened when they are all in use.
    pub max_h2_connections_per_origin: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            max_connections_per_origin: 256,
            max_idle_per_origin: 64,
            idle_timeout: Seconds::from_secs(60.0),
            max_h2_connections_per_origin: 4,
        }
    }
}
