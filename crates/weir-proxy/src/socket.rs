//! A TCP connection whose gathered writes are `sendmsg` calls.
//!
//! hyper writes a response's head and body together with one gathered write, and
//! rustls its records. tokio makes that a `writev`, which goes through the kernel's
//! file layer (the file position lock, `rw_verify_area`, `vfs_writev`) before it
//! reaches the socket; `sendmsg` goes to the socket directly, as `send` already does
//! for single buffers and `recv` for reads (std's choices, which tokio uses). On
//! loopback misses the file layer's functions took about 0.8 µs of kernel time per
//! miss, `sendmsg`'s about 0.35 µs; HAProxy, which calls `sendto`, pays neither
//! (docs/benchmarks.md, session 14). Reads and single writes are tokio's own.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A connected TCP stream, client's or origin's.
#[derive(Debug)]
pub(crate) struct Socket {
    stream: TcpStream,
}

impl Socket {
    /// The stream, for what only it does (readiness, options, addresses).
    pub(crate) fn get_ref(&self) -> &TcpStream {
        &self.stream
    }
}

impl From<TcpStream> for Socket {
    fn from(stream: TcpStream) -> Socket {
        Socket { stream }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    /// Cancel-safe as tokio's: nothing is sent unless `Ready(Ok(n))` says how much.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // A request head alone is one buffer: `send` copies no message header and
        // vector in, as `sendmsg` does.
        if let [only] = bufs {
            return self.poll_write(cx, only);
        }
        let stream = &self.stream;
        loop {
            ready!(stream.poll_write_ready(cx))?;
            // `try_io` clears the readiness when the socket is full, so the next
            // `poll_write_ready` waits for room.
            match stream.try_io(Interest::WRITABLE, || {
                SockRef::from(stream).send_vectored(bufs)
            }) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                sent => return Poll::Ready(sent),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn gathered_writes_arrive_whole_and_in_order_even_past_a_full_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (server, _) = listener.accept().await.unwrap();
        let mut writer = Socket::from(client.await.unwrap());
        let mut reader = server;
        // Far more than the socket buffers hold: the writer must wait for room.
        let head = vec![b'h'; 1000];
        let body: Vec<u8> = (0..8 << 20).map(|i| (i % 251) as u8).collect();
        let tail = b"tail".to_vec();
        let expected: Vec<u8> = [&head[..], &body[..], &tail[..]].concat();
        let read = tokio::spawn(async move {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).await.unwrap();
            got
        });
        let (mut h, mut b) = (&head[..], &body[..]);
        while !h.is_empty() || !b.is_empty() {
            let n = writer
                .write_vectored(&[IoSlice::new(h), IoSlice::new(b)])
                .await
                .unwrap();
            assert!(n > 0);
            let from_head = n.min(h.len());
            h = &h[from_head..];
            b = &b[n - from_head..];
        }
        // One buffer alone goes out as a plain `send`.
        let n = writer.write_vectored(&[IoSlice::new(&tail)]).await.unwrap();
        assert_eq!(n, tail.len());
        writer.shutdown().await.unwrap();
        assert!(
            read.await.unwrap() == expected,
            "the bytes changed on the way"
        );
    }
}
