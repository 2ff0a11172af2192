//! The body of a response sent to a client (`ProxyBody`), which completes the
//! transaction's record when it ends. Above the transaction record and the upstream
//! pools; the request bodies, below both, are in `body/request.rs`.

pub(crate) mod client;
pub(crate) mod request;
pub(crate) mod source;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::flight::{FlightHead, FlightOutcome};
use crate::record::{TunnelRecord, TxnRecord};

pub(crate) use client::{ClientStream, ClientTunnel, H2Body, H2Tunnel, H2Upgrade};
pub(crate) use request::{
    data_then_trailers, BoxError, ChunkStream, ClientBodyTimeout, ClientIncoming, FrameStream,
    ReadAheadError, RequestBody,
};
pub(crate) use source::BodySource;

/// The body of a response sent to a client. When the transaction record is attached,
/// it is completed (logged, counted) when the body ends or the client goes away.
pub struct ProxyBody {
    kind: Kind,
    record: Option<Box<TxnRecord>>,
    sent: u64,
    /// The length the response declared: hyper stops polling once it is reached, so
    /// the body may be dropped without ever returning its end.
    declared: Option<u64>,
    /// The server writing the body says when it reached the client
    /// ([`ProxyBody::delivered`]): its end, taken from the body, is not yet its
    /// delivery (a hit's body of many megabytes is one chunk).
    deferred: bool,
}

enum Kind {
    Empty,
    Full(Option<Bytes>),
    Stream(ChunkStream),
    /// A stream that may end with trailer fields (an origin's, or the modules').
    Frames(FrameStream),
    Upstream(crate::upstream::UpstreamBody),
    /// A flight's body as one of its readers reads it, then the trailers the origin's
    /// body ended with. Read here rather than through a stream adapter: an `unfold`
    /// stream in a box cost a miss about 480 instructions (its state moved at every
    /// chunk, the box allocated and freed).
    Flight(weir_cache::FlightReader<FlightHead>, FlightHead),
    /// No body: the response opens a tunnel, whose record the tunnel completes.
    Tunnel(Arc<TunnelRecord>),
}

impl ProxyBody {
    pub(crate) fn empty() -> Self {
        Self::from_kind(Kind::Empty)
    }

    pub(crate) fn full(b: Bytes) -> Self {
        Self::from_kind(Kind::Full(Some(b)))
    }

    pub(crate) fn stream(s: ChunkStream) -> Self {
        Self::from_kind(Kind::Stream(s))
    }

    /// `prefix`, then the rest of `rest` (a body whose beginning was already read),
    /// its trailers included.
    pub(crate) fn prefixed(prefix: Bytes, mut rest: ProxyBody) -> Self {
        let rest = futures_util::stream::poll_fn(move |cx| Pin::new(&mut rest).poll_frame(cx));
        let first = futures_util::stream::once(std::future::ready(Ok(Frame::data(prefix))));
        Self::frames(Box::pin(futures_util::StreamExt::chain(first, rest)))
    }

    /// A body held whole, then the trailers that ended it, if any.
    pub(crate) fn whole(b: Bytes, trailers: Option<http::HeaderMap>) -> Self {
        match trailers {
            None => Self::full(b),
            Some(t) => Self::frames(data_then_trailers([b], t)),
        }
    }

    pub(crate) fn frames(s: FrameStream) -> Self {
        Self::from_kind(Kind::Frames(s))
    }

    pub(crate) fn upstream(b: crate::upstream::UpstreamBody) -> Self {
        Self::from_kind(Kind::Upstream(b))
    }

    /// The empty body of a response that opens a tunnel: the transaction's record goes
    /// to `tunnel`, and is completed when the tunnel ends.
    pub(crate) fn tunnel(tunnel: Arc<TunnelRecord>) -> Self {
        Self::from_kind(Kind::Tunnel(tunnel))
    }

    /// The body of the flight `reader` reads, whose head is `head`.
    pub(crate) fn flight(reader: weir_cache::FlightReader<FlightHead>, head: FlightHead) -> Self {
        Self::from_kind(Kind::Flight(reader, head))
    }

    fn from_kind(kind: Kind) -> Self {
        ProxyBody {
            kind,
            record: None,
            sent: 0,
            declared: None,
            deferred: false,
        }
    }

    /// The whole body, when it is already in memory (a hit, a reply, an error), to be
    /// read or replaced in place. `None` for a streamed body.
    pub(crate) fn in_memory(&mut self) -> Option<&mut Bytes> {
        if let Kind::Empty = self.kind {
            // A module may give an empty body bytes of its own.
            self.kind = Kind::Full(None);
        }
        match &mut self.kind {
            Kind::Full(b) => Some(b.get_or_insert_with(Bytes::new)),
            Kind::Empty | Kind::Stream(_) | Kind::Frames(_) | Kind::Upstream(_) => None,
            Kind::Tunnel(_) => None,
            Kind::Flight(..) => None,
        }
    }

