//! Where the engine calls modules: one function (or, on the hit path, macro) per
//! event, each a no-op unless a module wants that event. The deliver events are in
//! `deliver.rs`.
//!
//! Above the engine's state and the vocabulary; never the cache path or the
//! transaction, which call these. What the events share (turning a module's decision
//! into a reply or an error, the body stage) is in `decision.rs` and `stage.rs`.

use std::sync::Arc;

use bytes::Bytes;
use http::{request, response, HeaderMap, HeaderValue};
use http_body::Frame;
use weir_api::{BodyChunk, Event, Reply};

use crate::body::ProxyBody;
use crate::engine::Engine;
use crate::error::ProxyError;
use crate::modules::txn::ModTxn;
use crate::modules::{call, run_event};
use crate::record::TxnSlot;
use crate::upstream::OriginRequest;

pub(crate) mod budget;
mod decision;
mod stage;
mod whole;

pub(crate) use budget::HeldBudget;
pub(crate) use decision::{decide, failed, fix_framing, module_failed_in_body};
pub(crate) use stage::{trailer_event, BodyStage};
pub(crate) use whole::{
    hook_request_body, whole_request, whole_response, RequestSlot, Whole, WholeRequest,
};

/// Hands the credentials the parser set aside to the transaction when its chain takes
/// them; returns them when it does not (no module, or a route's chain without the
/// module that the listener's has), to go back into the request.
pub(crate) fn hand_over_credentials(
    txn: Option<&mut ModTxn>,
    value: Option<Box<HeaderValue>>,
) -> Option<HeaderValue> {
    match txn {
        Some(t) if t.chain.takes_credentials() => {
            weir_api::engine::set_aside_credentials(&mut t.txn, value);
            None
        }
        _ => value.map(|value| *value),
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
        let engine: &$crate::engine::Engine = $engine;
        let mut lookup: weir_api::CacheLookup = $lookup;
        match $txn {
            Some($crate::modules::txn::ModTxn { chain, txn })
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

/// A request is about to go to the origin. `Some(reply)`: a module answered instead.
/// The request is borrowed, not moved in and out: without a module that wants the
/// event, a miss would copy it twice for nothing. A fill's head is made as a map only
/// for a module that wants the event.
pub(crate) async fn upstream_request(
    engine: &Engine,
    txn: Option<&mut ModTxn>,
    request: &mut OriginRequest,
) -> Result<Option<Box<Reply>>, ProxyError> {
    match txn {
        Some(ModTxn { chain, txn: t }) if chain.wants(Event::UpstreamRequest) => {
            let head = request.head_mut();
            let hook = run_event!(
                chain,
                Event::UpstreamRequest,
                t,
                head,
                call::upstream_request,
                &engine.metrics
            );
            decide(hook)
        }
        _ => Ok(None),
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

/// `body` with the body events' modules applied to each chunk as it streams, using
/// the transaction in `slot`. The final chunk has `last` set (it is empty when the end
/// only shows after the data), so a module may flush what it held back. Trailers that
/// end the body go through the response-trailers event (when in `events`), then on.
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
        /// The body's trailers, sent once the last chunk is out.
        trailers: Option<HeaderMap>,
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
        trailers: None,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if s.ended {
                let trailers = s.trailers.take()?;
                return Some((Ok(Frame::trailers(trailers)), s));
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
                    Err(frame) => {
                        s.trailers = frame.into_trailers().ok();
                        continue;
                    }
                },
            };
            let taken = s.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(mut txn) = taken {
                let data = std::mem::take(&mut chunk.data);
                let mut result = s
                    .stage
                    .feed(&s.engine, &mut txn, s.events, data, chunk.last)
                    .await;
                if let (Ok(_), Some(trailers)) = (&result, s.trailers.as_mut()) {
                    if s.events.contains(&Event::ResponseTrailers) {
                        let changed =
                            trailer_event(&s.engine, &mut txn, Event::ResponseTrailers, trailers);
                        if changed.await.is_err() {
                            result = Err(());
                        }
                    }
                }
                *s.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(txn);
                match result {
                    Ok(data) => chunk.data = data,
                    Err(()) => {
                        s.ended = true;
                        s.trailers = None;
                        return Some((
                            Err("a module failed while transforming the body".into()),
                            s,
                        ));
                    }
                }
            }
            if !chunk.data.is_empty() {
                return Some((Ok(Frame::data(chunk.data)), s));
            }
        }
    });
    ProxyBody::frames(Box::pin(stream))
}
