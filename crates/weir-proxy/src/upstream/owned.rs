//! An origin's body chunks, detached from the connection's read buffer.
//!
//! An origin connection's body chunks are slices of its read buffer (8 KiB and up, at
//! most `h1_conn::READ_MOST`; hyper's HTTP/2 client does the same with its frames).
//! Whatever keeps one alive (a flight retaining chunks for late readers) keeps the
//! whole buffer, and the connection allocates a fresh one for the next response, whose
//! pages the kernel must clear. Small chunks
//! are copied into allocations of their own size; large chunks are most of their
//! buffer already and are passed on as they are. (What is stored is copied once more
//! into one allocation of its exact size: `cached/keep.rs`, and for headers
//! `weir_cache::CachedObject::new`.)

use bytes::Bytes;

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

/// Whether `chunk`, as [`chunk`] returned it, is an allocation of exactly its own
/// size (it was copied out of the read buffer), which the cache may keep as it is.
pub(crate) fn owns_its_bytes(chunk: &Bytes) -> bool {
    chunk.len() < COPY_CHUNKS_BELOW && !chunk.is_empty()
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
        assert!(owns_its_bytes(&copied), "a small chunk is its own copy");
        assert!(
            !owns_its_bytes(&chunk(buffer.clone())),
            "a large one is the buffer"
        );
        assert!(!owns_its_bytes(&chunk(Bytes::new())));
    }
}
