//! The writer thread: files are written off the proxy's threads, one at a time, in the
//! order they were queued.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::format::{self, Meta};
use super::index::EntryMeta;
use super::layout::{object_path, temp_dir};
use super::shared::Shared;
use crate::body::{Body, FileBody};
use crate::key::CacheKey;
use crate::object::CachedObject;
use crate::temp_name::TempName;

/// Writes queued at most; more are dropped (and counted) rather than let memory grow
/// behind a slow disk.
const QUEUE_LEN: usize = 4096;
/// Body bytes queued at most, for the same reason.
const QUEUE_BYTES: u64 = 8 << 20;
/// Bytes copied per step when a body is rewritten from another file.
const COPY_CHUNK: usize = 256 << 10;

pub(super) struct Job {
    pub(super) id: u64,
    pub(super) key: CacheKey,
    pub(super) base: Option<CacheKey>,
    pub(super) object: Arc<CachedObject>,
}

enum Message {
    Write(Job),
    Flush(SyncSender<()>),
}

pub(super) struct Writer {
    queue: Option<SyncSender<Message>>,
    queued_bytes: Arc<AtomicU64>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    pub(super) fn start(shared: Arc<Shared>) -> Writer {
        let (tx, rx) = sync_channel(QUEUE_LEN);
        let queued_bytes = Arc::new(AtomicU64::new(0));
        let bytes = queued_bytes.clone();
        let thread = std::thread::Builder::new()
            .name("weir-disk-writer".into())
            .spawn(move || run(&shared, rx, &bytes))
            .ok();
        Writer {
            queue: Some(tx),
            queued_bytes,
            thread: Mutex::new(thread),
        }
    }

