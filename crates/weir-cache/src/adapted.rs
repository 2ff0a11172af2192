//! What modules changed in a stored response, so that a 304 from the origin refreshes
//! it without undoing them.
//!
//! A module that transforms a response (compresses it, transcodes an image) stores the
//! result with fields of its own: another `Content-Type` or `Content-Encoding`, a weak
//! or suffixed `ETag`, a wider `Vary`. The origin knows only its own representation.
//! When the stored result goes stale, the origin must be asked about its own
//! validators, must be believed when it answers 304 with them, and its 304 must not
//! put its own `Content-Type` or `ETag` back on the transformed body. RFC 9111 §3.2
//! lets a cache that stores the result of processing a response leave such fields
//! alone when it updates the stored ones.

use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue};

/// The representation fields whose changes are remembered: what a transformation
/// changes, and the validators.
const WATCHED: [HeaderName; 7] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LOCATION,
    header::ETAG,
    header::LAST_MODIFIED,
    header::VARY,
];

/// The origin's values of the watched fields, taken before any module sees the
/// response. [`OriginFields::adapted`] then says what the modules changed.
#[derive(Debug, Clone)]
pub struct OriginFields {
    values: HeaderMap,
}

impl OriginFields {
    /// The watched fields of the response as the origin sent it.
    pub fn of(headers: &HeaderMap) -> OriginFields {
        let mut values = HeaderMap::new();
        for name in &WATCHED {
            for v in headers.get_all(name) {
                values.append(name.clone(), v.clone());
            }
        }
        OriginFields { values }
    }

    /// What the modules changed, comparing with `stored`, the headers about to be
    /// stored; `None` when they changed none of the watched fields.
    pub fn adapted(self, stored: &HeaderMap) -> Option<Adapted> {
        let fields: Vec<HeaderName> = WATCHED
            .iter()
            .filter(|name| !stored.get_all(*name).iter().eq(self.values.get_all(*name)))
            .cloned()
            .collect();
        if fields.is_empty() {
            return None;
        }
        let origin = crate::compact::copy_headers(&self.values, |n| fields.contains(n));
        Some(Adapted { fields, origin })
    }
}

/// The fields modules changed in a stored response, with the origin's values of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapted {
    fields: Vec<HeaderName>,
    origin: HeaderMap,
}

impl Adapted {
    /// Rebuilds one from its parts (the disk tier's record): the changed fields' names
    /// and the origin's values of them. `None` when no name is a watched field.
    pub fn from_parts(names: &[String], origin: HeaderMap) -> Option<Adapted> {
        let fields: Vec<HeaderName> = names
            .iter()
            .filter_map(|n| WATCHED.iter().find(|w| w.as_str() == n).cloned())
            .collect();
        (!fields.is_empty()).then_some(Adapted { fields, origin })
    }

    /// The names of the changed fields.
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(HeaderName::as_str)
    }

    /// The origin's values of the changed fields (none for a field it did not send).
    pub fn origin_values(&self) -> &HeaderMap {
        &self.origin
    }

    /// Whether a module changed `name`.
    pub fn changed(&self, name: &HeaderName) -> bool {
        self.fields.contains(name)
    }

    /// The origin's own value of `name`, where the stored one (in `stored`) may be a
    /// module's: what to validate with, and what a 304 is compared with.
    pub(crate) fn origin_value<'a>(
        this: Option<&'a Adapted>,
        stored: &'a HeaderMap,
        name: &HeaderName,
    ) -> Option<&'a HeaderValue> {
        match this {
            Some(a) if a.changed(name) => a.origin.get(name),
            _ => stored.get(name),
        }
    }

    /// Bytes it costs in the memory tier.
    pub(crate) fn weight(&self) -> u32 {
        let size = crate::compact::heap_size(&self.origin)
            + self.fields.capacity() * std::mem::size_of::<HeaderName>()
            + std::mem::size_of::<Adapted>();
        size.min(u32::MAX as usize) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn unchanged_fields_make_nothing() {
        let origin = map(&[
            ("etag", "\"a\""),
            ("content-type", "text/plain"),
            ("x-other", "1"),
        ]);
        let mut stored = origin.clone();
        stored.insert("x-other", HeaderValue::from_static("2"));
        assert_eq!(OriginFields::of(&origin).adapted(&stored), None);
    }

    #[test]
    fn changed_added_and_removed_fields_are_remembered_with_the_origins_values() {
        let origin = map(&[
            ("etag", "\"a\""),
            ("content-type", "image/png"),
            ("vary", "Origin"),
            ("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT"),
        ]);
        let stored = map(&[
            ("etag", "W/\"a-tc\""),
            ("content-type", "image/jpeg"),
            ("vary", "Origin"),
            ("vary", "Accept"),
            ("content-encoding", "gzip"),
        ]);
        let a = OriginFields::of(&origin).adapted(&stored).unwrap();
        let mut names: Vec<&str> = a.field_names().collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "content-encoding",
                "content-type",
                "etag",
                "last-modified",
                "vary"
            ]
        );
        assert_eq!(a.origin_values()["etag"], "\"a\"");
        assert!(a.origin_values().get("content-encoding").is_none());
        let lm = Adapted::origin_value(Some(&a), &stored, &header::LAST_MODIFIED);
        assert_eq!(lm.unwrap(), "Sat, 21 Nov 2026 10:00:00 GMT");
        let etag = Adapted::origin_value(None, &stored, &header::ETAG);
        assert_eq!(etag.unwrap(), "W/\"a-tc\"", "not adapted: the stored value");
    }

    #[test]
    fn rebuilt_from_parts_keeps_only_watched_names() {
        let names = vec!["etag".to_string(), "x-nonsense".to_string()];
        let a = Adapted::from_parts(&names, map(&[("etag", "\"a\"")])).unwrap();
        assert_eq!(a.field_names().collect::<Vec<_>>(), ["etag"]);
        assert!(Adapted::from_parts(&["x".into()], HeaderMap::new()).is_none());
    }
}
