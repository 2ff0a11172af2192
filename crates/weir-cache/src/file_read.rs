//! Reading part of an open file without holding up the async threads.
//!
//! Its own file because both a stored body in a disk-tier file and a fill that went to
//! disk are read this way, and the fill's file becomes such a body.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

/// Reads `len` bytes of `file` at `at`, on a blocking thread when there is a runtime.
pub(crate) async fn read_at(file: &Arc<File>, at: u64, len: usize) -> io::Result<Bytes> {
    let file = file.clone();
    let read = move || {
        let mut buf = BytesMut::zeroed(len);
        file.read_exact_at(&mut buf, at)?;
        Ok(buf.freeze())
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => h
            .spawn_blocking(read)
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e))),
        Err(_) => read(),
    }
}
