//! The body chunks a flight holds, oldest first.
//!
//! Most bodies a cache fills arrive in one chunk (a small object in the origin's first
//! read): the first chunk is kept inline, so that a flight of one chunk makes no
//! allocation for it, as a queue would for its first element (one allocation and one
//! free on every such miss).

use std::collections::VecDeque;

use bytes::Bytes;

/// A queue of body chunks: `first` is the oldest, `rest` the others in order. When
/// `first` is empty, so is `rest`.
#[derive(Default)]
pub(super) struct Chunks {
    first: Option<Bytes>,
    rest: VecDeque<Bytes>,
}

impl Chunks {
    pub(super) fn push_back(&mut self, chunk: Bytes) {
        match self.first {
            None => self.first = Some(chunk),
            Some(_) => self.rest.push_back(chunk),
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<Bytes> {
        let front = self.first.take();
        self.first = self.rest.pop_front();
        front
    }

    pub(super) fn front(&self) -> Option<&Bytes> {
        self.first.as_ref()
    }

    /// The chunk `i` places after the oldest.
    pub(super) fn get(&self, i: usize) -> Option<&Bytes> {
        match i {
            0 => self.first.as_ref(),
            _ => self.rest.get(i - 1),
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(self.rest.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_their_order_through_pushes_and_pops() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let mut c = Chunks::default();
        assert_eq!((c.iter().count(), c.front(), c.get(0)), (0, None, None));
        c.push_back(b("a"));
        assert_eq!((c.iter().count(), c.front()), (1, Some(&b("a"))));
        c.push_back(b("b"));
        c.push_back(b("c"));
        assert_eq!(
            c.iter().cloned().collect::<Vec<_>>(),
            [b("a"), b("b"), b("c")]
        );
        assert_eq!(
            (c.get(1), c.get(2), c.get(3)),
            (Some(&b("b")), Some(&b("c")), None)
        );
        assert_eq!(c.pop_front(), Some(b("a")));
        assert_eq!(
            (c.iter().count(), c.front(), c.get(1)),
            (2, Some(&b("b")), Some(&b("c")))
        );
        c.push_back(b("d"));
        assert_eq!(c.pop_front(), Some(b("b")));
        assert_eq!(c.pop_front(), Some(b("c")));
        assert_eq!(c.pop_front(), Some(b("d")));
        assert_eq!((c.pop_front(), c.iter().count()), (None, 0));
        c.push_back(b("e"));
        assert_eq!(c.iter().cloned().collect::<Vec<_>>(), [b("e")]);
    }
}
