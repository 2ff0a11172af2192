//! Reads one ICAP answer from a connection, within fixed limits: the head and the
//! encapsulated HTTP heads together at most [`Limits::head`] bytes, the body at most
//! [`Limits::body`]. Nothing is believed before it has been read and checked.

use tokio::io::{AsyncRead, AsyncReadExt};
use weir_api::http::HeaderMap;

use super::wire::{
    find, parse_chunk_size, parse_encapsulated, parse_http_head, parse_icap_head, HttpHead,
    WireError,
};

/// How much of an answer the client accepts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The ICAP head plus the encapsulated HTTP heads.
    pub head: usize,
    /// The decoded body.
    pub body: usize,
}

/// A chunk-size line or a trailer line longer than this is malformed.
const MAX_LINE: usize = 1024;

/// An ICAP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    /// The ICAP status (100, 200, 204, ...).
    pub status: u16,
    /// The ICAP headers (`ISTag`, `Methods`, `Preview`, ...).
    pub headers: HeaderMap,
    /// The encapsulated HTTP heads, in order.
    pub heads: Vec<HttpHead>,
    /// The decoded body, when the answer has one.
    pub body: Option<Vec<u8>>,
}

impl Answer {
    /// Whether the server keeps the connection open after this answer.
    pub fn keeps_alive(&self) -> bool {
        !self
            .headers
            .get_all("connection")
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    }
}

/// Reads from `io` through its own buffer; bytes past one answer stay for the next.
pub struct Reader<R> {
    io: R,
    buf: Vec<u8>,
    /// Whether any byte of the current answer has arrived (to tell a connection the
    /// server closed while idle, which is safe to retry, from a broken answer).
    pub started: bool,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// A reader over `io`.
    pub fn new(io: R) -> Reader<R> {
        Reader {
            io,
            buf: Vec::new(),
            started: false,
        }
    }

    /// Reads more bytes into the buffer; the connection ending is [`WireError::Truncated`].
    async fn fill(&mut self) -> Result<(), ReadError> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.io.read(&mut chunk).await.map_err(|_| ReadError::Io)?;
        if n == 0 {
            return Err(ReadError::Wire(WireError::Truncated));
        }
        self.started = true;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// The bytes up to and including the first `delimiter`, which must come within
    /// `limit` bytes.
    async fn until(&mut self, delimiter: &[u8], limit: usize) -> Result<Vec<u8>, ReadError> {
        let mut searched = 0;
        loop {
            if let Some(i) = find(&self.buf[searched..], delimiter) {
                let end = searched + i + delimiter.len();
                if end > limit {
                    return Err(ReadError::Wire(WireError::TooLarge));
                }
                return Ok(self.buf.drain(..end).collect());
            }
            if self.buf.len() > limit {
                return Err(ReadError::Wire(WireError::TooLarge));
            }
            searched = self.buf.len().saturating_sub(delimiter.len() - 1);
            self.fill().await?;
        }
    }

    /// Exactly `n` bytes.
    async fn exact(&mut self, n: usize) -> Result<Vec<u8>, ReadError> {
        while self.buf.len() < n {
            self.fill().await?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// One ICAP answer: head, encapsulated heads, then the chunked body if any.
    pub async fn answer(&mut self, limits: Limits) -> Result<Answer, ReadError> {
        self.started = !self.buf.is_empty();
        let head = self.until(b"\r\n\r\n", limits.head).await?;
        let (status, headers) = parse_icap_head(&head)?;
        if status == 100 || status == 204 {
            // Neither carries an encapsulated message (RFC 3507, 4.5 and 4.6).
            return Ok(Answer {
                status,
                headers,
                heads: Vec::new(),
                body: None,
            });
        }
        let Some(value) = headers.get("encapsulated") else {
            if status == 200 {
                return Err(ReadError::Wire(WireError::Encapsulated));
            }
            // An error status without a message: the head is all there is.
            return Ok(Answer {
                status,
                headers,
                heads: Vec::new(),
                body: None,
            });
        };
        let encapsulated = parse_encapsulated(value.as_bytes())?;
        if head.len() + encapsulated.heads_len > limits.head {
            return Err(ReadError::Wire(WireError::TooLarge));
        }
        let heads_bytes = self.exact(encapsulated.heads_len).await?;
        let mut heads = Vec::with_capacity(encapsulated.heads.len());
        for (i, &(section, offset)) in encapsulated.heads.iter().enumerate() {
            let end = encapsulated
                .heads
                .get(i + 1)
                .map_or(encapsulated.heads_len, |&(_, next)| next);
            heads.push(parse_http_head(section, &heads_bytes[offset..end])?);
        }
        let body = if encapsulated.body {
            Some(self.chunked_body(limits.body).await?)
        } else {
            None
        };
        Ok(Answer {
            status,
            headers,
            heads,
            body,
        })
    }

    /// A chunked body, decoded, with its trailer read and dropped.
    async fn chunked_body(&mut self, limit: usize) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        loop {
            let line = self.until(b"\r\n", MAX_LINE).await?;
            let size = parse_chunk_size(&line[..line.len() - 2])?;
            if size == 0 {
                break;
            }
            if body.len() + size > limit {
                return Err(ReadError::Wire(WireError::TooLarge));
            }
            let data = self.exact(size + 2).await?;
            if !data.ends_with(b"\r\n") {
                return Err(ReadError::Wire(WireError::Chunk));
            }
            body.extend_from_slice(&data[..size]);
        }
        // The trailer: lines up to an empty one.
        let mut trailer = 0;
        loop {
            let line = self.until(b"\r\n", MAX_LINE).await?;
            if line.len() == 2 {
                return Ok(body);
            }
            trailer += line.len();
            if trailer > MAX_LINE * 8 {
                return Err(ReadError::Wire(WireError::TooLarge));
            }
        }
    }

    /// Whether bytes of a next answer are already buffered (a server that answered
    /// more than it was asked: the connection cannot be trusted again).
    pub fn has_leftover(&self) -> bool {
        !self.buf.is_empty()
    }
}

/// Reading an answer failed.
#[derive(Debug)]
pub enum ReadError {
    /// The socket failed.
    Io,
    /// The answer is malformed, too large or cut short.
    Wire(WireError),
}

impl From<WireError> for ReadError {
    fn from(e: WireError) -> ReadError {
        ReadError::Wire(e)
    }
}
