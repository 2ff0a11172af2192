//! Rebuilding the index from the files at startup.

use std::fs::{self, File};
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::format::{self, Damage};
use super::index::EntryMeta;
use super::layout::{object_path, temp_dir};
use super::shared::Shared;
use crate::key::CacheKey;
use crate::lock::lock;

/// Reads the header of every entry file under the directory and indexes the good
/// ones, oldest first so that a newer file for the same key wins. Stray temporary
/// files (a write cut short by a crash) and damaged files are removed, and so are
/// entries that an invalidation made while this ran applies to: the proxy serves
/// meanwhile, and a purge must not be undone. Links nothing before `start` is passed.
/// Ends the tier's loading state.
pub(super) fn rebuild(shared: &Shared, start: &std::sync::Barrier) {
    let started = Instant::now();
    let dir = &shared.dir;
    if let Err(e) = fs::create_dir_all(temp_dir(dir)) {
        tracing::error!(dir = %dir.display(), "disk cache: cannot use the directory: {e}; storing will be retried");
        start.wait();
        end_loading(shared);
        return;
    }
    if let Ok(stray) = fs::read_dir(temp_dir(dir)) {
        for f in stray.flatten() {
            let _ = fs::remove_file(f.path());
        }
    }
    let mut found = Vec::new();
    let mut damaged = 0u64;
    let mut outdated = 0u64;
    for sub in 0..=0xffu64 {
        let Ok(files) = fs::read_dir(dir.join(format!("{sub:02x}"))) else {
            continue;
        };
        for f in files.flatten() {
            let Some(id) = f
                .file_name()
                .to_str()
                .and_then(|n| u64::from_str_radix(n, 16).ok())
                .filter(|id| id & 0xff == sub)
            else {
                continue;
            };
            match read_meta(shared, id) {
                Ok(entry) => found.push(entry),
                Err(Damage::Gone) => {}
                Err(Damage::Bad(reason)) => {
                    damaged += 1;
                    tracing::warn!(file = %f.path().display(), "disk cache: damaged entry dropped: {reason}");
                    let _ = fs::remove_file(f.path());
                }
                Err(Damage::Outdated) => {
                    outdated += 1;
                    let _ = fs::remove_file(f.path());
                }
            }
        }
    }
    start.wait();
    found.sort_by_key(|e| e.meta.id);
    let max_id = found.last().map_or(0, |e| e.meta.id);
    shared.next_id.store(max_id + 1, Ordering::Relaxed);
    let mut count = 0;
    let mut invalidated = 0u64;
    for e in found {
        // Checked and linked under the lock that an invalidation takes to note itself
        // before it removes anything: it either is noted here or finds the entry linked.
        let missed = lock(&shared.missed);
        if missed.applies(e.key.url(), &e.meta.tags) {
            invalidated += 1;
            let _ = fs::remove_file(object_path(dir, e.meta.id));
        } else {
            shared.link(e.key, e.base, e.vary, e.meta);
            count += 1;
        }
    }
    end_loading(shared);
    shared
        .counters
        .damaged
        .fetch_add(damaged, Ordering::Relaxed);
    tracing::info!(
        dir = %dir.display(),
        entries = count,
        bytes = shared.index.file_bytes(),
        damaged,
        outdated,
        invalidated,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "disk cache: index rebuilt"
    );
}

/// The index is built: the tier finds and stores from now on, and invalidations go
/// straight to the index.
fn end_loading(shared: &Shared) {
    let mut missed = lock(&shared.missed);
    *missed = Default::default();
    shared.loading.store(false, Ordering::Release);
}

struct Scanned {
    key: CacheKey,
    base: Option<CacheKey>,
    vary: Vec<http::HeaderName>,
    meta: EntryMeta,
}

fn read_meta(shared: &Shared, id: u64) -> Result<Scanned, Damage> {
    let mut file = File::open(object_path(&shared.dir, id))?;
    let file_len = file.metadata()?.len();
    let (meta, _) = format::read_head(&mut file, file_len)?;
    Ok(Scanned {
        key: CacheKey::from_stored(meta.key),
        base: meta.base.map(CacheKey::from_stored),
        vary: crate::vary::vary_names(&meta.headers),
        meta: EntryMeta {
            id,
            file_len,
            tags: meta.tags,
        },
    })
}
