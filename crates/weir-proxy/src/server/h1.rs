//! Weir's own HTTP/1.1 server, for the requests nearly every client sends: HTTP/1.1
//! without a body. It reads a head, parses it once, runs the transaction on the
//! connection's own task and writes the answer with one gathered write where it can,
//! then waits for the next request holding no buffer at all.
//!
//! Why not hyper's server alone: its dispatcher, its buffers and a second parse of
//! each head by the framing guard cost about a quarter of a cached hit's instructions
//! (docs/benchmarks.md, session 22), and it keeps its state across the wait for the
//! next request, which a parking timer had to take back. hyper still serves every
//! request this server leaves to it (`h1_request::Parsed::Hyper`: bodies, upgrades,
//! CONNECT, `Expect`, HTTP/1.0, heads it must refuse), from that request on until the
//! connection is idle again (`server/connection.rs`).
//!
//! Cancel-safety: none needed; the futures here are awaited to their end by the one
//! task that serves the connection, and dropping them (the task ends) closes it.

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Body;
use tokio::io::{AsyncReadExt, AsyncWrite};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::body::{ClientStream, ProxyBody};
use crate::framing::FramingGuard;
use crate::listener::ClientIo;
use crate::service::ConnInfo;

use super::h1_request::{self, Head, Parsed};
use super::h1_response::{self, BodyHint, Coding, Written};
use super::stop::stopping;

/// Room for a read: a head arrives whole in one read nearly always.
const READ_ROOM: usize = 4096;

/// How this server's turn with a connection ended.
pub(super) enum Ended {
    /// The connection is done with: closed, idle too long, failed, or the proxy stops.
    Closed,
    /// A request for hyper is at the start of these bytes.
    ToHyper(BytesMut),
}

/// The limits a connection is served under.
pub(super) struct Limits {
    /// `client_idle`: the longest wait for a request, and for a whole head.
    pub idle: Duration,
    /// Past this many bytes a head goes to hyper, which refuses it.
    pub head_limit: usize,
}

/// The credentials field this connection's parser sets aside: the one its listener's
/// clients send, when a module of the listener's takes credentials.
fn credentials_set_aside(conn: &ConnInfo) -> Option<http::HeaderName> {
    let https = conn.listener.setup.tls.is_some();
    match conn.engine.modules.load().takes_credentials() {
        true => conn.listener.api_view(https).mode.credentials_field(),
        false => None,
    }
}

/// Serves the connection from `ahead` (bytes already read) on, until it ends or a
/// request for hyper comes.
pub(super) async fn serve(
    io: &mut FramingGuard<ClientIo>,
    ahead: Bytes,
    conn: &Arc<ConnInfo>,
    limits: &Limits,
    stop: &mut watch::Receiver<bool>,
) -> Ended {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&ahead);
    drop(ahead);
    // One timer for the connection's waits, moved rather than made anew.
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    let mut head_began = false;
    // Registered once, not at every wait: joining the channel's list of waiters and
    // leaving it cost a hit about 300 instructions.
    let mut watcher = stop.clone();
    let mut stopped = pin!(watcher.wait_for(|stop| *stop));
    // Seen now: from here on, `stopping` asks the channel only when something is sent.
    let seen_stop = *stop.borrow_and_update();
    // Looked up once per connection: a reload meanwhile is safe either way (a module
    // takes credentials left in the fields from them, and what is set aside for no
    // module goes back).
    let set_aside = credentials_set_aside(conn);
    loop {
        if !buf.is_empty() {
            match h1_request::parse(&mut buf, limits.head_limit, set_aside.as_ref()) {
                Parsed::Request(head) => {
                    head_began = false;
                    io.served_past();
                    // Boxed, and made in its box: the transaction's part of the task is
                    // large, and a connection that waits for its next request should
                    // not keep room for it.
                    let responded = crate::boxed::in_place(|| {
                        respond(io.get_mut(), &mut buf, conn, head, stop, seen_stop)
                    })
                    .await;
                    match responded {
                        Ok(true) if !stopping(stop, seen_stop) => continue,
                        _ => return Ended::Closed,
                    }
                }
                Parsed::Hyper => return Ended::ToHyper(buf),
                Parsed::Partial if !head_began => {
                    // A head's deadline runs from its first bytes, however it trickles in.
                    head_began = true;
                    arm(&mut timer, limits.idle);
                }
                Parsed::Partial => {}
            }
        } else if stopping(stop, seen_stop) {
            return Ended::Closed;
        }
        if buf.capacity() - buf.len() < READ_ROOM / 4 {
            buf.reserve(READ_ROOM);
        }
        match read_now(io.get_mut(), &mut buf).await {
            Some(Ok(0)) | Some(Err(_)) => return Ended::Closed,
            Some(Ok(_)) => continue,
            None => {}
        }
        let idle = buf.is_empty();
        if idle {
            // Nothing is held while the connection waits.
            buf = BytesMut::new();
            arm(&mut timer, limits.idle);
        }
        let timer = timer.as_mut().expect("armed above");
        let io = io.get_ref();
        let readable = poll_fn(|cx| {
            if let Poll::Ready(ready) = io.poll_readable(cx) {
                return Poll::Ready(ready.is_ok());
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            // A head on its way is waited for; an idle connection closes.
            if idle && stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            Poll::Pending
        })
        .await;
        if !readable {
            return Ended::Closed;
        }
    }
}

