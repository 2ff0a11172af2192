//! Where the files of the disk tier live in its directory.
//!
//! Its own file because the tier, its writer thread and its index rebuild all find
//! entry files and temporary files by these rules.

use std::path::{Path, PathBuf};

/// Where the file of entry `id` lives: spread over 256 subdirectories so that no
/// directory grows huge.
pub(super) fn object_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{:02x}", id & 0xff))
        .join(format!("{id:016x}"))
}

/// Where files are written before they are complete (and fills that go to disk).
pub(super) fn temp_dir(dir: &Path) -> PathBuf {
    dir.join("tmp")
}
