//! What a client connection hands a transaction: the request body as it arrives, and
//! the stream of a CONNECT tunnel once the tunnel is accepted. HTTP/1 connections are
//! served by hyper (`Incoming`, hyper's upgrades); HTTP/2 ones by the h2 crate
//! directly (`server/h2.rs`), which lets a stream carry interim responses.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// Errors inside a body stream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client's request body.
pub(crate) enum ClientStream {
    /// None (an HTTP/2 CONNECT: the stream's data is the tunnel's).
    Empty,
    /// Read by hyper's HTTP/1 server.
    Http1(Incoming),
    /// The data of one HTTP/2 stream.
    Http2(H2Body),
}

/// The request body of one HTTP/2 stream. The window is given back as data is taken,
/// so the client sends no faster than the transaction reads.
pub(crate) struct H2Body {
    recv: h2::RecvStream,
    /// The request's Content-Length (h2 checks the data against it).
    length: Option<u64>,
    data_done: bool,
}

impl H2Body {
    pub(crate) fn new(recv: h2::RecvStream, length: Option<u64>) -> H2Body {
        H2Body {
            recv,
            length,
            data_done: false,
        }
    }
}

impl Body for ClientStream {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ClientStream::Empty => Poll::Ready(None),
            ClientStream::Http1(incoming) => Pin::new(incoming)
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(BoxError::from))),
            ClientStream::Http2(body) => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientStream::Empty => true,
            ClientStream::Http1(incoming) => incoming.is_end_stream(),
            ClientStream::Http2(body) => body.recv.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientStream::Empty => SizeHint::with_exact(0),
            ClientStream::Http1(incoming) => incoming.size_hint(),
            ClientStream::Http2(body) if body.recv.is_end_stream() => SizeHint::with_exact(0),
            ClientStream::Http2(body) => body
                .length
                .map_or_else(SizeHint::default, SizeHint::with_exact),
        }
    }
}

impl H2Body {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                None => self.data_done = true,
            }
        }
        match ready!(self.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e.into()))),
        }
    }
}

/// Put in an HTTP/2 CONNECT request's extensions by the server: the tunnel's stream
/// arrives here once the 2xx answer has been sent. (Extensions must be `Clone`; the
/// first to take the receiver has it.)
#[derive(Clone)]
pub(crate) struct H2Upgrade(Arc<Mutex<Option<oneshot::Receiver<H2Tunnel>>>>);

impl H2Upgrade {
    pub(crate) fn new(accepted: oneshot::Receiver<H2Tunnel>) -> H2Upgrade {
        H2Upgrade(Arc::new(Mutex::new(Some(accepted))))
    }
}

/// The client's side of an accepted CONNECT tunnel or protocol switch.
pub(crate) enum ClientTunnel {
    Http1(TokioIo<hyper::upgrade::Upgraded>),
    Http2(H2Tunnel),
}

impl ClientTunnel {
    /// Waits for the client's side of the tunnel that `req` asked for, once the
    /// response accepting it has been sent.
    pub(crate) async fn accepted<B>(mut req: http::Request<B>) -> std::io::Result<ClientTunnel> {
        if let Some(H2Upgrade(stream)) = req.extensions_mut().remove::<H2Upgrade>() {
            let stream = stream.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some(stream) = stream else {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            };
            return stream
                .await
                .map(ClientTunnel::Http2)
                .map_err(|_| std::io::ErrorKind::BrokenPipe.into());
        }
        hyper::upgrade::on(req)
            .await
            .map(|upgraded| ClientTunnel::Http1(TokioIo::new(upgraded)))
            .map_err(std::io::Error::other)
    }
}

/// Bytes both ways over one HTTP/2 stream (RFC 9113 §8.5): DATA frames, with the
/// stream's flow control.
pub(crate) struct H2Tunnel {
    send: h2::SendStream<Bytes>,
    recv: h2::RecvStream,
    /// Received and not yet read.
    pending: Bytes,
}

impl H2Tunnel {
    pub(crate) fn new(send: h2::SendStream<Bytes>, recv: h2::RecvStream) -> H2Tunnel {
        H2Tunnel {
            send,
            recv,
            pending: Bytes::new(),
        }
    }
}

fn io_error(e: h2::Error) -> std::io::Error {
    if e.is_io() {
        e.into_io()
            .unwrap_or_else(|| std::io::ErrorKind::Other.into())
    } else {
        std::io::Error::other(e)
    }
}

impl AsyncRead for H2Tunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        while this.pending.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(Ok(data)) => this.pending = data,
                Some(Err(e)) => {
                    return Poll::Ready(match e.reason() {
                        Some(h2::Reason::NO_ERROR) | Some(h2::Reason::CANCEL) => Ok(()),
                        _ => Err(io_error(e)),
                    })
                }
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        let _ = this.recv.flow_control().release_capacity(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Tunnel {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.send.reserve_capacity(data.len());
        let granted = loop {
            match ready!(this.send.poll_capacity(cx)) {
                Some(Ok(0)) => {}
                Some(Ok(n)) => break n,
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                None => return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
            }
        };
        let n = granted.min(data.len());
        this.send
            .send_data(Bytes::copy_from_slice(&data[..n]), false)
            .map_err(io_error)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // h2 writes what it was given as the connection's task runs.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.send.reserve_capacity(0);
        Poll::Ready(this.send.send_data(Bytes::new(), true).map_err(io_error))
    }
}

impl AsyncRead for ClientTunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientTunnel::Http1(io) => Pin::new(io).poll_read(cx, buf),
            ClientTunnel::Http2(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientTunnel {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientTunnel::Http1(io) => Pin::new(io).poll_write(cx, data),
            ClientTunnel::Http2(io) => Pin::new(io).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientTunnel::Http1(io) => Pin::new(io).poll_flush(cx),
            ClientTunnel::Http2(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientTunnel::Http1(io) => Pin::new(io).poll_shutdown(cx),
            ClientTunnel::Http2(io) => Pin::new(io).poll_shutdown(cx),
        }
    }
}
