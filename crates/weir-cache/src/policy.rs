//! RFC 9111 decisions, through `http-cache-semantics`, wrapped so the rest of Weir
//! does not depend on its API (which changes between major versions).
//!
//! The crate decides storability and freshness. Weir builds the headers it sends
//! itself: the crate's `cached_response` keeps one value per header name (losing
//! repeated `Set-Cookie` or `Vary` lines) and rewrites `Date`, which a cache must not.

use std::time::{Duration, SystemTime};

use http::{header, request, response, HeaderMap, HeaderName, HeaderValue};
use http_cache_semantics::{BeforeRequest, CacheOptions, CachePolicy};

use crate::adapted::Adapted;
use crate::compact::{copy_headers, heap_size};

/// Whether a stored response may be reused for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Reuse it as is.
    Fresh,
    /// Validate it with the origin first (or serve it stale where allowed).
    Stale,
}

/// The storage and freshness policy of one stored response.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoragePolicy {
    inner: CachePolicy,
    /// Fresh until this instant, for requests without their own cache directives.
    fresh_until: SystemTime,
    has_validator: bool,
    /// `CachePolicy::is_storable`, asked once when built (each call parses again).
    #[serde(default = "unknown_storable")]
    storable: bool,
    /// Heap bytes of what the crate keeps (fields and parsed directives), for the
    /// memory tier's charge. Absent from entries written before it was recorded.
    #[serde(default = "unknown_kept")]
    kept_bytes: u32,
}

/// Entries written before `storable` was recorded were stored, so storable.
fn unknown_storable() -> bool {
    true
}

/// The charge of a policy read from an older disk entry: about what two small header
/// maps and their directives cost.
fn unknown_kept() -> u32 {
    1536
}

impl StoragePolicy {
    /// The policy of a response to a request, received at `response_time`.
    /// `heuristic_fraction` is the share of the time since Last-Modified that a response
    /// without explicit freshness is considered fresh for.
    pub fn new(
        request: &request::Parts,
        response: &response::Parts,
        response_time: SystemTime,
        heuristic_fraction: f32,
    ) -> StoragePolicy {
        let opts = CacheOptions {
            shared: true,
            cache_heuristic: heuristic_fraction,
            ..CacheOptions::default()
        };
        let kept = KeptFields::of(request, response);
        let inner = CachePolicy::new_options(&kept, &kept, response_time, opts);
        let fresh_until = response_time + inner.time_to_live(response_time);
        let has_validator = response.headers.contains_key(http::header::ETAG)
            || response.headers.contains_key(http::header::LAST_MODIFIED);
        StoragePolicy {
            storable: inner.is_storable(),
            inner,
            fresh_until,
            has_validator,
            kept_bytes: kept.heap_size().min(u32::MAX as usize) as u32,
        }
    }

    /// Heap bytes it keeps (for the memory tier's charge).
    pub(crate) fn heap_size(&self) -> usize {
        self.kept_bytes as usize
    }

    /// The same policy with its freshness set by a module: fresh for `ttl` from `now`.
    pub fn with_time_to_live(mut self, now: SystemTime, ttl: Duration) -> StoragePolicy {
        self.fresh_until = now + ttl;
        self
    }

    /// May this response be stored by a shared cache?
    pub fn is_storable(&self) -> bool {
        self.storable
    }

    /// Is it worth storing: storable, and either fresh for a while or revalidatable?
    pub fn is_worth_storing(&self, now: SystemTime) -> bool {
        self.is_storable() && (self.fresh_until > now || self.has_validator)
    }

    /// May the stored response answer `request` at `now` without contacting the origin?
    pub fn freshness(&self, request: &request::Parts, now: SystemTime) -> Freshness {
        let h = &request.headers;
        if !h.contains_key(http::header::CACHE_CONTROL) && !h.contains_key(http::header::PRAGMA) {
            // The common case: no request directives, so only the response's lifetime counts.
            return if now < self.fresh_until {
                Freshness::Fresh
            } else {
                Freshness::Stale
            };
        }
        match self.inner.before_request(&FreshnessProbe(request), now) {
            BeforeRequest::Fresh(_) => Freshness::Fresh,
            BeforeRequest::Stale { .. } => Freshness::Stale,
        }
    }

    /// The value of the `Age` header to send now.
    pub fn age(&self, now: SystemTime) -> Duration {
        self.inner.age(now)
    }

    /// How long the response has been stale (zero while it is fresh).
    pub fn staleness(&self, now: SystemTime) -> Duration {
        now.duration_since(self.fresh_until).unwrap_or_default()
    }

    /// How much longer the response is fresh.
    pub fn time_to_live(&self, now: SystemTime) -> Duration {
        self.fresh_until.duration_since(now).unwrap_or_default()
    }

    /// The policy of a stored response whose headers were just updated by a 304.
    pub fn refreshed(
        request: &request::Parts,
        status: http::StatusCode,
        headers: &HeaderMap,
        now: SystemTime,
        heuristic_fraction: f32,
    ) -> StoragePolicy {
        let mut parts = http::Response::new(()).into_parts().0;
        parts.status = status;
        parts.headers = headers.clone();
        Self::new(request, &parts, now, heuristic_fraction)
    }
}

/// Response fields the crate reads after the policy is built. It keeps whatever it is
/// given for as long as the object is cached, so it is given only these.
const RESPONSE_FIELDS: [HeaderName; 8] = [
    header::CACHE_CONTROL,
    header::PRAGMA,
    header::EXPIRES,
    header::DATE,
    header::AGE,
    header::LAST_MODIFIED,
    header::ETAG,
    header::VARY,
];

