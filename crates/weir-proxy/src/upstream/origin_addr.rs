//! Where a request goes: an origin's scheme, host and port. The name every layer above
//! uses for an origin (routes, targets, the access log): the bottom of `upstream/`,
//! using only the configuration's URL type.

use crate::config::OriginUrl;

/// Where a request goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OriginAddr {
    /// `https://`: TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl OriginAddr {
    /// An `http://` origin.
    pub(crate) fn http(host: impl Into<String>, port: u16) -> OriginAddr {
        OriginAddr {
            tls: false,
            host: host.into(),
            port,
        }
    }

    /// The origin an absolute `http://` or `https://` URI names (the default port
    /// when it names none); `None` for another scheme, no host, or a bad port.
    pub(crate) fn from_uri(uri: &http::Uri) -> Option<OriginAddr> {
        let tls = match uri.scheme_str()? {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        let authority = uri.authority()?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        let port = crate::config::authority_port(authority).ok()?;
        Some(OriginAddr {
            tls,
            host: host.to_string(),
            port: port.unwrap_or(if tls { 443 } else { 80 }),
        })
    }

    pub(crate) fn from_url(url: &OriginUrl) -> OriginAddr {
        OriginAddr {
            tls: url.tls,
            host: url.host.clone(),
            port: url.port,
        }
    }
}

impl std::fmt::Display for OriginAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tls {
            f.write_str("https://")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
