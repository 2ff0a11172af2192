//! The file formats of a disk-tier entry:
//!
//! ```text
//! magic "WEIRDSK2" | meta length (u32 LE) | meta CRC-32 (u32 LE) | meta (JSON) | body
//! magic "WEIRDSK3" | meta length (u32 LE) | meta CRC-32 (u32 LE) | body | meta (JSON)
//! ```
//!
//! The first is what the writer thread writes. The second is a fill that went to disk
//! as it arrived (`crate::spill`): its body was written from byte 16 on before its
//! metadata was known, so the metadata follows the body and the first 16 bytes are
//! filled in last. Renaming that file into place stores the entry without copying the
//! body.
//!
//! The metadata records the body's length and CRC-32, so a truncated file is found by
//! its size alone (when the index is rebuilt at startup) and a corrupted body when it
//! is read. Files are written under a temporary name and renamed into place, so a crash
//! leaves either the old entry, the new one, or a stray temporary file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use crate::policy::StoragePolicy;

const MAGIC: &[u8; 8] = b"WEIRDSK2";
/// The start of files whose metadata follows the body.
const TAIL_MAGIC: &[u8; 8] = b"WEIRDSK3";
/// The start of files written before Weir had its own RFC 9111 policy: their policies
/// cannot be read back, so the files are dropped.
const OUTDATED_MAGIC: &[u8; 8] = b"WEIRDSK1";
/// Bytes before the metadata.
pub(crate) const PREFIX_LEN: u64 = 16;
/// Metadata larger than this is not something Weir wrote.
const MAX_META: u32 = 4 << 20;

/// Everything stored about an entry except its body.
#[derive(Serialize, Deserialize)]
pub(crate) struct Meta {
    /// The entry's cache key.
    pub(crate) key: String,
    /// For a Vary variant, the key of its URL.
    pub(crate) base: Option<String>,
    #[serde(with = "http_serde::status_code")]
    pub(crate) status: StatusCode,
    #[serde(with = "http_serde::header_map")]
    pub(crate) headers: HeaderMap,
    pub(crate) policy: StoragePolicy,
    pub(crate) tags: Vec<String>,
    /// The fields modules changed (see `Adapted`), and the origin's values of them.
    /// Absent from entries that have none and from files older than this field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) adapted_fields: Vec<String>,
    #[serde(
        default,
        with = "http_serde::header_map",
        skip_serializing_if = "HeaderMap::is_empty"
    )]
    pub(crate) adapted_origin: HeaderMap,
    pub(crate) body_len: u64,
    pub(crate) body_crc: u32,
}

/// Why a file cannot be used.
#[derive(Debug)]
pub(crate) enum Damage {
    /// It went away (evicted or replaced) between the lookup and the read.
    Gone,
    /// It is not a complete entry.
    Bad(String),
    /// An older Weir wrote it, in a format this one does not read.
    Outdated,
}

impl From<io::Error> for Damage {
    fn from(e: io::Error) -> Damage {
        if e.kind() == io::ErrorKind::NotFound {
            Damage::Gone
        } else {
            Damage::Bad(e.to_string())
        }
    }
}

/// The bytes that precede the body.
pub(crate) fn encode_head(meta: &Meta) -> Vec<u8> {
    let json = serde_json::to_vec(meta).unwrap_or_default();
    let mut out = Vec::with_capacity(PREFIX_LEN as usize + json.len());
    out.extend_from_slice(&prefix(MAGIC, &json));
    out.extend_from_slice(&json);
    out
}

/// For a file whose body is already written from byte [`PREFIX_LEN`] on: the bytes
/// that go before the body, and the metadata that goes after it.
pub(crate) fn encode_tail(meta: &Meta) -> ([u8; PREFIX_LEN as usize], Vec<u8>) {
    let json = serde_json::to_vec(meta).unwrap_or_default();
    (prefix(TAIL_MAGIC, &json), json)
}

fn prefix(magic: &[u8; 8], json: &[u8]) -> [u8; PREFIX_LEN as usize] {
    let mut out = [0u8; PREFIX_LEN as usize];
    out[..8].copy_from_slice(magic);
    out[8..12].copy_from_slice(&(json.len() as u32).to_le_bytes());
    out[12..].copy_from_slice(&crc32fast::hash(json).to_le_bytes());
    out
}

/// Reads and checks the metadata of `file`, whose size is `file_len`. Returns it with
/// the offset of the body, where the file's position is left.
pub(crate) fn read_head(file: &mut File, file_len: u64) -> Result<(Meta, u64), Damage> {
    let mut prefix = [0u8; PREFIX_LEN as usize];
    file.read_exact(&mut prefix)
        .map_err(|_| Damage::Bad("shorter than its header".into()))?;
    if &prefix[..8] == OUTDATED_MAGIC {
        return Err(Damage::Outdated);
    }
    let tail = &prefix[..8] == TAIL_MAGIC;
    if &prefix[..8] != MAGIC && !tail {
        return Err(Damage::Bad("not a Weir cache file".into()));
    }
    let meta_len = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
    let meta_crc = u32::from_le_bytes([prefix[12], prefix[13], prefix[14], prefix[15]]);
    if meta_len > MAX_META || PREFIX_LEN + meta_len as u64 > file_len {
        return Err(Damage::Bad("header cut short".into()));
    }
    // Where the body starts; the metadata is next (head first) or at the end.
    let body_at = match tail {
        false => PREFIX_LEN + meta_len as u64,
        true => {
            file.seek(SeekFrom::Start(file_len - meta_len as u64))?;
            PREFIX_LEN
        }
    };
    let mut json = vec![0u8; meta_len as usize];
    file.read_exact(&mut json)?;
    if crc32fast::hash(&json) != meta_crc {
        return Err(Damage::Bad("header does not match its checksum".into()));
    }
    let meta: Meta =
        serde_json::from_slice(&json).map_err(|e| Damage::Bad(format!("header: {e}")))?;
    let body_bytes = file_len - PREFIX_LEN - meta_len as u64;
    if body_bytes != meta.body_len {
        return Err(Damage::Bad(format!(
            "{body_bytes} body bytes instead of {}",
            meta.body_len
        )));
    }
    if tail {
        file.seek(SeekFrom::Start(body_at))?;
    }
    Ok((meta, body_at))
}
