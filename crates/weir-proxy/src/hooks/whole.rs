//! The whole-message events (`WholeRequest`, `WholeResponse`), which collect a body
//! before the transaction goes on, and the request-body event, which runs on a
//! client's body as it streams to the origin.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, response};
use http_body::{Body as _, Frame};
use weir_api::{BodyChunk, Event, Reply, WholeBody};

use super::budget::Room;
use super::decision::{decide, failed, fix_framing};
use super::stage::{trailer_event, BodyStage};
use crate::body::{data_then_trailers, BodySource, BoxError, ClientIncoming, RequestBody};
use crate::engine::Engine;
use crate::error::ProxyError;
use crate::modules::txn::ModTxn;
use crate::modules::{call, run_event};

/// A body read for a whole-message event: all of it, or its first bytes past the
/// limit (the rest is still in the source).
pub(crate) struct Collected {
    pub data: Bytes,
    pub complete: bool,
    /// The trailers that ended a complete body (for sources that hand them over).
    pub trailers: Option<HeaderMap>,
    /// What `data` takes of `[limits] module_body_total`, until this is dropped.
    room: Room,
}

impl Collected {
    fn new(data: Bytes, complete: bool) -> Collected {
        Collected {
            data,
            complete,
            trailers: None,
            room: Room::default(),
        }
    }
}

/// Reads `source` to its end, or until more than `limit` bytes came, or until holding
/// more would go over `[limits] module_body_total` (then the body is handled as one
/// over the limit).
async fn collect(
    engine: &Engine,
    source: &mut impl BodySource,
    limit: u64,
) -> Result<Collected, BoxError> {
    let mut held = BytesMut::new();
    let mut room = Room::default();
    let mut trailers = None;
    loop {
        match std::future::poll_fn(|cx| source.poll_chunk_keeping(cx, &mut trailers)).await {
            None => {
                return Ok(Collected {
                    data: held.freeze(),
                    complete: true,
                    trailers,
                    room,
                })
            }
            Some(Err(e)) => return Err(e),
            Some(Ok(data)) => {
                if held.is_empty() && data.len() as u64 > limit {
                    return Ok(Collected::new(data, false));
                }
                let total = (held.len() + data.len()) as u64;
                let fits = engine.held.admits(&mut room, total, limit, &engine.metrics);
                held.extend_from_slice(&data);
                if !fits {
                    return Ok(Collected::new(held.freeze(), false));
                }
            }
        }
    }
}

/// What a whole-message event decided.
pub(crate) enum Whole<B> {
    /// Go on with this body (the whole of it, or its beginning when not `complete`).
    Body(Collected),
    /// A module answered instead.
    Reply(Box<Reply>),
    /// The body could not be read; the message is lost.
    Unreadable(B),
    /// No module wanted this message whole: nothing was read.
    NotWanted,
}

/// What the whole-request event decided.
pub(crate) enum WholeRequest {
    /// The body to forward: what was read, then the rest.
    Body(RequestBody),
    /// A module answered instead.
    Reply(Box<Reply>),
    /// No module wanted this request whole: its body, unread.
    NotWanted(ClientIncoming),
}

