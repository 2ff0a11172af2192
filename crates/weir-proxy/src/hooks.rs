//! Where the engine calls modules: one function (or, on the hit path, macro) per
//! event, each a no-op unless a module wants that event. The deliver events are in
//! `deliver.rs`.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{request, response, Request, Response, StatusCode};
use weir_api::{BodyChunk, Event, Reply};

use crate::body::{ProxyBody, RequestBody};
use crate::error::ProxyError;
use crate::metrics::ErrorKind;
use crate::modules::{call, run_event, Hook, ModTxn};
use crate::service::Engine;

mod budget;
mod whole;

pub(crate) use budget::{HeldBudget, Room};
pub(crate) use whole::{
    hook_request_body, whole_request, whole_response, RequestSlot, Whole, WholeRequest,
};

/// A transaction's module context, shared by the handler and the body it sends (the
/// deliver-body events run as the body streams; the log event when it ends).
pub(crate) type TxnSlot = Arc<Mutex<Option<ModTxn>>>;

pub(crate) fn failed(module: String) -> ProxyError {
    ProxyError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::ModuleFailed,
        format!("module `{module}` failed while handling this request"),
    )
    .with_detail(crate::cached::MODULE_ERROR)
}

/// A module's reply stays boxed on its way out: the result of every event is then
/// small, which is what a hit pays for.
#[inline]
pub(crate) fn decide(hook: Hook) -> Result<Option<Box<Reply>>, ProxyError> {
    match hook {
        Hook::Continue => Ok(None),
        Hook::Respond(reply) => Ok(Some(reply)),
        Hook::Failed(module) => Err(failed(module)),
    }
}

/// The request head is complete.
pub(crate) async fn request_headers(
    engine: &Engine,
    txn: Option<&mut ModTxn>,
    head: &mut request::Parts,
) -> Result<Option<Box<Reply>>, ProxyError> {
    match txn {
        Some(ModTxn { chain, txn: t }) if chain.wants(Event::RequestHeaders) => decide(run_event!(
            chain,
            Event::RequestHeaders,
            t,
            head,
            call::request_headers,
            &engine.metrics
        )),
        _ => Ok(None),
    }
}

/// The cache lookup's result: evaluates to `Result<Option<Box<Reply>>, ProxyError>`, the
/// reply when a module answered. A macro rather than an `async fn` for the reason
/// `run_event!` is one: this event runs on every hit, and the future of an `async fn`
/// cost more than calling the modules.
macro_rules! cache_lookup {
    ($engine:expr, $txn:expr, $lookup:expr) => {{
        let engine: &$crate::service::Engine = $engine;
        let mut lookup: weir_api::CacheLookup = $lookup;
        match $txn {
            Some($crate::modules::ModTxn { chain, txn })
                if chain.wants(weir_api::Event::CacheLookup) =>
            {
                $crate::hooks::decide($crate::modules::run_event!(
                    chain,
                    weir_api::Event::CacheLookup,
                    txn,
                    &mut lookup,
                    $crate::modules::call::cache_lookup,
                    &engine.metrics
                ))
            }
            _ => Ok(None),
        }
    }};
}
pub(crate) use cache_lookup;

/// A request is about to go to the origin. `Err(reply)`: a module answered instead.
pub(crate) async fn upstream_request(
    engine: &Engine,
    txn: Option<&mut ModTxn>,
    request: Request<RequestBody>,
) -> Result<Result<Request<RequestBody>, Box<Reply>>, ProxyError> {
    match txn {
        Some(ModTxn { chain, txn: t }) if chain.wants(Event::UpstreamRequest) => {
            let (mut head, body) = request.into_parts();
            let hook = run_event!(
                chain,
                Event::UpstreamRequest,
                t,
                &mut head,
                call::upstream_request,
                &engine.metrics
            );
            Ok(match decide(hook)? {
                None => Ok(Request::from_parts(head, body)),
                Some(reply) => Err(reply),
            })
        }
        _ => Ok(Ok(request)),
    }
}

