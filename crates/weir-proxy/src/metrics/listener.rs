//! Connection-level counters of client listeners: TLS handshakes by the protocol ALPN
//! chose, and connections refused before any HTTP was read (a failed or slow TLS
//! handshake, a missing or malformed PROXY header, a redirected connection whose
//! original destination is unknown).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::encode::Series;
use super::labels::{Alpn, Refusal};

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
