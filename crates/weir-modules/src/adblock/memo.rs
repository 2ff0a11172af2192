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

use weir_api::http::header::{self, HeaderName};
use weir_api::RequestHead;

const SHARDS: usize = 16;
/// Verdicts per shard before it is cleared.
const SHARD_CAPACITY: usize = 4096;

/// The request headers a verdict depends on besides the URL; names made once, so a
/// lookup does not parse them.
const KEY_HEADERS: [HeaderName; 5] = [
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
        for name in &KEY_HEADERS {
            h.write_u8(0);
            if let Some(v) = request.headers.get(name) {
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
