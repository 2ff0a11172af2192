//! A stored response: status, headers, body and the policy that says how long it lives.

use std::sync::Arc;
use std::time::SystemTime;

use http::{header, request, response, HeaderMap, HeaderName, StatusCode};

use crate::adapted::Adapted;
use crate::body::Body;
use crate::compact::{copy_headers, heap_size};
use crate::freshness::PolicyOptions;
use crate::policy::{self, Freshness, StoragePolicy};
use crate::vary::vary_names;

/// What the memory tier's map spends per entry besides the object: its entry and
/// hash-table slot, and the allocator's rounding. Measured as resident memory per
/// object over 100,000 objects with the moka map the tier used before, whose entries
/// were larger (docs/operations.md, "Sizing the cache"), so that the configured size
/// is at most the memory the cache holds.
const ENTRY: usize = 512;
/// The object itself and its reference count, and its shared header map's.
const OVERHEAD: usize =
    ENTRY + std::mem::size_of::<CachedObject>() + 16 + std::mem::size_of::<HeaderMap>() + 16;

/// A response head as the cache stores it: its fields copied into one allocation (see
/// `compact`), without `Trailer` (a stored response has no trailers, RFC 9111 §3) and
/// without those a qualified `private` or `no-cache` keeps from reuse. Made when a
/// fill's head arrives and shared: the clients that joined the fill are sent these
/// fields, and the object stored at its end keeps them, copied once.
#[derive(Debug, Clone)]
pub struct StoredHead(Arc<HeaderMap>);

impl StoredHead {
    /// The head of a response whose storage `policy` decided: `headers` must already be
    /// free of hop-by-hop fields.
    pub fn new(headers: &HeaderMap, policy: &StoragePolicy) -> StoredHead {
        let unstored = policy.unstored_fields();
        StoredHead(Arc::new(copy_headers(headers, |n| {
            n != header::TRAILER && !unstored.iter().any(|u| u == n.as_str())
        })))
    }

    /// The fields.
    pub fn headers(&self) -> &HeaderMap {
        &self.0
    }
}

/// A complete response held by the cache. Immutable: a validation makes a new one.
#[derive(Debug, Clone)]
pub struct CachedObject {
    /// The stored status.
    pub status: StatusCode,
    /// The stored response headers (hop-by-hop headers already removed). Shared: a
    /// fill's clients that joined it are sent these very fields while it is stored
    /// ([`StoredHead`]), so the fill copies them once.
    pub headers: Arc<HeaderMap>,
    /// The body, in memory or in a file of the disk tier.
    pub body: Body,
    /// How long it may be reused.
    pub policy: StoragePolicy,
    /// The request headers it varies on (from `Vary`), lowercase.
    pub vary: Vec<HeaderName>,
    /// Invalidation tags: those modules attached, and those of its tag headers
    /// (`Surrogate-Key`, `Cache-Tag`) once stored.
    pub tags: Vec<String>,
    /// What modules changed in it, with the origin's values (boxed: most objects have none).
    adapted: Option<Box<Adapted>>,
    weight: u32,
}

impl CachedObject {
    /// A stored response. `headers` must already be free of hop-by-hop fields; they are
    /// copied (borrowed, so that a fill can store the very head its clients are sent),
    /// without `Trailer`: a stored response has no trailers (RFC 9111 §3), so it
    /// announces none.
    pub fn new(
        status: StatusCode,
        headers: &HeaderMap,
        body: impl Into<Body>,
        policy: StoragePolicy,
    ) -> Self {
        let head = StoredHead::new(headers, &policy);
        CachedObject::with_head(status, head, body, policy)
    }

    /// A stored response whose head was made for it already (by a fill, whose joined
    /// clients were sent the same fields).
    pub fn with_head(
        status: StatusCode,
        head: StoredHead,
        body: impl Into<Body>,
        mut policy: StoragePolicy,
    ) -> Self {
        let body = body.into();
        // Left out of the head already; the policy need not keep them any longer.
        drop(policy.take_unstored_fields());
        let StoredHead(headers) = head;
        let vary = vary_names(&headers);
        // A body in a file costs the memory tier nothing but its handle.
        let body_bytes = body.in_memory().map_or(0, |b| b.len());
        let weight = body_bytes + heap_size(&headers) + policy.heap_size() + OVERHEAD;
        let weight = weight.min(u32::MAX as usize) as u32;
        CachedObject {
            status,
            headers,
            body,
            policy,
            vary,
            tags: Vec::new(),
            adapted: None,
            weight,
        }
    }

