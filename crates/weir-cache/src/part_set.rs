//! A URL's parts (see `parts.rs`): one representation's 206 bodies by offset, with the
//! head of the newest. Immutable: a new part makes a new set. Below the storage tier,
//! which charges it.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::object::CachedObject;

/// What a stored set of parts costs besides its head and bytes: the map's nodes.
const PIECE_COST: usize = 64;
/// One 206 response to keep: bytes `first..first + body.len()` of a representation of
/// `length` bytes.
#[derive(Debug)]
pub struct Part {
    /// The response as a 200 for the whole representation would be: its fields
    /// (without `Content-Range`, with the complete `Content-Length`), no body, and the
    /// storage policy of that 200.
    pub head: CachedObject,
    /// The offset of the first byte.
    pub first: u64,
    /// The bytes (in one allocation of their own: a slice of a read buffer would keep
    /// the whole buffer).
    pub body: Bytes,
    /// The complete length (`Content-Range: bytes a-b/LENGTH`).
    pub length: u64,
}

/// The parts of one representation of a URL.
#[derive(Debug)]
pub struct PartSet {
    /// The newest part's head: its fields and freshness are those of the set.
    pub head: Arc<CachedObject>,
    pub(crate) validator: Box<str>,
    pub(crate) length: u64,
    /// By offset; never overlapping or touching.
    pieces: BTreeMap<u64, Bytes>,
    weight: u32,
}

impl PartSet {
    /// The complete length of the representation.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Bytes `first..=last`, when one piece holds them all.
    pub fn slice(&self, first: u64, last: u64) -> Option<Bytes> {
        let (&start, piece) = self.pieces.range(..=first).next_back()?;
        let end = start + piece.len() as u64;
        (last < end).then(|| piece.slice((first - start) as usize..=(last - start) as usize))
    }

    /// Bytes charged in the memory tier.
    pub(crate) fn weight(&self) -> u32 {
        self.weight
    }

    pub(crate) fn held(&self) -> u64 {
        self.pieces.values().map(|p| p.len() as u64).sum()
    }

    /// The whole body, when one piece covers it.
    pub(crate) fn complete(&self) -> Option<Bytes> {
        let piece = self.pieces.get(&0)?;
        (piece.len() as u64 == self.length).then(|| piece.clone())
    }

    /// `old`'s pieces (if any) with `part`'s added, under `part`'s head.
    pub(crate) fn with(old: Option<&PartSet>, part: Part, validator: Box<str>) -> PartSet {
        let mut pieces = old.map(|o| o.pieces.clone()).unwrap_or_default();
        let mut first = part.first;
        let mut end = part.first + part.body.len() as u64;
        let mut neighbours = Vec::new();
        for (&start, piece) in pieces.range(..=end).rev() {
            let piece_end = start + piece.len() as u64;
            if piece_end < first {
                break;
            }
            neighbours.push(start);
        }
        let merged = if neighbours.is_empty() {
            part.body
        } else {
            let taken: Vec<(u64, Bytes)> = neighbours
                .iter()
                .filter_map(|s| pieces.remove(s).map(|p| (*s, p)))
                .collect();
            for (start, piece) in &taken {
                first = first.min(*start);
                end = end.max(start + piece.len() as u64);
            }
            let mut joined = BytesMut::zeroed((end - first) as usize);
            // The validator is strong: where pieces overlap, their bytes are the same.
            for (start, piece) in taken.iter().chain([(part.first, part.body)].iter()) {
                let at = (start - first) as usize;
                joined[at..at + piece.len()].copy_from_slice(piece);
            }
            joined.freeze()
        };
        pieces.insert(first, merged);
        let head = Arc::new(part.head);
        let bytes: usize = pieces.values().map(Bytes::len).sum();
        let weight = head.weight() as usize + bytes + PIECE_COST * pieces.len() + validator.len();
        PartSet {
            head,
            validator,
            length: part.length,
            pieces,
            weight: weight.min(u32::MAX as usize) as u32,
        }
    }
}
