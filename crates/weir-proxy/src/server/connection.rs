//! Serving one client connection, and keeping it cheap while it waits.
//!
//! An HTTP/1.1 connection is served by Weir's own server (`server/h1.rs`) as long as
//! its requests have no body, which holds no buffer while it waits. From the first
//! request it leaves to hyper (a body, an upgrade or CONNECT, `Expect`, HTTP/1.0, a
//! head to refuse), hyper's HTTP/1 server takes the connection over, with the bytes
//! already read.
//!
//! hyper's HTTP/1 connection keeps everything it ever needed for as long as it
//! serves: a read buffer (16 KiB once a request has been read), a write buffer
//! (8 KiB), a box the size of the whole transaction future (8 KiB and more), the last
//! response's header map. On a keep-alive connection that waits for its next request
//! that was about 40 KB each, nearly all of it idle.
//!
//! So hyper serves in segments. When hyper waits for the next
//! request, no transaction is running, every byte read so far belongs to a complete
//! request and every byte written has been flushed, and nothing arrives for
//! [`PARK_AFTER`], the connection is parked: hyper is told the client closed (a clean
//! end between two requests), hands the stream back (with anything it read but did not
//! use), and all its state is freed. The connection then goes back to Weir's own
//! server, which waits for the next request with no buffer at all, for as long as
//! `client_idle` lets it wait. The client sees one ordinary keep-alive connection.
//!
//! The same timer, reset rather than made anew, holds a request head to `client_idle`
//! from the moment the connection waits for its rest (slow or stalled heads), which
//! hyper's header read timeout did with a timer of its own for every request.
//!
//! HTTP/2 connections are served from start to end by the h2 crate (`server/h2.rs`):
//! their state (HPACK tables, flow-control windows, settings) cannot be dropped and
//! rebuilt.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::body::{ClientStream, ProxyBody};
use crate::framing::FramingGuard;
use crate::headers::Credentials;
use crate::interim::{self, Interim};
use crate::listener::ClientIo;
use crate::service::ConnInfo;

use super::h2::H2Settings;

/// How long an HTTP/1 connection waits for its next request with hyper's state kept,
/// before it is parked. A client that sends its requests back to back never pays for
/// rebuilding that state; one that pauses longer waits for free.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(2);

/// The first bytes an HTTP/2 client sends (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How client connections are served: hyper's settings for each protocol.
pub(crate) struct Protocols {
    pub http1: http1::Builder,
    pub http2: H2Settings,
    /// How long a connection may wait for a request, and an HTTP/1 request head take
    /// to arrive whole (`client_idle`; see [`Client::poll_read`]).
    pub idle: Duration,
    /// The most bytes a head may take before hyper refuses it (its buffer's limit).
    pub head_limit: usize,
}

impl Protocols {
    pub fn new(config: &crate::config::Config) -> Protocols {
        let header_limit = config.limits.max_request_header.0 as usize;
        let idle = config.timeouts.client_idle.0;
        let head_limit = (2 * header_limit + 8192).max(16384);
        let mut h1 = http1::Builder::new();
        // The head's deadline is kept by `Client`, with the one timer it reuses: hyper's
        // own allocated, registered and dropped a timer for every request.
        h1.timer(TokioTimer::new())
            .header_read_timeout(None)
            .keep_alive(true)
            // Requests over our own limit get a 431 with a reason from the service;
            // hyper's own buffer limit (a bare 431) is only reached far beyond it.
            .max_buf_size(head_limit)
            .max_headers(crate::headers::MAX_REQUEST_FIELDS)
            .pipeline_flush(false);
        Protocols {
            http1: h1,
            http2: H2Settings {
                max_header_list_size: (header_limit as u32).saturating_mul(2),
                max_concurrent_streams: 256,
            },
            idle,
            head_limit,
        }
    }
}