/// What the crate keeps of a request and its response: the fields it reads later, in
/// one allocation each (see `compact`), and no URI (it only compares URIs through
/// [`FreshnessProbe`], which the cache key makes equal).
struct KeptFields {
    method: http::Method,
    status: http::StatusCode,
    request: HeaderMap,
    response: HeaderMap,
}

impl KeptFields {
    fn of(request: &request::Parts, response: &response::Parts) -> KeptFields {
        let vary = crate::vary::vary_names(&response.headers);
        let request_fields = copy_headers(&request.headers, |n| {
            n == header::HOST
                || n == header::AUTHORIZATION
                || n == header::CACHE_CONTROL
                || n == header::PRAGMA
                || vary.contains(n)
        });
        let mut response_fields = copy_headers(&response.headers, |n| RESPONSE_FIELDS.contains(n));
        // Only its presence counts (a shared cache does not reuse such a response
        // without `public`); the cookie itself need not be kept.
        if response.headers.contains_key(header::SET_COOKIE) {
            response_fields.insert(header::SET_COOKIE, HeaderValue::from_static(""));
        }
        KeptFields {
            method: request.method.clone(),
            status: response.status,
            request: request_fields,
            response: response_fields,
        }
    }
}

impl KeptFields {
    /// What the crate's copy costs on the heap: the two maps, and its parsed
    /// `Cache-Control` directives (a table per message that has any, and a string or
    /// two per directive).
    fn heap_size(&self) -> usize {
        let directives = |h: &HeaderMap| -> usize {
            let n: usize = h
                .get_all(header::CACHE_CONTROL)
                .iter()
                .map(|v| v.as_bytes().split(|&b| b == b',').count())
                .sum();
            if n == 0 {
                0
            } else {
                160 + n * 96
            }
        };
        heap_size(&self.request)
            + heap_size(&self.response)
            + directives(&self.request)
            + directives(&self.response)
    }
}

impl http_cache_semantics::RequestLike for KeptFields {
    fn uri(&self) -> http::Uri {
        http::Uri::from_static("/")
    }
    fn is_same_uri(&self, _other: &http::Uri) -> bool {
        true
    }
    fn method(&self) -> &http::Method {
        &self.method
    }
    fn headers(&self) -> &HeaderMap {
        &self.request
    }
}

impl http_cache_semantics::ResponseLike for KeptFields {
    fn status(&self) -> http::StatusCode {
        self.status
    }
    fn headers(&self) -> &HeaderMap {
        &self.response
    }
}

/// The crate compares the request's URI and Host with the stored request's, which the
/// cache key already guarantees; this view presents only what freshness depends on.
struct FreshnessProbe<'a>(&'a request::Parts);

impl http_cache_semantics::RequestLike for FreshnessProbe<'_> {
    fn uri(&self) -> http::Uri {
        self.0.uri.clone()
    }
    fn is_same_uri(&self, _other: &http::Uri) -> bool {
        true
    }
    fn method(&self) -> &http::Method {
        &http::Method::GET
    }
    fn headers(&self) -> &HeaderMap {
        &self.0.headers
    }
}

/// Headers a 304 must not overwrite in the stored response (RFC 9111 §3.2 lets a cache
/// keep its own framing; the body did not change).
const KEEP_ON_UPDATE: [&str; 5] = [
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "content-range",
    "etag",
];

/// Replaces the stored headers with those a 304 carries (RFC 9111 §4.3.4), except
/// the fields modules set on the stored response (`adapted`): those stay, and a `Vary`
/// a module widened only gains the names the 304 adds.
pub(crate) fn merge_not_modified(
    stored: &HeaderMap,
    not_modified: &HeaderMap,
    adapted: Option<&Adapted>,
) -> HeaderMap {
    let mut merged = stored.clone();
    for name in not_modified.keys() {
        if KEEP_ON_UPDATE.contains(&name.as_str()) {
            continue;
        }
        if adapted.is_some_and(|a| a.changed(name)) {
            if name == http::header::VARY {
                widen_vary(&mut merged, not_modified);
            }
            continue;
        }
        merged.remove(name);
        for v in not_modified.get_all(name) {
            merged.append(name.clone(), v.clone());
        }
    }
    merged
}

/// Adds to `merged`'s `Vary` the names of `from`'s that it lacks.
fn widen_vary(merged: &mut HeaderMap, from: &HeaderMap) {
    let have = crate::vary::vary_names(merged);
    if have.iter().any(|n| n.as_str() == "*") {
        return;
    }
    for name in crate::vary::vary_names(from) {
        if !have.contains(&name) {
            let value = HeaderValue::from_str(name.as_str()).expect("a header name is a value");
            merged.append(http::header::VARY, value);
        }
    }
}

/// Formats seconds for an `Age` header. Ages under a minute, the common case for
/// popular objects, come from a table instead of a fresh allocation on every hit.
pub(crate) fn age_value(age: Duration) -> HeaderValue {
    const SMALL: [&str; 60] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
        "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
        "32", "33", "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46",
        "47", "48", "49", "50", "51", "52", "53", "54", "55", "56", "57", "58", "59",
    ];
    match SMALL.get(age.as_secs() as usize) {
        Some(s) => HeaderValue::from_static(s),
        None => HeaderValue::from(age.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_values() {
        assert_eq!(age_value(Duration::from_secs(0)), "0");
        assert_eq!(age_value(Duration::from_millis(59_999)), "59");
        assert_eq!(age_value(Duration::from_secs(60)), "60");
        assert_eq!(age_value(Duration::from_secs(86_400)), "86400");
    }
}
