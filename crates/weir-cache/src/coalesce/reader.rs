//! One client's view of a flight: the head, then the body chunk by chunk, from memory
//! or, for what a fill that went to disk no longer keeps there, from its file.
//!
//! A flight's readers are made here too ([`Flight::reader`]), above the flight they
//! read, so the flight itself knows nothing of them.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use super::flight::{trim, Flight};
use crate::lock::lock;
use crate::spill::SPILL_BATCH;

/// One client's view of a flight. Dropping it leaves the flight.
pub struct FlightReader<H> {
    pub(super) flight: Arc<Flight<H>>,
    pub(super) id: u64,
    /// Index of the next chunk, when it is in memory.
    pub(super) pos: usize,
    /// Byte offset of the next chunk in the body.
    pub(super) at: u64,
    pub(super) rx: watch::Receiver<u64>,
}

impl<H: Clone> Flight<H> {
    /// A reader from the first chunk, unless the flight no longer keeps its start.
    pub(super) fn reader(self: &Arc<Self>) -> Option<FlightReader<H>> {
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
    /// the fetch failed or was cut, or the part of a fill that went to disk could not
    /// be read back.
    ///
    /// Cancel-safe: a chunk is only consumed when it is returned.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            let from_file = {
                let mut s = lock(&self.flight.state);
                if self.at < s.base_bytes {
                    // Only a spill file lets chunks leave memory before every reader
                    // has read them.
                    let Some(file) = s.spill.clone() else {
                        return Some(Err(()));
                    };
                    let len = (s.base_bytes - self.at).min(SPILL_BATCH as u64) as usize;
                    Some((file, len))
                } else {
                    // Back from the file exactly where memory starts.
                    self.pos = self.pos.max(s.base);
                    if self.pos < s.base + s.chunks.len() {
                        let chunk = s.chunks[self.pos - s.base].clone();
                        self.pos += 1;
                        self.at += chunk.len() as u64;
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
                        None => None,
                    }
                }
            };
            if let Some((file, len)) = from_file {
                return match file.read_at(self.at, len).await {
                    Ok(bytes) => {
                        self.at += bytes.len() as u64;
                        Some(Ok(bytes))
                    }
                    Err(_) => Some(Err(())),
                };
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
