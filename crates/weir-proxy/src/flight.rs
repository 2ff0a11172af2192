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

pub(crate) struct FetchedHead {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// The origin's own map, for the client that leads the flight to take once
    /// ([`FetchedHead::leader_headers`]); `headers` is a copy of it for the others and
    /// the cache. A copy's field list is exactly as long as its fields, and the
    /// `Cache-Status` every response gets then reallocated it (about 1 KiB copied per
    /// miss); the origin's has room for it.
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
}

impl FetchedHead {
    /// A head whose trailers are still to come. `shared`: other clients may be served
    /// from the fetch, without these fields (those the origin kept from reuse, see
    /// `StoragePolicy::unstored_fields`); their `headers` are then a copy without
    /// them, and the leader takes the map itself, with them.
    pub(crate) fn new(
        status: StatusCode,
        headers: HeaderMap,
        shared: Option<&[String]>,
        outcome: CacheOutcome,
        cache_status: HeaderValue,
        vary: Option<(Vec<http::HeaderName>, CacheKey)>,
    ) -> FetchedHead {
        let (headers, for_leader) = match shared {
            Some(unshared) => {
                let mut copy = headers.clone();
                for name in unshared {
                    copy.remove(name.as_str());
                }
                (copy, Some(headers))
            }
            None => (headers, None),
        };
        FetchedHead {
            status,
            headers,
            for_leader: std::sync::Mutex::new(for_leader),
            shareable: shared.is_some(),
            outcome,
            cache_status,
            vary,
            trailers: Default::default(),
        }
    }

    /// The head's fields for the flight's leader: the origin's map the first time,
    /// a copy after.
    pub(crate) fn leader_headers(&self) -> HeaderMap {
        let taken = self
            .for_leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        taken.unwrap_or_else(|| self.headers.clone())
    }
}
