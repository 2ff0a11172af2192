//! Why a request to an origin failed, as the pools report it; the engine turns it into
//! the answer the client gets. The bottom of `upstream/`, beside `origin_addr.rs`.

/// Why a request to an origin failed.
#[derive(Debug, Clone)]
pub(crate) enum UpstreamError {
    /// Could not connect (DNS, refused, connect timeout).
    Connect(String),
    /// The TLS handshake failed (certificate not trusted or not for this name, no
    /// common protocol), or TLS could not be set up for this origin.
    Tls(String),
    /// No response header within `[timeouts] origin_response`.
    Timeout,
    /// The client's body went over the limit while it was being forwarded.
    BodyTooLarge,
    /// The client paused too long while its body was being forwarded.
    ClientTimeout(std::time::Duration),
    /// The origin broke the protocol, closed the connection or reset the stream.
    Protocol(String),
}
