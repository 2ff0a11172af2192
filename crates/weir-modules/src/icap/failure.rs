//! Why an ICAP service could not be used.
//!
//! Its own file because every layer of the client reports it: the transport (connect
//! and read failures), the service (statuses, resting), the metrics that count it and
//! the module that applies the service's `on_failure` policy.

use super::wire::WireError;

/// Why the service could not be used.
#[derive(Debug)]
pub enum Failure {
    /// Connecting failed (refused, unreachable, connect timeout).
    Connect,
    /// The exchange took longer than the service's timeout.
    Timeout,
    /// The socket failed in the middle of the exchange.
    Io,
    /// The answer was malformed, too large or cut short.
    Protocol(WireError),
    /// The service answered with an error status (or OPTIONS did not answer 200).
    Status(u16),
    /// Not tried: the service was unreachable or timed out moments ago
    /// (`retry_after`).
    Resting,
}

impl std::fmt::Display for Failure {
    /// `connect`, `timeout`, `io`, `protocol-<what>`, `status-<code>` or `resting`: the
    /// `icap=failed:…` log field.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect => f.write_str("connect"),
            Failure::Timeout => f.write_str("timeout"),
            Failure::Io => f.write_str("io"),
            Failure::Protocol(e) => write!(f, "protocol-{}", e.name()),
            Failure::Status(s) => write!(f, "status-{s}"),
            Failure::Resting => f.write_str("resting"),
        }
    }
}
