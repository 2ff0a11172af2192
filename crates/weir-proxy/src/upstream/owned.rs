//! An origin's response, detached from the connection's read buffer.
//!
//! hyper hands out header values and body chunks as slices of the connection's read
//! buffer (8 KiB and up). Whatever keeps one of them alive (a stored object, a flight
//! retaining chunks for late readers) keeps the whole buffer, and hyper allocates a
//! fresh one for the next response: a stored 1 KB object held about 20 KB, and the
//! kernel's clearing of the fresh pages was a third of Weir's CPU on cache misses.
//! Small pieces are copied into allocations of their own size; large chunks are most
//! of their buffer already and are passed on as they are.

use bytes::Bytes;
use http::header::HeaderMap;

/// Header values of a response, in an allocation of their own.
pub(super) fn header_values(headers: &mut HeaderMap) {
    crate::headers::detach_values(headers);
}

/// Body chunks shorter than this are copied out of the read buffer.
pub(super) const COPY_CHUNKS_BELOW: usize = 16 * 1024;

/// A body chunk that no longer shares the connection's read buffer when it is small.
pub(super) fn chunk(data: Bytes) -> Bytes {
    if data.len() < COPY_CHUNKS_BELOW && !data.is_empty() {
        Bytes::copy_from_slice(&data)
    } else {
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_copied_only_when_small() {
        let big = Bytes::from(vec![7u8; COPY_CHUNKS_BELOW]);
        let ptr = big.as_ptr();
        assert_eq!(chunk(big).as_ptr(), ptr);
        let buffer = Bytes::from(vec![1u8; 64 * 1024]);
        let small = buffer.slice(10..1034);
        let copied = chunk(small.clone());
        assert_eq!(copied, small);
        assert_ne!(copied.as_ptr(), small.as_ptr());
    }
}
