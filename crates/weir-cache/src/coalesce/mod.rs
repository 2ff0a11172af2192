//! Request coalescing: concurrent misses for one key share one origin fetch.
//!
//! The fetch writes the response head and body chunks into a [`Flight`]; every client
//! waiting on that key reads them through its own [`FlightReader`] as they arrive.
//! While the response may still be stored, the flight keeps every chunk (the body
//! is bounded by the largest storable object, and a late reader needs the start).
//! Once it will not be stored, chunks every reader has passed are dropped and the
//! writer waits for slow readers, so a huge download is never held in memory.
//! When the last reader goes away the flight is abandoned and the fetch stops.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::watch;

use crate::key::CacheKey;
use crate::spill::SpillFile;

mod reader;
pub use reader::FlightReader;

/// Bytes a non-retaining flight may buffer ahead of its slowest reader.
const WINDOW: usize = 1 << 20;

/// The in-flight fetches, by key.
pub struct Coalescer<H> {
    flights: Mutex<HashMap<CacheKey, Arc<Flight<H>>>>,
}

/// The result of [`Coalescer::join`].
pub enum Join<H> {
    /// No fetch was in flight: the caller must start one and write into this flight.
    Leader(Arc<Flight<H>>, FlightReader<H>),
    /// A fetch is in flight: read it.
    Follower(FlightReader<H>),
}

impl<H: Clone> Default for Coalescer<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Clone> Coalescer<H> {
    /// No flights.
    pub fn new() -> Self {
        Coalescer {
            flights: Mutex::new(HashMap::new()),
        }
    }

    /// Joins the flight for `key`, or creates it (the caller is then the leader).
    /// `recheck` runs under the table's lock when there is no flight, so a fetch that
    /// just finished and stored its response is found instead of fetched again; when it
    /// returns `Some`, that value is returned and no flight is created.
    pub fn join<T>(
        &self,
        key: &CacheKey,
        recheck: impl FnOnce() -> Option<T>,
    ) -> Result<Join<H>, T> {
        let mut flights = lock(&self.flights);
        if let Some(flight) = flights.get(key) {
            if let Some(reader) = flight.reader() {
                return Ok(Join::Follower(reader));
            }
        }
        if let Some(found) = recheck() {
            return Err(found);
        }
        let flight = Arc::new(Flight::new());
        let reader = flight.reader().expect("a new flight accepts readers");
        flights.insert(key.clone(), flight.clone());
        Ok(Join::Leader(flight, reader))
    }

    /// Removes the flight for `key` if it is `flight` (new requests will not join it).
    pub fn leave(&self, key: &CacheKey, flight: &Arc<Flight<H>>) {
        let mut flights = lock(&self.flights);
        if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            flights.remove(key);
        }
    }

    /// Removes the flights whose key `matches` from the table: their readers go on
    /// reading them, new requests start fetches of their own. For invalidations, so
    /// that no request that arrives after one is served what was fetched before it.
    pub fn detach(&self, matches: impl Fn(&CacheKey) -> bool) -> usize {
        let mut flights = lock(&self.flights);
        let before = flights.len();
        flights.retain(|key, _| !matches(key));
        before - flights.len()
    }

    /// Number of fetches in flight.
    pub fn len(&self) -> usize {
        lock(&self.flights).len()
    }

    /// Whether no fetch is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One fetch in flight, shared by its readers.
pub struct Flight<H> {
    pub(super) state: Mutex<State<H>>,
    /// Bumped on every change the readers care about.
    progress: watch::Sender<u64>,
    /// Bumped when a reader advances or leaves (the writer may be waiting for room).
    pub(super) drained: watch::Sender<u64>,
}

pub(super) struct State<H> {
    head: Option<H>,
    chunks: VecDeque<Bytes>,
    /// Absolute index of `chunks[0]`.
    base: usize,
    /// Byte offset in the body of `chunks[0]`.
    base_bytes: u64,
    buffered: usize,
    /// The file the body is being written to, once it went to disk: chunks it holds
    /// leave memory, and readers behind them read it from there.
    spill: Option<Arc<SpillFile>>,
    /// Bytes of the body the file holds.
    persisted: u64,
    end: Option<bool>,
    retain: bool,
    readers: Vec<(u64, usize)>,
    next_reader: u64,
    abandoned: bool,
}

