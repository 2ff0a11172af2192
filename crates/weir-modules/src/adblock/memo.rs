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
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use weir_api::http::header;
use weir_api::RequestHead;

const SHARDS: usize = 16;
/// Verdicts per shard before it is cleared.
const SHARD_CAPACITY: usize = 4096;

/// The verdicts of requests seen before.
pub struct Memo {
    shards: Vec<Mutex<HashMap<u64, bool>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Memo {
        Memo {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// The key of `request`: what its verdict depends on. (Random-keyed SipHash: a
    /// client cannot choose URLs that collide with another's.)
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
        for name in [
            header::HOST.as_str(),
            header::REFERER.as_str(),
            header::ACCEPT.as_str(),
            "sec-fetch-dest",
            "sec-fetch-site",
        ] {
            h.write_u8(0);
            if let Some(v) = request.headers.get(name) {
                h.write(v.as_bytes());
            }
        }
        h.finish()
    }

    /// A remembered verdict: `Some(block)`.
    pub fn get(&self, key: u64) -> Option<bool> {
        let shard = self.shards[key as usize % SHARDS].lock().ok()?;
        shard.get(&key).copied()
    }

    /// Remembers a verdict.
    pub fn put(&self, key: u64, block: bool) {
        if let Ok(mut shard) = self.shards[key as usize % SHARDS].lock() {
            if shard.len() >= SHARD_CAPACITY {
                shard.clear();
            }
            shard.insert(key, block);
        }
    }
}
