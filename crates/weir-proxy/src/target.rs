//! Where a request goes (`Target`: the origin, and the names it is cached under), and
//! how the transaction finds it from the request and the listener's mode: forward
//! (the absolute URL), reverse (Host and path, through the routes) or transparent
//! (Host, else the original destination). Uses the connection's facts and the error
//! vocabulary only.

use std::net::SocketAddr;

use http::header::{self, HeaderValue};
use http::request;
use http::uri::PathAndQuery;

use crate::config::ListenMode;
use crate::conn::ConnInfo;
use crate::error::ProxyError;
use crate::interim::Interim;
use crate::upstream::OriginAddr;

/// Where a request goes and how it is named in the cache.
#[derive(Clone)]
pub(crate) struct Target {
    pub origin: OriginAddr,
    /// The Host header to send, and the authority part of the cache key.
    pub host: HeaderValue,
    /// The client's, shared with its URI (`/` when it has none).
    pub path_and_query: PathAndQuery,
    /// Whether the storage policy obeys targeted cache-control fields (RFC 9213), as
    /// the listener says (`targeted_cache_control`).
    pub targeted: bool,
    /// Where the origin's 1xx responses go, when the client takes them.
    pub interim: Option<Interim>,
}

/// Finds the origin and the names to use for it.
/// `stream_interim`: an HTTP/2 stream's own queue for 1xx responses (see
/// `service::handle`); other requests use their connection's, when they take 1xx.
pub(crate) fn resolve_target(
    conn: &ConnInfo,
    req: &request::Parts,
    stream_interim: Option<Interim>,
) -> Result<Target, ProxyError> {
    let mut target = locate(conn, req)?;
    target.targeted = conn.listener.targeted_fields;
    target.interim = match stream_interim {
        Some(queue) => Some(queue),
        None if req.version == http::Version::HTTP_2 => None,
        None => crate::interim::client_accepts(req.version).then(|| conn.interim.clone()),
    };
    Ok(target)
}

/// On the cluster's peer listener, a peer's fill names the origin to fetch from in
/// `Weir-Hop-Origin` (its URL is the one it is cached under, which in reverse mode is
/// the public name, not the origin's). Elsewhere the field means nothing.
fn peer_origin(conn: &ConnInfo, req: &request::Parts) -> Result<Option<OriginAddr>, ProxyError> {
    if !conn.listener.peers || !req.headers.contains_key(crate::headers::HOP) {
        return Ok(None);
    }
    let Some(value) = req.headers.get(crate::headers::HOP_ORIGIN) else {
        return Ok(None);
    };
    let uri: Option<http::Uri> = value.to_str().ok().and_then(|v| v.parse().ok());
    match uri.as_ref().and_then(OriginAddr::from_uri) {
        Some(origin) => Ok(Some(origin)),
        None => Err(ProxyError::bad_request("invalid Weir-Hop-Origin")),
    }
}

/// The path and query of `uri`, as an origin-form request target.
pub(crate) fn origin_form(uri: &http::Uri) -> PathAndQuery {
    uri.path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"))
}

fn locate(conn: &ConnInfo, req: &request::Parts) -> Result<Target, ProxyError> {
    let uri = &req.uri;
    let path_and_query = origin_form(uri);
    match conn.listener.mode {
        ListenMode::Transparent => transparent_target(req, conn.original_dst, path_and_query),
        ListenMode::Forward => {
            match uri.scheme_str() {
                Some("http") => {}
                Some("https") => {
                    return Err(ProxyError::bad_request(
                        "https:// URLs go through a CONNECT tunnel, not a plain request",
                    ))
                }
                Some(other) => {
                    return Err(ProxyError::bad_request(format!(
                        "unsupported URL scheme `{other}`"
                    )))
                }
                None => {
                    return Err(ProxyError::bad_request(
                        "this is a forward proxy: request an absolute http:// URL",
                    ))
                }
            }
            let authority = uri
                .authority()
                .ok_or_else(|| ProxyError::bad_request("the URL has no host"))?;
            if authority.as_str().contains('@') {
                return Err(ProxyError::bad_request(
                    "user info in the URL is not allowed",
                ));
            }
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            if host.is_empty() {
                return Err(ProxyError::bad_request("the URL has no host"));
            }
            let port = checked_port(authority)?;
            let to = port.unwrap_or(80);
            if !conn.listener.safe_ports.iter().any(|r| r.contains(&to)) {
                return Err(ProxyError::forbidden(format!(
                    "requests to port {to} are not allowed through this proxy"
                )));
            }
            // RFC 9112 §3.2.2: the target URI's authority replaces any Host received.
            let host_header = match port {
                Some(80) => HeaderValue::from_str(authority.as_str().trim_end_matches(":80")),
                _ => HeaderValue::from_str(authority.as_str()),
            }
            .map_err(|_| ProxyError::bad_request("invalid host in the URL"))?;
            let origin = match peer_origin(conn, req)? {
                Some(origin) => origin,
                None => OriginAddr::http(host, to),
            };
            Ok(Target {
                origin,
                host: host_header,
                path_and_query,
                targeted: false,
                interim: None,
            })
        }
        ListenMode::Reverse => {
            // RFC 9112 §3.2.2: a target in absolute form (or HTTP/2's :authority)
            // names the host; a Host field beside it is ignored.
            let host = match uri.authority() {
                Some(a) => {
                    checked_port(a)?;
                    HeaderValue::from_str(a.as_str())
                        .map_err(|_| ProxyError::bad_request("invalid authority in the target"))?
                }
                None => match req.headers.get(header::HOST) {
                    Some(h) => h.clone(),
                    None => return Err(ProxyError::bad_request("missing Host header")),
                },
            };
            let router = conn
                .listener
                .router
                .as_ref()
                .expect("reverse listeners have a router");
            let origin = router
                .route(host.to_str().ok(), uri.path())
                .ok_or_else(|| {
                    ProxyError::bad_gateway("no origin is configured for this host and path")
                })?
                .clone();
            Ok(Target {
                origin,
                host,
                path_and_query,
                targeted: false,
                interim: None,
            })
        }
    }
}

