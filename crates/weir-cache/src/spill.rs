//! Fills that go to disk as they arrive: a response too large for the memory tier is
//! written to a file of the disk tier chunk by chunk, never held whole in memory.
//!
//! The file lives in the disk tier's temporary directory, its body starting at an
//! offset the tier chose (room for what goes before the body in an entry's file).
//! When the fill is stored, the disk tier adds the metadata and renames the file into
//! place: the body is written once. Otherwise the file's name is removed with its last
//! holder ([`TempName`]), and a crash leaves it in the temporary directory, which the
//! tier empties when it starts. Clients that join the fill late read what has already
//! left memory from the same file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::body::{Body, FileBody};
use crate::damage::DamageReport;
use crate::file_read::read_at;
use crate::temp_name::TempName;

/// Bytes gathered in memory before they are written in one step: large enough that
/// the hop to a blocking thread is rare, small enough that many fills stay cheap.
pub const SPILL_BATCH: usize = 256 << 10;

/// The file a fill is written to, shared with the clients reading the fill.
#[derive(Debug)]
pub struct SpillFile {
    file: Arc<File>,
    name: Arc<TempName>,
    /// Where the body starts in the file.
    body_at: u64,
}

impl SpillFile {
    /// Reads `len` bytes at `pos` of the body on a blocking thread.
    pub(crate) async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        read_at(&self.file, self.body_at + pos, len).await
    }
}

/// What a failed write of a fill is told to (the disk tier counts and logs it).
pub(crate) type OnWriteError = Arc<dyn Fn(&io::Error) + Send + Sync>;

/// A fill being written to disk. Made by [`Cache::spill`](crate::Cache::spill).
pub struct Spill {
    file: Arc<SpillFile>,
    len: u64,
    crc: crc32fast::Hasher,
    on_error: OnWriteError,
}

impl Spill {
    /// A fill written to `file` (named `name`) from byte `body_at` on; a write that
    /// fails is told to `on_error`.
    pub(crate) fn new(file: File, name: TempName, body_at: u64, on_error: OnWriteError) -> Spill {
        Spill {
            file: Arc::new(SpillFile {
                file: Arc::new(file),
                name: Arc::new(name),
                body_at,
            }),
            len: 0,
            crc: crc32fast::Hasher::new(),
            on_error,
        }
    }

    /// The file, for the fill's readers.
    pub fn file(&self) -> Arc<SpillFile> {
        self.file.clone()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `chunks` to the file, on a blocking thread.
    ///
    /// Cancel safety: not cancel-safe; a write whose future is dropped may or may not
    /// have happened, and the spill must then be dropped.
    pub async fn append(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let total: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if total == 0 {
            return Ok(());
        }
        for c in &chunks {
            self.crc.update(c);
        }
        let file = self.file.file.clone();
        let at = self.file.body_at + self.len;
        let write = move || -> io::Result<()> {
            let mut pos = at;
            for c in &chunks {
                file.write_all_at(c, pos)?;
                pos += c.len() as u64;
            }
            Ok(())
        };
        let written = match tokio::runtime::Handle::try_current() {
            Ok(h) => h
                .spawn_blocking(write)
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e))),
            Err(_) => write(),
        };
        if let Err(e) = written {
            (self.on_error)(&e);
            return Err(e);
        }
        self.len += total;
        Ok(())
    }

    /// The complete body, to store (the disk tier renames its file into place).
    pub fn finish(self) -> Body {
        Body::File(FileBody {
            file: self.file.file.clone(),
            offset: self.file.body_at,
            len: self.len,
            crc: self.crc.finalize(),
            damage: DamageReport::none(),
            temp_name: Some(self.file.name.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_failed_write_is_told_and_returned() {
        // Every write to /dev/full fails as a full disk does (ENOSPC).
        let full = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let told = Arc::new(AtomicUsize::new(0));
        let count = told.clone();
        let name = TempName::new(std::env::temp_dir().join("weir-spill-test-never-made"));
        let on_error: OnWriteError = Arc::new(move |e: &io::Error| {
            assert_eq!(e.raw_os_error(), Some(28), "{e}");
            count.fetch_add(1, Ordering::Relaxed);
        });
        let mut spill = Spill::new(full, name, 16, on_error);
        assert!(spill
            .append(vec![Bytes::from_static(b"body")])
            .await
            .is_err());
        assert_eq!(told.load(Ordering::Relaxed), 1);
        assert_eq!(spill.len(), 0, "a failed write is not counted as written");
    }
}
