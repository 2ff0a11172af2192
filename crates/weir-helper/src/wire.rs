//! The wire protocol between the proxy and a helper: length-prefixed frames, each
//! carrying a job id, a kind and a payload.
//!
//! ```text
//! u32 length (big-endian) of what follows | u64 job id | u8 kind | payload
//! ```
//! The proxy sends [`FrameKind::Job`] frames; the helper answers each with a
//! [`FrameKind::Done`] or [`FrameKind::Failed`] frame that carries the same id, in
//! whatever order its jobs finish (correlated dispatch: many jobs in flight on one
//! socket, answers matched by id, not by order). The proxy sends a
//! [`FrameKind::Cancel`] for a job it stopped waiting for; the helper then drops it
//! if it has not started it, and answers nothing.

use std::io::{self, Read, Write};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame either side accepts (id, kind and payload): a bigger length
/// prefix means a corrupt stream, and the connection is dropped.
pub const MAX_FRAME: usize = 64 << 20;

/// The id and kind that follow the length prefix.
const HEADER: usize = 8 + 1;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Proxy to helper: a job to run.
    Job,
    /// Helper to proxy: the job with this id succeeded; the payload is its answer.
    Done,
    /// Helper to proxy: the job with this id failed; the payload is a message.
    Failed,
    /// Proxy to helper: nobody waits for the job with this id any more (empty payload).
    Cancel,
}

impl FrameKind {
    fn code(self) -> u8 {
        match self {
            FrameKind::Job => 1,
            FrameKind::Done => 2,
            FrameKind::Failed => 3,
            FrameKind::Cancel => 4,
        }
    }

    fn from_code(code: u8) -> Option<FrameKind> {
        match code {
            1 => Some(FrameKind::Job),
            2 => Some(FrameKind::Done),
            3 => Some(FrameKind::Failed),
            4 => Some(FrameKind::Cancel),
            _ => None,
        }
    }
}

/// One message on a helper socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The job this frame belongs to; an answer echoes its job's id.
    pub id: u64,
    /// What the frame is.
    pub kind: FrameKind,
    /// The job's input, its answer, or a failure message.
    pub payload: Vec<u8>,
}

impl Frame {
    /// The frame's bytes on the wire.
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let len = HEADER + self.payload.len();
        if len > MAX_FRAME {
            return Err(too_big(len));
        }
        let mut out = Vec::with_capacity(4 + len);
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.extend_from_slice(&self.id.to_be_bytes());
        out.push(self.kind.code());
        out.extend_from_slice(&self.payload);
        Ok(out)
    }

    /// Writes the frame (blocking).
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.encode()?)?;
        w.flush()
    }

    /// Writes the frame (async).
    pub async fn write_async(&self, w: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        w.write_all(&self.encode()?).await?;
        w.flush().await
    }

    /// Reads one frame (blocking); `Ok(None)` at a clean end of stream.
    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut prefix = [0u8; 4];
        if !read_prefix(r.read(&mut prefix[..1])?, &mut prefix, r)? {
            return Ok(None);
        }
        let len = checked_len(prefix)?;
        let mut rest = vec![0u8; len];
        r.read_exact(&mut rest)?;
        Frame::from_body(rest).map(Some)
    }

    /// Reads one frame (async); `Ok(None)` at a clean end of stream. Not cancel-safe:
    /// dropping it mid-frame loses the stream's place, so read from one task only.
    pub async fn read_async(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Frame>> {
        let mut prefix = [0u8; 4];
        if r.read(&mut prefix[..1]).await? == 0 {
            return Ok(None);
        }
        r.read_exact(&mut prefix[1..]).await?;
        let len = checked_len(prefix)?;
        let mut rest = vec![0u8; len];
        r.read_exact(&mut rest).await?;
        Frame::from_body(rest).map(Some)
    }

    /// A frame from what follows the length prefix.
    fn from_body(mut body: Vec<u8>) -> io::Result<Frame> {
        let id = u64::from_be_bytes(body[..8].try_into().expect("eight bytes"));
        let kind = FrameKind::from_code(body[8]).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "unknown helper frame kind")
        })?;
        let payload = body.split_off(HEADER);
        Ok(Frame { id, kind, payload })
    }
}

/// Completes a blocking prefix read whose first byte was read as `first` bytes:
/// false at the end of the stream.
fn read_prefix(first: usize, prefix: &mut [u8; 4], r: &mut impl Read) -> io::Result<bool> {
    if first == 0 {
        return Ok(false);
    }
    r.read_exact(&mut prefix[1..])?;
    Ok(true)
}

fn checked_len(prefix: [u8; 4]) -> io::Result<usize> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len < HEADER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "helper frame shorter than its header",
        ));
    }
    if len > MAX_FRAME {
        return Err(too_big(len));
    }
    Ok(len)
}

fn too_big(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("helper frame of {len} bytes is over the {MAX_FRAME}-byte limit"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: u64, kind: FrameKind, payload: &[u8]) -> Frame {
        Frame {
            id,
            kind,
            payload: payload.to_vec(),
        }
    }

    #[test]
    fn frames_round_trip_back_to_back() {
        let frames = [
            frame(1, FrameKind::Job, b"first"),
            frame(u64::MAX, FrameKind::Done, b""),
            frame(7, FrameKind::Failed, b"bad image"),
        ];
        let mut wire = Vec::new();
        for f in &frames {
            f.write_to(&mut wire).unwrap();
        }
        assert_eq!(&wire[..4], &(9u32 + 5).to_be_bytes());
        let mut r = &wire[..];
        for f in &frames {
            assert_eq!(Frame::read_from(&mut r).unwrap().as_ref(), Some(f));
        }
        assert_eq!(Frame::read_from(&mut r).unwrap(), None, "clean end");
    }

    #[tokio::test]
    async fn async_reader_reads_what_the_blocking_writer_wrote() {
        let mut wire = Vec::new();
        frame(42, FrameKind::Job, b"payload")
            .write_to(&mut wire)
            .unwrap();
        let mut r = &wire[..];
        let got = Frame::read_async(&mut r).await.unwrap().unwrap();
        assert_eq!(
            (got.id, got.kind, &got.payload[..]),
            (42, FrameKind::Job, &b"payload"[..])
        );
        assert!(Frame::read_async(&mut r).await.unwrap().is_none());
    }

    #[test]
    fn corrupt_streams_are_refused() {
        let mut torn = Vec::new();
        frame(1, FrameKind::Job, b"abcdef")
            .write_to(&mut torn)
            .unwrap();
        torn.truncate(torn.len() - 2);
        assert!(Frame::read_from(&mut &torn[..]).is_err(), "cut mid-frame");

        let huge = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(Frame::read_from(&mut &huge[..]).is_err(), "over the limit");

        let mut bad_kind = Vec::new();
        frame(1, FrameKind::Job, b"")
            .write_to(&mut bad_kind)
            .unwrap();
        bad_kind[12] = 9;
        assert!(
            Frame::read_from(&mut &bad_kind[..]).is_err(),
            "unknown kind"
        );

        let short = 3u32.to_be_bytes();
        assert!(
            Frame::read_from(&mut &short[..]).is_err(),
            "shorter than a header"
        );
    }
}
