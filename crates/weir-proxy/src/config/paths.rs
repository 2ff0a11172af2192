//! Whether the files and directories the settings name can be used as `weir run` would
//! use them, checked without changing anything on disk (`weir check` creates nothing).

use std::path::Path;

use nix::unistd::{access, AccessFlags};

/// Why the access log could not be opened at `path` (the same checks `weir run` would
/// fail on), if it could not: its directory must exist, it must not be a directory
/// itself, and this process must be allowed to write it (or to create it there).
pub(super) fn access_log_problem(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some(format!("{} is a directory, not a file", path.display()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Some(format!(
            "the directory {} of {} does not exist",
            dir.display(),
            path.display()
        ));
    }
    let (target, flags) = match path.exists() {
        true => (path, AccessFlags::W_OK),
        false => (dir, AccessFlags::W_OK | AccessFlags::X_OK),
    };
    access(target, flags)
        .err()
        .map(|e| format!("{} is not writable ({})", target.display(), e.desc()))
}

/// Why the disk tier could not keep its files in `dir`, if it could not: `dir` must be
/// a directory this process may write in, or be missing where this process may create
/// it (the tier creates it at start, parents included). A read-only file system is not
/// writable, whoever the process runs as. Without this, Weir would start, log that it
/// cannot use the directory, and keep nothing on disk.
pub(super) fn disk_dir_problem(dir: &Path) -> Option<String> {
    // The nearest part of the path that exists: where the tier's directory would be
    // made, or the directory itself (a relative path's last ancestor is empty: the
    // working directory).
    let existing = dir
        .ancestors()
        .map(|p| match p.as_os_str().is_empty() {
            true => Path::new("."),
            false => p,
        })
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    let made = existing != dir;
    if !existing.is_dir() {
        return Some(match made {
            true => format!(
                "`path` {} cannot be created: {} is not a directory",
                dir.display(),
                existing.display()
            ),
            false => format!("`path` {} exists and is not a directory", dir.display()),
        });
    }
    let Err(e) = access(existing, AccessFlags::W_OK | AccessFlags::X_OK) else {
        return None;
    };
    Some(match made {
        true => format!(
            "`path` {} cannot be created: {} is not writable ({})",
            dir.display(),
            existing.display(),
            e.desc()
        ),
        false => format!("`path` {} is not writable ({})", dir.display(), e.desc()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_directory_is_usable_when_it_or_a_parent_is_writable() {
        let base = std::env::temp_dir().join(format!("weir-paths-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        assert_eq!(disk_dir_problem(&base), None, "an existing directory");
        assert_eq!(
            disk_dir_problem(&base.join("a/b/c")),
            None,
            "made with parents"
        );
        let file = base.join("file");
        std::fs::write(&file, "x").unwrap();
        let under_file = disk_dir_problem(&file.join("cache")).unwrap();
        assert!(under_file.contains("cannot be created"), "{under_file}");
        assert!(under_file.contains("is not a directory"), "{under_file}");
        let is_file = disk_dir_problem(&file).unwrap();
        assert!(
            is_file.contains("exists and is not a directory"),
            "{is_file}"
        );
        // Nothing was created by asking.
        assert!(!base.join("a").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_access_log_needs_a_directory_to_be_written_in() {
        let base = std::env::temp_dir().join(format!("weir-log-paths-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        assert_eq!(access_log_problem(&base.join("access.log")), None);
        let missing = access_log_problem(&base.join("no/access.log")).unwrap();
        assert!(missing.contains("does not exist"), "{missing}");
        let dir = access_log_problem(&base).unwrap();
        assert!(dir.contains("is a directory"), "{dir}");
        assert!(!base.join("access.log").exists(), "nothing made by asking");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