/// Response headers, from the origin (`Event::ResponseHeaders`, before storing) or
/// about to be delivered (`Event::DeliverHeaders`). When a module says the body length
/// may change, the framing is fixed here: no Content-Length, a weak ETag.
pub(crate) async fn response_headers(
    engine: &Engine,
    txn: Option<&mut ModTxn>,
    event: Event,
    head: &mut response::Parts,
) -> Result<Option<Box<Reply>>, ProxyError> {
    let Some(ModTxn { chain, txn: t }) = txn else {
        return Ok(None);
    };
    if !chain.wants(event) {
        return Ok(None);
    }
    weir_api::engine::reset_body_length(t);
    let callback = match event {
        Event::DeliverHeaders => call::deliver_headers,
        _ => call::response_headers,
    };
    let decided = decide(run_event!(chain, event, t, head, callback, &engine.metrics))?;
    if t.body_length_changes() {
        fix_framing(&mut head.headers);
    }
    Ok(decided)
}

/// After a module changed (or may change) a body's length.
pub(crate) fn fix_framing(headers: &mut http::HeaderMap) {
    headers.remove(header::CONTENT_LENGTH);
    if let Some(etag) = headers.get(header::ETAG) {
        if !etag.as_bytes().starts_with(b"W/") {
            let mut weak = b"W/".to_vec();
            weak.extend_from_slice(etag.as_bytes());
            if let Ok(v) = HeaderValue::from_bytes(&weak) {
                headers.insert(header::ETAG, v);
            }
        }
    }
}

/// Runs the modules of each of `events` that the chain wants on one chunk, in order;
/// `Err` when a module that is not optional failed (the body is then cut).
pub(crate) async fn body_events(
    engine: &Engine,
    m: &mut ModTxn,
    events: &[Event],
    chunk: &mut BodyChunk,
) -> Result<(), ()> {
    let ModTxn { chain, txn } = m;
    for &event in events {
        if !chain.wants(event) {
            continue;
        }
        let callback = match event {
            Event::DeliverBody => call::deliver_body,
            Event::RequestBody => call::request_body,
            _ => call::response_body,
        };
        match run_event!(chain, event, txn, chunk, callback, &engine.metrics) {
            Hook::Continue => {}
            // A body event cannot replace the response any more; treat it as a failure.
            Hook::Respond(_) | Hook::Failed(_) => return Err(()),
        }
    }
    Ok(())
}

/// The body events of one body, chunk by chunk, or, when a module asked for it, the
/// whole body at once (up to a limit, past which it passes through unchanged).
pub(crate) struct BodyStage {
    limit: u64,
    mode: StageMode,
    held: bytes::BytesMut,
    /// What `held` takes of `[limits] module_body_total`.
    room: Room,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StageMode {
    Undecided,
    Chunks,
    Whole,
    Unchanged,
}

impl BodyStage {
    pub fn new(limit: u64) -> BodyStage {
        BodyStage {
            limit,
            mode: StageMode::Undecided,
            held: bytes::BytesMut::new(),
            room: Room::default(),
        }
    }

    /// A stage whose mode is known now (the transaction's declarations are about to
    /// be reset for the next body).
    pub fn decided(limit: u64, whole: bool) -> BodyStage {
        BodyStage {
            mode: if whole {
                StageMode::Whole
            } else {
                StageMode::Chunks
            },
            ..BodyStage::new(limit)
        }
    }

