//! The policy of one stored response: what RFC 9111 said about it when it arrived
//! (see [`crate::freshness`]), kept in a few plain fields, and the answers the cache
//! asks of it later (is it fresh for this request, how old is it, how long until
//! stale).

use std::time::{Duration, SystemTime};

use http::{header, request, response, HeaderMap, HeaderValue};

use crate::adapted::Adapted;
use crate::freshness::{assess, request_directives, satisfies, PolicyOptions};

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
    /// When its age was zero: when it arrived, less the age it arrived with.
    born: SystemTime,
    /// Fresh until this instant.
    fresh_until: SystemTime,
    has_validator: bool,
    storable: bool,
    /// Unqualified `no-cache`: every reuse is validated first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    validate_always: bool,
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: a client's `max-stale`
    /// does not make it usable once stale.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    forbids_stale: bool,
    /// Fields a qualified `private` or `no-cache` names: not stored (taken out when
    /// the object is made, so a stored policy has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unstored_fields: Vec<String>,
}

impl StoragePolicy {
    /// The policy of a response to a request, received at `response_time`, with
    /// default options but the share of the time since `Last-Modified` that a response
    /// without explicit freshness stays fresh.
    pub fn new(
        request: &request::Parts,
        response: &response::Parts,
        response_time: SystemTime,
        heuristic_fraction: f32,
    ) -> StoragePolicy {
        let options = PolicyOptions {
            heuristic: crate::freshness::Heuristic {
                fraction: heuristic_fraction,
                ..Default::default()
            },
            ..PolicyOptions::default()
        };
        Self::with_options(request, response, response_time, &options)
    }

    /// The policy of a response to a request, received at `response_time`.
    pub fn with_options(
        request: &request::Parts,
        response: &response::Parts,
        response_time: SystemTime,
        options: &PolicyOptions<'_>,
    ) -> StoragePolicy {
        let a = assess(request, response, response_time, options);
        let born = response_time
            .checked_sub(a.initial_age)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        StoragePolicy {
            born,
            fresh_until: born + a.lifetime,
            has_validator: a.has_validator,
            storable: a.storable,
            validate_always: a.validate_always,
            forbids_stale: a.forbids_stale,
            unstored_fields: a.unstored_fields,
        }
    }

    /// Heap bytes it keeps (for the memory tier's charge).
    pub(crate) fn heap_size(&self) -> usize {
        self.unstored_fields.capacity() * std::mem::size_of::<String>()
            + self
                .unstored_fields
                .iter()
                .map(String::capacity)
                .sum::<usize>()
    }

    /// The fields a shared cache must not reuse (`private="…"`, `no-cache="…"`): left
    /// out of what is stored, and of what other clients are sent from the fetch.
    pub fn unstored_fields(&self) -> &[String] {
        &self.unstored_fields
    }

    /// Takes the fields that must not be stored (see [`CachedObject::new`]).
    ///
    /// [`CachedObject::new`]: crate::CachedObject::new
    pub(crate) fn take_unstored_fields(&mut self) -> Vec<String> {
        std::mem::take(&mut self.unstored_fields)
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
        self.is_storable()
            && ((self.fresh_until > now && !self.validate_always) || self.has_validator)
    }

    /// May the stored response answer `request` at `now` without contacting the origin?
    pub fn freshness(&self, request: &request::Parts, now: SystemTime) -> Freshness {
        if self.validate_always {
            return Freshness::Stale;
        }
        let h = &request.headers;
        let fresh = if !h.contains_key(header::CACHE_CONTROL) && !h.contains_key(header::PRAGMA) {
            // The common case: no request directives, so only the response's lifetime counts.
            now < self.fresh_until
        } else {
            satisfies(
                &request_directives(h),
                self.forbids_stale,
                self.lifetime(),
                self.age(now),
            )
        };
        if fresh {
            Freshness::Fresh
        } else {
            Freshness::Stale
        }
    }

