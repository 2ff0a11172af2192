//! One fetch in flight: the response head and body chunks its readers share, and
//! what memory it keeps for them.
//!
//! Its own file, below the coalescer and the readers, which both work on a flight's
//! state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use smallvec::SmallVec;

use super::chunks::Chunks;
use crate::lock::lock;
use crate::spill::SpillFile;

/// Bytes a non-retaining flight may buffer ahead of its slowest reader.
const WINDOW: usize = 1 << 20;

/// One fetch in flight, shared by its readers.
///
/// Each reader keeps its waker in its own place in the state ([`ReaderPlace`]): it
/// checks the state and leaves its waker under one lock, and the writer changes the
/// state and wakes the waiting readers under the same lock, so no change goes unseen.
/// A watch channel's send woke eight notifiers (each behind its own lock), about 6,000
/// instructions a miss; a `Notify` cost each wait a registration and its removal,
/// about 800 instructions a miss. The writer, one fill task, waits on an
/// `AtomicWaker`: a `Notify` cost it about 600 instructions a miss, registering and
/// unregistering each time it waited for the origin with the readers' departure in a
/// `select!`; it registers before it reads the state a second time.
pub struct Flight<H> {
    pub(super) state: Mutex<State<H>>,
    /// Woken when a reader advances or leaves: the writer may be waiting for room, or
    /// for the readers to go. Holds one waker: only the one task that writes the
    /// flight waits on it ([`Flight::push`], [`Flight::abandoned`]).
    pub(super) drained: AtomicWaker,
    /// Every reader has gone away before the end. Set under the state's lock (where
    /// it is also read), and read without it by the writer, which checks it each time
    /// it waits (a lock taken twice per wait, four waits a miss).
    pub(super) abandoned: AtomicBool,
}

pub(super) struct State<H> {
    pub(super) head: Option<H>,
    pub(super) chunks: Chunks,
    /// Absolute index of `chunks[0]`.
    pub(super) base: usize,
    /// Byte offset in the body of `chunks[0]`.
    pub(super) base_bytes: u64,
    pub(super) buffered: usize,
    /// The file the body is being written to, once it went to disk: chunks it holds
    /// leave memory, and readers behind them read it from there.
    pub(super) spill: Option<Arc<SpillFile>>,
    /// Bytes of the body the file holds.
    pub(super) persisted: u64,
    pub(super) end: Option<bool>,
    pub(super) retain: bool,
    /// Inline for one reader (the leader alone, a miss nearly always): a list on the
    /// heap cost every miss an allocation and its release.
    pub(super) readers: SmallVec<[ReaderPlace; 1]>,
    pub(super) next_reader: u64,
}

/// One reader's place in its flight.
pub(super) struct ReaderPlace {
    pub(super) id: u64,
    /// Index of the next chunk it reads.
    pub(super) pos: usize,
    /// Its task, while it waits for the flight to change.
    pub(super) waker: Option<Waker>,
}

impl<H> State<H> {
    /// Leaves reader `id`'s waker, to be woken by the next change.
    pub(super) fn wait(&mut self, id: u64, waker: &Waker) {
        if let Some(place) = self.readers.iter_mut().find(|r| r.id == id) {
            match &mut place.waker {
                Some(w) if w.will_wake(waker) => {}
                slot => *slot = Some(waker.clone()),
            }
        }
    }

    /// Wakes every reader that waits. Under the flight's lock, so that no reader checks
    /// the state between the change and its wake-up; a wake-up only schedules the
    /// reader's task.
    fn wake_readers(&mut self) {
        for place in &mut self.readers {
            if let Some(waker) = place.waker.take() {
                waker.wake();
            }
        }
    }
}

impl<H> Flight<H> {
    /// Marks the flight failed unless it has ended: for its writer going away.
    pub(super) fn fail_unless_ended(&self) {
        let mut s = lock(&self.state);
        if s.end.is_none() {
            s.end = Some(false);
            s.wake_readers();
        }
    }
}

impl<H: Clone> Flight<H> {
    pub(super) fn new() -> Self {
        Flight {
            state: Mutex::new(State {
                head: None,
                chunks: Chunks::default(),
                base: 0,
                base_bytes: 0,
                buffered: 0,
                spill: None,
                persisted: 0,
                end: None,
                retain: true,
                readers: SmallVec::new(),
                next_reader: 0,
            }),
            drained: AtomicWaker::new(),
            abandoned: AtomicBool::new(false),
        }
    }

    /// Publishes the response head.
    pub fn set_head(&self, head: H) {
        let mut s = lock(&self.state);
        s.head = Some(head);
        s.wake_readers();
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
        let has_room = |s: &State<H>| s.retain || self.is_abandoned() || s.buffered <= WINDOW;
        {
            let mut s = lock(&self.state);
            s.buffered += chunk.len();
            s.chunks.push_back(chunk);
            s.wake_readers();
            // Under the same lock: a flight that keeps its chunks (a fill being
            // stored) always has room, and need not be locked again to learn so.
            if has_room(&s) {
                return;
            }
        }
        self.wait_drained(|| has_room(&lock(&self.state))).await;
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
        let mut s = lock(&self.state);
        s.end = Some(ok);
        s.wake_readers();
    }

    /// All chunks, when the flight retained them (for storing the complete body).
    pub fn retained_body(&self) -> Option<Vec<Bytes>> {
        let s = lock(&self.state);
        (s.retain && s.base == 0).then(|| s.chunks.iter().cloned().collect())
    }

    /// Whether every reader has gone away.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// Completes when every reader has gone away. Only the task that writes the flight
    /// may wait for it (see `drained`).
    pub async fn abandoned(&self) {
        self.wait_drained(|| self.is_abandoned()).await;
    }

    /// Waits until `ready` holds, reading it again each time a reader advances or
    /// leaves. Cancel-safe: nothing is left behind but the registered waker, which the
    /// next wait replaces.
    async fn wait_drained(&self, mut ready: impl FnMut() -> bool) {
        std::future::poll_fn(|cx| {
            if ready() {
                return std::task::Poll::Ready(());
            }
            self.drained.register(cx.waker());
            match ready() {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            }
        })
        .await
    }
}

/// Drops the chunks a spill file holds, and, when the flight does not retain its
/// body, those every reader has passed.
pub(super) fn trim<H>(s: &mut State<H>) {
    let passed = if s.retain {
        0
    } else {
        s.readers.iter().map(|r| r.pos).min().unwrap_or(usize::MAX)
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
