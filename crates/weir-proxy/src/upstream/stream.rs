//! What a connection to an origin is: a byte stream, plain TCP or TLS. The bottom of
//! `upstream/`: opening one is `connect.rs`, speaking HTTP on one `h1_conn.rs` and
//! `h2.rs`.

use tokio::io::{AsyncRead, AsyncWrite};

/// A connected stream, plain or TLS: the protocols do not care which.
pub(super) type BoxIo = Box<dyn Io>;

/// What a connection to an origin is.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