/// Serves `stream` until the client closes it, it stays idle too long, or the proxy
/// stops. `counted` keeps the connection counted open until then (it moves to the
/// task that serves HTTP/2).
pub(crate) async fn serve<K: Send + 'static>(
    stream: FramingGuard<ClientIo>,
    conn: Arc<ConnInfo>,
    protocols: Arc<Protocols>,
    mut stop: watch::Receiver<bool>,
    counted: K,
) {
    let mut client = Client {
        io: stream,
        prefix: Bytes::new(),
        busy: Arc::new(AtomicUsize::new(0)),
        unflushed: false,
        parked: false,
        may_park: false,
        timer: None,
        armed: Armed::No,
        idle: protocols.idle,
        interim: conn.interim.clone(),
    };
    // Nothing is allocated for HTTP until the client sends. Not a wait for readability:
    // a TLS client's first bytes may already be decrypted, read with the handshake.
    if *stop.borrow() {
        return;
    }
    let preface = tokio::select! {
        read = tokio::time::timeout(protocols.idle, client.read_preface()) => read.ok().flatten(),
        _ = stop.changed() => None,
    };
    let Some(h2) = preface else {
        return;
    };
    if h2 {
        client.io.step_aside();
        // HTTP/2 goes on in a task of its own, sized for it; this one ends. Awaited
        // here, HTTP/2's state (h2's connection, about 3.7 KiB) would size this future
        // and so the task of every connection: a parked HTTP/1.1 connection would keep
        // twice what it needs (docs/benchmarks.md, "Idle client connections: memory").
        tokio::spawn(async move {
            let _counted = counted;
            let idle = protocols.idle;
            super::h2::serve(client, conn, &protocols.http2, idle, stop).await
        });
        return;
    }
    client.may_park = true;
    let limits = super::h1::Limits {
        idle: protocols.idle,
        head_limit: protocols.head_limit,
    };
    loop {
        // Weir's own server serves what it can; hyper takes over from the first request
        // it leaves, until the connection is idle again (`server/h1.rs`).
        let prefix = std::mem::take(&mut client.prefix);
        let mut ahead =
            match super::h1::serve(&mut client.io, prefix, &conn, &limits, &mut stop).await {
                super::h1::Ended::Closed => return,
                super::h1::Ended::ToHyper(ahead) => ahead,
            };
        // The guard follows what hyper is given, as if hyper had read it through it.
        client.io.observe_ahead(&mut ahead);
        client.prefix = ahead.freeze();
        let busy = client.busy.clone();
        let conn = conn.clone();
        let service = hyper::service::service_fn(move |req| {
            let transaction = Busy::enter(&busy);
            // The transaction finds the queue through its connection (`Target::interim`).
            let relay = interim::client_accepts(req.version()).then(|| conn.interim.clone());
            // Boxed: a transaction's future is several KiB, and hyper moves the future
            // it is given; a pointer is cheaper to move than the future (a miss spent
            // about 8,500 instructions copying it). Made in its box (`boxed.rs`).
            let req = req.map(ClientStream::Http1);
            let handled = crate::boxed::in_place(|| {
                crate::service::handle(conn.clone(), req, Credentials::InFields, None)
            });
            async move {
                // hyper polls this future on the connection's task: its waker is the
                // one that gets a queued interim response written.
                let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
                let waiting = relay.map(|relay| relay.wait_for_final(waker));
                let response = handled.await?;
                drop(waiting);
                Ok::<_, std::convert::Infallible>(response.map(|body| Tracked {
                    body,
                    _transaction: transaction,
                }))
            }
        });
        // Boxed: the task keeps only a pointer to hyper's state, and frees it on parking.
        let mut connection = Box::pin(
            protocols
                .http1
                .serve_connection(TokioIo::new(client), service)
                .with_upgrades(),
        );
        let mut stopping = *stop.borrow();
        if stopping {
            connection.as_mut().graceful_shutdown();
        }
        let (result, stopped) =
            super::stop::until_stop(&mut connection, &mut stop, stopping, |c| {
                c.as_mut().graceful_shutdown()
            })
            .await;
        stopping = stopped;
        if let Err(e) = result {
            tracing::debug!("client connection ended: {e}");
            return;
        }
        // Upgraded (a tunnel owns the stream now), or closed: nothing comes back. What
        // the pattern leaves out (hyper's read buffer, the service) is dropped here.
        let Some(http1::Parts { io, read_buf, .. }) = Pin::into_inner(connection).into_parts()
        else {
            return;
        };
        client = io.into_inner();
        if !client.parked || stopping {
            return;
        }
        client.parked = false;
        client.timer = None;
        client.armed = Armed::No;
        // A copy: hyper's leftover is a view of its whole read buffer, and would keep it.
        client.prefix = Bytes::copy_from_slice(&read_buf);
        drop(read_buf);
        client.io.release_buffers();
    }
}

/// The stream as hyper sees it: bytes read ahead first, then the client's. It tells
/// hyper the client closed when the connection can be parked.
struct Client {
    io: FramingGuard<ClientIo>,
    /// Bytes read from the stream that hyper has not seen yet.
    prefix: Bytes,
    /// Transactions whose response body hyper has not finished with.
    busy: Arc<AtomicUsize>,
    /// Written to the stream and not flushed since.
    unflushed: bool,
    /// The end hyper saw was ours, not the client's.
    parked: bool,
    /// HTTP/1: may be parked between requests.
    may_park: bool,
    /// The connection's one timer, for what `armed` says; allocated once per segment.
    timer: Option<Pin<Box<Sleep>>>,
    armed: Armed,
    /// `client_idle`: the longest a request head may take.
    idle: Duration,
    /// 1xx responses from the origin, written ahead of hyper's output.
    interim: Interim,
}

impl Client {
    /// Reads the first bytes, as far as they can be the HTTP/2 preface, into the prefix.
    /// Some(true): HTTP/2; None: the client closed or failed.
    async fn read_preface(&mut self) -> Option<bool> {
        let mut first = [0u8; H2_PREFACE.len()];
        let mut n = 0;
        while n < first.len() && first[..n] == H2_PREFACE[..n] {
            // Past the guard: an HTTP/1.1 request's first bytes are parsed by Weir's
            // own server, and given to the guard only if hyper is to have them.
            match self.io.get_mut().read(&mut first[n..]).await {
                Ok(0) if n == 0 => return None,
                Ok(0) => break,
                Ok(read) => n += read,
                Err(_) => return None,
            }
        }
        self.prefix = Bytes::copy_from_slice(&first[..n]);
        Some(first[..] == H2_PREFACE[..])
    }

