//! RFC 9111's arithmetic for a shared cache: may a response be stored (§3), how long is
//! it fresh (§4.2.1, §4.2.2), how old was it when it arrived (§4.2.3), and may a stored
//! copy answer a request that carries its own directives (§5.2.1).
//!
//! It reads headers through [`crate::cache_control`], [`crate::targeted`] and
//! [`crate::directives`], and knows nothing of stored objects.

use std::time::{Duration, SystemTime};

use http::{header, request, response, HeaderMap, HeaderName, StatusCode};

use crate::cache_control::{delta_seconds, directives, Directives};
use crate::directives::{FieldScope, RequestDirectives, ResponseDirectives};
use crate::head_fields::{RequestFields, ResponseFields};
use crate::targeted::targeted_directives;

/// What the operator decides about storing and freshness.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyOptions<'a> {
    /// The heuristic lifetime of a response without explicit freshness (RFC 9111
    /// §4.2.2), as Squid's `refresh_pattern` shapes it.
    pub heuristic: Heuristic,
    /// Targeted fields (RFC 9213) that this cache obeys instead of `Cache-Control` and
    /// `Expires`, most specific first; empty to obey only `Cache-Control`.
    pub targeted_fields: &'a [HeaderName],
    /// Refuse to store responses that set cookies, whatever their freshness, unless a
    /// qualified `private` or `no-cache` keeps `Set-Cookie` out of the stored copy.
    pub refuse_set_cookie: bool,
}

/// How long a response without explicit freshness stays fresh: `fraction` of the time
/// since its `Last-Modified`, at least `min` and at most `max`; `min` when it has no
/// `Last-Modified`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heuristic {
    /// The share of the time since `Last-Modified`.
    pub fraction: f32,
    /// The shortest heuristic lifetime.
    pub min: Duration,
    /// The longest heuristic lifetime.
    pub max: Duration,
}

/// Squid's default cap on a heuristic lifetime: three days.
pub const HEURISTIC_MAX: Duration = Duration::from_secs(3 * 24 * 3600);

impl Default for Heuristic {
    fn default() -> Self {
        Heuristic {
            fraction: 0.1,
            min: Duration::ZERO,
            max: HEURISTIC_MAX,
        }
    }
}

/// What RFC 9111 says about one response, as the policy stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// A shared cache may store it.
    pub storable: bool,
    /// Its freshness lifetime.
    pub lifetime: Duration,
    /// Its corrected initial age when it arrived.
    pub initial_age: Duration,
    /// Unqualified `no-cache`: every reuse must be validated first.
    pub validate_always: bool,
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: never served stale.
    pub forbids_stale: bool,
    /// Fields a qualified `private` or `no-cache` names: they are not stored.
    pub unstored_fields: Vec<String>,
    /// It has `ETag` or `Last-Modified`, so a stale copy can be validated.
    pub has_validator: bool,
}

/// Status codes whose responses are heuristically cacheable (RFC 9110 §15.1).
const HEURISTIC_STATUSES: [u16; 12] = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501];

/// Assesses `response`, received at `response_time`, to `request`.
pub fn assess(
    request: &request::Parts,
    response: &response::Parts,
    response_time: SystemTime,
    options: &PolicyOptions<'_>,
) -> Assessment {
    let headers = &response.headers;
    let fields = ResponseFields::of(headers, options.targeted_fields);
    let (cc, targeted) = response_directives(&fields, headers, options);
    let date = fields.date.and_then(date_value);
    let explicit = explicit_lifetime(&cc, &fields, targeted, date, response_time);
    let status = response.status;
    let heuristic_status = HEURISTIC_STATUSES.contains(&status.as_u16());
    let lifetime = match explicit {
        Some(l) => l,
        None if heuristic_status || cc.public => {
            heuristic(&fields, date.unwrap_or(response_time), &options.heuristic)
        }
        None => Duration::ZERO,
    };
    let storable = storable(request, response, &cc, &fields, explicit.is_some(), options);
    let mut unstored_fields = Vec::new();
    for scope in [&cc.private, &cc.no_cache] {
        if let FieldScope::Fields(names) = scope {
            unstored_fields.extend(names.iter().cloned());
        }
    }
    Assessment {
        storable,
        lifetime,
        initial_age: initial_age(&fields, date, response_time),
        validate_always: cc.no_cache.is_whole(),
        forbids_stale: cc.forbids_stale(),
        unstored_fields,
        has_validator: fields.etag || fields.last_modified.is_some(),
    }
}

