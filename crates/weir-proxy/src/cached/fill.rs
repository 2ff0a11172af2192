//! Starting the origin fetch behind a flight (`fetch.rs` runs it): for the leader of
//! a miss or a validation, or in the background (stale-while-revalidate, the whole
//! object after a range miss). Above `fetch.rs`; used by the lookup (`cached.rs`) and
//! by ranges (`range.rs`).

use std::sync::Arc;

use http::request;
use weir_cache::{CacheKey, CachedObject, Join};

use super::fetch_outcomes::Fetch;
use crate::engine::Engine;
use crate::flight::{FlightHead, FlightOutcome};
use crate::modules::txn::ModTxn;
use crate::target::Target;
use crate::upstream::OriginRequest;

/// What a fetch fills: the key, its flight, the stale copy it validates (if any), and
/// the invalidation ticket taken before the lookup.
pub(super) struct Fill {
    pub(super) key: CacheKey,
    pub(super) flight: weir_cache::FlightWriter<FlightHead>,
    pub(super) stale: Option<Arc<CachedObject>>,
    /// The stale copy was fresh: the request asked for it to be validated.
    pub(super) asked: bool,
    pub(super) ticket: weir_cache::Ticket,
}

/// Starts the origin fetch that feeds a flight: a validation when there is a stale
/// copy, else a plain fetch. `client_waits`: the client of `parts` waits for this
/// fetch's response (it leads the flight), and is relayed its 1xx responses. The fill
/// keeps `parts` (the leader's request, for the storage policy and the variant key):
/// a leader hands over its own, not a copy, and its `target` too (a clone of its names
/// counted each in the client's read buffer, and of the origin's host allocated).
pub(super) fn start_fetch(
    engine: &Arc<Engine>,
    fill: Fill,
    mut parts: request::Parts,
    target: Target,
    txn: &Option<ModTxn>,
    client_waits: bool,
) {
    let Fill {
        key,
        flight,
        stale,
        asked,
        ticket,
    } = fill;
    let Target {
        origin,
        host,
        path_and_query,
        targeted,
        interim,
    } = target;
    // What the client's connection attached to its request stays with the client.
    parts.extensions.clear();
    let parts = Arc::new(parts);
    let mut req = OriginRequest::fill(&parts, host, path_and_query);
    if let Some(object) = &stale {
        object.add_validators(&mut req.head_mut().headers);
    }
    // The fill may serve several clients: it has a transaction of its own, with the
    // leader's cache overrides (see docs/modules.md).
    let fill_txn = txn.as_ref().and_then(|t| {
        let mut fill = t.chain.new_txn(t.txn.client_addr())?;
        weir_api::engine::set_listener(&mut fill.txn, t.txn.listener());
        *fill.txn.cache() = t.txn.cache_overrides().clone();
        Some(fill)
    });
    let fetch = Fetch {
        engine: engine.clone(),
        txn: fill_txn,
        key,
        flight,
        request: parts,
        origin,
        targeted,
        stale,
        asked,
        ticket,
    };
    // Boxed before it is spawned, and made in its box (`boxed.rs`): the fetch's future
    // is several KiB, and spawning it unboxed moved it whole several times.
    // The origin's 1xx responses go to the client when it waits for this very
    // response, never for a fetch its answer does not wait for.
    let interim = interim.filter(|_| client_waits);
    tokio::spawn(crate::boxed::in_place(|| fetch.run(req, interim)));
}

/// Validates a stale copy that was just served (`stale`), or fetches a response that
/// no client waits for to store it (`stale` is `None`), unless a fetch of the key is
/// already under way (so a key is fetched once, however many clients ask meanwhile).
/// A fetch without a stale copy stops as soon as its response turns out not to be
/// stored.
pub(super) fn fetch_in_background(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    txn: &Option<ModTxn>,
    stale: Option<Arc<CachedObject>>,
    ticket: weir_cache::Ticket,
) {
    if let Ok(Join::Leader(flight, mut reader)) =
        engine.flights.join(key, || None::<Arc<CachedObject>>)
    {
        let validating = stale.is_some();
        let fill = Fill {
            key: key.clone(),
            flight,
            stale,
            asked: false,
            ticket,
        };
        start_fetch(engine, fill, strip_body(parts), target.clone(), txn, false);
        // A fetch stops when nobody reads it; this reader keeps it going to the end.
        tokio::spawn(async move {
            let Some(head) = reader.head().await else {
                return;
            };
            let stored = matches!(&*head, FlightOutcome::Response(h) if h.shareable);
            if validating || stored {
                while let Some(Ok(_)) = reader.next_chunk().await {}
            }
        });
    }
}

pub(super) fn strip_body(parts: &request::Parts) -> request::Parts {
    let mut r = http::Request::new(());
    *r.method_mut() = parts.method.clone();
    *r.uri_mut() = parts.uri.clone();
    *r.version_mut() = parts.version;
    *r.headers_mut() = parts.headers.clone();
    r.into_parts().0
}