    /// The same response with another policy (e.g. a new expiry).
    pub fn with_policy(&self, policy: StoragePolicy) -> CachedObject {
        CachedObject::new(self.status, &self.headers, self.body.clone(), policy)
            .with_tags(self.tags.clone())
            .with_adapted(self.adapted.as_deref().cloned())
    }

    /// The same object, recording what modules changed in it (see [`Adapted`]): a 304
    /// then validates and refreshes it by the origin's own fields.
    pub fn with_adapted(mut self, adapted: Option<Adapted>) -> CachedObject {
        if let Some(a) = &adapted {
            self.weight = self.weight.saturating_add(a.weight());
        }
        self.adapted = adapted.map(Box::new);
        self
    }

    /// What modules changed in it, if anything.
    pub fn adapted(&self) -> Option<&Adapted> {
        self.adapted.as_deref()
    }

    /// The same object with these invalidation tags.
    pub fn with_tags(mut self, tags: Vec<String>) -> CachedObject {
        self.weight = self
            .weight
            .saturating_add(tags.iter().map(|t| tag_cost(t)).sum());
        self.tags = tags;
        self
    }

    /// The same object with `more` tags added to its own (each tag once).
    pub(crate) fn add_tags(mut self, more: Vec<String>) -> CachedObject {
        for tag in more {
            if !self.tags.contains(&tag) {
                self.weight = self.weight.saturating_add(tag_cost(&tag));
                self.tags.push(tag);
            }
        }
        self
    }

    /// Bytes this object is charged in the memory tier: its body, its headers, what its
    /// policy keeps, and the fixed cost of an entry.
    pub fn weight(&self) -> u32 {
        self.weight
    }

    /// Whether `Vary: *` makes it unusable for any other request.
    pub fn varies_on_everything(&self) -> bool {
        self.vary.iter().any(|n| n.as_str() == "*")
    }

    /// May it answer this request now without contacting the origin?
    pub fn freshness(&self, request: &request::Parts, now: SystemTime) -> Freshness {
        self.policy.freshness(request, now)
    }

    /// The headers to send with it now: the stored ones plus a current `Age`.
    pub fn response_headers(&self, now: SystemTime) -> HeaderMap {
        let mut h = HeaderMap::clone(&self.headers);
        h.insert(header::AGE, policy::age_value(self.policy.age(now)));
        h
    }

    /// Adds `If-None-Match` / `If-Modified-Since` for validating this object: the
    /// origin's own validators, where a module changed the stored ones.
    pub fn add_validators(&self, request: &mut HeaderMap) {
        let adapted = self.adapted();
        if let Some(etag) = Adapted::origin_value(adapted, &self.headers, &header::ETAG) {
            request.insert(header::IF_NONE_MATCH, etag.clone());
        }
        if let Some(lm) = Adapted::origin_value(adapted, &self.headers, &header::LAST_MODIFIED) {
            request.insert(header::IF_MODIFIED_SINCE, lm.clone());
        }
    }

    /// Whether it carries a validator (ETag or Last-Modified).
    pub fn has_validator(&self) -> bool {
        self.headers.contains_key(header::ETAG) || self.headers.contains_key(header::LAST_MODIFIED)
    }