impl<H: Clone> Flight<H> {
    fn new() -> Self {
        Flight {
            state: Mutex::new(State {
                head: None,
                chunks: VecDeque::new(),
                base: 0,
                base_bytes: 0,
                buffered: 0,
                spill: None,
                persisted: 0,
                end: None,
                retain: true,
                readers: Vec::new(),
                next_reader: 0,
                abandoned: false,
            }),
            progress: watch::channel(0).0,
            drained: watch::channel(0).0,
        }
    }

    /// A reader from the first chunk, unless the flight no longer keeps its start.
    fn reader(self: &Arc<Self>) -> Option<FlightReader<H>> {
        let mut s = lock(&self.state);
        if !s.retain || s.abandoned || s.end == Some(false) {
            return None;
        }
        let id = s.next_reader;
        s.next_reader += 1;
        s.readers.push((id, 0));
        Some(FlightReader {
            flight: self.clone(),
            id,
            pos: 0,
            at: 0,
            rx: self.progress.subscribe(),
        })
    }

    /// Publishes the response head.
    pub fn set_head(&self, head: H) {
        lock(&self.state).head = Some(head);
        self.bump();
    }

    /// Stops keeping chunks every reader has read (the response will not be stored);
    /// late readers can no longer join.
    pub fn stop_retaining(&self) {
        let mut s = lock(&self.state);
        s.retain = false;
        trim(&mut s);
    }

    /// Appends a body chunk. When the flight does not retain chunks, waits while
    /// readers are more than a window behind.
    pub async fn push(&self, chunk: Bytes) {
        let mut drained = self.drained.subscribe();
        {
            let mut s = lock(&self.state);
            s.buffered += chunk.len();
            s.chunks.push_back(chunk);
        }
        self.bump();
        loop {
            {
                let s = lock(&self.state);
                if s.retain || s.abandoned || s.buffered <= WINDOW {
                    return;
                }
            }
            if drained.changed().await.is_err() {
                return;
            }
        }
    }

    /// From now on the body is also written to `file` (which holds its first
    /// `persisted` bytes already): what the file holds leaves memory, and late readers
    /// read it from there, so the flight keeps at most what is not written yet.
    pub fn spill_to(&self, file: Arc<SpillFile>, persisted: u64) {
        let mut s = lock(&self.state);
        s.spill = Some(file);
        s.persisted = persisted;
        trim(&mut s);
    }

    /// The file now holds the body's first `persisted` bytes.
    pub fn persisted(&self, persisted: u64) {
        let mut s = lock(&self.state);
        s.persisted = persisted;
        trim(&mut s);
    }

    /// Bytes of body chunks the flight holds in memory.
    pub fn buffered(&self) -> usize {
        lock(&self.state).buffered
    }

    /// Marks the body complete (`ok`) or failed.
    pub fn finish(&self, ok: bool) {
        lock(&self.state).end = Some(ok);
        self.bump();
    }

    /// All chunks, when the flight retained them (for storing the complete body).
    pub fn retained_body(&self) -> Option<Vec<Bytes>> {
        let s = lock(&self.state);
        (s.retain && s.base == 0).then(|| s.chunks.iter().cloned().collect())
    }

    /// Whether every reader has gone away.
    pub fn is_abandoned(&self) -> bool {
        lock(&self.state).abandoned
    }

    /// Completes when every reader has gone away.
    pub async fn abandoned(&self) {
        let mut drained = self.drained.subscribe();
        loop {
            if self.is_abandoned() {
                return;
            }
            if drained.changed().await.is_err() {
                return;
            }
        }
    }

    fn bump(&self) {
        self.progress.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// Drops the chunks a spill file holds, and, when the flight does not retain its
/// body, those every reader has passed.
fn trim<H>(s: &mut State<H>) {
    let passed = if s.retain {
        0
    } else {
        s.readers.iter().map(|r| r.1).min().unwrap_or(usize::MAX)
    };
    while let Some(front) = s.chunks.front() {
        let end = s.base_bytes + front.len() as u64;
        let on_disk = s.spill.is_some() && end <= s.persisted;
        if !on_disk && s.base >= passed {
            break;
        }
        s.buffered -= front.len();
        s.base += 1;
        s.base_bytes = end;
        s.chunks.pop_front();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
