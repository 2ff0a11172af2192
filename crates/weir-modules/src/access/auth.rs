//! Basic authentication (RFC 7617) against an htpasswd file: the file as last read,
//! a short-lived cache of verifications, and the per-client slowdown of failures.
//!
//! The cache is keyed on a keyed 128-bit hash of the credentials, so neither a
//! password nor a header value is kept; the key is random per process. Each thread
//! also keeps the last entry it found (clients send the same credentials with each
//! request), checked again for its credentials, its expiry and the cache's epoch, and
//! so found without hashing, the cache's lock and its lookup. The thread keeps those
//! credentials masked with random bytes of its own (a one-time pad per thread), never
//! as they came, and compares a request's credentials with them word by word: exact,
//! where a hash would accept whatever collides with it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::htpasswd::{Htpasswd, Stamp};
use super::settings::AuthConfig;

/// At most this many verifications (and clients with failures) are remembered: an
/// attacker sending endless new credentials or addresses cannot grow memory.
const MAX_REMEMBERED: usize = 10_000;
/// A client's failures are forgotten this long after its last one.
const FAILURE_MEMORY: Duration = Duration::from_secs(300);

/// The outcome of checking a request's credentials.
#[derive(Debug, Clone)]
pub(crate) enum Checked {
    /// The credentials are a user's.
    User(Arc<str>),
    /// Credentials that are not valid (unknown user, wrong password, not Basic).
    Bad,
}

pub(crate) struct Authenticator {
    pub config: AuthConfig,
    /// Unique per authenticator: names it in the threads' last entries.
    id: u64,
    /// Bumped (under the cache's lock) whenever entries leave the cache other than by
    /// expiring: a thread's last entry is good only while it has not moved.
    epoch: AtomicU64,
    file: RwLock<(Arc<Htpasswd>, Option<Stamp>)>,
    cache: RwLock<Cache>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    hashers: (
        foldhash::quality::RandomState,
        foldhash::quality::RandomState,
    ),
}

#[derive(Default)]
struct Cache {
    /// Bumped when the file changes, so a verification of the old file that ends
    /// after the change is not cached.
    generation: u64,
    entries: HashMap<u128, (Option<Arc<str>>, Instant), BuildHasherDefault<KeyHasher>>,
}

/// The cache's keys are already keyed hashes, random per process: the map uses their
/// low bits as they are rather than hashing them again.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

impl Authenticator {
    /// Reads the file once; an unreadable or bad file is an error of the
    /// configuration.
    pub fn new(config: AuthConfig) -> Result<Authenticator, String> {
        let stamp = Stamp::of(&config.htpasswd);
        let file = Htpasswd::load(&config.htpasswd)?;
        static IDS: AtomicU64 = AtomicU64::new(1);
        Ok(Authenticator {
            config,
            id: IDS.fetch_add(1, Ordering::Relaxed),
            epoch: AtomicU64::new(0),
            file: RwLock::new((Arc::new(file), stamp)),
            cache: RwLock::default(),
            failures: Mutex::default(),
            hashers: Default::default(),
        })
    }

    pub fn path(&self) -> &PathBuf {
        &self.config.htpasswd
    }

    /// Reads the file again when it changed. A file that became unreadable or
    /// invalid is reported and the users last read are kept.
    pub fn reload_if_changed(&self) -> Option<Result<usize, String>> {
        let stamp = Stamp::of(&self.config.htpasswd);
        if self.file.read().unwrap_or_else(|e| e.into_inner()).1 == stamp {
            return None;
        }
        let loaded = Htpasswd::load(&self.config.htpasswd);
        let mut file = self.file.write().unwrap_or_else(|e| e.into_inner());
        file.1 = stamp;
        Some(loaded.map(|users| {
            let count = users.len();
            file.0 = Arc::new(users);
            drop(file);
            let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
            cache.generation += 1;
            cache.entries.clear();
            self.epoch.fetch_add(1, Ordering::Release);
            count
        }))
    }

    fn key(&self, credentials: &[u8]) -> u128 {
        let half = |state: &foldhash::quality::RandomState| {
            let mut h = state.build_hasher();
            h.write(credentials);
            h.finish() as u128
        };
        half(&self.hashers.0) << 64 | half(&self.hashers.1)
    }

    /// What the cache remembers of these credentials (the header's value), when it
    /// remembers them and they have not expired.
    pub fn cached(&self, credentials: &[u8]) -> Option<Checked> {
        // Read before the cache: an entry found after a change is then not kept as
        // found before it.
        let epoch = self.epoch.load(Ordering::Acquire);
        let now = Instant::now();
        let last = LAST.with_borrow(|last| match last {
            Some(l)
                if l.id == self.id
                    && l.epoch == epoch
                    && l.expires > now
                    && l.credentials.holds(credentials) =>
            {
                Some(checked(&l.user))
            }
            _ => None,
        });
        if last.is_some() {
            return last;
        }
        let key = self.key(credentials);
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        let (user, expires) = cache.entries.get(&key)?;
        if *expires <= now {
            return None;
        }
        let kept = Last {
            id: self.id,
            epoch,
            credentials: Masked::of(credentials),
            // The thread's own copy of the name: the requests this entry answers
            // count their references to it on this thread's cache line, not on one
            // that every thread's requests write.
            user: user.as_deref().map(Arc::from),
            expires: *expires,
        };
        drop(cache);
        let found = checked(&kept.user);
        LAST.with_borrow_mut(|last| *last = Some(kept));
        Some(found)
    }

