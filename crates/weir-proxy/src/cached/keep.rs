//! What a fill keeps of the body it receives, for the cache: in memory within the fill
//! budget when the memory tier will take the object, else written to the disk tier as
//! it arrives, else nothing (the response is then served, not stored).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use weir_cache::{Body, Cache, FillHold, Flight, Spill, SPILL_BATCH};

/// Where the kept body is.
enum Place {
    /// In the flight's chunks, charged to the fill budget.
    Memory,
    /// Too large for the memory tier: going to disk (the file is made at the first
    /// chunk, so a response with no body makes none).
    Disk(Option<Spill>),
}

/// One fill's keeper.
pub(super) struct Keeper {
    place: Place,
    /// Taken at the first bytes it must count: the budget is shared by every worker,
    /// and a hold taken and given back for a body that needs none moved the budget's
    /// cache line between cores four times a miss.
    hold: Option<FillHold>,
    declared: Option<u64>,
    /// Chunks pushed but not yet written to the spill file.
    batch: Vec<Bytes>,
    batch_bytes: usize,
    received: u64,
    memory_limit: u64,
    max_object: u64,
    /// The chunks are the origin's as `UpstreamBody` hands them out: a small one owns
    /// exactly its bytes.
    from_origin: bool,
}

impl Keeper {
    /// A keeper for a response that declares `declared` body bytes, if it does.
    /// `from_origin`: the chunks come as the origin's body gave them, no module
    /// between.
    pub(super) fn new(cache: &Cache, declared: Option<u64>, from_origin: bool) -> Keeper {
        let memory_limit = cache.memory_object_limit();
        let place = match declared {
            Some(n) if n > memory_limit => Place::Disk(None),
            _ => Place::Memory,
        };
        Keeper {
            place,
            hold: None,
            declared,
            batch: Vec::new(),
            batch_bytes: 0,
            received: 0,
            memory_limit,
            max_object: cache.settings().max_object_bytes,
            from_origin,
        }
    }

    fn hold(&mut self, cache: &Cache) -> &mut FillHold {
        self.hold.get_or_insert_with(|| cache.fill_budget().hold())
    }

    fn release(&mut self) {
        if let Some(hold) = &mut self.hold {
            hold.release();
        }
    }

    /// Whether every byte the response declared is in: the fill stores the body then,
    /// at once (`fetch.rs`), rather than at the stream's end.
    pub(super) fn is_complete(&self) -> bool {
        self.declared == Some(self.received)
    }

    /// Whether the body is kept in memory (and is stored from the flight's chunks).
    pub(super) fn in_memory(&self) -> bool {
        matches!(self.place, Place::Memory)
    }

    /// Whether the body is being written to disk (each chunk is then handed to
    /// [`Keeper::after_push`] once pushed).
    pub(super) fn to_disk(&self) -> bool {
        matches!(self.place, Place::Disk(Some(_)))
    }

    /// Takes note of `len` more bytes, before they are pushed to the flight. Returns
    /// `false` when the response can no longer be stored: larger than any object, no
    /// room in the fill budget, or too large for memory with no disk file to go to.
    /// The fill's room in the budget is then given back at once.
    pub(super) async fn before_push<H: Clone>(
        &mut self,
        cache: &Cache,
        flight: &Flight<H>,
        len: usize,
    ) -> bool {
        let keeps = self.take(cache, flight, len).await;
        if !keeps {
            self.release();
        }
        keeps
    }

    async fn take<H: Clone>(&mut self, cache: &Cache, flight: &Flight<H>, len: usize) -> bool {
        self.received += len as u64;
        if self.received > self.max_object {
            return false;
        }
        if self.in_memory() && self.received > self.memory_limit {
            // What the flight kept so far goes to disk first.
            self.release();
            let Some(mut spill) = cache.spill() else {
                return false;
            };
            let kept = flight.retained_body().unwrap_or_default();
            if spill.append(kept).await.is_err() {
                return false;
            }
            flight.spill_to(spill.file(), spill.len());
            self.place = Place::Disk(Some(spill));
        }
        if !self.in_memory() {
            // What goes to disk is counted until written (`after_push`).
            self.hold(cache);
        }
        // A body that arrives whole in its first chunk is stored at once, before the
        // fill waits for anything: it is never held in flight, so it is not counted
        // (nor is the budget touched).
        let whole_at_once = self.is_complete() && self.received == len as u64;
        match &mut self.place {
            Place::Memory if whole_at_once => true,
            Place::Memory => self.hold(cache).try_add(len as u64),
            Place::Disk(spill @ None) => match cache.spill() {
                Some(s) => {
                    flight.spill_to(s.file(), 0);
                    *spill = Some(s);
                    true
                }
                None => false,
            },
            Place::Disk(Some(_)) => true,
        }
    }