    /// Whether it is fresh by its own lifetime, whatever a request asks: a request's
    /// `no-cache` or `max-age` may still send a fresh copy to be validated.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        !self.validate_always && now < self.fresh_until
    }

    /// Its freshness lifetime.
    fn lifetime(&self) -> Duration {
        self.fresh_until
            .duration_since(self.born)
            .unwrap_or_default()
    }

    /// The value of the `Age` header to send now.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.born).unwrap_or_default()
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
        options: &PolicyOptions<'_>,
    ) -> StoragePolicy {
        let mut parts = http::Response::new(()).into_parts().0;
        parts.status = status;
        parts.headers = headers.clone();
        Self::with_options(request, &parts, now, options)
    }
}

/// Headers a 304 must not overwrite in the stored response (RFC 9111 §3.2): the
/// framing and content coding of the body Weir holds (it did not change), what the
/// recipient processes and drops (`Content-Range`), and the fields specific to the
/// proxy a request went through, which a cache never stores (§3.1).
const KEEP_ON_UPDATE: [&str; 7] = [
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "content-range",
    "etag",
    "proxy-authenticate",
    "proxy-authentication-info",
];

/// Replaces the stored headers with those a 304 received at `now` carries (RFC 9111
/// §4.3.4), except the fields modules set on the stored response (`adapted`): those
/// stay, and a `Vary` a module widened only gains the names the 304 adds.
pub(crate) fn merge_not_modified(
    stored: &HeaderMap,
    not_modified: &HeaderMap,
    adapted: Option<&Adapted>,
    now: std::time::SystemTime,
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
    // The 304 is the newer message, and the age of the updated response is its age
    // (§4.2.3): an `Age` the stored response arrived with must not make it old again.
    // A 304 without `Date` was generated when it arrived (RFC 9110 §6.6.1).
    if !not_modified.contains_key(header::AGE) {
        merged.remove(header::AGE);
    }
    if !not_modified.contains_key(header::DATE) {
        let date = httpdate::fmt_http_date(now);
        merged.insert(
            header::DATE,
            HeaderValue::from_str(&date).expect("an HTTP date is a valid value"),
        );
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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn a_304_updates_what_it_may_and_leaves_the_body_description() {
        let stored = headers(&[
            ("content-length", "5"),
            ("content-type", "text/plain"),
            ("age", "100"),
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("cache-control", "max-age=1"),
        ]);
        let not_modified = headers(&[
            ("content-length", "0"),
            ("content-encoding", "gzip"),
            ("content-range", "bytes 0-1/5"),
            ("proxy-authentication-info", "nextnonce=\"x\""),
            ("cache-control", "max-age=60"),
            ("x-new", "1"),
        ]);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let merged = merge_not_modified(&stored, &not_modified, None, now);
        assert_eq!(merged["content-length"], "5");
        assert!(!merged.contains_key("content-encoding"));
        assert!(!merged.contains_key("content-range"));
        assert!(!merged.contains_key("proxy-authentication-info"));
        assert_eq!(merged["cache-control"], "max-age=60");
        assert_eq!(merged["x-new"], "1");
        assert!(
            !merged.contains_key("age"),
            "the stored Age is the old message's"
        );
        assert_eq!(merged["date"], httpdate::fmt_http_date(now).as_str());
        let dated = headers(&[("date", "Mon, 07 Nov 1994 08:49:37 GMT"), ("age", "3")]);
        let merged = merge_not_modified(&stored, &dated, None, now);
        assert_eq!(merged["date"], "Mon, 07 Nov 1994 08:49:37 GMT");
        assert_eq!(merged["age"], "3");
    }

    #[test]
    fn age_values() {
        assert_eq!(age_value(Duration::from_secs(0)), "0");
        assert_eq!(age_value(Duration::from_millis(59_999)), "59");
        assert_eq!(age_value(Duration::from_secs(60)), "60");
        assert_eq!(age_value(Duration::from_secs(86_400)), "86400");
    }
}
