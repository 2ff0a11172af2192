//! Connection-level counters of client listeners: TLS handshakes by the protocol ALPN
//! chose, and connections refused before any HTTP was read (a failed or slow TLS
//! handshake, a missing or malformed PROXY header, a redirected connection whose
//! original destination is unknown).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::Series;

/// Why a connection was closed before HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The TLS handshake failed (bad ClientHello, no common cipher, client gave up).
    TlsHandshake,
    /// The TLS handshake did not finish within `timeouts.client_handshake`.
    TlsTimeout,
    /// A `proxy_protocol` listener got no valid PROXY header.
    ProxyHeader,
    /// The PROXY header did not arrive within `timeouts.client_handshake`.
    ProxyTimeout,
}

impl Refusal {
    /// Every reason, in a fixed order (index = `self as usize`).
    pub const ALL: [Refusal; 4] = [
        Refusal::TlsHandshake,
        Refusal::TlsTimeout,
        Refusal::ProxyHeader,
        Refusal::ProxyTimeout,
    ];

    /// Lowercase label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::TlsHandshake => "tls_handshake",
            Refusal::TlsTimeout => "tls_timeout",
            Refusal::ProxyHeader => "proxy_header",
            Refusal::ProxyTimeout => "proxy_timeout",
        }
    }
}

/// The application protocol a TLS handshake settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// HTTP/2.
    H2,
    /// HTTP/1.1.
    Http11,
    /// The client offered no ALPN (HTTP/1.1 is assumed, h2 still detected by its preface).
    None,
}

impl Alpn {
    const ALL: [Alpn; 3] = [Alpn::H2, Alpn::Http11, Alpn::None];

    fn as_str(self) -> &'static str {
        match self {
            Alpn::H2 => "h2",
            Alpn::Http11 => "http/1.1",
            Alpn::None => "none",
        }
    }
}

/// The listener counters.
#[derive(Debug)]
pub(super) struct ListenerCounters {
    refused: [Counter; Refusal::ALL.len()],
    handshakes: [Counter; Alpn::ALL.len()],
}

impl ListenerCounters {
    pub(super) fn register(r: &mut Registry) -> ListenerCounters {
        let refused: [Counter; Refusal::ALL.len()] = Default::default();
        let labels = Refusal::ALL.map(|k| vec![("reason", k.as_str())]);
        r.register(
            "connections_refused",
            "Client connections closed before HTTP, by reason",
            Series::new(labels, &refused),
        );
        let handshakes: [Counter; Alpn::ALL.len()] = Default::default();
        let labels = Alpn::ALL.map(|a| vec![("alpn", a.as_str())]);
        r.register(
            "tls_handshakes",
            "TLS handshakes completed on client listeners, by ALPN protocol",
            Series::new(labels, &handshakes),
        );
        ListenerCounters {
            refused,
            handshakes,
        }
    }

    pub(super) fn refused(&self, why: Refusal) {
        self.refused[why as usize].inc();
    }

    pub(super) fn handshake(&self, alpn: Alpn) {
        let i = Alpn::ALL.iter().position(|a| *a == alpn).unwrap_or(0);
        self.handshakes[i].inc();
    }
}