    /// After `chunk` was pushed, when the body goes to disk: it is written in batches.
    /// Returns `false` when the write failed (the response is then not stored).
    pub(super) async fn after_push<H: Clone>(&mut self, flight: &Flight<H>, chunk: Bytes) -> bool {
        if let Some(hold) = &mut self.hold {
            hold.add(chunk.len() as u64);
        }
        self.batch_bytes += chunk.len();
        self.batch.push(chunk);
        if self.batch_bytes >= SPILL_BATCH {
            return self.write_batch(flight).await;
        }
        true
    }

    async fn write_batch<H: Clone>(&mut self, flight: &Flight<H>) -> bool {
        let Place::Disk(Some(spill)) = &mut self.place else {
            return true;
        };
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        let written = spill.append(batch).await.is_ok();
        if written {
            flight.persisted(spill.len());
        }
        self.release();
        written
    }

    /// The complete body, to store: the flight's chunks in one allocation of exactly
    /// their size (plus `last`, not pushed yet), or the spill file. `None` when the
    /// last write to the file failed.
    pub(super) async fn finish<H: Clone>(
        &mut self,
        flight: &Arc<Flight<H>>,
        last: Option<Bytes>,
    ) -> Option<Body> {
        if self.in_memory() {
            let mut chunks = flight.retained_body()?;
            // A body in one chunk (the last, not pushed yet) needs no list.
            if chunks.is_empty() {
                let whole = last.map_or_else(Bytes::new, |c| own(c, self.from_origin));
                return Some(Body::Memory(whole));
            }
            chunks.extend(last);
            return Some(Body::Memory(concat(chunks, self.from_origin)));
        }
        if !self.write_batch(flight).await {
            return None;
        }
        match std::mem::replace(&mut self.place, Place::Memory) {
            Place::Disk(Some(spill)) => Some(spill.finish()),
            // No chunk came: an empty body.
            _ => Some(Body::Memory(Bytes::new())),
        }
    }
}

/// The stored body in one allocation of exactly its size: a chunk may be a slice of the
/// connection's read buffer, and keeping it would pin that whole buffer in the cache.
/// `from_origin`: the chunks are the origin's as `UpstreamBody` hands them out, where
/// a small one is already such an allocation.
fn concat(mut chunks: Vec<Bytes>, from_origin: bool) -> Bytes {
    match chunks.len() {
        0 => Bytes::new(),
        1 => own(chunks.pop().expect("one chunk"), from_origin),
        _ => {
            let mut b = BytesMut::with_capacity(chunks.iter().map(Bytes::len).sum());
            for c in chunks {
                b.extend_from_slice(&c);
            }
            b.freeze()
        }
    }
}

/// One chunk as the stored body: as it is when it is an origin's chunk that owns
/// exactly its bytes, else copied into an allocation of its own.
fn own(chunk: Bytes, from_origin: bool) -> Bytes {
    match from_origin && crate::upstream::owns_its_bytes(&chunk) {
        true => chunk,
        false => Bytes::copy_from_slice(&chunk),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_body_does_not_keep_the_buffer_it_was_read_into() {
        let buffer = Bytes::from(vec![7u8; 64 << 10]);
        let one = concat(vec![buffer.slice(0..1000)], false);
        let two = concat(vec![buffer.slice(0..10), buffer.slice(10..20)], true);
        assert!(
            buffer.is_unique(),
            "a stored body refers to the read buffer"
        );
        assert_eq!((one.len(), two.len()), (1000, 20));
    }

    #[test]
    fn an_origin_chunk_of_its_own_is_stored_without_a_copy() {
        let own = Bytes::copy_from_slice(&[7u8; 1000]);
        assert_eq!(concat(vec![own.clone()], true).as_ptr(), own.as_ptr());
        assert_ne!(concat(vec![own.clone()], false).as_ptr(), own.as_ptr());
    }

    /// A flight to push into, as a fill has.
    fn flight() -> weir_cache::FlightWriter<Arc<()>> {
        let key = weir_cache::CacheKey::for_url("http", "origin.test", "/k");
        match weir_cache::Coalescer::new().join(&key, || None::<()>) {
            Ok(weir_cache::Join::Leader(flight, _reader)) => flight,
            _ => unreachable!("a new coalescer has no flight"),
        }
    }

    #[tokio::test]
    async fn a_body_whole_in_its_first_chunk_is_not_counted() {
        let cache = Cache::new(weir_cache::CacheSettings::default());
        let flight = flight();
        let mut whole = Keeper::new(&cache, Some(1000), true);
        assert!(whole.before_push(&cache, &flight, 1000).await);
        assert_eq!(cache.fill_budget().held(), 0);
        assert!(whole.hold.is_none(), "the budget was not touched");

        // In two chunks, or of no declared length: held until the keeper goes.
        let mut halves = Keeper::new(&cache, Some(2000), true);
        assert!(halves.before_push(&cache, &flight, 1000).await);
        let mut unknown = Keeper::new(&cache, None, true);
        assert!(unknown.before_push(&cache, &flight, 1000).await);
        assert_eq!(cache.fill_budget().held(), 2000);
        drop((halves, unknown));
        assert_eq!(cache.fill_budget().held(), 0);
    }
}