/// The port a request's authority names, if any; one outside 1–65535 is a 400.
fn checked_port(authority: &http::uri::Authority) -> Result<Option<u16>, ProxyError> {
    crate::config::authority_port(authority).map_err(ProxyError::bad_request)
}

/// Where a request on a transparent listener goes: the host its `Host` header names
/// (port 80 unless it says), as a forward proxy would take it from an absolute URL;
/// without `Host`, the original destination.
///
/// The Host header wins over the original destination so that what is cached under
/// a name always comes from that name's own server: a client that connects to one
/// address with another site's name in `Host` reaches that site, and cannot make
/// Weir store a third party's answer under it.
fn transparent_target(
    req: &http::request::Parts,
    original_dst: Option<SocketAddr>,
    path_and_query: PathAndQuery,
) -> Result<Target, ProxyError> {
    let named = req
        .headers
        .get(http::header::HOST)
        .map(|h| {
            h.to_str()
                .ok()
                .and_then(|h| h.parse::<http::uri::Authority>().ok())
                .ok_or_else(|| ProxyError::bad_request("invalid Host header"))
        })
        .or_else(|| req.uri.authority().cloned().map(Ok))
        .transpose()?;
    let (origin, host) = match named {
        Some(authority) => {
            if authority.as_str().contains('@') {
                return Err(ProxyError::bad_request("user info in Host is not allowed"));
            }
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            if host.is_empty() {
                return Err(ProxyError::bad_request("the Host header names no host"));
            }
            let port = checked_port(&authority)?;
            // The cache key's authority, as forward mode writes it: `:80` left out.
            let header = match port {
                Some(80) => HeaderValue::from_str(authority.as_str().trim_end_matches(":80")),
                _ => HeaderValue::from_str(authority.as_str()),
            }
            .map_err(|_| ProxyError::bad_request("invalid Host header"))?;
            let origin = OriginAddr::http(host.to_ascii_lowercase(), port.unwrap_or(80));
            (origin, header)
        }
        None => {
            let Some(dst) = original_dst else {
                return Err(ProxyError::bad_request(
                    "no Host header, and the connection was not redirected to this listener",
                ));
            };
            let host = match dst {
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            let header = if dst.port() == 80 {
                host.clone()
            } else {
                format!("{host}:{}", dst.port())
            };
            let origin = OriginAddr::http(dst.ip().to_string(), dst.port());
            let header = HeaderValue::from_str(&header)
                .map_err(|_| ProxyError::bad_request("invalid original destination"))?;
            (origin, header)
        }
    };
    Ok(Target {
        origin,
        host,
        path_and_query,
        targeted: false,
        interim: None,
    })
}

#[cfg(test)]
mod tests {
    use super::transparent_target as target;
    use http::uri::PathAndQuery;

    fn path(p: &'static str) -> PathAndQuery {
        PathAndQuery::from_static(p)
    }

    fn parts(host: Option<&str>) -> http::request::Parts {
        let mut b = http::Request::get("/a?b");
        if let Some(h) = host {
            b = b.header("host", h);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn host_header_names_the_origin_and_the_key() {
        let dst = Some("192.0.2.1:80".parse().unwrap());
        let t = target(&parts(Some("Example.org:80")), dst, path("/a?b")).unwrap();
        assert_eq!((t.origin.host.as_str(), t.origin.port), ("example.org", 80));
        assert_eq!(t.host, "Example.org");
        let t = target(&parts(Some("[2001:db8::1]:8080")), dst, path("/")).unwrap();
        assert_eq!(
            (t.origin.host.as_str(), t.origin.port),
            ("2001:db8::1", 8080)
        );
        assert!(target(&parts(Some("a b")), dst, path("/")).is_err());
        assert!(target(&parts(Some("u@h")), dst, path("/")).is_err());
    }

    #[test]
    fn without_host_the_original_destination_is_used() {
        let dst = Some("192.0.2.1:8080".parse().unwrap());
        let t = target(&parts(None), dst, path("/")).unwrap();
        assert_eq!((t.origin.host.as_str(), t.origin.port), ("192.0.2.1", 8080));
        assert_eq!(t.host, "192.0.2.1:8080");
        let dst6 = Some("[2001:db8::1]:80".parse().unwrap());
        assert_eq!(
            target(&parts(None), dst6, path("/")).unwrap().host,
            "[2001:db8::1]"
        );
        assert!(target(&parts(None), None, path("/")).is_err());
    }
}
