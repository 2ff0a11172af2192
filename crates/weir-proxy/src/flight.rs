//! What a fetch in flight tells the clients that read it (`FlightHead`): the origin's
//! response head and whether it is being stored, or why the fetch failed. Named by the
//! engine's state (the coalescer), the cache path that fills and reads flights, and
//! purge; it uses only the cache's and the metrics' names.

use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;
use weir_cache::CacheKey;

use crate::metrics::CacheOutcome;

/// What a flight's readers learn when the origin's response head arrives.
pub(crate) type FlightHead = Arc<FlightOutcome>;

// Built once per fetch, straight into the flight's `Arc`: boxing the larger variant
// would add an allocation to every miss and save nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum FlightOutcome {
    Response(FetchedHead),
    Failed(ProxyErrorParts),
}

/// A fetch's failure as its readers learn it (already counted by the fetch).
pub(crate) struct ProxyErrorParts {
    pub(crate) status: StatusCode,
    pub(crate) reason: String,
    /// The `Cache-Status` detail, when the status alone does not tell.
    pub(crate) detail: Option<&'static str>,
}

/// Who else a flight's head is for, besides the client that leads it.
pub(crate) enum Shared {
    /// No one: the fetch is not shared.
    No,
    /// Other clients, sent a copy of the head.
    Copy,
    /// Other clients, sent these fields: the head as the cache will store it (without
    /// what the origin kept from reuse), which the stored object keeps too.
    As(weir_cache::StoredHead),
}

/// What a flight's other readers are sent: their own copy (none when there are no
/// others: an empty map, which allocates nothing), or the head the fill stores.
enum ForOthers {
    Copy(HeaderMap),
    Stored(weir_cache::StoredHead),
}

pub(crate) struct FetchedHead {
    pub(crate) status: StatusCode,
    /// The fields the flight's other readers are sent (see [`FetchedHead::headers`]).
    for_others: ForOthers,
    /// The origin's own map, for the client that leads the flight to take once
    /// ([`FetchedHead::leader_headers`]). A copy's field list is exactly as long as
    /// its fields, and the `Cache-Status` every response gets then reallocated it
    /// (about 1 KiB copied per miss); the origin's has room for it.
    pub(crate) for_leader: std::sync::Mutex<Option<HeaderMap>>,
    /// May other clients be served from this fetch (it is being stored)?
    pub(crate) shareable: bool,
    pub(crate) outcome: CacheOutcome,
    pub(crate) cache_status: HeaderValue,
    /// The request headers the response varies on, and the leader's variant key.
    pub(crate) vary: Option<(Vec<http::HeaderName>, CacheKey)>,
    /// The trailer fields that ended the origin's body, set before the flight ends
    /// so that every reader sends them after the body (they are not stored).
    pub(crate) trailers: std::sync::OnceLock<Box<HeaderMap>>,
    /// The origin's `Trailer` field when the head the other readers get is the stored
    /// one, which leaves it out (a stored response has no trailers): they get the
    /// trailers too, and an HTTP/1.1 client is sent only the trailer fields it names.
    pub(crate) announced: Option<HeaderValue>,
}

impl FetchedHead {
    /// A head whose trailers are still to come. A shared head's other readers get
    /// `shared`'s fields, and the leader takes `headers` itself.
    pub(crate) fn new(
        status: StatusCode,
        headers: HeaderMap,
        shared: Shared,
        outcome: CacheOutcome,
        cache_status: HeaderValue,
        vary: Option<(Vec<http::HeaderName>, CacheKey)>,
    ) -> FetchedHead {
        let shareable = !matches!(shared, Shared::No);
        let for_others = match shared {
            // No other reader: the leader takes the map, and nothing is copied.
            Shared::No => ForOthers::Copy(HeaderMap::new()),
            Shared::Copy => ForOthers::Copy(headers.clone()),
            Shared::As(head) => ForOthers::Stored(head),
        };
        FetchedHead {
            status,
            for_others,
            shareable,
            for_leader: std::sync::Mutex::new(Some(headers)),
            outcome,
            cache_status,
            vary,
            trailers: Default::default(),
            announced: None,
        }
    }

    /// The fields the flight's readers other than the leader are sent, and that the
    /// fill stores; empty when the head is not shared.
    pub(crate) fn headers(&self) -> &HeaderMap {
        match &self.for_others {
            ForOthers::Copy(headers) => headers,
            ForOthers::Stored(head) => head.headers(),
        }
    }

    /// Keeps the origin's `Trailer` field for the other readers, when they get the
    /// stored head (which leaves it out) and the body may end with trailers: its
    /// length is unknown (`unknown_length`: chunked, as an HTTP/1.1 body with
    /// trailers must be).
    pub(crate) fn announcing_trailers(mut self, unknown_length: bool) -> FetchedHead {
        if unknown_length && matches!(self.for_others, ForOthers::Stored(_)) {
            let leader = self.for_leader.get_mut().unwrap_or_else(|e| e.into_inner());
            let announced = leader.as_ref().and_then(|h| h.get(http::header::TRAILER));
            self.announced = announced.cloned();
        }
        self
    }

    /// The head's fields for a reader other than the leader.
    pub(crate) fn follower_headers(&self) -> HeaderMap {
        let mut headers = self.headers().clone();
        if let Some(names) = &self.announced {
            headers.insert(http::header::TRAILER, names.clone());
        }
        headers
    }

    /// The object a fill stores, with the head its other readers were sent; `None`
    /// when the head was not made for the store ([`Shared::As`]).
    pub(crate) fn object(
        &self,
        status: StatusCode,
        body: weir_cache::Body,
        policy: weir_cache::StoragePolicy,
    ) -> Option<weir_cache::CachedObject> {
        let ForOthers::Stored(head) = &self.for_others else {
            return None;
        };
        let head = head.clone();
        Some(weir_cache::CachedObject::with_head(
            status, head, body, policy,
        ))
    }

    /// The head's fields for the flight's leader: the origin's map the first time,
    /// a copy after.
    pub(crate) fn leader_headers(&self) -> HeaderMap {
        let taken = self
            .for_leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        taken.unwrap_or_else(|| self.headers().clone())
    }
}
