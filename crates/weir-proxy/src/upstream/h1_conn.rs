//! One HTTP/1.1 connection to an origin, read and written by the task of the request
//! it carries (no task of its own): a request goes out while the response head is
//! read, so that an origin answering before it has the whole body is heard, and 1xx
//! responses are relayed on the way. Above the wire format (`h1_wire.rs`); the pool
//! keeps these connections (`h1_pool.rs`), and the body reader reads on from where
//! the head ended (`h1_body.rs`).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http::Method;
use http_body::Body;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use super::h1_wire::{self, Framing, Outgoing, ResponseHead};
use super::stream::BoxIo;
use super::UpstreamError;
use crate::body::request::{BodyTooLarge, BoxError, ClientBodyTimeout, RequestBody};
use crate::interim::Interim;
use crate::metrics::Metrics;

/// How much room a read asks for when the buffer has little left.
const READ_ROOM: usize = 8 << 10;
/// The most a read asks for at once (a long body's reads).
pub(super) const READ_MOST: usize = 64 << 10;
/// Bodies up to this size are written in one piece with their head.
const JOIN_BODY_BELOW: usize = 16 << 10;

/// How many connections one origin has open, and a signal when one closes or goes
/// idle (a request waiting for a connection may proceed).
#[derive(Default)]
pub(super) struct Counts {
    pub(super) open: AtomicUsize,
    pub(super) available: Notify,
}

/// A connection's place in its origin's count: given back when dropped.
pub(super) struct Place(pub(super) Arc<Counts>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.available.notify_one();
    }
}

/// An open connection: its stream and what has been read from it but not used.
pub(super) struct H1Conn {
    io: BoxIo,
    pub(super) buf: BytesMut,
    /// The buffer was grown past [`READ_ROOM`] for a long body: its allocation may be
    /// large even when what is left of it looks small.
    grown: bool,
    metrics: Arc<Metrics>,
    /// Its place in the origin's count; none once it became a tunnel
    /// ([`H1Conn::leave_count`]).
    _place: Option<Place>,
}

impl Drop for H1Conn {
    fn drop(&mut self) {
        self.metrics.origin_connection_closed();
    }
}

/// A request ready to go: its head's bytes and its body. A plain vector: made into
/// `Bytes`, a head (shorter than the room it was written into) would take a second
/// allocation to share bytes that nothing shares.
pub(super) struct Outbound {
    pub(super) head: Vec<u8>,
    pub(super) body: RequestBody,
    pub(super) outgoing: Outgoing,
}

/// What an exchange came to: the final response head and its body's framing, and
/// whether the request went out whole (else the connection cannot be reused).
pub(super) struct Answered {
    pub(super) head: ResponseHead,
    pub(super) framing: Framing,
    pub(super) sent_whole: bool,
}

/// Why an exchange failed.
pub(super) enum ExchangeError {
    /// The connection closed or failed before any byte of a response came back: on a
    /// reused connection, the origin had closed it meanwhile.
    NothingBack(String),
    Failed(UpstreamError),
}

impl From<ExchangeError> for UpstreamError {
    fn from(e: ExchangeError) -> UpstreamError {
        match e {
            ExchangeError::NothingBack(why) => UpstreamError::Protocol(why),
            ExchangeError::Failed(e) => e,
        }
    }
}

impl H1Conn {
    /// A connection just opened (and counted in the metrics).
    pub(super) fn new(io: BoxIo, place: Place, metrics: Arc<Metrics>) -> H1Conn {
        metrics.origin_connection_opened();
        H1Conn {
            io,
            buf: BytesMut::new(),
            grown: false,
            metrics,
            _place: Some(place),
        }
    }

