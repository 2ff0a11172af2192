//! Cache keys: one per URL, and one per Vary variant of a URL.

use std::cell::RefCell;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::{Arc, LazyLock};

use http::HeaderMap;

/// What separates a URL from a module's variant in a key.
const MODULE_VARIANT: &str = "\0~";
/// What ends the key of a URL's stored parts: `\u{2}` never starts a Vary value (field
/// values hold no control characters, and an absent field is `\u{1}`).
const PARTS: &str = "\0\u{2}";

/// The most a thread's scratch text for building keys keeps between keys.
const SCRATCH_KEPT: usize = 4096;

/// The identity of a cached object: `scheme://authority/path?query` with the host
/// lowercased, plus, for a Vary variant, the values of the request headers it varies on.
///
/// Cloning is a reference-count increment.
///
/// The key's hash is computed once, when the key is made, with std's randomly keyed
/// SipHash (clients choose the URLs, and must not be able to aim them at one hash
/// chain or shard); the maps keyed by it ([`KeyHashing`]) take that hash as it is. A
/// miss looks its key up in the memory tier, the coalescing table and the memory tier
/// again, then stores it: each of these hashed the whole key, about 250 instructions
/// for a short URL, and now none does.
#[derive(Clone, PartialEq, Eq)]
pub struct CacheKey {
    // First, so that unequal keys usually differ at the first comparison.
    hash: u64,
    text: Arc<str>,
}

/// The process's key for hashing cache keys.
static KEY_HASH: LazyLock<RandomState> = LazyLock::new(RandomState::new);

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Hashes for the maps keyed by [`CacheKey`]: the key's own hash, taken as it is.
pub(crate) type KeyHashing = BuildHasherDefault<KeyHasher>;

/// See [`KeyHashing`].
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    // Only cache keys are hashed with it, and they write one `u64`; anything else is
    // mixed in all the same, so the hasher stays correct if that ever changes.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

impl CacheKey {
    fn new(text: impl Into<Arc<str>>) -> CacheKey {
        let text: Arc<str> = text.into();
        CacheKey {
            hash: KEY_HASH.hash_one(&*text),
            text,
        }
    }

