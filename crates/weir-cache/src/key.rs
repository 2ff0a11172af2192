//! Cache keys: one per URL, and one per Vary variant of a URL.

use std::fmt;
use std::sync::Arc;

use http::HeaderMap;

/// What separates a URL from a module's variant in a key.
const MODULE_VARIANT: &str = "\0~";
/// What ends the key of a URL's stored parts: `\u{2}` never starts a Vary value (field
/// values hold no control characters, and an absent field is `\u{1}`).
const PARTS: &str = "\0\u{2}";

/// The identity of a cached object: `scheme://authority/path?query` with the host
/// lowercased, plus, for a Vary variant, the values of the request headers it varies on.
///
/// Cloning is a reference-count increment.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CacheKey(Arc<str>);

impl CacheKey {
    /// The key of a URL. GET and HEAD share it (a HEAD is answered from a stored GET).
    pub fn for_url(scheme: &str, authority: &str, path_and_query: &str) -> CacheKey {
        CacheKey::for_url_variant(scheme, authority, path_and_query, None)
    }

    /// The key of a URL with a module's variant (`None`: the URL's own key), made in
    /// one piece: [`CacheKey::with_module_variant`] of [`CacheKey::for_url`] without
    /// the intermediate key (this runs on every request a module gives a variant).
    pub fn for_url_variant(
        scheme: &str,
        authority: &str,
        path_and_query: &str,
        variant: Option<&str>,
    ) -> CacheKey {
        let extra = variant.map_or(0, |v| 2 + v.len());
        let mut s = String::with_capacity(
            scheme.len() + 3 + authority.len() + path_and_query.len() + extra,
        );
        s.push_str(scheme);
        s.push_str("://");
        // Copied, then lowercased in place: a character at a time cost every request
        // about ten instructions per character.
        let host_at = s.len();
        s.push_str(authority);
        s[host_at..].make_ascii_lowercase();
        s.push_str(if path_and_query.is_empty() {
            "/"
        } else {
            path_and_query
        });
        if let Some(variant) = variant {
            s.push_str(MODULE_VARIANT);
            s.push_str(variant);
        }
        CacheKey(s.into())
    }

    /// The key of one variant of this URL: the request's values of the `vary` headers,
    /// each in the form that makes equivalent values equal (see `vary_value.rs`), so a
    /// lookup compares one string.
    pub fn variant(&self, vary: &[http::HeaderName], request: &HeaderMap) -> CacheKey {
        let mut s = String::with_capacity(self.0.len() + 16 * vary.len());
        s.push_str(&self.0);
        for name in vary {
            // NUL cannot occur in a URL or a header value, so keys cannot collide.
            s.push('\0');
            crate::vary_value::push_field(&mut s, name, request);
        }
        CacheKey(s.into())
    }

    /// This key with a module's variant added (e.g. the encoding a compressor made):
    /// a different object of the same URL.
    pub fn with_module_variant(&self, variant: &str) -> CacheKey {
        let mut s = String::with_capacity(self.0.len() + 2 + variant.len());
        s.push_str(&self.0);
        s.push_str(MODULE_VARIANT);
        s.push_str(variant);
        CacheKey(s.into())
    }

    /// The key under which the parts (206 responses) of this key's object are kept.
    pub(crate) fn parts(&self) -> CacheKey {
        let mut s = String::with_capacity(self.0.len() + PARTS.len());
        s.push_str(&self.0);
        s.push_str(PARTS);
        CacheKey(s.into())
    }

    /// The key of a URL already in key form (what [`CacheKey::url`] returns).
    pub(crate) fn from_url(url: &str) -> CacheKey {
        CacheKey(url.into())
    }

    /// Whether this URL key carries a module's variant. (Only for keys given to
    /// `Cache::store`, never Vary variant keys, whose values may start with `~`.)
    pub(crate) fn has_module_variant(&self) -> bool {
        self.0.contains("\0~")
    }

    /// The URL part of the key (without variant values).
    pub fn url(&self) -> &str {
        self.0.split('\0').next().unwrap_or("")
    }

    /// The whole key as stored (variant values separated by NUL).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The key this variant key was made from by [`CacheKey::variant`] with `n` names.
    pub(crate) fn strip_vary(&self, n: usize) -> CacheKey {
        let mut end = self.0.len();
        for _ in 0..n {
            end = self.0[..end].rfind('\0').unwrap_or(end);
        }
        CacheKey(self.0[..end].into())
    }

    /// A key read back from the disk tier.
    pub(crate) fn from_stored(s: String) -> CacheKey {
        CacheKey(s.into())
    }

    /// Bytes used by the key, for memory accounting.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the key is empty (never, for keys built by this type).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({:?})", self.0.replace('\0', " | "))
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_case_insensitive_and_path_is_not() {
        let a = CacheKey::for_url("http", "Example.COM:80", "/A?b=1");
        let b = CacheKey::for_url("http", "example.com:80", "/A?b=1");
        let c = CacheKey::for_url("http", "example.com:80", "/a?b=1");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.url(), "http://example.com:80/A?b=1");
    }

    #[test]
    fn variants_differ_by_header_values() {
        let base = CacheKey::for_url("http", "h", "/");
        let vary = [http::header::ACCEPT_ENCODING];
        let mut r1 = HeaderMap::new();
        r1.insert("accept-encoding", "gzip, br".parse().unwrap());
        let mut r2 = HeaderMap::new();
        r2.insert("accept-encoding", "gzip,br".parse().unwrap());
        let r3 = HeaderMap::new();
        assert_eq!(base.variant(&vary, &r1), base.variant(&vary, &r2));
        assert_ne!(base.variant(&vary, &r1), base.variant(&vary, &r3));
        assert_eq!(base.variant(&vary, &r1).url(), base.url());
    }
}