    /// Whether an idle connection can take a request: the origin has not closed it
    /// and sent nothing unasked. Reads one byte without waiting, on the stack: the
    /// probe of a connection in the sweep must not give it a buffer.
    pub(super) fn is_usable(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut byte = [0u8; 1];
        let mut probe = ReadBuf::new(&mut byte);
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut probe),
            Poll::Pending
        )
    }

    /// The connection goes idle: a read buffer grown for a long body is let go, so
    /// that an idle connection keeps at most what is left of a small one (the next
    /// response is read into that, with no new allocation).
    pub(super) fn idle(&mut self) {
        if self.buf.is_empty() && (self.grown || self.buf.capacity() > READ_ROOM) {
            self.buf = BytesMut::new();
            self.grown = false;
        }
    }

    /// Reads what the origin sent into the buffer, asking for about `want` bytes:
    /// the count read, 0 at the end of the stream.
    pub(super) fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
    ) -> Poll<io::Result<usize>> {
        let want = want.clamp(READ_ROOM, READ_MOST);
        if self.buf.capacity() - self.buf.len() < want / 2 {
            self.buf.reserve(want);
            self.grown |= want > READ_ROOM;
        }
        pin!(self.io.read_buf(&mut self.buf)).poll(cx)
    }

    /// The connection became a tunnel (the origin switched protocols): it no longer
    /// counts against the origin's connections, which requests wait for.
    pub(super) fn leave_count(&mut self) {
        self._place = None;
    }

    /// The stream, for a tunnel; what was read past the response head is in `buf`.
    pub(super) fn io(&mut self) -> &mut BoxIo {
        &mut self.io
    }

    /// Sends `out` and reads the response head (relaying 1xx responses to
    /// `interim`). A 101 is the final answer when the request asked to switch
    /// protocols (`upgrade`), else an error. Cancel safety: dropping the future leaves
    /// the connection in an unknown state; it must then be dropped, not reused.
    pub(super) async fn exchange(
        &mut self,
        method: &Method,
        out: Outbound,
        interim: Option<&Interim>,
        upgrade: bool,
    ) -> Result<Answered, ExchangeError> {
        let mut writer = Writer::new(out);
        let mut write_error = None;
        let mut received = false;
        std::future::poll_fn(|cx| {
            if write_error.is_none() && !writer.done {
                match writer.poll_send(cx, &mut self.io) {
                    Poll::Ready(Ok(())) => writer.done = true,
                    Poll::Ready(Err(Sending::Body(e))) => {
                        return Poll::Ready(Err(ExchangeError::Failed(body_error(e))))
                    }
                    // The origin may have answered and closed: read what it sent.
                    Poll::Ready(Err(Sending::Io(e))) => write_error = Some(e),
                    Poll::Pending => {}
                }
            }
            loop {
                if !self.buf.is_empty() {
                    received = true;
                    match h1_wire::parse_response(&mut self.buf) {
                        Err(e) => return Poll::Ready(Err(failed(e.0))),
                        Ok(None) => {}
                        Ok(Some(head))
                            if upgrade && head.status == http::StatusCode::SWITCHING_PROTOCOLS =>
                        {
                            return Poll::Ready(Ok(Answered {
                                head,
                                framing: Framing::Empty,
                                sent_whole: writer.done && write_error.is_none(),
                            }));
                        }
                        Ok(Some(head)) if head.status.is_informational() => {
                            if head.status == http::StatusCode::SWITCHING_PROTOCOLS {
                                return Poll::Ready(Err(failed(
                                    "the origin switched protocols unasked".into(),
                                )));
                            }
                            if let Some(interim) = interim {
                                interim.push(head.status, &head.headers);
                            }
                            continue;
                        }
                        Ok(Some(mut head)) => {
                            let framing = match h1_wire::response_framing(method, &mut head) {
                                Ok(f) => f,
                                Err(e) => return Poll::Ready(Err(failed(e.0))),
                            };
                            return Poll::Ready(Ok(Answered {
                                head,
                                framing,
                                sent_whole: writer.done && write_error.is_none(),
                            }));
                        }
                    }
                }
                let why = match ready!(self.poll_fill(cx, READ_ROOM)) {
                    Ok(0) => match &write_error {
                        Some(e) => format!("writing to the origin failed: {e}"),
                        None => "the origin closed the connection before answering".into(),
                    },
                    Ok(_) => continue,
                    Err(e) => format!("reading from the origin failed: {e}"),
                };
                return Poll::Ready(Err(match received {
                    true => failed(why),
                    false => ExchangeError::NothingBack(why),
                }));
            }
        })
        .await
    }
}

fn failed(why: String) -> ExchangeError {
    ExchangeError::Failed(UpstreamError::Protocol(why))
}

/// The client's body failed while it was forwarded: over the limit, too slow, or cut.
fn body_error(e: BoxError) -> UpstreamError {
    if e.is::<BodyTooLarge>() {
        return UpstreamError::BodyTooLarge;
    }
    if let Some(t) = e.downcast_ref::<ClientBodyTimeout>() {
        return UpstreamError::ClientTimeout(t.0);
    }
    UpstreamError::Protocol(format!("the request body failed: {e}"))
}

/// Why sending stopped.
enum Sending {
    Io(io::Error),
    Body(BoxError),
}

