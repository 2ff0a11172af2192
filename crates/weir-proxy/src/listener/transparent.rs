//! Transparent interception: the destination a client meant before the kernel
//! (iptables `REDIRECT`, nftables `redirect`) sent its connection to Weir.
//!
//! Netfilter's connection tracking keeps the original destination and Linux hands
//! it out through `getsockopt(SO_ORIGINAL_DST)` (IPv4) and
//! `getsockopt(IP6T_SO_ORIGINAL_DST)` (IPv6). `nix` wraps both as safe socket
//! options, so Weir needs no `unsafe` here.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use nix::sys::socket::{getsockopt, sockopt};
use tokio::net::TcpStream;

/// The destination the client connected to before it was redirected; `None` when
/// the connection was not redirected (it came to Weir's own address, or connection
/// tracking has no entry for it).
pub(crate) fn original_destination(stream: &TcpStream) -> Option<SocketAddr> {
    let local = stream.local_addr().ok()?;
    let original = match local {
        SocketAddr::V4(_) => getsockopt(stream, sockopt::OriginalDst).ok().map(|a| {
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            ))
        }),
        SocketAddr::V6(_) => getsockopt(stream, sockopt::Ip6tOriginalDst).ok().map(|a| {
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                0,
                a.sin6_scope_id,
            ))
        }),
    }?;
    // Without a redirect, connection tracking reports the address the client really
    // reached: Weir itself, which is no origin.
    (original != local).then_some(original)
}

/// Where a request on a transparent listener goes: the host its `Host` header names
/// (port 80 unless it says), as a forward proxy would take it from an absolute URL;
/// without `Host`, the original destination.
///
/// The Host header wins over the original destination so that what is cached under
/// a name always comes from that name's own server: a client that connects to one
/// address with another site's name in `Host` reaches that site, and cannot make
/// Weir store a third party's answer under it.
pub(crate) fn target(
    req: &http::request::Parts,
    original_dst: Option<SocketAddr>,
    path_and_query: String,
) -> Result<crate::service::Target, crate::error::ProxyError> {
    use crate::error::ProxyError;
    use crate::upstream::OriginAddr;
    use http::HeaderValue;

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
            let port = authority.port_u16().unwrap_or(80);
            // The cache key's authority, as forward mode writes it: `:80` left out.
            let header = match authority.port_u16() {
                Some(80) => HeaderValue::from_str(authority.as_str().trim_end_matches(":80")),
                _ => HeaderValue::from_str(authority.as_str()),
            }
            .map_err(|_| ProxyError::bad_request("invalid Host header"))?;
            let origin = OriginAddr::http(host.to_ascii_lowercase(), port);
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
    Ok(crate::service::Target {
        origin,
        host,
        path_and_query,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = target(&parts(Some("Example.org:80")), dst, "/a?b".into()).unwrap();
        assert_eq!((t.origin.host.as_str(), t.origin.port), ("example.org", 80));
        assert_eq!(t.host, "Example.org");
        let t = target(&parts(Some("[2001:db8::1]:8080")), dst, "/".into()).unwrap();
        assert_eq!(
            (t.origin.host.as_str(), t.origin.port),
            ("2001:db8::1", 8080)
        );
        assert!(target(&parts(Some("a b")), dst, "/".into()).is_err());
        assert!(target(&parts(Some("u@h")), dst, "/".into()).is_err());
    }

    #[test]
    fn without_host_the_original_destination_is_used() {
        let dst = Some("192.0.2.1:8080".parse().unwrap());
        let t = target(&parts(None), dst, "/".into()).unwrap();
        assert_eq!((t.origin.host.as_str(), t.origin.port), ("192.0.2.1", 8080));
        assert_eq!(t.host, "192.0.2.1:8080");
        let dst6 = Some("[2001:db8::1]:80".parse().unwrap());
        assert_eq!(
            target(&parts(None), dst6, "/".into()).unwrap().host,
            "[2001:db8::1]"
        );
        assert!(target(&parts(None), None, "/".into()).is_err());
    }
}