    /// The object after the origin answered our validation with 304, or `None` when
    /// the 304 names a different representation (RFC 9111 §4.3.4: a strong ETag, or
    /// failing that a Last-Modified, that disagrees with the stored one). A 304 without
    /// validators confirms the copy it was asked about: Weir sent the conditions itself.
    /// Where modules changed the stored response, the 304 is compared with the
    /// origin's own validators and does not replace the fields the modules set.
    pub fn refreshed(
        &self,
        request: &request::Parts,
        not_modified: &response::Parts,
        now: SystemTime,
        options: &PolicyOptions<'_>,
    ) -> Option<CachedObject> {
        let new = &not_modified.headers;
        let adapted = self.adapted();
        let ours = |name: &HeaderName| {
            Adapted::origin_value(adapted, &self.headers, name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let agrees = match (text(new, header::ETAG), ours(&header::ETAG)) {
            (Some(a), Some(b)) => crate::conditional::weak_eq(a, b),
            (Some(_), None) => false,
            (None, _) => match (
                text(new, header::LAST_MODIFIED),
                ours(&header::LAST_MODIFIED),
            ) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            },
        };
        if !agrees {
            return None;
        }
        let headers = policy::merge_not_modified(&self.headers, new, adapted, now);
        let policy = StoragePolicy::refreshed(request, self.status, &headers, now, options);
        // The tags and what modules changed go with it: neither is in the 304.
        Some(
            CachedObject::new(self.status, &headers, self.body.clone(), policy)
                .with_tags(self.tags.clone())
                .with_adapted(adapted.cloned()),
        )
    }

    /// Would the client's own conditional request be answered 304 by this object?
    pub fn satisfies_conditional(&self, request: &HeaderMap) -> bool {
        crate::conditional::not_modified(self.status, &self.headers, request)
    }
}

/// A tag's string and its slot in the object's list.
fn tag_cost(tag: &str) -> u32 {
    (tag.len() + std::mem::size_of::<String>()) as u32
}

fn text(h: &HeaderMap, name: HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

impl CachedObject {
    /// The headers of a 304 answer to a client's conditional request.
    pub fn not_modified_headers(&self, now: SystemTime) -> HeaderMap {
        let mut h = crate::conditional::not_modified_headers(&self.headers);
        h.insert(header::AGE, policy::age_value(self.policy.age(now)));
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::HeaderValue;

    /// A response head whose values are slices of one large buffer, as hyper parses
    /// them from a connection's read buffer.
    fn parsed(buffer: &Bytes) -> (request::Parts, response::Parts) {
        let value = |range: std::ops::Range<usize>| {
            HeaderValue::from_maybe_shared(buffer.slice(range)).expect("a valid value")
        };
        let mut request = http::Request::new(()).into_parts().0;
        request.headers.insert(header::HOST, value(0..4));
        request.headers.insert(header::USER_AGENT, value(4..8));
        let mut response = http::Response::new(()).into_parts().0;
        response.headers.insert(header::CACHE_CONTROL, value(8..19));
        response.headers.insert(header::ETAG, value(20..24));
        response.headers.insert(header::SERVER, value(24..28));
        (request, response)
    }

    #[test]
    fn a_stored_object_does_not_keep_the_buffer_its_head_was_parsed_from() {
        let mut text = b"hostuagtmax-age=600 \"e1\"ngnx".to_vec();
        text.resize(64 << 10, b' ');
        let buffer = Bytes::from(text);
        let (request, response) = parsed(&buffer);
        let now = SystemTime::now();
        let policy = StoragePolicy::new(&request, &response, now, 0.1);
        let object = CachedObject::new(
            StatusCode::OK,
            &response.headers,
            Bytes::from_static(b"body"),
            policy,
        );
        drop((request, response));
        assert!(
            buffer.is_unique(),
            "the object or its policy still refers to the parsed buffer"
        );
        assert_eq!(object.headers[header::ETAG], "\"e1\"");
        assert_eq!(object.freshness(&parsed(&buffer).0, now), Freshness::Fresh);
        // The charge covers the fixed cost, the body and the headers.
        assert!(object.weight() as usize >= OVERHEAD + 4 + 3 * 28);
    }

    #[test]
    fn a_stored_object_announces_no_trailers() {
        let buffer = Bytes::from_static(b"hostuagtmax-age=600 \"e1\"ngnx");
        let (request, mut response) = parsed(&buffer);
        response
            .headers
            .insert(header::TRAILER, http::HeaderValue::from_static("x-digest"));
        let policy = StoragePolicy::new(&request, &response, SystemTime::now(), 0.1);
        let object = CachedObject::new(StatusCode::OK, &response.headers, Bytes::new(), policy);
        assert!(!object.headers.contains_key(header::TRAILER));
        assert_eq!(object.headers[header::ETAG], "\"e1\"");
        // The head it was copied from is left as it was.
        assert_eq!(response.headers[header::TRAILER], "x-digest");
    }
}
