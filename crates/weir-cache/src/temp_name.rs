//! A file's temporary name, removed when the last holder lets go of it.
//!
//! A fill that goes to disk as it arrives is written to a file in the disk tier's
//! temporary directory, and shared with the clients reading the fill. When the fill is
//! stored, the disk tier renames the file into place; when it is not (abandoned, not
//! storable, invalidated while queued), nobody renames it, and the name goes with the
//! last reader. Removing a name that was renamed away finds nothing, which is fine:
//! names are never reused. A crash leaves the file behind in the temporary directory,
//! which the disk tier empties when it starts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The name of a file that is removed when this is dropped, unless it was renamed.
#[derive(Debug)]
pub(crate) struct TempName {
    path: PathBuf,
    claimed: AtomicBool,
}

impl TempName {
    pub(crate) fn new(path: PathBuf) -> TempName {
        TempName {
            path,
            claimed: AtomicBool::new(false),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the caller is the first to ask: the one that may change the file and
    /// rename it. The same body can be stored twice (a response stored again after a
    /// revalidation shares it); every later store copies it instead of touching a file
    /// that may already be an entry.
    pub(crate) fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