    /// Checks the credentials against the file, off the proxy's threads, and
    /// remembers the outcome for `credential_ttl`.
    pub async fn verify(self: &Arc<Self>, credentials: Vec<u8>) -> Checked {
        let key = self.key(&credentials);
        let generation = self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .generation;
        let file = self
            .file
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone();
        let user = tokio::task::spawn_blocking(move || {
            let decoded = decode_basic(&credentials)?;
            let colon = decoded.iter().position(|&b| b == b':')?;
            let user = std::str::from_utf8(&decoded[..colon]).ok()?;
            file.verify(user, &decoded[colon + 1..])
        })
        .await
        .ok()
        .flatten();
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if cache.generation == generation {
            let now = Instant::now();
            if cache.entries.len() >= MAX_REMEMBERED {
                cache.entries.retain(|_, (_, expires)| *expires > now);
                if cache.entries.len() >= MAX_REMEMBERED {
                    cache.entries.clear();
                    self.epoch.fetch_add(1, Ordering::Release);
                }
            }
            let expires = now + self.config.credential_ttl;
            cache.entries.insert(key, (user.clone(), expires));
        }
        user.map_or(Checked::Bad, Checked::User)
    }

    /// Counts a failure of `client` and says how long to wait before answering it:
    /// `failure_delay`, doubled with each further failure, up to `failure_delay_max`.
    pub fn failed(&self, client: IpAddr) -> Duration {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_REMEMBERED && !failures.contains_key(&client) {
            failures.retain(|_, (_, last)| now.duration_since(*last) < FAILURE_MEMORY);
            if failures.len() >= MAX_REMEMBERED {
                failures.clear();
            }
        }
        let entry = failures.entry(client).or_insert((0, now));
        if now.duration_since(entry.1) >= FAILURE_MEMORY {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        let doublings = (entry.0 - 1).min(16);
        (self.config.failure_delay * (1u32 << doublings)).min(self.config.failure_delay_max)
    }

    /// A client authenticated: its failures are forgotten.
    pub fn succeeded(&self, client: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if !failures.is_empty() {
            failures.remove(&client);
        }
    }
}

thread_local! {
    /// The cache entry this thread found last.
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// A cache entry as a thread keeps it: which authenticator's, at which epoch.
struct Last {
    id: u64,
    epoch: u64,
    credentials: Masked,
    user: Option<Arc<str>>,
    expires: Instant,
}

/// Longest credentials a thread keeps in its last entry (masked); longer ones, rare,
/// are hashed and looked up in the cache on every request.
const MASKED_MAX: usize = 256;

thread_local! {
    /// This thread's random bytes, which the credentials of its last entry are masked
    /// with.
    static PAD: [u8; MASKED_MAX] = random_pad();
}

fn random_pad() -> [u8; MASKED_MAX] {
    let state = foldhash::quality::RandomState::default();
    let mut pad = [0u8; MASKED_MAX];
    for (i, word) in pad.chunks_exact_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        word.copy_from_slice(&h.finish().to_ne_bytes());
    }
    pad
}

/// Credentials as a thread keeps them: each byte XOR the thread's pad. Empty (matching
/// nothing) for credentials longer than the pad.
struct Masked(Box<[u8]>);

impl Masked {
    fn of(credentials: &[u8]) -> Masked {
        if credentials.len() > MASKED_MAX {
            return Masked(Box::default());
        }
        PAD.with(|pad| Masked(credentials.iter().zip(pad).map(|(c, p)| c ^ p).collect()))
    }

    /// Whether these are `credentials` (never, for empty or too long ones).
    fn holds(&self, credentials: &[u8]) -> bool {
        let kept = &self.0[..];
        if kept.len() != credentials.len() || kept.is_empty() {
            return false;
        }
        PAD.with(|pad| {
            let n = kept.len();
            if n < 8 {
                return (0..n).all(|i| kept[i] ^ credentials[i] == pad[i]);
            }
            // Every byte compared, the differences gathered eight at a time, the last
            // word overlapping the one before: no branch per byte.
            let word = |b: &[u8], at: usize| {
                u64::from_ne_bytes(b[at..at + 8].try_into().expect("eight bytes"))
            };
            let both = |at: usize| word(kept, at) ^ word(credentials, at) ^ word(pad, at);
            let mut differ = both(n - 8);
            for at in (0..n - 8).step_by(8) {
                differ |= both(at);
            }
            differ == 0
        })
    }
}

fn checked(user: &Option<Arc<str>>) -> Checked {
    user.clone().map_or(Checked::Bad, Checked::User)
}

/// Decodes `Basic <base64>` into `user:password` bytes.
fn decode_basic(value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_finds_exactly_the_credentials_it_kept() {
        for len in [1, 7, 8, 9, 16, 60, 255, 256] {
            let credentials: Vec<u8> = (0..len).map(|i| b'A' + (i % 26) as u8).collect();
            let kept = Masked::of(&credentials);
            assert!(kept.holds(&credentials), "length {len}");
            if len >= 8 {
                // Eight pad bytes all zero: one chance in 2^64.
                assert_ne!(&kept.0[..], &credentials[..], "kept masked, length {len}");
            }
            for at in 0..len {
                let mut other = credentials.clone();
                other[at] ^= 1;
                assert!(!kept.holds(&other), "length {len}, byte {at} changed");
            }
            assert!(
                !kept.holds(&credentials[..len - 1]),
                "length {len}, shorter"
            );
            let mut longer = credentials.clone();
            longer.push(b'A');
            assert!(!kept.holds(&longer), "length {len}, longer");
        }
        let long = vec![b'x'; MASKED_MAX + 1];
        assert!(!Masked::of(&long).holds(&long), "too long to keep");
        assert!(!Masked::of(b"").holds(b""));
    }
}