/// Moves the timer's deadline to `after` from now.
fn arm(timer: &mut Option<Pin<Box<Sleep>>>, after: Duration) {
    let deadline = Instant::now() + after;
    match timer {
        Some(t) => t.as_mut().reset(deadline),
        None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
}

/// Reads what the stream has now into `buf`'s spare room; `None` when it has nothing.
async fn read_now(io: &mut ClientIo, buf: &mut BytesMut) -> Option<io::Result<usize>> {
    poll_fn(|cx| match poll_read(io, buf, cx) {
        Poll::Ready(r) => Poll::Ready(Some(r)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// One read into `buf`'s spare room (grown when it has none).
fn poll_read(
    io: &mut ClientIo,
    buf: &mut BytesMut,
    cx: &mut std::task::Context<'_>,
) -> Poll<io::Result<usize>> {
    pin!(io.read_buf(buf)).poll(cx)
}

/// Runs the transaction of `head` and writes its answer; whether the connection may
/// carry another request. `buf` holds what the client sent after the head, and takes
/// what it sends while the answer is made.
async fn respond(
    io: &mut ClientIo,
    buf: &mut BytesMut,
    conn: &Arc<ConnInfo>,
    head: Head,
    stop: &watch::Receiver<bool>,
    seen_stop: bool,
) -> io::Result<bool> {
    let Head {
        request,
        keep_alive,
        trailers,
        credentials,
    } = head;
    let method = request.method().clone();
    let interim = &conn.interim;
    // Boxed: a transaction's future is several KiB; made in its box (`boxed.rs`).
    let mut handled = crate::boxed::in_place(|| {
        let request = request.map(|()| ClientStream::Empty);
        crate::service::handle(conn.clone(), request, credentials, None)
    });
    // Interim responses from the origin wake this task, which writes them out.
    let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
    let waiting = interim.wait_for_final(waker);
    // A client that closes while its answer is being made cancels the transaction (its
    // fetch too, unless other clients wait for it), as hyper's server and nginx do;
    // one that sends its next request meanwhile has it kept for later. Read only once
    // the transaction waits, and nothing buffered: a hit never reads here.
    let mut watch_end = buf.is_empty();
    let answered = poll_fn(|cx| {
        if let Poll::Ready(Err(e)) = write_interim(io, interim, cx) {
            return Poll::Ready(Err(e));
        }
        if let Poll::Ready(answer) = handled.as_mut().poll(cx) {
            return Poll::Ready(Ok(answer));
        }
        if watch_end {
            match poll_read(io, buf, cx) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                }
                Poll::Ready(Ok(_)) => watch_end = false,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await?;
    drop(waiting);
    drop(handled);
    poll_fn(|cx| write_interim(io, interim, cx)).await?;
    let Ok(response) = answered;
    let (parts, mut body) = response.into_parts();
    let hint = if body.is_end_stream() {
        BodyHint::Empty
    } else {
        body.size_hint()
            .exact()
            .map_or(BodyHint::Unknown, BodyHint::Known)
    };
    let mut out = Vec::with_capacity(128 + parts.headers.len() * 48);
    let keep_alive = keep_alive && !stopping(stop, seen_stop);
    let written = h1_response::encode_head(&parts, &method, hint, keep_alive, trailers, &mut out);
    drop(parts);
    let keep_alive = written.keep_alive;
    match written.coding {
        Coding::Nothing => {
            drop(body);
            write_all(io, &mut [IoSlice::new(&out)]).await?;
        }
        _ => {
            // Logged and counted once the last byte is written, not when it is taken
            // from the body: a client that goes away meanwhile aborted it.
            body.defer_completion();
            send_body(io, out, &mut body, written).await?;
            poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await?;
            body.delivered();
            return Ok(keep_alive);
        }
    }
    poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await?;
    Ok(keep_alive)
}

fn write_interim(
    io: &mut ClientIo,
    interim: &crate::interim::Interim,
    cx: &mut std::task::Context<'_>,
) -> Poll<io::Result<()>> {
    interim.poll_write_queued(cx, |cx, bytes| Pin::new(&mut *io).poll_write(cx, bytes))
}

/// Writes the head in `out` and the body after it, framed by `written.coding`. A body
/// whose first data is ready goes out with the head in one write.
async fn send_body(
    io: &mut ClientIo,
    mut out: Vec<u8>,
    body: &mut ProxyBody,
    written: Written,
) -> io::Result<()> {
    let Written {
        coding,
        trailer_names,
        ..
    } = written;
    let chunked = coding == Coding::Chunked;
    let mut left = match coding {
        Coding::Length(n) => n,
        _ => u64::MAX,
    };
    let mut body = Pin::new(body);
    loop {
        let frame = match poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                // What is written so far goes out while the body is on its way.
                write_all(io, &mut [IoSlice::new(&out)]).await?;
                out.clear();
                poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await?;
                poll_fn(|cx| body.as_mut().poll_frame(cx)).await
            }
        };
        let frame = match frame {
            None => break,
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::debug!("response body failed: {e}");
                return Err(io::Error::other("response body failed"));
            }
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let (true, Ok(trailers)) = (chunked, frame.into_trailers()) {
                    h1_response::last_chunk(Some(&trailers), &trailer_names, &mut out);
                    return write_all(io, &mut [IoSlice::new(&out)]).await;
                }
                continue;
            }
        };
        if data.is_empty() {
            continue;
        }
        if !chunked {
            if data.len() as u64 > left {
                return Err(io::Error::other("response body longer than its length"));
            }
            left -= data.len() as u64;
            let slices = &mut [IoSlice::new(&out), IoSlice::new(&data)];
            write_data(io, slices, out.len(), data.len(), &mut body).await?;
            out.clear();
            if left == 0 {
                return Ok(());
            }
        } else {
            crate::wire::chunk_size_line(data.len(), &mut out);
            // The last data chunk carries the last chunk with it.
            let last = body.is_end_stream();
            let end = if last { &b"\r\n0\r\n\r\n"[..] } else { b"\r\n" };
            let slices = &mut [IoSlice::new(&out), IoSlice::new(&data), IoSlice::new(end)];
            write_data(io, slices, out.len(), data.len(), &mut body).await?;
            out.clear();
            if last {
                return Ok(());
            }
        }
        if body.is_end_stream() {
            break;
        }
    }
    if chunked {
        h1_response::last_chunk(None, &[], &mut out);
    } else if left != 0 {
        // Shorter than its length: the client must not take the next bytes for it.
        write_all(io, &mut [IoSlice::new(&out)]).await?;
        return Err(io::Error::other("response body shorter than its length"));
    }
    write_all(io, &mut [IoSlice::new(&out)]).await
}

/// Writes all of `bufs`, gathered.
async fn write_all(io: &mut ClientIo, bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    write_counted(io, bufs, &mut 0).await
}

/// Writes `bufs`: `before` bytes, then `len` of the body's data, then the framing
/// after it. When the connection fails, the data that did not go out is taken off
/// what the body counts as sent.
async fn write_data(
    io: &mut ClientIo,
    bufs: &mut [IoSlice<'_>],
    before: usize,
    len: usize,
    body: &mut Pin<&mut ProxyBody>,
) -> io::Result<()> {
    let mut written = 0;
    let result = write_counted(io, bufs, &mut written).await;
    if result.is_err() {
        let out = written.saturating_sub(before).min(len);
        body.not_delivered((len - out) as u64);
    }
    result
}

/// Writes all of `bufs`, gathered, adding what went out to `written`.
async fn write_counted(
    io: &mut ClientIo,
    mut bufs: &mut [IoSlice<'_>],
    written: &mut usize,
) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *io).poll_write_vectored(cx, bufs)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        *written += n;
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}