/// Sets the framing of a body a whole-message event changed: its exact length, and a
/// weak ETag (the bytes are no longer the ones the origin tagged).
fn body_changed(headers: &mut HeaderMap, len: usize, length_may_change_later: bool) {
    fix_framing(headers);
    headers.remove(header::TRANSFER_ENCODING);
    if !length_may_change_later {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
}

/// Runs a whole-message event on the modules `chosen`, lending them `head` (an `empty`
/// one stands in meanwhile) with the `collected` body. Returns a module's reply, if
/// any, and the body as the modules left it.
#[allow(clippy::too_many_arguments)]
async fn run_whole<H: Send>(
    engine: &Engine,
    chain: &crate::modules::txn::ChainHandle,
    txn: &mut weir_api::Txn,
    chosen: &[u16],
    event: Event,
    callback: crate::modules::Callback<(H, WholeBody)>,
    (head, empty): (&mut H, H),
    collected: &Collected,
) -> Result<(Option<Box<Reply>>, WholeBody), ProxyError> {
    let mut target = (
        std::mem::replace(head, empty),
        WholeBody {
            data: collected.data.clone(),
            truncated: !collected.complete,
        },
    );
    let hook = run_event!(in chosen, chain, event, txn, &mut target, callback, &engine.metrics);
    let (lent, body) = target;
    *head = lent;
    Ok((decide(hook)?, body))
}

/// The `WholeResponse` event on a response whose body is in `source`. Holds the head
/// back until the body is read (up to `[limits] module_body`).
pub(crate) async fn whole_response(
    engine: &Engine,
    m: &mut ModTxn,
    head: &mut response::Parts,
    source: &mut impl BodySource,
) -> Result<Whole<BoxError>, ProxyError> {
    let ModTxn { chain, txn } = m;
    let chosen = chain
        .choose(Event::WholeResponse, txn, &engine.metrics, |module, txn| {
            module.wants_whole_response(txn, head)
        })
        .map_err(failed)?;
    if chosen.is_empty() {
        return Ok(Whole::NotWanted);
    }
    let collected = match collect(engine, source, engine.limits.module_body.0).await {
        Ok(c) => c,
        Err(e) => return Ok(Whole::Unreadable(e)),
    };
    let empty = http::Response::new(()).into_parts().0;
    let (reply, body) = run_whole(
        engine,
        chain,
        txn,
        &chosen,
        Event::WholeResponse,
        call::whole_response,
        (head, empty),
        &collected,
    )
    .await?;
    if let Some(reply) = reply {
        return Ok(Whole::Reply(reply));
    }
    let original = collected.data;
    let data = if body.truncated || body.data == original {
        original
    } else {
        // Trailers need a chunked body to an HTTP/1.1 client: no length then.
        let trailers = collected.trailers.is_some() || source.has_trailers();
        body_changed(
            &mut head.headers,
            body.data.len(),
            txn.body_length_changes() || trailers,
        );
        body.data
    };
    // The room goes with the body until it has been passed on.
    Ok(Whole::Body(Collected {
        data,
        complete: collected.complete,
        trailers: collected.trailers,
        room: collected.room,
    }))
}

/// The `WholeRequest` event: reads the client's body (up to `[limits] module_body`)
/// and returns the body to forward, the collected part followed by the rest.
pub(crate) async fn whole_request(
    engine: &Engine,
    m: &mut ModTxn,
    head: &mut request::Parts,
    mut body: ClientIncoming,
    has_body: bool,
) -> Result<WholeRequest, ProxyError> {
    let ModTxn { chain, txn } = m;
    let chosen = chain
        .choose(Event::WholeRequest, txn, &engine.metrics, |module, txn| {
            module.wants_whole_request(txn, head)
        })
        .map_err(failed)?;
    if chosen.is_empty() {
        return Ok(WholeRequest::NotWanted(body));
    }
    let max_body = engine.limits.max_request_body.0;
    let limit = engine.limits.module_body.0.min(max_body);
    let collected = if has_body {
        collect(engine, &mut body, limit)
            .await
            .map_err(|e| crate::error::client_body_error(&*e))?
    } else {
        Collected::new(Bytes::new(), true)
    };
    if !collected.complete && collected.data.len() as u64 > max_body {
        return Err(crate::error::body_too_large(max_body));
    }
    let empty = http::Request::new(()).into_parts().0;
    let (reply, whole) = run_whole(
        engine,
        chain,
        txn,
        &chosen,
        Event::WholeRequest,
        call::whole_request,
        (head, empty),
        &collected,
    )
    .await?;
    if let Some(reply) = reply {
        return Ok(WholeRequest::Reply(reply));
    }
    let original = collected.data;
    if !collected.complete {
        let remaining = max_body - original.len() as u64;
        return Ok(WholeRequest::Body(RequestBody::Client {
            read_ahead: VecDeque::from([original]),
            inner: body,
            remaining,
        }));
    }
    let trailers = collected.trailers;
    let data = if whole.data == original {
        original
    } else {
        // Trailers need a chunked body: no length then.
        body_changed(&mut head.headers, whole.data.len(), trailers.is_some());
        whole.data
    };
    Ok(WholeRequest::Body(match trailers {
        // Sent chunked, the trailers after the data, where the request-trailers event
        // sees them too.
        Some(trailers) => RequestBody::Streamed(data_then_trailers([data], trailers)),
        None if data.is_empty() && !has_body => RequestBody::Empty,
        None => RequestBody::Buffered(Some(data)),
    }))
}

/// Where a transaction's module context waits while the request-body event runs on
/// a body that another task (the origin connection) polls.
pub(crate) type RequestSlot = Arc<tokio::sync::Mutex<Option<ModTxn>>>;

/// `body` with the request-body event applied to each chunk as it streams to the
/// origin, using the transaction in `slot`, and the request-trailers event on the
/// trailers that end it. Once the engine takes the transaction back (the origin
/// answered), the rest passes unchanged.
pub(crate) fn hook_request_body(
    engine: Arc<Engine>,
    body: RequestBody,
    slot: RequestSlot,
    whole: bool,
) -> RequestBody {
    struct State {
        engine: Arc<Engine>,
        body: RequestBody,
        slot: RequestSlot,
        stage: BodyStage,
        ended: bool,
        trailers: Option<HeaderMap>,
    }
    let stage = BodyStage::decided(engine.limits.module_body.0, whole);
    let state = State {
        engine,
        body,
        slot,
        stage,
        ended: false,
        trailers: None,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if s.ended {
                let trailers = s.trailers.take()?;
                return Some((Ok(Frame::trailers(trailers)), s));
            }
            let next = std::future::poll_fn(|cx| Pin::new(&mut s.body).poll_frame(cx)).await;
            let chunk = match next {
                None => {
                    s.ended = true;
                    BodyChunk {
                        data: Bytes::new(),
                        last: true,
                    }
                }
                Some(Err(e)) => {
                    s.ended = true;
                    return Some((Err(e), s));
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let last = s.body.is_end_stream();
                        s.ended |= last;
                        BodyChunk { data, last }
                    }
                    Err(frame) => {
                        s.trailers = frame.into_trailers().ok();
                        continue;
                    }
                },
            };
            let mut guard = s.slot.lock().await;
            let data = match guard.as_mut() {
                Some(m) => {
                    let mut fed = s
                        .stage
                        .feed(&s.engine, m, &[Event::RequestBody], chunk.data, chunk.last)
                        .await;
                    if let (Ok(_), Some(trailers)) = (&fed, s.trailers.as_mut()) {
                        let event = Event::RequestTrailers;
                        if trailer_event(&s.engine, m, event, trailers).await.is_err() {
                            fed = Err(());
                        }
                    }
                    match fed {
                        Ok(data) => data,
                        Err(()) => {
                            s.ended = true;
                            s.trailers = None;
                            drop(guard);
                            return Some((Err(MODULE_FAILED_ON_REQUEST.into()), s));
                        }
                    }
                }
                None => chunk.data,
            };
            drop(guard);
            if !data.is_empty() {
                return Some((Ok(Frame::data(data)), s));
            }
        }
    });
    RequestBody::Streamed(Box::pin(stream))
}

/// Cuts the request on its way to the origin (the module's failure is counted where
/// it happened).
const MODULE_FAILED_ON_REQUEST: &str = "a module failed while transforming the request body";
