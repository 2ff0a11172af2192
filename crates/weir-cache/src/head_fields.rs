//! The fields of a response head that its storability and freshness read, and those
//! of a request that speak to a cache, found in one pass over a head's fields. Below
//! the freshness rules (`freshness.rs`), which read them from here.
//!
//! Looked up one by one, they were about ten hashed lookups per stored response (a
//! targeted field's name, not a standard one, hashed byte by byte), about 1,000
//! instructions of a miss; most of them find nothing. A pass over a head's few names
//! compares standard names as small integers.

use http::{header, HeaderMap, HeaderName, HeaderValue};

use crate::conditional::CONDITION_FIELDS;

/// Where a response's freshness fields are, or that it has none.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ResponseFields<'a> {
    /// The first `Cache-Control` line, and whether there are more.
    pub cache_control: Option<&'a HeaderValue>,
    pub more_cache_control: bool,
    /// The first line of each.
    pub date: Option<&'a HeaderValue>,
    pub expires: Option<&'a HeaderValue>,
    pub last_modified: Option<&'a HeaderValue>,
    pub age: Option<&'a HeaderValue>,
    pub etag: bool,
    pub set_cookie: bool,
    /// One of the targeted fields this cache obeys is there.
    pub targeted: bool,
}

impl<'a> ResponseFields<'a> {
    /// The fields of `headers`; `targeted`: the targeted fields this cache obeys.
    pub fn of(headers: &'a HeaderMap, targeted: &[HeaderName]) -> ResponseFields<'a> {
        let mut fields = ResponseFields::default();
        for (name, value) in headers {
            match *name {
                header::CACHE_CONTROL => match fields.cache_control {
                    None => fields.cache_control = Some(value),
                    Some(_) => fields.more_cache_control = true,
                },
                header::DATE => first(&mut fields.date, value),
                header::EXPIRES => first(&mut fields.expires, value),
                header::LAST_MODIFIED => first(&mut fields.last_modified, value),
                header::AGE => first(&mut fields.age, value),
                header::ETAG => fields.etag = true,
                header::SET_COOKIE => fields.set_cookie = true,
                _ => fields.targeted |= targeted.contains(name),
            }
        }
        fields
    }
}

fn first<'a>(slot: &mut Option<&'a HeaderValue>, value: &'a HeaderValue) {
    if slot.is_none() {
        *slot = Some(value);
    }
}

/// Which of the fields that speak to a cache a request carries, found in one pass over
/// its names: most requests carry none, and looking each up hashed its name (about 90
/// instructions a lookup, several per transaction).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RequestFields {
    /// `Cache-Control`.
    pub cache_control: bool,
    /// `Pragma`.
    pub pragma: bool,
    /// `Authorization`.
    pub authorization: bool,
    /// `Range`.
    pub range: bool,
    /// One of the conditions the cache answers ([`CONDITION_FIELDS`]: `If-None-Match`,
    /// `If-Modified-Since`).
    pub conditions: bool,
}

impl RequestFields {
    /// The fields of `headers`.
    pub fn of(headers: &HeaderMap) -> RequestFields {
        let mut fields = RequestFields::default();
        for name in headers.keys() {
            match *name {
                header::CACHE_CONTROL => fields.cache_control = true,
                header::PRAGMA => fields.pragma = true,
                header::AUTHORIZATION => fields.authorization = true,
                header::RANGE => fields.range = true,
                ref name if CONDITION_FIELDS.contains(name) => fields.conditions = true,
                _ => {}
            }
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_of_each_field_and_whether_cache_control_has_more() {
        let mut h = HeaderMap::new();
        h.append("date", HeaderValue::from_static("d1"));
        h.append("cache-control", HeaderValue::from_static("max-age=1"));
        h.append("date", HeaderValue::from_static("d2"));
        h.append("x-other", HeaderValue::from_static("o"));
        h.append("age", HeaderValue::from_static("5"));
        h.append("etag", HeaderValue::from_static("\"e\""));
        let f = ResponseFields::of(&h, &[]);
        assert_eq!(f.date.unwrap(), "d1");
        assert_eq!(f.cache_control.unwrap(), "max-age=1");
        assert!(!f.more_cache_control);
        assert_eq!(f.age.unwrap(), "5");
        assert!(f.etag && !f.set_cookie && !f.targeted);
        assert!(f.expires.is_none() && f.last_modified.is_none());
        h.append("cache-control", HeaderValue::from_static("public"));
        h.append("cdn-cache-control", HeaderValue::from_static("max-age=9"));
        let targeted = [HeaderName::from_static("cdn-cache-control")];
        let f = ResponseFields::of(&h, &targeted);
        assert!(f.more_cache_control && f.targeted);
        assert!(!ResponseFields::of(&h, &[]).targeted);
    }

    #[test]
    fn a_requests_fields_in_one_pass() {
        let mut h = HeaderMap::new();
        assert_eq!(RequestFields::of(&h), RequestFields::default());
        h.insert(header::HOST, HeaderValue::from_static("a"));
        assert_eq!(RequestFields::of(&h), RequestFields::default());
        h.insert(header::IF_MODIFIED_SINCE, HeaderValue::from_static("x"));
        h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic x"));
        let f = RequestFields::of(&h);
        assert!(f.conditions && f.pragma && f.authorization);
        assert!(!f.cache_control && !f.range);
        h.insert(header::RANGE, HeaderValue::from_static("bytes=0-1"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let f = RequestFields::of(&h);
        assert!(f.range && f.cache_control);
    }
}
