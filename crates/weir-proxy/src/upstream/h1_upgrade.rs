//! A request that asks the origin to switch protocols (`Upgrade`, a WebSocket
//! handshake): sent over HTTP/1.1 on a connection of its own, which the origin's 101
//! turns into a tunnel, handed over whole (with what the origin sent past its head)
//! for bytes both ways. Any other answer is an ordinary response, read on from the
//! connection, which then closes. Above the connection (`h1_conn.rs`) and beside
//! the pooled exchange (`h1_send.rs`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{HeaderMap, Response, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::body::UpstreamBody;
use super::h1;
use super::h1_conn::H1Conn;
use super::h1_send::outbound;
use super::h1_wire::BodyKnown;
use super::origin_request::OriginRequest;
use super::origins::Upstream;
use super::timer::ExchangeTimer;
use super::{OriginAddr, UpstreamError};

/// What the origin answered a request to switch protocols.
pub(crate) enum UpgradeAnswer {
    /// 101: its fields, and the connection as a tunnel.
    Switched(HeaderMap, OriginTunnel),
    /// Any other final answer: the response, as [`Upstream::send`] gives one.
    Response(Response<UpstreamBody>),
}

/// An origin connection after a 101: the bytes the origin sent right behind its
/// head are read first. It no longer counts against the origin's connections.
pub(crate) struct OriginTunnel {
    conn: H1Conn,
}

impl Upstream {
    /// Sends `request` (without a body, its `Connection: upgrade` and `Upgrade`
    /// fields set) to `addr` on a new HTTP/1.1 connection, and reads the answer within
    /// the origin's response deadline.
    pub(crate) async fn upgrade(
        &self,
        addr: &OriginAddr,
        request: OriginRequest,
    ) -> Result<UpgradeAnswer, UpstreamError> {
        let origin = self.origin(addr);
        let (written, body) = request.into_parts();
        let out = outbound(&written, BodyKnown::Empty, body);
        let mut conn = h1::connect_reserved(self, &origin, origin.h1.reserve()).await?;
        let mut timer = ExchangeTimer::new(self.response_timeout);
        let answered = {
            let exchange = std::pin::pin!(conn.conn.exchange(written.method(), out, None, true));
            timer.bound(exchange).await
        };
        let answered = match answered {
            None => return Err(UpstreamError::Timeout),
            Some(Ok(answered)) => answered,
            // A new connection: nothing to send again when nothing came back.
            Some(Err(e)) => return Err(e.into()),
        };
        if answered.head.status == StatusCode::SWITCHING_PROTOCOLS {
            let mut conn = conn.conn;
            conn.leave_count();
            return Ok(UpgradeAnswer::Switched(
                answered.head.headers,
                OriginTunnel { conn },
            ));
        }
        Ok(UpgradeAnswer::Response(
            self.response(conn, answered, false, timer),
        ))
    }
}

impl AsyncRead for OriginTunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let conn = &mut self.conn;
        if !conn.buf.is_empty() {
            let n = conn.buf.len().min(out.remaining());
            out.put_slice(&conn.buf[..n]);
            conn.buf.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(conn.io()).poll_read(cx, out)
    }
}

impl AsyncWrite for OriginTunnel {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self.conn.io()).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.conn.io()).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.conn.io()).poll_shutdown(cx)
    }
}