    /// Queues a job; gives it back when the queue is full.
    pub(super) fn send(&self, job: Job) -> Result<(), Job> {
        let len = queued_len(&job);
        let queued = self.queued_bytes.load(Ordering::Relaxed);
        if queued > 0 && queued + len > QUEUE_BYTES {
            return Err(job);
        }
        let Some(queue) = &self.queue else {
            return Err(job);
        };
        self.queued_bytes.fetch_add(len, Ordering::Relaxed);
        match queue.try_send(Message::Write(job)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(Message::Write(job)))
            | Err(TrySendError::Disconnected(Message::Write(job))) => {
                self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
                Err(job)
            }
            Err(_) => Ok(()),
        }
    }

    pub(super) fn flush(&self) {
        let Some(queue) = &self.queue else { return };
        let (tx, rx) = sync_channel(1);
        if queue.send(Message::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

impl Drop for Writer {
    /// Finishes the queued writes, so that a clean shutdown keeps everything stored.
    fn drop(&mut self) {
        self.queue = None;
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared, rx: Receiver<Message>, queued_bytes: &AtomicU64) {
    for message in rx {
        match message {
            Message::Flush(done) => {
                let _ = done.send(());
            }
            Message::Write(job) => {
                let len = queued_len(&job);
                write_and_link(shared, job);
                queued_bytes.fetch_sub(len, Ordering::Relaxed);
            }
        }
    }
}

/// Memory a queued job holds: its body when the body is in memory (a body in a file,
/// from a fill that went to disk as it arrived, holds none).
fn queued_len(job: &Job) -> u64 {
    job.object.body.in_memory().map_or(0, |b| b.len() as u64)
}

fn write_and_link(shared: &Shared, job: Job) {
    // Already invalidated or superseded while queued: do not spend the I/O.
    if !shared.is_pending(&job.key, job.id) {
        return;
    }
    let object = &job.object;
    let meta = Meta {
        key: job.key.as_str().to_string(),
        base: job.base.as_ref().map(|b| b.as_str().to_string()),
        status: object.status,
        headers: http::HeaderMap::clone(&object.headers),
        policy: object.policy.clone(),
        tags: object.tags.clone(),
        adapted_fields: object
            .adapted()
            .map(|a| a.field_names().map(str::to_string).collect())
            .unwrap_or_default(),
        adapted_origin: object
            .adapted()
            .map(|a| a.origin_values().clone())
            .unwrap_or_default(),
        body_len: object.body.len(),
        body_crc: match &object.body {
            Body::Memory(b) => crc32fast::hash(b),
            Body::File(f) => f.crc,
        },
    };
    let file_len = match write_file(shared, job.id, meta, &object.body) {
        Ok(n) => n,
        Err(e) => {
            shared.write_failed(&e);
            shared.forget_pending(&job.key, job.id);
            return;
        }
    };
    if shared.failing.swap(false, Ordering::Relaxed) {
        tracing::info!(dir = %shared.dir.display(), "disk cache: writes succeed again");
    }
    shared.counters.writes.fetch_add(1, Ordering::Relaxed);
    // Linked under the pending lock, so an invalidation either came first (and the
    // file is discarded) or comes after (and removes the linked entry).
    let mut pending = shared.pending();
    if pending.get(&job.key).is_none_or(|p| p.id != job.id) {
        drop(pending);
        let _ = fs::remove_file(object_path(&shared.dir, job.id));
        return;
    }
    pending.remove(&job.key);
    shared.link(
        job.key,
        job.base,
        object.vary.clone(),
        EntryMeta {
            id: job.id,
            file_len,
            tags: object.tags.clone(),
        },
    );
}

/// Writes the entry under a temporary name and renames it into place. Returns the
/// file's length.
fn write_file(shared: &Shared, id: u64, meta: Meta, body: &Body) -> io::Result<u64> {
    if let Body::File(f) = body {
        if let Some(name) = f.temp_name.as_deref().filter(|n| n.claim()) {
            match finish_fill_file(shared, id, &meta, f, name) {
                Ok(len) => return Ok(len),
                // Copied below instead (for example, the directory of entries is on
                // another file system than the temporary one).
                Err(e) => {
                    tracing::debug!(
                        "disk cache: a fill's file cannot become entry {id:016x} ({e}); copying it"
                    )
                }
            }
        }
    }
    let tmp = temp_dir(&shared.dir).join(format!("{id:016x}"));
    let result = (|| {
        let mut file = create(&tmp)?;
        let head = format::encode_head(&meta);
        file.write_all(&head)?;
        match body {
            Body::Memory(b) => file.write_all(b)?,
            Body::File(f) => {
                let mut buf = vec![0u8; COPY_CHUNK];
                let mut pos = 0u64;
                while pos < f.len {
                    let n = (f.len - pos).min(COPY_CHUNK as u64) as usize;
                    f.file.read_exact_at(&mut buf[..n], f.offset + pos)?;
                    file.write_all(&buf[..n])?;
                    pos += n as u64;
                }
            }
        }
        rename_into_place(&tmp, &object_path(&shared.dir, id))?;
        Ok(head.len() as u64 + meta.body_len)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes a fill's file (`name`, its body from byte [`format::PREFIX_LEN`] on, see
/// `crate::spill`) entry `id`: the metadata after the body, the first bytes, and the
/// rename into place, so that the body is written once. Returns the file's length.
fn finish_fill_file(
    shared: &Shared,
    id: u64,
    meta: &Meta,
    body: &FileBody,
    name: &TempName,
) -> io::Result<u64> {
    if body.offset != format::PREFIX_LEN {
        return Err(io::Error::other("no room for the entry's first bytes"));
    }
    let (prefix, json) = format::encode_tail(meta);
    let end = body.offset + body.len;
    body.file.write_all_at(&json, end)?;
    body.file.write_all_at(&prefix, 0)?;
    rename_into_place(name.path(), &object_path(&shared.dir, id))?;
    Ok(end + json.len() as u64)
}

/// Renames `from` to `dest`, recreating `dest`'s directory when it went away.
fn rename_into_place(from: &std::path::Path, dest: &std::path::Path) -> io::Result<()> {
    match fs::rename(from, dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::rename(from, dest)
        }
        other => other,
    }
}

/// Creates a file, recreating the directories when they went away (the directory was
/// removed or replaced while running, then fixed by the operator).
fn create(path: &std::path::Path) -> io::Result<File> {
    match File::create(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            File::create(path)
        }
        other => other,
    }
}
