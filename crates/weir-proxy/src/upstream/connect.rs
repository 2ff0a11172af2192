//! Opening a connection to an origin: name resolution, TCP, and for `https://` origins
//! a TLS handshake with rustls that offers the ALPN protocols the caller asks for
//! (the client configurations are in `tls.rs`). Above the shared state (it reads an
//! origin's address and TLS settings); below the senders.

use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use super::error::UpstreamError;
use super::origin_addr::OriginAddr;
use super::origins::Origin;
use super::stream::BoxIo;
use super::tls::Alpn;
use crate::socket::Socket;

/// What the handshake agreed on. Clear-text connections and origins that ignore ALPN
/// give `Unspecified`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Negotiated {
    Http1,
    Http2,
    Unspecified,
}

/// Resolves, connects (trying each address) and, for `https://`, completes the TLS
/// handshake. The caller bounds the time.
pub(super) async fn connect(
    origin: &Origin,
    alpn: Alpn,
) -> Result<(BoxIo, Negotiated), UpstreamError> {
    let tcp = Socket::from(connect_tcp(&origin.addr).await?);
    let Some(tls) = &origin.tls else {
        return Ok((Box::new(tcp), Negotiated::Unspecified));
    };
    let configs = tls.as_ref().map_err(|e| UpstreamError::Tls(e.clone()))?;
    let name = ServerName::try_from(origin.addr.host.as_str())
        .map_err(|e| UpstreamError::Tls(format!("`{}` as a TLS name: {e}", origin.addr.host)))?
        .to_owned();
    let stream = tokio_rustls::TlsConnector::from(configs.get(alpn))
        .connect(name, tcp)
        .await
        .map_err(|e| {
            UpstreamError::Tls(format!("TLS handshake with {} failed: {e}", origin.addr))
        })?;
    let negotiated = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Negotiated::Http2,
        Some(b"http/1.1") => Negotiated::Http1,
        _ => Negotiated::Unspecified,
    };
    Ok((Box::new(stream), negotiated))
}

async fn connect_tcp(origin: &OriginAddr) -> Result<TcpStream, UpstreamError> {
    let addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .map_err(|e| UpstreamError::Connect(format!("cannot resolve {}: {e}", origin.host)))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(UpstreamError::Connect(match last {
        Some(e) => format!("cannot connect to {origin}: {e}"),
        None => format!("{} has no address", origin.host),
    }))
}
