//! Serving stale copies (RFC 5861): `stale-while-revalidate` answers at once from a
//! stale copy while it is refreshed in the background; `stale-if-error` answers from a
//! stale copy when the origin fails.

use std::time::{Duration, SystemTime};

use http::{header, HeaderMap};

use crate::cache_control::{delta_seconds, directive};
use crate::object::CachedObject;

/// Which use of a stale copy is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleUse {
    /// Serve it now and validate it in the background.
    WhileRevalidate,
    /// Serve it because the origin could not answer (error status, unreachable,
    /// timed out).
    OnError,
}

impl CachedObject {
    /// May this (stale) copy answer `request` for `usage` at `now`? The window comes
    /// from the response's directive, or failing that `default` (the operator's
    /// setting); `stale-if-error` may also come from the request. Responses that say
    /// `must-revalidate`, `proxy-revalidate`, `s-maxage` or `no-cache` never may, nor
    /// requests that ask for a validated or younger copy.
    pub fn may_serve_stale(
        &self,
        request: &HeaderMap,
        now: SystemTime,
        usage: StaleUse,
        default: Duration,
    ) -> bool {
        let staleness = self.policy.staleness(now);
        if staleness.is_zero() {
            // Not stale by its own lifetime: the request's directives made it so.
            return false;
        }
        let response = &self.headers;
        if [
            "must-revalidate",
            "proxy-revalidate",
            "s-maxage",
            "no-cache",
        ]
        .iter()
        .any(|d| directive(response, d).is_some())
        {
            return false;
        }
        if ["no-cache", "max-age", "min-fresh"]
            .iter()
            .any(|d| directive(request, d).is_some())
            || pragma_no_cache(request)
        {
            return false;
        }
        let name = match usage {
            StaleUse::WhileRevalidate => "stale-while-revalidate",
            StaleUse::OnError => "stale-if-error",
        };
        let mut window = seconds(response, name).unwrap_or(default);
        if usage == StaleUse::OnError {
            if let Some(asked) = seconds(request, name) {
                window = window.max(asked);
            }
        }
        staleness <= window
    }
}

fn seconds(headers: &HeaderMap, name: &str) -> Option<Duration> {
    delta_seconds(&directive(headers, name)?).map(Duration::from_secs)
}

fn pragma_no_cache(headers: &HeaderMap) -> bool {
    !headers.contains_key(header::CACHE_CONTROL)
        && headers
            .get_all(header::PRAGMA)
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"no-cache"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoragePolicy;
    use bytes::Bytes;
    use http::StatusCode;

    fn stored(cc: &str, age: u64) -> CachedObject {
        let request = http::Request::get("http://h/")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let mut response = http::Response::new(()).into_parts().0;
        response
            .headers
            .insert("cache-control", cc.parse().unwrap());
        let then = SystemTime::now() - Duration::from_secs(age);
        let policy = StoragePolicy::new(&request, &response, then, 0.1);
        CachedObject::new(StatusCode::OK, &response.headers, Bytes::new(), policy)
    }

    fn req(cc: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if !cc.is_empty() {
            h.insert("cache-control", cc.parse().unwrap());
        }
        h
    }

    const SWR: StaleUse = StaleUse::WhileRevalidate;
    const SIE: StaleUse = StaleUse::OnError;

    #[test]
    fn windows_come_from_the_response_or_the_default() {
        let now = SystemTime::now();
        let o = stored("max-age=10, stale-while-revalidate=30", 20);
        assert!(o.may_serve_stale(&req(""), now, SWR, Duration::ZERO));
        assert!(!o.may_serve_stale(&req(""), now, SIE, Duration::ZERO));
        let late = stored("max-age=10, stale-while-revalidate=30", 50);
        assert!(!late.may_serve_stale(&req(""), now, SWR, Duration::ZERO));
        let plain = stored("max-age=10", 20);
        assert!(!plain.may_serve_stale(&req(""), now, SIE, Duration::ZERO));
        assert!(plain.may_serve_stale(&req(""), now, SIE, Duration::from_secs(60)));
        assert!(plain.may_serve_stale(&req("stale-if-error=60"), now, SIE, Duration::ZERO));
        // Still fresh: nothing stale to serve.
        let young = stored("max-age=100, stale-while-revalidate=30", 20);
        assert!(!young.may_serve_stale(&req(""), now, SWR, Duration::ZERO));
    }

    #[test]
    fn revalidation_requirements_forbid_it() {
        let now = SystemTime::now();
        for cc in [
            "max-age=10, must-revalidate, stale-if-error=60",
            "max-age=10, proxy-revalidate, stale-if-error=60",
            "max-age=10, s-maxage=10, stale-if-error=60",
        ] {
            assert!(
                !stored(cc, 20).may_serve_stale(&req(""), now, SIE, Duration::ZERO),
                "{cc}"
            );
        }
        let o = stored("max-age=10, stale-while-revalidate=60", 20);
        assert!(!o.may_serve_stale(&req("no-cache"), now, SWR, Duration::ZERO));
        assert!(!o.may_serve_stale(&req("max-age=0"), now, SWR, Duration::ZERO));
    }
}