/// The response's directives, and whether they are a targeted field's: those of the
/// first targeted field this cache obeys that the response has, else its
/// `Cache-Control` (from the one line the pass found, or every line when it has more).
fn response_directives(
    fields: &ResponseFields<'_>,
    headers: &HeaderMap,
    options: &PolicyOptions<'_>,
) -> (ResponseDirectives, bool) {
    let targeted = match fields.targeted {
        true => targeted_directives(headers, options.targeted_fields),
        false => None,
    };
    if let Some(ds) = targeted {
        return (ResponseDirectives::read(ds.iter().cloned()), true);
    }
    let cc = match fields.more_cache_control {
        false => {
            ResponseDirectives::read(fields.cache_control.into_iter().flat_map(Directives::of))
        }
        true => ResponseDirectives::read(directives(headers)),
    };
    (cc, false)
}

/// Whether a response gives its freshness explicitly (`s-maxage`, `max-age` or
/// `Expires`, or the targeted field this cache obeys), as a POST response must to
/// answer later GETs (RFC 9110 §9.3.3).
pub fn has_explicit_freshness(headers: &HeaderMap, options: &PolicyOptions<'_>) -> bool {
    let fields = ResponseFields::of(headers, options.targeted_fields);
    let (cc, targeted) = response_directives(&fields, headers, options);
    let now = SystemTime::now();
    explicit_lifetime(&cc, &fields, targeted, None, now).is_some()
}

/// RFC 9111 §3 for a shared cache, with §5.2.2.3 (`must-understand`) and the
/// operator's cookie rule.
fn storable(
    request: &request::Parts,
    response: &response::Parts,
    cc: &ResponseDirectives,
    fields: &ResponseFields<'_>,
    explicit: bool,
    options: &PolicyOptions<'_>,
) -> bool {
    let status = response.status;
    // A 206 needs the partial-content rules, a 304 is an update, not a response to keep.
    if status.is_informational()
        || status == StatusCode::PARTIAL_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return false;
    }
    let asked = RequestFields::of(&request.headers);
    if (asked.cache_control || asked.pragma) && request_directives(&request.headers).no_store {
        return false;
    }
    if cc.must_understand {
        if !understood(status) {
            return false;
        }
    } else if cc.no_store {
        return false;
    }
    if cc.private.is_whole() {
        return false;
    }
    if asked.authorization && !(cc.public || cc.must_revalidate || cc.s_maxage.is_some()) {
        return false;
    }
    if options.refuse_set_cookie && fields.set_cookie && !keeps_out_cookies(cc) {
        return false;
    }
    explicit || cc.public || HEURISTIC_STATUSES.contains(&status.as_u16())
}

/// Whether a qualified `private` or `no-cache` names `Set-Cookie`, so the stored copy
/// would not carry anyone's cookie: the origin's own way to share the rest.
fn keeps_out_cookies(cc: &ResponseDirectives) -> bool {
    [&cc.private, &cc.no_cache]
        .into_iter()
        .any(|scope| match scope {
            FieldScope::Fields(names) => names.iter().any(|n| n == "set-cookie"),
            _ => false,
        })
}

/// Status codes whose caching rules Weir implements (for `must-understand`).
fn understood(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 300 | 301 | 302 | 303 | 307 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// The explicit lifetime: `s-maxage`, then `max-age`, then `Expires` minus `Date`
/// (§4.2.1). An invalid `Expires` means already expired (§5.3), as does an invalid
/// freshness directive.
fn explicit_lifetime(
    cc: &ResponseDirectives,
    fields: &ResponseFields<'_>,
    targeted: bool,
    date: Option<SystemTime>,
    response_time: SystemTime,
) -> Option<Duration> {
    if cc.invalid_freshness {
        return Some(Duration::ZERO);
    }
    if let Some(l) = cc.s_maxage.or(cc.max_age) {
        return Some(l);
    }
    if targeted {
        // A targeted field replaces `Expires` too (RFC 9213 §2.2).
        return None;
    }
    match parse_date(fields.expires?) {
        Some(expires) => Some(
            expires
                .duration_since(date.unwrap_or(response_time))
                .unwrap_or_default(),
        ),
        None => Some(Duration::ZERO),
    }
}

/// §4.2.2: a fraction of the time since `Last-Modified`, within the rule's bounds.
fn heuristic(fields: &ResponseFields<'_>, date: SystemTime, rule: &Heuristic) -> Duration {
    let from_modified = match fields.last_modified.and_then(parse_date) {
        Some(modified) => date
            .duration_since(modified)
            .unwrap_or_default()
            .mul_f32(rule.fraction.max(0.0)),
        None => Duration::ZERO,
    };
    from_modified.min(rule.max).max(rule.min.min(rule.max))
}

/// §4.2.3 with the request time unknown (taken as the response time): the larger of
/// the apparent age and the `Age` the response carries (its first value, §5.1).
fn initial_age(
    fields: &ResponseFields<'_>,
    date: Option<SystemTime>,
    response_time: SystemTime,
) -> Duration {
    let apparent = date
        .and_then(|d| response_time.duration_since(d).ok())
        .unwrap_or_default();
    let age = fields
        .age
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.split(',').next())
        .and_then(|s| delta_seconds(s.trim()))
        .map(Duration::from_secs)
        .unwrap_or_default();
    apparent.max(age)
}

