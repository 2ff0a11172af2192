//! One client's view of a flight: the head, then the body chunk by chunk, from memory
//! or, for what a fill that went to disk no longer keeps there, from its file.
//!
//! A flight's readers are made here too ([`Flight::reader`]), above the flight they
//! read, so the flight itself knows nothing of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;

use super::flight::{trim, Flight, ReaderPlace};
use crate::lock::lock;
use crate::spill::{SpillFile, SPILL_BATCH};

/// One client's view of a flight. Dropping it leaves the flight.
pub struct FlightReader<H> {
    pub(super) flight: Arc<Flight<H>>,
    pub(super) id: u64,
    /// Index of the next chunk, when it is in memory.
    pub(super) pos: usize,
    /// Byte offset of the next chunk in the body.
    pub(super) at: u64,
    /// A read of the spill file under way (the next chunk is no longer in memory).
    reading: Option<FileRead>,
}

/// A read of a spill file, boxed: rare, and inline it would make every reader larger.
type FileRead = Pin<Box<dyn Future<Output = std::io::Result<Bytes>> + Send>>;

/// What a reader finds when it looks at its flight.
enum Found {
    /// The next chunk, from memory.
    Chunk(Bytes),
    /// The next bytes are in the spill file only.
    InFile(Arc<SpillFile>, usize),
    /// The end: complete (`None`) or failed.
    End(Option<Result<Bytes, ()>>),
}

impl<H: Clone> Flight<H> {
    /// A reader from the first chunk, unless the flight no longer keeps its start.
    pub(super) fn reader(self: &Arc<Self>) -> Option<FlightReader<H>> {
        let mut s = lock(&self.state);
        if !s.retain || self.is_abandoned() || s.end == Some(false) {
            return None;
        }
        let id = s.next_reader;
        s.next_reader += 1;
        s.readers.push(ReaderPlace {
            id,
            pos: 0,
            waker: None,
        });
        Some(FlightReader {
            flight: self.clone(),
            id,
            pos: 0,
            at: 0,
            reading: None,
        })
    }
}

impl<H: Clone> FlightReader<H> {
    /// Waits for the response head; `None` when the fetch failed before it.
    ///
    /// Cancel-safe: dropping the future loses nothing (the waker it left may be woken
    /// once more, for nothing).
    pub async fn head(&mut self) -> Option<H> {
        std::future::poll_fn(|cx| {
            let mut s = lock(&self.flight.state);
            if let Some(head) = &s.head {
                return Poll::Ready(Some(head.clone()));
            }
            if s.end.is_some() {
                return Poll::Ready(None);
            }
            s.wait(self.id, cx.waker());
            Poll::Pending
        })
        .await
    }

    /// The next body chunk: `Some(Ok)`, `None` at a complete end, `Some(Err(()))` when
    /// the fetch failed or was cut, or the part of a fill that went to disk could not
    /// be read back.
    ///
    /// Cancel-safe: a chunk is only consumed when it is returned (the waker a dropped
    /// wait left may be woken once more, for nothing).
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, ()>> {
        std::future::poll_fn(|cx| self.poll_next_chunk(cx)).await
    }

    /// [`FlightReader::next_chunk`], polled: for a body that reads the flight itself.
    /// A read of the spill file that was begun goes on at the next poll.
    pub fn poll_next_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>> {
        loop {
            if let Some(reading) = &mut self.reading {
                let read = ready!(reading.as_mut().poll(cx));
                self.reading = None;
                return Poll::Ready(match read {
                    Ok(bytes) => {
                        self.at += bytes.len() as u64;
                        Some(Ok(bytes))
                    }
                    Err(_) => Some(Err(())),
                });
            }
            match ready!(self.look(cx)) {
                Found::Chunk(chunk) => return Poll::Ready(Some(Ok(chunk))),
                Found::End(end) => return Poll::Ready(end),
                Found::InFile(file, len) => {
                    let at = self.at;
                    self.reading = Some(Box::pin(async move { file.read_at(at, len).await }));
                }
            }
        }
    }

    /// What is next for this reader, taking a chunk in memory; while there is nothing
    /// yet, the reader's waker is left for the next change.
    fn look(&mut self, cx: &mut Context<'_>) -> Poll<Found> {
        let mut s = lock(&self.flight.state);
        if self.at < s.base_bytes {
            // Only a spill file lets chunks leave memory before every reader has read
            // them.
            let Some(file) = s.spill.clone() else {
                return Poll::Ready(Found::End(Some(Err(()))));
            };
            let len = (s.base_bytes - self.at).min(SPILL_BATCH as u64) as usize;
            return Poll::Ready(Found::InFile(file, len));
        }
        // Back from the file exactly where memory starts.
        self.pos = self.pos.max(s.base);
        if let Some(chunk) = s.chunks.get(self.pos - s.base).cloned() {
            self.pos += 1;
            self.at += chunk.len() as u64;
            if let Some(r) = s.readers.iter_mut().find(|r| r.id == self.id) {
                r.pos = self.pos;
            }
            if !s.retain {
                trim(&mut s);
                drop(s);
                self.flight.drained.wake();
            }
            return Poll::Ready(Found::Chunk(chunk));
        }
        match s.end {
            Some(true) => Poll::Ready(Found::End(None)),
            Some(false) => Poll::Ready(Found::End(Some(Err(())))),
            None => {
                s.wait(self.id, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl<H> Drop for FlightReader<H> {
    fn drop(&mut self) {
        let mut s = lock(&self.flight.state);
        s.readers.retain(|r| r.id != self.id);
        if s.readers.is_empty() && s.end.is_none() {
            self.flight.abandoned.store(true, Ordering::Release);
        }
        trim(&mut s);
        drop(s);
        self.flight.drained.wake();
    }
}
