//! What happens to a client connection between the accept and HTTP: the PROXY
//! protocol header, the TLS handshake, the original destination of a redirected
//! connection. It runs on the worker that will serve the connection, never on the
//! accept loop, so a slow or hostile client holds up no one else.
//!
//! Order on the wire: TCP, then the PROXY header (a load balancer writes it before
//! anything of the client's), then TLS, then HTTP.

pub(crate) mod proxy_protocol;
pub(crate) mod tls;
pub(crate) mod transparent;

use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::metrics::{Metrics, Refusal};
use crate::socket::Socket;
use proxy_protocol::Prefixed;

// A fact of the listener (the transaction reads it too), defined with the others.
pub(crate) use crate::conn::Setup;

/// A connection ready for HTTP.
pub(crate) struct Established {
    pub io: ClientIo,
    /// The client: the PROXY header's source, else the peer.
    pub client: SocketAddr,
    /// Where a redirected client meant to go (transparent listeners).
    pub original_dst: Option<SocketAddr>,
}

/// Runs the PROXY header read and the TLS handshake that `setup` asks for. `None`:
/// the connection was refused (counted, logged at debug level) and is closed.
pub(crate) async fn establish(
    stream: TcpStream,
    peer: SocketAddr,
    setup: &Setup,
    metrics: &Metrics,
) -> Option<Established> {
    let original_dst = if setup.transparent {
        transparent::original_destination(&stream)
    } else {
        None
    };
    let deadline = tokio::time::Instant::now() + setup.handshake_timeout;
    let mut stream = stream;
    let mut client = peer;
    let mut rest = Vec::new();
    if setup.proxy_protocol {
        match tokio::time::timeout_at(deadline, proxy_protocol::read_header(&mut stream)).await {
            Ok(Ok(header)) => {
                client = header.source.unwrap_or(peer);
                rest = header.rest;
            }
            Ok(Err(proxy_protocol::HeaderError::Empty)) => return None,
            Ok(Err(e)) => {
                tracing::debug!(%peer, "PROXY header refused: {e:?}");
                metrics.connection_refused(Refusal::ProxyHeader);
                return None;
            }
            Err(_) => {
                tracing::debug!(%peer, "no PROXY header in time");
                metrics.connection_refused(Refusal::ProxyTimeout);
                return None;
            }
        }
    }
    if setup.tls.is_some() && rest.is_empty() {
        // A connection closed before its first byte (a TCP health check, a port
        // probe) is no failed handshake: close it without counting it.
        let mut first = [0u8; 1];
        match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(_)) => {}
            Err(_) => {
                tracing::debug!(%peer, "no TLS handshake in time");
                metrics.connection_refused(Refusal::TlsTimeout);
                return None;
            }
        }
    }
    let stream = Prefixed::new(rest, Socket::from(stream));
    let io = match &setup.tls {
        None => ClientIo::Plain(stream),
        Some(tls) => match tokio::time::timeout_at(deadline, tls.acceptor().accept(stream)).await {
            Ok(Ok(tls_stream)) => {
                metrics.tls_handshake(tls::alpn_label(tls_stream.get_ref().1));
                ClientIo::Tls(Box::new(tls_stream))
            }
            Ok(Err(e)) => {
                tracing::debug!(%peer, "TLS handshake failed: {e}");
                metrics.connection_refused(Refusal::TlsHandshake);
                return None;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake not done in time");
                metrics.connection_refused(Refusal::TlsTimeout);
                return None;
            }
        },
    };
    Some(Established {
        io,
        client,
        original_dst,
    })
}

/// A client connection: cleartext or TLS, after any PROXY header.
pub(crate) enum ClientIo {
    Plain(Prefixed<Socket>),
    Tls(Box<tokio_rustls::server::TlsStream<Prefixed<Socket>>>),
}

impl ClientIo {
    /// Ready when reading may return something (bytes, the end, an error), without
    /// reading or holding any buffer. For TLS this is the socket's readiness: when a
    /// read of the TLS stream last returned nothing, rustls had no plaintext left.
    /// A poll, not a future: it keeps the one waker slot the last read registered,
    /// where tokio's `readable` joins a list of waiters and leaves it on every wait.
    pub(crate) fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let stream = match self {
            ClientIo::Plain(s) => s,
            ClientIo::Tls(s) => s.get_ref().0,
        };
        if stream.has_prefix() {
            return Poll::Ready(Ok(()));
        }
        stream.get_ref().get_ref().poll_read_ready(cx)
    }
}

impl AsyncRead for ClientIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientIo::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientIo::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ClientIo::Plain(s) => s.is_write_vectored(),
            ClientIo::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientIo::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
