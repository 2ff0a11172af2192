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