    /// Whether this is the empty body of a response that opens a tunnel.
    pub(crate) fn opens_tunnel(&self) -> bool {
        matches!(self.kind, Kind::Tunnel(_))
    }

    /// Whether the body is held whole (or empty): it then ends itself as its one frame
    /// is taken, so its completion needs no declared length.
    pub(crate) fn is_whole(&self) -> bool {
        matches!(self.kind, Kind::Empty | Kind::Full(_) | Kind::Tunnel(_))
    }

    pub(crate) fn attach(&mut self, record: Box<TxnRecord>, declared_len: Option<u64>) {
        if let Kind::Tunnel(tunnel) = &self.kind {
            tunnel.keep(record);
            return;
        }
        self.record = Some(record);
        self.declared = declared_len;
        if http_body::Body::is_end_stream(self) {
            // Nothing will be polled for an empty body; complete on drop as a success.
            if let Some(r) = self.record.as_mut() {
                r.completed = true;
            }
        }
    }

    /// The transaction completes when the server says the body reached the client
    /// ([`ProxyBody::delivered`]), not when the body's end is taken; dropped before
    /// that, the client went away.
    pub(crate) fn defer_completion(&mut self) {
        self.deferred = true;
    }

    /// The whole body was written to the client (after [`ProxyBody::defer_completion`]).
    pub(crate) fn delivered(&mut self) {
        self.finish(true);
    }

    /// `bytes` taken from the body did not reach the client: the connection failed.
    pub(crate) fn not_delivered(&mut self, bytes: u64) {
        self.sent = self.sent.saturating_sub(bytes);
    }

    /// Sends the trailers that end the body; the body is over once they are sent.
    fn trailers(&mut self, trailers: Frame<Bytes>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.kind = Kind::Empty;
        self.ended();
        Poll::Ready(Some(Ok(trailers)))
    }

    /// The body's end was taken.
    fn ended(&mut self) {
        if !self.deferred {
            self.finish(true);
        }
    }

    fn finish(&mut self, completed: bool) {
        if let Some(mut r) = self.record.take() {
            let declared_sent = !self.deferred && self.declared.is_some_and(|n| self.sent >= n);
            r.completed |= completed || declared_sent;
            r.finish(self.sent);
        }
    }
}

impl Drop for ProxyBody {
    fn drop(&mut self) {
        self.finish(false);
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled: Poll<Option<Result<Bytes, BoxError>>> = match &mut this.kind {
            Kind::Empty | Kind::Tunnel(_) => Poll::Ready(None),
            Kind::Full(b) => Poll::Ready(b.take().map(Ok)),
            Kind::Stream(s) => s.as_mut().poll_next(cx),
            Kind::Frames(s) => match s.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Poll::Ready(Some(Ok(data))),
                    // Trailers end the body: nothing is polled after them.
                    Err(trailers) => return this.trailers(trailers),
                },
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            Kind::Upstream(b) => match b.poll_data(cx) {
                Poll::Ready(None) => match b.take_trailers() {
                    Some(t) => return this.trailers(Frame::trailers(t)),
                    None => Poll::Ready(None),
                },
                other => other,
            },
            Kind::Flight(reader, head) => match reader.poll_next_chunk(cx) {
                Poll::Ready(None) => match flight_trailers(head) {
                    Some(t) => return this.trailers(Frame::trailers(t)),
                    None => Poll::Ready(None),
                },
                Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(data))),
                Poll::Ready(Some(Err(()))) => {
                    Poll::Ready(Some(Err("the origin's response was cut short".into())))
                }
                Poll::Pending => Poll::Pending,
            },
        };
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(data))) => {
                this.sent += data.len() as u64;
                // hyper stops polling a body that says it has ended.
                if http_body::Body::is_end_stream(&*this) {
                    this.ended();
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(r) = this.record.as_mut() {
                    r.body_failed = true;
                }
                this.finish(false);
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.ended();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty | Kind::Tunnel(_) => true,
            Kind::Full(b) => b.is_none(),
            Kind::Stream(_) | Kind::Frames(_) | Kind::Flight(..) => false,
            Kind::Upstream(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty | Kind::Tunnel(_) => SizeHint::with_exact(0),
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream(_) | Kind::Frames(_) | Kind::Flight(..) => SizeHint::default(),
            Kind::Upstream(b) => b.size_hint(),
        }
    }
}

/// The trailer fields that ended a flight's body, if the origin sent any.
fn flight_trailers(head: &FlightHead) -> Option<http::HeaderMap> {
    match &**head {
        FlightOutcome::Response(h) => h.trailers.get().map(|t| http::HeaderMap::clone(t)),
        FlightOutcome::Failed(_) => None,
    }
}

source::frame_source!(ProxyBody);
