//! The deliver stage of a transaction that has modules: the deliver-headers event on
//! the response about to be sent, then the body events on its body.

use std::sync::{Arc, Mutex};

use http::header::HeaderValue;
use http::{response, Response};
use weir_api::{engine, Event, Txn};

use crate::body::ProxyBody;
use crate::engine::Engine;
use crate::hooks;
use crate::metrics::Metrics;
use crate::modules::txn::ModTxn;
use crate::modules::{Hook, ModuleChain};
use crate::record::TxnSlot;
use crate::served::{refusal, reply_response, set_cache_status};

/// Runs the deliver events on a response: headers now, body chunks as they stream
/// (with the response-body event first when the body comes straight from the origin).
/// A reply or a failure replaces the response. Evaluates to `Option<TxnSlot>`: when
/// body events stream, the transaction's module context moves out of `txn` to that
/// slot, shared with the body.
///
/// Works on the response in place and awaits only for a module that waits, so a hit
/// whose modules answer at once is neither taken apart nor moved through a future.
/// A macro rather than an `async fn` for the reason `run_event!` is one: on a hit,
/// the future of an `async fn` here cost as much as calling a module.
macro_rules! deliver {
    ($engine:expr, $txn:expr, $response:expr, $origin_body:expr) => {
        'deliver: {
            use weir_api::Event;
            use $crate::deliver as d;
            use $crate::modules::txn::ModTxn;
            use $crate::modules::{call, run_event};
            let engine: &std::sync::Arc<$crate::engine::Engine> = $engine;
            let txn: &mut Option<ModTxn> = $txn;
            let response: &mut http::Response<$crate::body::ProxyBody> = $response;
            let Some(ModTxn { chain, txn: t }) = txn.as_mut() else {
                break 'deliver None;
            };
            let metrics = &*engine.metrics;
            if chain.wants(Event::DeliverHeaders) {
                let mut head = d::lend_head(response, t);
                let hook = run_event!(
                    chain,
                    Event::DeliverHeaders,
                    t,
                    &mut head,
                    call::deliver_headers,
                    metrics
                );
                d::headers_decided(response, head, t, hook, metrics);
            }
            let Some(events) = d::body_events(chain, $origin_body) else {
                break 'deliver None;
            };
            let Some(data) = response.body_mut().in_memory() else {
                if response.body().opens_tunnel() {
                    // No body: the tunnel's bytes go through `TunnelData`, and its
                    // record must reach the tunnel, not a wrapper that ends at once.
                    break 'deliver None;
                }
                break 'deliver Some(d::stream(engine, txn, response, events));
            };
            if std::ptr::eq(events, d::TRAILERS) {
                // A body in memory has no trailers.
                break 'deliver None;
            }
            // The body is in memory (a hit): its body events run once, now, on the
            // whole body, changed in place.
            if !d::hands_over(engine, t, data) {
                break 'deliver None;
            }
            let mut chunk = weir_api::BodyChunk {
                data: std::mem::take(data),
                last: true,
            };
            // One `run_event!` per event, so each calls its callback directly.
            let goes_on = (events.first() != Some(&Event::ResponseBody)
                || !chain.wants(Event::ResponseBody)
                || run_event!(
                    chain,
                    Event::ResponseBody,
                    t,
                    &mut chunk,
                    call::response_body,
                    metrics
                )
                .goes_on())
                && (!chain.wants(Event::DeliverBody)
                    || run_event!(
                        chain,
                        Event::DeliverBody,
                        t,
                        &mut chunk,
                        call::deliver_body,
                        metrics
                    )
                    .goes_on());
            if goes_on {
                *data = chunk.data;
            } else {
                // A body event cannot replace the response any more: a failure.
                *response =
                    $crate::served::refusal(metrics, $crate::hooks::module_failed_in_body());
            }
            None
        }
    };
}
pub(crate) use deliver;

