//! Answering a client's own conditional request from a response Weir holds
//! (RFC 9110 §13.1.2 and §13.2.2).

use std::time::SystemTime;

use http::{header, HeaderMap, HeaderName, StatusCode};

/// The request fields [`not_modified`] reads: a caller that keeps only these for it
/// (rather than the whole request) gets the same answer.
pub const CONDITION_FIELDS: [HeaderName; 2] = [header::IF_NONE_MATCH, header::IF_MODIFIED_SINCE];

/// Whether a GET with these request headers is answered 304 by a response with this
/// status and these headers: `If-None-Match` (weak comparison) when present, else
/// `If-Modified-Since` against `Last-Modified`, or `Date` when there is none.
pub fn not_modified(status: StatusCode, response: &HeaderMap, request: &HeaderMap) -> bool {
    if status != StatusCode::OK {
        return false;
    }
    if let Some(inm) = request.get(header::IF_NONE_MATCH) {
        let Some(etag) = response.get(header::ETAG).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let Ok(inm) = inm.to_str() else { return false };
        return inm.trim() == "*" || inm.split(',').any(|c| weak_eq(c.trim(), etag.trim()));
    }
    let date = |v: &http::HeaderValue| -> Option<SystemTime> {
        httpdate::parse_http_date(v.to_str().ok()?).ok()
    };
    // Most requests have no condition: the response's date is not parsed for them.
    let Some(since) = request.get(header::IF_MODIFIED_SINCE).and_then(date) else {
        return false;
    };
    // A response without Last-Modified was last modified no later than its Date
    // (RFC 9111 §4.3.2).
    let modified = response
        .get(header::LAST_MODIFIED)
        .or_else(|| response.get(header::DATE));
    modified
        .and_then(date)
        .is_some_and(|modified| modified <= since)
}

/// Whether an origin's 304, which answered other conditions than the client's, also
/// answers the client's own conditional GET: its `ETag` is one the client's
/// `If-None-Match` names, or, without `If-None-Match`, its `Last-Modified` is no later
/// than the client's `If-Modified-Since`. A 304 without the validator in question
/// answers nothing.
pub fn not_modified_answers(not_modified: &HeaderMap, request: &HeaderMap) -> bool {
    if let Some(inm) = request.get(header::IF_NONE_MATCH) {
        let (Ok(inm), Some(etag)) = (
            inm.to_str(),
            not_modified.get(header::ETAG).and_then(|v| v.to_str().ok()),
        ) else {
            return false;
        };
        return inm.trim() == "*" || inm.split(',').any(|c| weak_eq(c.trim(), etag.trim()));
    }
    let date = |v: &http::HeaderValue| -> Option<SystemTime> {
        httpdate::parse_http_date(v.to_str().ok()?).ok()
    };
    match (
        request.get(header::IF_MODIFIED_SINCE).and_then(date),
        not_modified.get(header::LAST_MODIFIED).and_then(date),
    ) {
        (Some(since), Some(modified)) => modified <= since,
        _ => false,
    }
}

/// Weak comparison (RFC 9110 §8.8.3.2): the same opaque tag, `W/` ignored.
pub(crate) fn weak_eq(a: &str, b: &str) -> bool {
    a.trim_start_matches("W/") == b.trim_start_matches("W/")
}

/// Fields a 304 carries from the response it stands for (RFC 9110 §15.4.5).
const NOT_MODIFIED_FIELDS: [HeaderName; 8] = [
    header::CACHE_CONTROL,
    header::CONTENT_LOCATION,
    header::DATE,
    header::ETAG,
    header::EXPIRES,
    header::VARY,
    header::LAST_MODIFIED,
    header::AGE,
];

/// The headers of a 304 standing for a response with these headers.
pub fn not_modified_headers(response: &HeaderMap) -> HeaderMap {
    let mut h = HeaderMap::new();
    for name in &NOT_MODIFIED_FIELDS {
        for v in response.get_all(name) {
            h.append(name.clone(), v.clone());
        }
    }
    if let Some(via) = response.get(header::VIA) {
        h.insert(header::VIA, via.clone());
    }
    h
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
    fn etags_compare_weakly() {
        let resp = headers(&[("etag", "\"v1\"")]);
        assert!(not_modified(
            StatusCode::OK,
            &resp,
            &headers(&[("if-none-match", "W/\"v1\"")])
        ));
        assert!(not_modified(
            StatusCode::OK,
            &resp,
            &headers(&[("if-none-match", "\"x\", \"v1\"")])
        ));
        assert!(!not_modified(
            StatusCode::OK,
            &resp,
            &headers(&[("if-none-match", "\"v2\"")])
        ));
        assert!(!not_modified(
            StatusCode::NOT_FOUND,
            &resp,
            &headers(&[("if-none-match", "\"v1\"")])
        ));
    }

    #[test]
    fn if_none_match_takes_precedence_over_dates() {
        let resp = headers(&[
            ("etag", "\"v1\""),
            ("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        let req = headers(&[
            ("if-none-match", "\"v2\""),
            ("if-modified-since", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        assert!(!not_modified(StatusCode::OK, &resp, &req));
        let req = headers(&[("if-modified-since", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert!(not_modified(StatusCode::OK, &resp, &req));
    }

    #[test]
    fn an_origin_304_answers_a_client_only_by_its_own_validators() {
        let not_modified = headers(&[
            ("etag", "\"v2\""),
            ("date", "Sun, 06 Nov 1994 09:00:00 GMT"),
        ]);
        let asks = |pairs: &[(&str, &str)]| not_modified_answers(&not_modified, &headers(pairs));
        assert!(asks(&[("if-none-match", "\"v1\", W/\"v2\"")]));
        assert!(!asks(&[("if-none-match", "\"v1\"")]));
        // No Last-Modified in the 304: its Date says nothing about the representation.
        assert!(!asks(&[(
            "if-modified-since",
            "Sun, 06 Nov 1994 10:00:00 GMT"
        )]));
        assert!(!asks(&[]));
        let dated = headers(&[("last-modified", "Sun, 06 Nov 1994 08:00:00 GMT")]);
        let since = headers(&[("if-modified-since", "Sun, 06 Nov 1994 08:00:00 GMT")]);
        assert!(not_modified_answers(&dated, &since));
    }

    #[test]
    fn without_last_modified_the_date_counts() {
        let resp = headers(&[("date", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        let later = headers(&[("if-modified-since", "Sun, 06 Nov 1994 09:00:00 GMT")]);
        let earlier = headers(&[("if-modified-since", "Sun, 06 Nov 1994 08:00:00 GMT")]);
        assert!(not_modified(StatusCode::OK, &resp, &later));
        assert!(!not_modified(StatusCode::OK, &resp, &earlier));
        assert!(!not_modified(StatusCode::OK, &HeaderMap::new(), &later));
    }
}
