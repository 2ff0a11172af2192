//! Files for fills that go to disk as they arrive (see `crate::spill`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::spill::{OnWriteError, Spill};
use crate::temp_name::TempName;

use super::format;
use super::layout::temp_dir;
use super::DiskTier;

impl DiskTier {
    /// A file for a fill to be written to as it arrives; `None` while the index is
    /// being rebuilt (nothing is stored then) or when no file can be made.
    pub(crate) fn spill(&self) -> Option<Spill> {
        if self.shared.loading.load(Ordering::Acquire) {
            return None;
        }
        let dir = temp_dir(&self.shared.dir);
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("fill-{id:016x}"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .or_else(|_| {
                std::fs::create_dir_all(&dir)?;
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
            });
        match file {
            // The body after room for an entry's first bytes: the metadata goes after
            // the body (format.rs), and the file becomes the entry as it is.
            Ok(file) => {
                // Counted and logged with the tier's other failed writes (the response
                // is then served without being stored). Weak: a fill does not keep the
                // tier alive.
                let shared = Arc::downgrade(&self.shared);
                let on_error: OnWriteError = Arc::new(move |e: &std::io::Error| {
                    if let Some(shared) = shared.upgrade() {
                        shared.write_failed(e);
                    }
                });
                Some(Spill::new(
                    file,
                    TempName::new(path),
                    format::PREFIX_LEN,
                    on_error,
                ))
            }
            Err(e) => {
                self.shared.write_failed(&e);
                None
            }
        }
    }
}
