//! Copying a tunnel's bytes both ways with buffers that a waiting tunnel does not hold.
//!
//! `tokio::io::copy_bidirectional` gives each direction a buffer of its own, zeroed
//! when the tunnel opens and kept until it closes: 16 KiB of every tunnel, most of
//! which wait (a browser keeps a dozen TLS connections open through a forward proxy,
//! mostly idle). Here a read borrows a buffer from its worker thread's pool for the
//! one poll: if nothing is there to read, the buffer goes straight back, and it is
//! kept only while what it read waits to be written (as HAProxy releases an empty
//! buffer). A tunnel that waits holds no buffer; the pool holds a few per thread.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most one read takes. 32 KiB relayed a gigabyte with half the CPU of
/// `copy_bidirectional`'s 8 KiB, and as 64 KiB did (benchmarks.md, session 34), while a
/// direction whose writer is slow holds half as much as with 64 KiB.
pub(super) const READ_SIZE: usize = 32 * 1024;

/// The most buffers a thread keeps for later reads; more are freed when given back.
const POOL_MAX: usize = 32;

thread_local! {
    static POOL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer from this thread's pool, or a new one.
fn take() -> Box<[u8]> {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| vec![0u8; READ_SIZE].into_boxed_slice())
}

/// Gives a buffer back to this thread's pool.
fn give(buf: Box<[u8]>) {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_MAX {
            pool.push(buf);
        }
    });
}

/// Reads once from `from` into a pooled buffer: `Ok(None)` at the end of the stream,
/// else the bytes read, in an allocation of their own (for callers that hand them on,
/// as the modules' relay does). The pooled buffer is not held while the read waits.
pub(super) fn read_some<'a, R>(
    from: &'a mut R,
) -> impl std::future::Future<Output = io::Result<Option<Bytes>>> + 'a
where
    R: AsyncRead + Unpin,
{
    poll_fn(move |cx| {
        let mut buf = take();
        let mut read = ReadBuf::new(&mut buf);
        let polled = Pin::new(&mut *from).poll_read(cx, &mut read);
        let got = match polled {
            Poll::Ready(Ok(())) if read.filled().is_empty() => Poll::Ready(Ok(None)),
            Poll::Ready(Ok(())) => Poll::Ready(Ok(Some(Bytes::copy_from_slice(read.filled())))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        };
        give(buf);
        got
    })
}

/// One direction of a copy.
#[derive(Default)]
struct OneWay {
    /// What was read and is not all written yet, with how much of it was written.
    held: Option<(Box<[u8]>, usize, usize)>,
    /// Bytes were written since the last flush.
    unflushed: bool,
    /// The reader ended: the writer's sending side is being shut down.
    ended: bool,
}

impl OneWay {
    /// Copies until `from` ends and `to` has been shut down.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut R,
        to: &mut W,
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            if let Some((buf, written, len)) = &mut self.held {
                let n = ready!(Pin::new(&mut *to).poll_write(cx, &buf[*written..*len]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
                self.unflushed = true;
                if *written == *len {
                    if let Some((buf, ..)) = self.held.take() {
                        give(buf);
                    }
                }
                continue;
            }
            if self.ended {
                return Pin::new(&mut *to).poll_shutdown(cx);
            }
            let mut buf = take();
            let mut read = ReadBuf::new(&mut buf);
            match Pin::new(&mut *from).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let len = read.filled().len();
                    if len == 0 {
                        give(buf);
                        self.ended = true;
                    } else {
                        self.held = Some((buf, 0, len));
                    }
                }
                Poll::Ready(Err(e)) => {
                    give(buf);
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {
                    give(buf);
                    // Nothing more to read now: what was written goes out (a TLS or
                    // HTTP/2 writer may hold it until flushed).
                    if self.unflushed {
                        ready!(Pin::new(&mut *to).poll_flush(cx))?;
                        self.unflushed = false;
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Copies both ways between `a` and `b` until both directions have ended (each
/// reader's end shuts the other side's sending half, as `copy_bidirectional` does)
/// or either fails.
///
/// Cancel-safe as far as the tunnel allows: dropping the future drops what was read
/// and not yet written, so the tunnel is not usable after it.
pub(super) async fn copy_both_ways<A, B>(a: &mut A, b: &mut B) -> io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut a_to_b, mut b_to_a) = (OneWay::default(), OneWay::default());
    let (mut a_done, mut b_done) = (false, false);
    poll_fn(|cx| {
        if !a_done {
            if let Poll::Ready(r) = a_to_b.poll_copy(cx, a, b) {
                r?;
                a_done = true;
            }
        }
        if !b_done {
            if let Poll::Ready(r) = b_to_a.poll_copy(cx, b, a) {
                r?;
                b_done = true;
            }
        }
        if a_done && b_done {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
    .await
}

impl Drop for OneWay {
    fn drop(&mut self) {
        if let Some((buf, ..)) = self.held.take() {
            give(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_go_both_ways_and_an_end_is_passed_on() {
        let (mut client, mut near) = tokio::io::duplex(1024);
        let (mut far, mut server) = tokio::io::duplex(1024);
        let relay = tokio::spawn(async move { copy_both_ways(&mut near, &mut far).await });
        let big = vec![7u8; 100_000];
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            let mut back = Vec::new();
            client.read_to_end(&mut back).await.unwrap();
            back
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, big);
        server.write_all(b"answer").await.unwrap();
        server.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"answer");
        relay.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_waiting_read_keeps_no_buffer() {
        let (_client, mut near) = tokio::io::duplex(64);
        let read = read_some(&mut near);
        tokio::pin!(read);
        let before = POOL.with(|p| p.borrow().len());
        let polled = poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
        // The buffer the poll took is back in the pool.
        assert_eq!(POOL.with(|p| p.borrow().len()), before.max(1));
    }
}
