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
    state: Mutex<State<H>>,
    /// Bumped on every change the readers care about.
    progress: watch::Sender<u64>,
    /// Bumped when a reader advances or leaves (the writer may be waiting for room).
    drained: watch::Sender<u64>,
}

struct State<H> {
    head: Option<H>,
    chunks: VecDeque<Bytes>,
    /// Absolute index of `chunks[0]`.
    base: usize,
    buffered: usize,
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
                buffered: 0,
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

/// Drops chunks every reader has passed, when the flight does not retain them.
fn trim<H>(s: &mut State<H>) {
    if s.retain {
        return;
    }
    let min = s.readers.iter().map(|r| r.1).min().unwrap_or(usize::MAX);
    while s.base < min {
        match s.chunks.pop_front() {
            Some(c) => {
                s.buffered -= c.len();
                s.base += 1;
            }
            None => break,
        }
    }
}

/// One client's view of a flight. Dropping it leaves the flight.
pub struct FlightReader<H> {
    flight: Arc<Flight<H>>,
    id: u64,
    pos: usize,
    rx: watch::Receiver<u64>,
}

impl<H: Clone> FlightReader<H> {
    /// Waits for the response head; `None` when the fetch failed before it.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn head(&mut self) -> Option<H> {
        loop {
            {
                let s = lock(&self.flight.state);
                if let Some(h) = &s.head {
                    return Some(h.clone());
                }
                if s.end.is_some() {
                    return None;
                }
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The next body chunk: `Some(Ok)`, `None` at a complete end, `Some(Err(()))` when
    /// the fetch failed or was cut.
    ///
    /// Cancel-safe: a chunk is only consumed when it is returned.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            {
                let mut s = lock(&self.flight.state);
                if self.pos < s.base + s.chunks.len() {
                    let chunk = s.chunks[self.pos - s.base].clone();
                    self.pos += 1;
                    if let Some(r) = s.readers.iter_mut().find(|r| r.0 == self.id) {
                        r.1 = self.pos;
                    }
                    if !s.retain {
                        trim(&mut s);
                        drop(s);
                        self.flight.drained.send_modify(|v| *v = v.wrapping_add(1));
                    }
                    return Some(Ok(chunk));
                }
                match s.end {
                    Some(true) => return None,
                    Some(false) => return Some(Err(())),
                    None => {}
                }
            }
            if self.rx.changed().await.is_err() {
                return Some(Err(()));
            }
        }
    }
}

impl<H> Drop for FlightReader<H> {
    fn drop(&mut self) {
        let mut s = lock(&self.flight.state);
        s.readers.retain(|r| r.0 != self.id);
        if s.readers.is_empty() && s.end.is_none() {
            s.abandoned = true;
        }
        trim(&mut s);
        drop(s);
        self.flight.drained.send_modify(|v| *v = v.wrapping_add(1));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CacheKey {
        CacheKey::for_url("http", "h", "/")
    }

    #[tokio::test]
    async fn followers_read_everything_the_leader_wrote() {
        let c: Coalescer<u16> = Coalescer::new();
        let Ok(Join::Leader(flight, mut leader)) = c.join(&key(), || None::<()>) else {
            panic!("first join leads")
        };
        flight.set_head(200);
        flight.push(Bytes::from_static(b"ab")).await;
        let Ok(Join::Follower(mut late)) = c.join(&key(), || None::<()>) else {
            panic!("second join follows")
        };
        flight.push(Bytes::from_static(b"cd")).await;
        flight.finish(true);
        for r in [&mut leader, &mut late] {
            assert_eq!(r.head().await, Some(200));
            let mut body = Vec::new();
            while let Some(c) = r.next_chunk().await {
                body.extend_from_slice(&c.unwrap());
            }
            assert_eq!(body, b"abcd");
        }
        assert_eq!(flight.retained_body().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn dropping_every_reader_abandons_the_flight() {
        let c: Coalescer<u16> = Coalescer::new();
        let Ok(Join::Leader(flight, leader)) = c.join(&key(), || None::<()>) else {
            panic!()
        };
        assert!(!flight.is_abandoned());
        drop(leader);
        flight.abandoned().await;
        assert!(flight.is_abandoned());
    }

    #[tokio::test]
    async fn a_non_retaining_flight_drops_read_chunks() {
        let c: Coalescer<u16> = Coalescer::new();
        let Ok(Join::Leader(flight, mut r)) = c.join(&key(), || None::<()>) else {
            panic!()
        };
        flight.stop_retaining();
        assert!(c
            .join(&key(), || None::<()>)
            .is_ok_and(|j| matches!(j, Join::Leader(..))));
        flight.push(Bytes::from(vec![0u8; 1000])).await;
        r.next_chunk().await.unwrap().unwrap();
        assert_eq!(lock(&flight.state).buffered, 0);
        assert!(flight.retained_body().is_none());
    }

    #[tokio::test]
    async fn recheck_short_circuits_when_no_flight() {
        let c: Coalescer<u16> = Coalescer::new();
        assert!(matches!(c.join(&key(), || Some(7)), Err(7)));
        assert!(c.is_empty());
    }
}
