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

/// A whole body, as the [`WholeRequest`](crate::Event::WholeRequest) and
/// [`WholeResponse`](crate::Event::WholeResponse) events see it.
#[derive(Debug, Clone, Default)]
pub struct WholeBody {
    /// The body. A module may replace it; the engine then sets the new length.
    pub data: Bytes,
    /// The body is longer than `[limits] module_body`: `data` holds only its
    /// beginning, changes to `data` are ignored, and the rest follows unchanged. The
    /// module may still change the head or answer instead (to fail closed, say).
    pub truncated: bool,
}

/// Which way bytes go through a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelDirection {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

/// Bytes read from one side of a tunnel (a CONNECT tunnel, or a connection switched to
/// another protocol such as a WebSocket), about to be written to the other, as the
/// [`TunnelData`](crate::Event::TunnelData) event sees them. They are the tunnelled
/// protocol's own (TLS records, for HTTPS through a CONNECT), one read's worth, with
/// no message boundaries of their own.
#[derive(Debug, Clone)]
pub struct TunnelChunk {
    /// Which way they go.
    pub direction: TunnelDirection,
    /// The bytes. What it holds after the callbacks is what is written, so a module
    /// may change them, at the price of understanding the protocol inside.
    pub data: Bytes,
}
