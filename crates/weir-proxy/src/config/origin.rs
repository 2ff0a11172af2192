//! Origin server URLs as written in the configuration.

/// An origin server named in the configuration, e.g. `http://127.0.0.1:8081`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginUrl {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// `host:port` as sent in Host headers and used as the pool key.
    pub authority: http::uri::Authority,
}

impl OriginUrl {
    /// Parses `http://host[:port]` (a trailing `/` is allowed; no other path, query or
    /// user info). `https://` is not supported yet.
    pub fn parse(text: &str) -> Result<OriginUrl, String> {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "`{text}`: scheme `{other}` is not supported (use http://)"
                ))
            }
            None => return Err(format!("`{text}` needs a scheme, e.g. http://{text}")),
        }
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
            .to_string();
        if host.is_empty() {
            return Err(format!("`{text}` has no host"));
        }
        let port = authority.port_u16().unwrap_or(80);
        Ok(OriginUrl {
            host,
            port,
            authority,
        })
    }
}
