//! Remembered verdicts. Matching a request against EasyList and EasyPrivacy costs
//! microseconds (parsing the URL and the page's domain, then the rules); a cache
//! sees the same requests again and again, so the verdict of a request is kept,
//! keyed by a hash of everything the verdict depends on (method, URL, Host,
//! Referer, Accept, Sec-Fetch-Dest, Sec-Fetch-Site).
//!
//! Bounded: each shard forgets everything when full, which is crude but costs no
//! bookkeeping per hit. The memo lives in the module, so a reload (new lists)
//! starts with an empty one.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Mutex;

use weir_api::http::header::{self, HeaderName, HeaderValue};
use weir_api::RequestHead;

const SHARDS: usize = 16;
/// Verdicts per shard before it is cleared.
const SHARD_CAPACITY: usize = 4096;

/// The request headers a verdict depends on besides the URL; names made once, so a
/// lookup does not parse them.
const KEY_COUNT: usize = 5;
const KEY_HEADERS: [HeaderName; KEY_COUNT] = [
    header::HOST,
    header::REFERER,
    header::ACCEPT,
    HeaderName::from_static("sec-fetch-dest"),
    HeaderName::from_static("sec-fetch-site"),
];

/// The memo's keys are already hashes: the map uses them as they are.
#[derive(Default)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are u64); fold anything else in anyway.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The verdicts of requests seen before.
pub struct Memo {
    shards: Vec<Mutex<HashMap<u64, bool, BuildHasherDefault<KeyIsHash>>>>,
    hasher: foldhash::quality::RandomState,
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Memo {
        Memo {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            hasher: foldhash::quality::RandomState::default(),
        }
    }

    /// The key of `request`: what its verdict depends on. (A hash keyed at random
    /// when the module is built, so a client cannot choose URLs that collide with
    /// another's; foldhash rather than SipHash because this runs on every request.)
    pub fn key(&self, request: &RequestHead) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(request.method.as_str().as_bytes());
        h.write_u8(0);
        let uri = &request.uri;
        for part in [
            uri.scheme_str(),
            uri.authority().map(|a| a.as_str()),
            uri.path_and_query().map(|p| p.as_str()),
        ] {
            h.write(part.unwrap_or("").as_bytes());
            h.write_u8(0);
        }
        // One pass over the request's few headers costs less than five lookups, each
        // of which hashes its name.
        let mut values: [Option<&HeaderValue>; KEY_COUNT] = [None; KEY_COUNT];
        for (name, value) in &request.headers {
            if let Some(i) = KEY_HEADERS.iter().position(|k| k == name) {
                // The first value, as `HeaderMap::get` gives it.
                values[i].get_or_insert(value);
            }
        }
        for value in values {
            h.write_u8(0);
            if let Some(v) = value {
                h.write(v.as_bytes());
            }
        }
        h.finish()
    }

    /// A remembered verdict: `Some(block)`.
    pub fn get(&self, key: u64) -> Option<bool> {
        // The low bits pick the bucket inside a shard: the shard comes from the high ones.
        let shard = self.shards[(key >> 60) as usize % SHARDS].lock().ok()?;
        shard.get(&key).copied()
    }

    /// Remembers a verdict.
    pub fn put(&self, key: u64, block: bool) {
        if let Ok(mut shard) = self.shards[(key >> 60) as usize % SHARDS].lock() {
            if shard.len() >= SHARD_CAPACITY {
                shard.clear();
            }
            shard.insert(key, block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::http::Request;

    fn head(uri: &str, headers: &[(&str, &str)]) -> RequestHead {
        let mut b = Request::get(uri);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_key_is_what_a_verdict_depends_on() {
        let memo = Memo::new();
        let key = |uri: &str, headers: &[(&str, &str)]| memo.key(&head(uri, headers));
        let page = [
            ("referer", "http://news.test/"),
            ("sec-fetch-dest", "image"),
        ];
        let base = key("http://ads.test/a.gif", &page);
        // Headers a verdict does not depend on, and their order, change nothing.
        let reordered = [
            ("sec-fetch-dest", "image"),
            ("x-other", "1"),
            ("referer", "http://news.test/"),
        ];
        assert_eq!(base, key("http://ads.test/a.gif", &reordered));
        // Each header it does depend on, and the URL, does.
        assert_ne!(base, key("http://ads.test/b.gif", &page));
        assert_ne!(
            base,
            key("http://ads.test/a.gif", &[("referer", "http://news.test/")])
        );
        assert_ne!(
            base,
            key(
                "http://ads.test/a.gif",
                &[
                    ("referer", "http://other.test/"),
                    ("sec-fetch-dest", "image")
                ]
            )
        );
        for name in ["host", "accept", "sec-fetch-site"] {
            let mut more = page.to_vec();
            more.push((name, "x"));
            assert_ne!(base, key("http://ads.test/a.gif", &more), "{name}");
        }
        // A header given twice: its first value counts, as `HeaderMap::get` reads it.
        let twice = [
            ("referer", "http://news.test/"),
            ("referer", "http://else.test/"),
            ("sec-fetch-dest", "image"),
        ];
        assert_eq!(base, key("http://ads.test/a.gif", &twice));
    }
}
