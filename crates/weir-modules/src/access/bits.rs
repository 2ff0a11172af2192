//! Sets of rules as bits, one per rule in rule order: what the walk intersects to
//! find the rules a request can match without visiting the others.

/// Words of 64 bits for `rules` rules.
pub(crate) fn words(rules: usize) -> usize {
    rules.div_ceil(64)
}

pub(crate) fn zeros(words: usize) -> Box<[u64]> {
    vec![0; words].into_boxed_slice()
}

pub(crate) fn set(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

pub(crate) fn get(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

pub(crate) fn or(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a |= b;
    }
}

/// Rows of `words` words, one row per value of something a rule tests (a method, a
/// scheme, a range of ports), stored end to end.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    words: usize,
    data: Box<[u64]>,
}

impl Rows {
    pub fn new(rows: usize, words: usize) -> Rows {
        Rows {
            words,
            data: zeros(rows * words),
        }
    }

    #[inline]
    pub fn row(&self, row: usize) -> &[u64] {
        &self.data[row * self.words..(row + 1) * self.words]
    }

    pub fn row_mut(&mut self, row: usize) -> &mut [u64] {
        &mut self.data[row * self.words..(row + 1) * self.words]
    }
}
