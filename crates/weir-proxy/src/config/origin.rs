//! Origin servers as written in the configuration: their URLs (in `[[listen]] origin`
//! and routes) and their `[[origin]]` sections (protocol and TLS settings).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::spans::KeyPath;

/// An origin server named in the configuration, e.g. `http://127.0.0.1:8081` or
/// `https://img.example`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginUrl {
    /// `true` for `https://`: Weir speaks TLS to it.
    pub tls: bool,
    /// Host name or IP address (IPv6 without brackets), lowercased.
    pub host: String,
    /// Port (80 for `http://`, 443 for `https://` when not given).
    pub port: u16,
    /// `host[:port]` as written, for Host headers.
    pub authority: http::uri::Authority,
}

impl OriginUrl {
    /// Parses `http://host[:port]` or `https://host[:port]` (a trailing `/` is allowed;
    /// no other path, query or user info).
    pub fn parse(text: &str) -> Result<OriginUrl, String> {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(format!(
                    "`{text}`: scheme `{other}` is not supported (use http:// or https://)"
                ))
            }
            None => return Err(format!("`{text}` needs a scheme, e.g. http://{text}")),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("`{text}` has no host"))?
            .clone();
        if authority.as_str().contains('@') {
            return Err(format!("`{text}`: user info is not allowed in an origin"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(format!("`{text}`: an origin has no path or query"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() {
            return Err(format!("`{text}` has no host"));
        }
        let port = authority_port(&authority)
            .map_err(|e| format!("`{text}`: {e}"))?
            .unwrap_or(if tls { 443 } else { 80 });
        Ok(OriginUrl {
            tls,
            host,
            port,
            authority,
        })
    }

    /// Whether `other` names the same origin: same scheme, host and port (a default
    /// port written or left out makes no difference).
    pub fn same_origin(&self, other: &OriginUrl) -> bool {
        self.tls == other.tls && self.host == other.host && self.port == other.port
    }
}

/// The port an authority names: none when it names none (or leaves it empty, as in
/// `host:`), an error when it is not a number from 1 to 65535. `http::uri` reads any
/// digits as a port and gives no number for one that overflows, so without this check
/// `host:73617` would quietly mean the scheme's default port.
pub fn authority_port(authority: &http::uri::Authority) -> Result<Option<u16>, String> {
    let text = authority.as_str();
    if text.ends_with(']') {
        return Ok(None);
    }
    let Some((_, port)) = text.rsplit_once(':') else {
        return Ok(None);
    };
    if port.is_empty() {
        return Ok(None);
    }
    match port.parse::<u16>() {
        Ok(n) if n > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        _ => Err(format!("port {port} is not between 1 and 65535")),
    }
}

/// How Weir speaks to an origin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OriginProtocol {
    /// Over TLS, HTTP/2 when the origin offers it (ALPN), else HTTP/1.1; in clear
    /// text, HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only, from the keep-alive pool.
    Http1,
    /// HTTP/2 only: negotiated by ALPN over TLS, with prior knowledge (h2c) in clear
    /// text.
    Http2,
}

impl OriginProtocol {
    /// The name, as in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            OriginProtocol::Auto => "auto",
            OriginProtocol::Http1 => "http1",
            OriginProtocol::Http2 => "http2",
        }
    }
}

/// `[[origin]]`: how to reach one origin server, matched by scheme, host and port
/// against the origins of listeners and routes (and the URLs of a forward listener).
/// Origins without a section use the defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginConfig {
    /// `http://host[:port]` or `https://host[:port]`. Required.
    pub url: String,
    /// `auto`, `http1` or `http2`. Default: `auto`.
    #[serde(default)]
    pub protocol: OriginProtocol,
    /// `https://` only: a PEM file of the CA certificates to trust for this origin,
    /// instead of the system's roots. Relative to the working directory.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// `https://` only: `false` accepts any certificate (for tests only). Default: true.
    #[serde(default)]
    pub tls_verify: Option<bool>,
}

impl OriginConfig {
    /// The parsed `url` (valid once the configuration is validated).
    pub fn origin_url(&self) -> Result<OriginUrl, String> {
        OriginUrl::parse(&self.url)
    }

    /// Whether the origin's certificate is checked (the default).
    pub fn verifies(&self) -> bool {
        self.tls_verify.unwrap_or(true)
    }
}

/// Reads the CA certificates of a `ca_file`: at least one PEM certificate, each one
/// usable as a trust anchor.
pub fn load_ca_file(path: &Path) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{}` is not a valid PEM file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "`{}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in &certs {
        roots.add(cert.clone()).map_err(|e| {
            format!(
                "`{}` holds a certificate that cannot be a trust anchor: {e}",
                path.display()
            )
        })?;
    }
    Ok(certs)
}

/// The `[[origin]]` sections: valid URLs, each origin once, TLS keys on `https://`
/// origins only, readable CA files.
pub(crate) fn check(origins: &[OriginConfig], report: &mut impl FnMut(Vec<KeyPath>, String)) {
    let mut seen: Vec<(usize, OriginUrl)> = Vec::new();
    for (i, origin) in origins.iter().enumerate() {
        let at = KeyPath::top("origin").index(i);
        let url = match origin.origin_url() {
            Ok(url) => url,
            Err(e) => {
                report(vec![at.key("url")], e);
                continue;
            }
        };
        if let Some((first, _)) = seen.iter().find(|(_, u)| u.same_origin(&url)) {
            report(
                vec![at.clone().key("url")],
                format!("this origin already has a section (origin[{first}])"),
            );
        }
        if !url.tls {
            for key in ["ca_file", "tls_verify"] {
                let written = match key {
                    "ca_file" => origin.ca_file.is_some(),
                    _ => origin.tls_verify.is_some(),
                };
                if written {
                    report(
                        vec![at.clone().key(key)],
                        format!("`{key}` applies to https:// origins only"),
                    );
                }
            }
        }
        if let Some(path) = &origin.ca_file {
            if !origin.verifies() {
                report(
                    vec![at.clone().key("ca_file"), at.clone().key("tls_verify")],
                    "a `ca_file` has no use with `tls_verify = false`".into(),
                );
            } else if url.tls {
                if let Err(e) = load_ca_file(path) {
                    report(vec![at.clone().key("ca_file")], e);
                }
            }
        }
        seen.push((i, url));
    }
}