/// A request being written: its head (with a small body), the bytes queued after it,
/// then the body's frames as they come.
struct Writer {
    /// Apart from `queued`, which a request without a body never needs to allocate;
    /// written from `head_sent` on.
    head: Vec<u8>,
    head_sent: usize,
    queued: VecDeque<Bytes>,
    /// Bytes of the front of `queued` already written.
    front_sent: usize,
    body: Option<RequestBody>,
    outgoing: Outgoing,
    /// Body bytes sent (checked against a declared length).
    sent: u64,
    done: bool,
}

impl Writer {
    fn new(out: Outbound) -> Writer {
        let Outbound {
            mut head,
            mut body,
            outgoing,
        } = out;
        let mut sent = 0;
        // A small body in memory goes out with its head, in one write.
        if let (RequestBody::Buffered(b), Outgoing::Length(_)) = (&mut body, outgoing) {
            if let Some(b) = b.take_if(|b| b.len() < JOIN_BODY_BELOW) {
                sent = b.len() as u64;
                head.extend_from_slice(&b);
            }
        }
        let body = match outgoing {
            Outgoing::None => None,
            _ => Some(body),
        };
        Writer {
            head,
            head_sent: 0,
            queued: VecDeque::new(),
            front_sent: 0,
            body,
            outgoing,
            sent,
            done: false,
        }
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, io: &mut BoxIo) -> Poll<Result<(), Sending>> {
        ready!(write_out(cx, io, &self.head, &mut self.head_sent))?;
        loop {
            while let Some(front) = self.queued.front() {
                ready!(write_out(cx, io, front, &mut self.front_sent))?;
                self.queued.pop_front();
                self.front_sent = 0;
            }
            let Some(body) = self.body.as_mut() else {
                return Pin::new(&mut *io).poll_flush(cx).map_err(Sending::Io);
            };
            let frame = match Pin::new(body).poll_frame(cx) {
                Poll::Pending => {
                    ready!(Pin::new(&mut *io).poll_flush(cx)).map_err(Sending::Io)?;
                    return Poll::Pending;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Sending::Body(e))),
                Poll::Ready(None) => None,
                Poll::Ready(Some(Ok(frame))) => Some(frame),
            };
            let frame = match frame {
                None => {
                    self.end(None)?;
                    continue;
                }
                Some(frame) => frame,
            };
            match frame.into_data() {
                Ok(data) if data.is_empty() => {}
                Ok(data) => {
                    self.sent += data.len() as u64;
                    match self.outgoing {
                        Outgoing::Length(n) if self.sent > n => {
                            return Poll::Ready(Err(Sending::Body(
                                "the request body is longer than its Content-Length".into(),
                            )))
                        }
                        Outgoing::Chunked => {
                            let mut line = Vec::with_capacity(18);
                            h1_wire::chunk_size_line(data.len(), &mut line);
                            self.queued.push_back(Bytes::from(line));
                            self.queued.push_back(data);
                            self.queued.push_back(Bytes::from_static(b"\r\n"));
                        }
                        _ => self.queued.push_back(data),
                    }
                }
                Err(frame) => {
                    let trailers = frame.into_trailers().ok();
                    self.end(trailers.as_ref())?;
                }
            }
        }
    }

    /// The body ended (with trailers, which only a chunked body carries on).
    fn end(&mut self, trailers: Option<&http::HeaderMap>) -> Result<(), Sending> {
        self.body = None;
        match self.outgoing {
            Outgoing::Chunked => {
                let mut last = Vec::new();
                h1_wire::last_chunk(trailers, &mut last);
                self.queued.push_back(Bytes::from(last));
                Ok(())
            }
            Outgoing::Length(n) if self.sent != n => Err(Sending::Body(
                "the request body is shorter than its Content-Length".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// Writes what is left of `bytes` after the first `sent`, counting them in `sent`, so
/// that a wait resumes where it stopped.
fn write_out(
    cx: &mut Context<'_>,
    io: &mut BoxIo,
    bytes: &[u8],
    sent: &mut usize,
) -> Poll<Result<(), Sending>> {
    while *sent < bytes.len() {
        let n = ready!(Pin::new(&mut *io).poll_write(cx, &bytes[*sent..])).map_err(Sending::Io)?;
        if n == 0 {
            return Poll::Ready(Err(Sending::Io(io::ErrorKind::WriteZero.into())));
        }
        *sent += n;
    }
    Poll::Ready(Ok(()))
}
