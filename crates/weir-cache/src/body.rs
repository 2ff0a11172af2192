//! Where a stored body lives: in memory, or in a file of the disk tier that is read as
//! a stream so that a large body is never loaded whole.

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::damage::DamageReport;
use crate::file_read::read_at;
use crate::temp_name::TempName;

/// Bytes read from a file per step. Large enough to amortise the thread hop of a
/// blocking read, small enough that many concurrent readers stay cheap.
const READ_CHUNK: usize = 256 << 10;

/// A stored body.
#[derive(Debug, Clone)]
pub enum Body {
    /// Held in memory; cloning it is a reference-count increment.
    Memory(Bytes),
    /// In a file of the disk tier.
    File(FileBody),
}

impl Body {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Body::Memory(b) => b.len() as u64,
            Body::File(f) => f.len,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, when they are in memory.
    pub fn in_memory(&self) -> Option<&Bytes> {
        match self {
            Body::Memory(b) => Some(b),
            Body::File(_) => None,
        }
    }

    /// A reader that yields the body in chunks (one chunk when it is in memory).
    pub fn reader(&self) -> BodyReader {
        match self {
            Body::Memory(b) => BodyReader {
                source: Source::Memory(Some(b.clone())),
            },
            Body::File(f) => BodyReader {
                source: Source::File {
                    body: f.clone(),
                    pos: 0,
                    end: f.len,
                    crc: Some(crc32fast::Hasher::new()),
                    done: false,
                },
            },
        }
    }

    /// A reader of `len` bytes from `start` (a byte range; the caller keeps it within
    /// the body). A part of a file body cannot be checked against the body's checksum:
    /// it is read as it is (the file's size and header were checked when it was found).
    pub fn range_reader(&self, start: u64, len: u64) -> BodyReader {
        match self {
            Body::Memory(b) => {
                let end = (start + len).min(b.len() as u64) as usize;
                let start = (start as usize).min(end);
                BodyReader {
                    source: Source::Memory(Some(b.slice(start..end))),
                }
            }
            Body::File(f) => BodyReader {
                source: Source::File {
                    body: f.clone(),
                    pos: start.min(f.len),
                    end: (start + len).min(f.len),
                    crc: None,
                    done: false,
                },
            },
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body::Memory(b)
    }
}

/// A body in a file of the disk tier. The file is already open, so it stays readable
/// even if the entry is evicted or replaced while a client is reading it.
#[derive(Clone)]
pub struct FileBody {
    pub(crate) file: Arc<File>,
    /// Where the body starts in the file.
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// CRC-32 of the body as written; checked when the last byte has been read.
    pub(crate) crc: u32,
    /// Told when the body turns out to be damaged, so the entry is dropped.
    pub(crate) damage: DamageReport,
    /// The file's temporary name while it is a fill's (see `crate::spill`): the disk
    /// tier renames the file into place instead of copying the body.
    pub(crate) temp_name: Option<Arc<TempName>>,
}

impl std::fmt::Debug for FileBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBody")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl FileBody {
    /// Reads `len` bytes at `pos` (relative to the body) on a blocking thread.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        read_at(&self.file, self.offset + pos, len).await
    }
}

enum Source {
    Memory(Option<Bytes>),
    File {
        body: FileBody,
        pos: u64,
        /// Where reading stops (the body's length, or the end of a range).
        end: u64,
        /// Checked at the end when the whole body is read.
        crc: Option<crc32fast::Hasher>,
        done: bool,
    },
}

/// Yields a stored body chunk by chunk.
///
/// A file body's checksum is verified as it is read: when the last chunk does not
/// match, that chunk is replaced by an error (so the client sees a response cut short,
/// never a complete but corrupted one) and the entry is dropped from the disk tier.
pub struct BodyReader {
    source: Source,
}

impl BodyReader {
    /// The next chunk, `None` at the end.
    ///
    /// Cancel safety: dropping the future loses nothing but the read in progress; the
    /// next call reads the same chunk again.
    pub async fn next_chunk(&mut self) -> Option<io::Result<Bytes>> {
        match &mut self.source {
            Source::Memory(b) => b.take().filter(|b| !b.is_empty()).map(Ok),
            Source::File {
                body,
                pos,
                end,
                crc,
                done,
            } => {
                if *done {
                    return None;
                }
                if *pos >= *end {
                    *done = true;
                    return crc.as_ref().and_then(|c| check(body, c.clone().finalize()));
                }
                let want = (*end - *pos).min(READ_CHUNK as u64) as usize;
                match body.read_at(*pos, want).await {
                    Ok(chunk) => {
                        *pos += chunk.len() as u64;
                        if let Some(c) = crc.as_mut() {
                            c.update(&chunk);
                        }
                        if *pos >= *end {
                            *done = true;
                            let verdict =
                                crc.as_ref().and_then(|c| check(body, c.clone().finalize()));
                            if let Some(Err(e)) = verdict {
                                return Some(Err(e));
                            }
                        }
                        Some(Ok(chunk))
                    }
                    Err(e) => {
                        *done = true;
                        body.damage.report("the body could not be read");
                        Some(Err(e))
                    }
                }
            }
        }
    }
}

fn check(body: &FileBody, crc: u32) -> Option<io::Result<Bytes>> {
    if crc == body.crc {
        return None;
    }
    body.damage.report("the body does not match its checksum");
    Some(Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "stored body does not match its checksum",
    )))
}