    /// Writes the interim responses queued for the current request, before any byte of
    /// hyper's.
    fn poll_write_interim(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let Client {
            io,
            interim,
            unflushed,
            ..
        } = self;
        interim.poll_write_queued(cx, |cx, bytes| {
            *unflushed = true;
            Pin::new(&mut *io).poll_write(cx, bytes)
        })
    }

    /// hyper writes: what it writes is not flushed yet, and a wait to park begins again
    /// after it.
    fn writes(&mut self) {
        self.unflushed = true;
        if self.armed == Armed::Park {
            self.disarm();
        }
    }

    /// hyper waits for (the rest of) a request head: no transaction's response is
    /// being written. (While one is, hyper reads only to see whether the client closed,
    /// and a long download must not be cut.)
    fn waits_for_head(&self) -> bool {
        self.may_park && self.busy.load(Ordering::Acquire) == 0 && self.io.reading_head()
    }

    fn can_park(&self) -> bool {
        self.may_park
            && !self.unflushed
            && self.busy.load(Ordering::Acquire) == 0
            && self.io.between_requests()
    }
}

/// What a connection's timer runs for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Armed {
    No,
    /// The current wait for a request, with hyper's state kept: the connection is
    /// parked when it ends.
    Park,
    /// The current request head, or a wait for one while the connection cannot park
    /// (a response not flushed yet): the connection ends when it ends (`client_idle`,
    /// against slow or stalled heads).
    Head,
}

impl Client {
    /// Runs the timer for `armed` from now, unless it already runs for it; whether it
    /// has ended.
    fn timer_ended(&mut self, cx: &mut Context<'_>, armed: Armed) -> bool {
        if self.armed != armed {
            // The wait begins now; later polls (the timer's own wake-up among them)
            // must not push the deadline back.
            self.armed = armed;
            let after = match armed {
                Armed::Park => PARK_AFTER,
                _ => self.idle,
            };
            let deadline = tokio::time::Instant::now() + after;
            match &mut self.timer {
                Some(t) => t.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let timer = self.timer.as_mut().expect("armed above");
        timer.as_mut().poll(cx).is_ready()
    }

    /// The wait the timer ran for is over. Left as it was, the timer would still wake
    /// the task when its deadline passes, in the middle of the next transaction (a
    /// turn of hyper's dispatcher for nothing: with clients that send their next
    /// request within `PARK_AFTER`, on most requests). Moving a deadline later is
    /// cheap (tokio only notes it, and files the timer again when the old one comes
    /// round), so it is moved out of the way rather than dropped and made again.
    fn disarm(&mut self) {
        if self.armed == Armed::No {
            return;
        }
        self.armed = Armed::No;
        if let Some(timer) = &mut self.timer {
            let later = timer.deadline() + self.idle;
            timer.as_mut().reset(later);
        }
    }
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if !r.is_pending() {
            // A head's deadline holds until the head is whole, however it trickles in.
            let partial_head = this.io.reading_head() && !this.io.between_requests();
            if this.armed == Armed::Park || !partial_head {
                this.disarm();
            }
            return r;
        }
        if this.can_park() {
            if this.timer_ended(cx, Armed::Park) {
                // hyper takes an end of stream between two requests for the client's
                // clean close, and gives the stream back.
                this.parked = true;
                return Poll::Ready(Ok(()));
            }
        } else if this.waits_for_head() && this.timer_ended(cx, Armed::Head) {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no whole request head within client_idle",
            )));
        }
        r
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.writes();
        std::task::ready!(self.poll_write_interim(cx))?;
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.writes();
        std::task::ready!(self.poll_write_interim(cx))?;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::task::ready!(self.poll_write_interim(cx))?;
        let r = Pin::new(&mut self.io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            // hyper flushes the stream only once its own buffer is empty.
            self.unflushed = false;
            // hyper looks for the next request before it flushes the last response,
            // and may not read again until bytes come: the wait that may end in parking
            // begins now. (With hyper's header timer on, the task was polled again after
            // the flush; without it, nothing but the client's bytes would poll it.)
            if self.can_park() && self.timer_ended(cx, Armed::Park) {
                cx.waker().wake_by_ref();
            }
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.parked {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// One transaction on an HTTP/1 connection, from the request until hyper drops the
/// response body (written whole, or abandoned).
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(count: &Arc<AtomicUsize>) -> Busy {
        count.fetch_add(1, Ordering::AcqRel);
        Busy(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its transaction counted until hyper drops it.
struct Tracked {
    body: ProxyBody,
    _transaction: Busy,
}

impl Body for Tracked {
    type Data = <ProxyBody as Body>::Data;
    type Error = <ProxyBody as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