    /// The key `write` puts together. Written into this thread's scratch text and
    /// then copied into the key's own allocation: a `String` made for the key was a
    /// second allocation, freed at once (`Arc<str>` from a `String` copies it).
    fn built(write: impl FnOnce(&mut String)) -> CacheKey {
        thread_local! {
            static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
        }
        SCRATCH.with_borrow_mut(|s| {
            s.clear();
            write(s);
            let key = CacheKey::new(s.as_str());
            // A long key (a URL of kilobytes) does not stay with the thread.
            if s.capacity() > SCRATCH_KEPT {
                *s = String::new();
            }
            key
        })
    }

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
        CacheKey::built(|s| {
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
        })
    }

    /// The key of one variant of this URL: the request's values of the `vary` headers,
    /// each in the form that makes equivalent values equal (see `vary_value.rs`), so a
    /// lookup compares one string.
    pub fn variant(&self, vary: &[http::HeaderName], request: &HeaderMap) -> CacheKey {
        CacheKey::built(|s| {
            s.push_str(&self.text);
            for name in vary {
                // NUL cannot occur in a URL or a header value, so keys cannot collide.
                s.push('\0');
                crate::vary_value::push_field(s, name, request);
            }
        })
    }

    /// This key with a module's variant added (e.g. the encoding a compressor made):
    /// a different object of the same URL.
    pub fn with_module_variant(&self, variant: &str) -> CacheKey {
        CacheKey::built(|s| {
            s.push_str(&self.text);
            s.push_str(MODULE_VARIANT);
            s.push_str(variant);
        })
    }

    /// The key's hash, as the maps keyed by it use it (also to pick a shard).
    pub(crate) fn hash_value(&self) -> u64 {
        self.hash
    }

    /// The key under which the parts (206 responses) of this key's object are kept.
    pub(crate) fn parts(&self) -> CacheKey {
        CacheKey::built(|s| {
            s.push_str(&self.text);
            s.push_str(PARTS);
        })
    }

    /// The key of a URL already in key form (what [`CacheKey::url`] returns).
    pub(crate) fn from_url(url: &str) -> CacheKey {
        CacheKey::new(url)
    }

    /// Whether this URL key carries a module's variant. (Only for keys given to
    /// `Cache::store`, never Vary variant keys, whose values may start with `~`.)
    pub(crate) fn has_module_variant(&self) -> bool {
        let text = self.text.as_bytes();
        memchr::memchr_iter(0, text).any(|at| text.get(at + 1) == Some(&b'~'))
    }

    /// The URL part of the key (without variant values).
    pub fn url(&self) -> &str {
        // memchr's vector search: a miss asks for the URL several times, and a `split`
        // searched the key a byte at a time behind a pattern searcher.
        match memchr::memchr(0, self.text.as_bytes()) {
            Some(end) => &self.text[..end],
            None => &self.text,
        }
    }

    /// The whole key as stored (variant values separated by NUL).
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The key this variant key was made from by [`CacheKey::variant`] with `n` names.
    pub(crate) fn strip_vary(&self, n: usize) -> CacheKey {
        let mut end = self.text.len();
        for _ in 0..n {
            end = self.text[..end].rfind('\0').unwrap_or(end);
        }
        CacheKey::new(&self.text[..end])
    }

    /// A key read back from the disk tier.
    pub(crate) fn from_stored(s: String) -> CacheKey {
        CacheKey::new(s)
    }

    /// Bytes used by the key, for memory accounting.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Whether the key is empty (never, for keys built by this type).
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({:?})", self.text.replace('\0', " | "))
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
    fn equal_keys_hash_alike_however_made_and_maps_find_them() {
        use std::collections::HashMap;
        let url = CacheKey::for_url("http", "Example.com", "/a");
        let same = CacheKey::from_url("http://example.com/a");
        let variant = url.with_module_variant("gzip");
        let back = CacheKey::from_stored(variant.as_str().to_string());
        assert_eq!(url, same);
        assert_eq!(variant, back);
        assert_ne!(url, variant);
        let hash = |k: &CacheKey| KEY_HASH.hash_one(k);
        assert_eq!(hash(&url), hash(&same));
        assert_ne!(hash(&url), hash(&variant));
        let mut map: HashMap<CacheKey, u32, KeyHashing> = HashMap::default();
        for i in 0..1000 {
            map.insert(CacheKey::for_url("http", "h", &format!("/{i}")), i);
        }
        map.insert(url.clone(), 7);
        assert_eq!(map.get(&same), Some(&7));
        assert_eq!(map.get(&back), None);
        assert_eq!(map.get(&CacheKey::for_url("http", "h", "/999")), Some(&999));
    }

    #[test]
    fn the_url_part_and_the_module_variant_are_found_in_every_kind_of_key() {
        let url = CacheKey::for_url("http", "h", "/a");
        assert_eq!(url.url(), "http://h/a");
        assert!(!url.has_module_variant());
        let module = url.with_module_variant("gzip");
        assert_eq!(module.url(), "http://h/a");
        assert!(module.has_module_variant());
        let vary = [http::header::ACCEPT_ENCODING];
        let mut h = http::HeaderMap::new();
        h.insert(http::header::ACCEPT_ENCODING, "br".parse().unwrap());
        let varied = url.variant(&vary, &h);
        assert_eq!(varied.url(), "http://h/a");
        assert!(!varied.has_module_variant());
        assert!(module.variant(&vary, &h).has_module_variant());
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

    #[test]
    fn keys_built_one_after_another_keep_only_their_own_text() {
        // Built in one thread's scratch text: a shorter key after a longer one (and
        // after one longer than the scratch keeps) must not keep the rest.
        let long = format!("/{}", "x".repeat(SCRATCH_KEPT * 2));
        let first = CacheKey::for_url("http", "H", &long);
        assert_eq!(first.as_str(), format!("http://h{long}"));
        let short = CacheKey::for_url("http", "h", "/a");
        assert_eq!(short.as_str(), "http://h/a");
        assert_eq!(short.with_module_variant("gz").url(), "http://h/a");
        assert_eq!(short.parts().url(), "http://h/a");
        assert_eq!(CacheKey::for_url("http", "h", "/a"), short);
    }
}
