//! Body chunks as modules see them.

use bytes::Bytes;

/// A piece of a body on its way through a body event. A module may replace `data`
/// with other bytes (shorter, longer, empty); when any module may change a body's
/// length, the engine sends it chunked and marks the ETag weak, so modules never
/// fix framing themselves.
#[derive(Debug, Clone, Default)]
pub struct BodyChunk {
    /// The bytes of this chunk.
    pub data: Bytes,
    /// Whether this is the last chunk of the body. Every body ends with exactly one
    /// chunk marked last; it may be empty when the end only became known after the
    /// data, so a module that holds bytes back can always flush them.
    pub last: bool,
}