/// The response's `Date`, parsed (`None` when absent or not a valid HTTP-date).
#[cfg(test)]
fn response_date(headers: &HeaderMap) -> Option<SystemTime> {
    date_value(headers.get(header::DATE)?)
}

/// A `Date` value, parsed (`None` when not a valid HTTP-date). The last one parsed on
/// this thread is remembered: an origin's responses within one second carry the same
/// text, and parsing it cost a miss about 650 instructions.
fn date_value(value: &http::HeaderValue) -> Option<SystemTime> {
    let bytes = value.as_bytes();
    if bytes.len() > LastDate::LONGEST {
        return parse_date(value);
    }
    if let Some(last) = LAST_DATE.get() {
        if last.text[..usize::from(last.len)] == *bytes {
            return last.parsed;
        }
    }
    let parsed = parse_date(value);
    let mut text = [0; LastDate::LONGEST];
    text[..bytes.len()].copy_from_slice(bytes);
    let len = bytes.len() as u8;
    LAST_DATE.set(Some(LastDate { text, len, parsed }));
    parsed
}

/// The last `Date` text [`response_date`] parsed on this thread, and what it meant.
#[derive(Clone, Copy)]
struct LastDate {
    text: [u8; LastDate::LONGEST],
    len: u8,
    parsed: Option<SystemTime>,
}

impl LastDate {
    /// An IMF-fixdate is 29 bytes; longer texts (obsolete forms, padding) are parsed
    /// each time.
    const LONGEST: usize = 32;
}

thread_local! {
    static LAST_DATE: std::cell::Cell<Option<LastDate>> = const { std::cell::Cell::new(None) };
}

fn parse_date(value: &http::HeaderValue) -> Option<SystemTime> {
    value
        .to_str()
        .ok()
        .and_then(|s| httpdate::parse_http_date(s.trim()).ok())
}

/// A request's directives; `Pragma: no-cache` counts as `no-cache` when the request has
/// no `Cache-Control` (RFC 9111 §5.4).
pub fn request_directives(headers: &HeaderMap) -> RequestDirectives {
    // One lookup of `Cache-Control` tells both whether there is one and what it says.
    let mut lines = headers.get_all(header::CACHE_CONTROL).iter().peekable();
    if lines.peek().is_some() {
        return RequestDirectives::read(lines.flat_map(Directives::of));
    }
    RequestDirectives {
        no_cache: headers
            .get_all(header::PRAGMA)
            .iter()
            .flat_map(Directives::of)
            .any(|d| d.is("no-cache")),
        ..RequestDirectives::default()
    }
}

/// May a stored copy of this `age` with this `lifetime` answer a request with these
/// directives without validation (RFC 9111 §4.2, §5.2.1)?
pub fn satisfies(
    request: &RequestDirectives,
    assessment_forbids_stale: bool,
    lifetime: Duration,
    age: Duration,
) -> bool {
    if request.no_cache {
        return false;
    }
    if request.max_age.is_some_and(|max| age > max) {
        return false;
    }
    if let Some(min) = request.min_fresh {
        if lifetime < age.saturating_add(min) {
            return false;
        }
    }
    if age < lifetime {
        return true;
    }
    match request.max_stale {
        Some(limit) if !assessment_forbids_stale => {
            limit.is_none_or(|max| age.saturating_sub(lifetime) <= max)
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "freshness_tests.rs"]
mod tests;
