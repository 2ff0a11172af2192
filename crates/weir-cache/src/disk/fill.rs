//! Files for fills that go to disk as they arrive (see `crate::spill`).

use std::sync::atomic::Ordering;

use crate::temp_name::TempName;

use super::format;
use super::layout::temp_dir;
use super::DiskTier;

impl DiskTier {
    /// A file for a fill to be written to as it arrives; `None` while the index is
    /// being rebuilt (nothing is stored then) or when no file can be made.
    pub(crate) fn spill(&self) -> Option<crate::spill::Spill> {
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
            Ok(file) => Some(crate::spill::Spill::new(
                file,
                TempName::new(path),
                format::PREFIX_LEN,
            )),
            Err(e) => {
                self.shared
                    .counters
                    .write_errors
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(dir = %dir.display(), "disk cache: cannot make a file for a fill ({e}); it is not stored");
                None
            }
        }
    }
}