const BOTH: &[Event] = &[Event::ResponseBody, Event::DeliverBody];
const DELIVER: &[Event] = &[Event::DeliverBody];
const BOTH_AND_TRAILERS: &[Event] = &[
    Event::ResponseBody,
    Event::DeliverBody,
    Event::ResponseTrailers,
];
const DELIVER_AND_TRAILERS: &[Event] = &[Event::DeliverBody, Event::ResponseTrailers];
/// No body event, only the trailers'.
pub(crate) const TRAILERS: &[Event] = &[Event::ResponseTrailers];

/// The response's head for the deliver-headers callbacks, which take a head that
/// `Response` does not lend: its fields visit an empty one, which costs less than
/// taking the response apart and back. [`headers_decided`] returns them.
#[inline]
pub(crate) fn lend_head(response: &mut Response<ProxyBody>, txn: &mut Txn) -> response::Parts {
    engine::reset_body_length(txn);
    let mut head = Response::new(()).into_parts().0;
    swap_head(response, &mut head);
    head
}

/// Returns the head lent by [`lend_head`] and acts on what the modules decided.
#[inline]
pub(crate) fn headers_decided(
    response: &mut Response<ProxyBody>,
    mut head: response::Parts,
    txn: &Txn,
    hook: Hook,
    metrics: &Metrics,
) {
    swap_head(response, &mut head);
    // `head` is the empty head `lend_head` made again, which owns no memory: no need
    // to run its destructor.
    std::mem::forget(head);
    match hook {
        Hook::Continue => {
            if txn.body_length_changes() {
                hooks::fix_framing(response.headers_mut());
            }
        }
        Hook::Respond(reply) => {
            *response = reply_response(*reply);
            set_cache_status(
                response.headers_mut(),
                HeaderValue::from_static("weir; detail=module"),
            );
        }
        Hook::Failed(module) => *response = refusal(metrics, hooks::failed(module)),
    }
}

/// The body events to run, if any: the response-body event first when the body
/// comes straight from the origin, the response-trailers event last.
#[inline]
pub(crate) fn body_events(chain: &ModuleChain, origin_body: bool) -> Option<&'static [Event]> {
    let response = origin_body && chain.wants(Event::ResponseBody);
    let deliver = chain.wants(Event::DeliverBody);
    Some(
        match (response, deliver, chain.wants(Event::ResponseTrailers)) {
            (false, false, false) => return None,
            (false, false, true) => TRAILERS,
            (true, _, false) => BOTH,
            (true, _, true) => BOTH_AND_TRAILERS,
            (false, true, false) => DELIVER,
            (false, true, true) => DELIVER_AND_TRAILERS,
        },
    )
}

/// Whether the modules get a body in memory: not one asked for whole but larger than
/// the limit, which passes through unchanged, as a streamed one would.
#[inline]
pub(crate) fn hands_over(engine: &Engine, txn: &Txn, data: &bytes::Bytes) -> bool {
    !(txn.wants_whole_body() && data.len() as u64 > engine.limits.module_body.0)
}

/// Wraps a streamed body so that its body events run chunk by chunk, with the
/// transaction's module context moved to a slot the body shares.
pub(crate) fn stream(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    response: &mut Response<ProxyBody>,
    events: &'static [Event],
) -> TxnSlot {
    let slot: TxnSlot = Arc::new(Mutex::new(txn.take()));
    let declared = crate::headers::content_length(response.headers());
    let streamed = std::mem::replace(response.body_mut(), ProxyBody::empty());
    *response.body_mut() =
        hooks::hook_body(engine.clone(), streamed, events, slot.clone(), declared);
    slot
}

fn swap_head(response: &mut Response<ProxyBody>, head: &mut response::Parts) {
    std::mem::swap(response.status_mut(), &mut head.status);
    std::mem::swap(response.version_mut(), &mut head.version);
    std::mem::swap(response.headers_mut(), &mut head.headers);
    std::mem::swap(response.extensions_mut(), &mut head.extensions);
}
