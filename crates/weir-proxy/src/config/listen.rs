//! `[[listen]]`: client listeners, their mode and their reverse-proxy routes.

use std::net::SocketAddr;

use ipnet::IpNet;
use serde::Deserialize;

use super::ports::{default_safe_ports, PortSpec};
use super::tls::TlsConfig;
use super::values::{default_allow, networks};

/// What a listener does with requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenMode {
    /// Clients name absolute `http://` URLs (and CONNECT for tunnels).
    Forward,
    /// Clients talk to Weir as if it were the origin; requests are routed by Host and path.
    Reverse,
    /// Connections redirected to Weir by the kernel (iptables `REDIRECT`): requests in
    /// origin form, named by their Host header (else the original destination), cached
    /// as in forward mode.
    Transparent,
}

impl ListenMode {
    /// The lowercase name, as in the configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ListenMode::Forward => "forward",
            ListenMode::Reverse => "reverse",
            ListenMode::Transparent => "transparent",
        }
    }
}

/// `[[listen]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// Address and port to accept connections on.
    pub addr: SocketAddr,
    /// `forward`, `reverse` or `transparent`.
    pub mode: ListenMode,
    /// Client networks allowed to use this listener; others get 403. A bare address
    /// in the file stands for that one host.
    #[serde(default = "default_allow", deserialize_with = "networks")]
    pub allow: Vec<IpNet>,
    /// Reverse mode: the default origin, e.g. `http://127.0.0.1:8081`.
    #[serde(default)]
    pub origin: Option<String>,
    /// Reverse mode: routes tried in order before the default origin.
    #[serde(default)]
    pub route: Vec<RouteConfig>,
    /// Forward mode: ports CONNECT may tunnel to.
    #[serde(default = "default_connect_ports")]
    pub connect_ports: Vec<u16>,
    /// Forward mode: ports plain requests may go to (Squid's `Safe_ports`): ports and
    /// `"LOW-HIGH"` ranges. Default: 80, 443, 21, 70, 210, 280, 488, 591, 777 and
    /// 1025-65535.
    #[serde(default = "default_safe_ports")]
    pub safe_ports: Vec<PortSpec>,
    /// The modules that apply to this listener, by `[[module]]` name. They run in the
    /// order of the `[[module]]` list, whatever the order here; disabled ones are not
    /// loaded. `None` (no `modules` key): every enabled module.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
    /// TLS termination: the listener speaks HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with
    /// these certificates. `None`: cleartext.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a load
    /// balancer, whose client address then stands for the peer's. Default: false.
    #[serde(default)]
    pub proxy_protocol: bool,
    /// Obey targeted cache-control fields (RFC 9213: `[cache] targeted_field`, then
    /// `CDN-Cache-Control`) instead of `Cache-Control` and `Expires` when a response
    /// has one. `None`: yes on reverse listeners, no on the others.
    #[serde(default)]
    pub targeted_cache_control: Option<bool>,
    /// The cluster's peer listener (`[cluster] peer_addr`), made by the engine, never
    /// read from a file: it also takes `https://` requests from peers, whose fills
    /// it makes over TLS.
    #[serde(skip)]
    pub peers: bool,
}

impl ListenConfig {
    /// Whether this listener obeys targeted cache-control fields.
    pub fn obeys_targeted_fields(&self) -> bool {
        self.targeted_cache_control
            .unwrap_or(self.mode == ListenMode::Reverse)
    }
}

/// `[[listen.route]]`: the first route whose host and path prefix match wins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Host to match (without port, case-insensitive); any host when absent.
    #[serde(default)]
    pub host: Option<String>,
    /// Path prefix to match.
    #[serde(default = "default_path_prefix")]
    pub path_prefix: String,
    /// Origin to send matching requests to.
    pub origin: String,
    /// Which modules (by name, in `[[module]]` order) apply to requests this route
    /// matches; absent: the listener's.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
}

impl ListenConfig {
    /// The ports of `safe_ports` (entries `weir check` refused are left out).
    pub fn safe_port_ranges(&self) -> Vec<std::ops::RangeInclusive<u16>> {
        self.safe_ports
            .iter()
            .filter_map(|p| p.range().ok())
            .collect()
    }
}

pub(super) fn default_connect_ports() -> Vec<u16> {
    vec![443]
}

fn default_path_prefix() -> String {
    "/".into()
}