    /// Runs `events` on the next piece of body (`last`: nothing follows) and returns
    /// the bytes to pass on, possibly none. `Err` when a module failed.
    pub async fn feed(
        &mut self,
        engine: &Engine,
        m: &mut ModTxn,
        events: &[Event],
        data: Bytes,
        last: bool,
    ) -> Result<Bytes, ()> {
        if self.mode == StageMode::Undecided {
            self.mode = if m.txn.wants_whole_body() {
                StageMode::Whole
            } else {
                StageMode::Chunks
            };
        }
        let mut chunk = match self.mode {
            StageMode::Unchanged => return Ok(data),
            StageMode::Chunks | StageMode::Undecided => BodyChunk { data, last },
            StageMode::Whole => {
                let total = (self.held.len() + data.len()) as u64;
                if !engine
                    .held
                    .admits(&mut self.room, total, self.limit, &engine.metrics)
                {
                    // Too large to hand over whole, or no room left to hold it: the
                    // module never sees this body.
                    self.mode = StageMode::Unchanged;
                    self.room = Room::default();
                    let mut out = std::mem::take(&mut self.held);
                    out.extend_from_slice(&data);
                    return Ok(out.freeze());
                }
                self.held.extend_from_slice(&data);
                if !last {
                    return Ok(Bytes::new());
                }
                BodyChunk {
                    data: std::mem::take(&mut self.held).freeze(),
                    last: true,
                }
            }
        };
        body_events(engine, m, events, &mut chunk).await?;
        // The modules have had the whole body: its room is given back.
        self.room = Room::default();
        Ok(chunk.data)
    }
}

/// `body` with the body events' modules applied to each chunk as it streams, using
/// the transaction in `slot`. The final chunk has `last` set (it is empty when the end
/// only shows after the data), so a module may flush what it held back.
pub(crate) fn hook_body(
    engine: Arc<Engine>,
    body: ProxyBody,
    events: &'static [Event],
    slot: TxnSlot,
    declared: Option<u64>,
) -> ProxyBody {
    struct State {
        engine: Arc<Engine>,
        body: ProxyBody,
        events: &'static [Event],
        slot: TxnSlot,
        ended: bool,
        /// The length the response declares: hyper stops polling once it is sent, so
        /// the chunk that completes it is the last one modules see.
        declared: Option<u64>,
        seen: u64,
        stage: BodyStage,
    }
    let limit = engine.limits.module_body.0;
    let state = State {
        engine,
        body,
        events,
        slot,
        ended: false,
        declared,
        seen: 0,
        stage: BodyStage::new(limit),
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if s.ended {
                return None;
            }
            let next = std::future::poll_fn(|cx| {
                use http_body::Body as _;
                std::pin::Pin::new(&mut s.body).poll_frame(cx)
            })
            .await;
            let mut chunk = match next {
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
                        use http_body::Body as _;
                        s.seen += data.len() as u64;
                        let last =
                            s.body.is_end_stream() || s.declared.is_some_and(|n| s.seen >= n);
                        s.ended |= last;
                        BodyChunk { data, last }
                    }
                    Err(_) => continue,
                },
            };
            let taken = s.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(mut txn) = taken {
                let data = std::mem::take(&mut chunk.data);
                let result = s
                    .stage
                    .feed(&s.engine, &mut txn, s.events, data, chunk.last)
                    .await;
                *s.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(txn);
                match result {
                    Ok(data) => chunk.data = data,
                    Err(()) => {
                        s.ended = true;
                        return Some((
                            Err("a module failed while transforming the body".into()),
                            s,
                        ));
                    }
                }
            }
            if !chunk.data.is_empty() {
                return Some((Ok(chunk.data), s));
            }
        }
    });
    ProxyBody::stream(Box::pin(stream))
}

/// The error when a module fails on a body that was not sent yet.
pub(crate) fn module_failed_in_body() -> ProxyError {
    ProxyError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::ModuleFailed,
        "a module failed while transforming the body",
    )
    .with_detail(crate::cached::MODULE_ERROR)
}

/// The response a module made.
pub(crate) fn reply_response(reply: Reply) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(reply.body));
    *response.status_mut() = reply.status;
    *response.headers_mut() = reply.headers;
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}
