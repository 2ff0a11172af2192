//! A guard on client connections that follows HTTP/1 message framing as bytes arrive,
//! to catch what hyper's parser hides from the service.
//!
//! hyper handles a request carrying both Content-Length and Transfer-Encoding as
//! RFC 9112 §6.3 allows (chunked wins, Content-Length is dropped from the headers), so
//! the service cannot see the conflict. Weir rejects such requests instead: they are
//! the classic request-smuggling vector when a chain of intermediaries disagrees.
//! The guard shadows the framing of each request (head, then a fixed-length or chunked
//! body) and records the sequence number of the first ambiguous one. On anything it
//! does not understand it steps aside and leaves the verdict to hyper.
//!
//! On the way out it does one thing: hyper answers a request it cannot parse with a
//! bare status line (400, 414 or 431, `content-length: 0`, connection closing) that
//! never reaches the service. The guard replaces that answer with the same status and
//! a short plain-text reason, and counts it, so that every refusal explains itself.
//! For heads that are too large it gives the service's own status and reason
//! (`headers::head_refusal`), so a head over the limit gets the same answer whether it
//! is one long field, many fields or a long target.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::headers::MAX_REQUEST_FIELDS;
use crate::metrics::Metrics;

mod proxy_connection;
mod replacement;

use replacement::{replacement_for, target_longer_than, Oversize};

/// What the guard found, shared with the connection's transactions.
#[derive(Default)]
pub(crate) struct FramingReport {
    /// 1-based number of the first request with ambiguous framing; 0 when none.
    first_ambiguous: AtomicU64,
}

impl FramingReport {
    /// Whether the `n`th request (1-based) on the connection had ambiguous framing.
    pub fn is_ambiguous(&self, n: u64) -> bool {
        self.first_ambiguous.load(Ordering::Acquire) == n
    }
}

enum State {
    Head(Vec<u8>),
    Fixed(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    ChunkDataEnd(u8),
    Trailers(Vec<u8>),
    /// HTTP/2, a tunnel, or something hyper will reject: stop following.
    Off,
}

/// An I/O stream that watches the request framing of what is read from it.
pub(crate) struct FramingGuard<IO> {
    io: IO,
    state: State,
    requests: u64,
    first_read: bool,
    /// `limits.max_request_header`, for the reasons of hyper's 431 and 414.
    header_limit: usize,
    /// Past this many bytes hyper refuses a head (its buffer) and the guard stops.
    head_limit: usize,
    /// Why the last head was too large, when it was.
    oversize: Oversize,
    report: Arc<FramingReport>,
    metrics: Arc<Metrics>,
    /// A replacement for hyper's bare error answer, being written: (bytes, written,
    /// length of hyper's write it stands for).
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<IO> FramingGuard<IO> {
    pub fn new(io: IO, header_limit: usize, metrics: Arc<Metrics>) -> (Self, Arc<FramingReport>) {
        let report = Arc::new(FramingReport::default());
        (
            FramingGuard {
                io,
                state: State::Head(Vec::new()),
                requests: 0,
                first_read: true,
                header_limit,
                head_limit: 2 * header_limit + 8192,
                oversize: Oversize::Section,
                report: report.clone(),
                metrics,
                replacing: None,
            },
            report,
        )
    }

    /// The stream under the guard.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The stream under the guard, for Weir's own HTTP/1.1 server, which reads whole
    /// bodiless requests past the guard (it parses them itself, and serves nothing
    /// whose framing could be ambiguous) and tells the guard with
    /// [`FramingGuard::served_past`].
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// A request was read past the guard, whole and without a body: the next one is
    /// the guard's next in sequence.
    pub fn served_past(&mut self) {
        self.first_read = false;
        self.requests += 1;
    }

    /// Follows bytes read past the guard that hyper is about to be given.
    pub fn observe_ahead(&mut self, data: &mut [u8]) {
        if !matches!(self.state, State::Off) {
            self.observe(data);
        }
    }

    /// The connection speaks HTTP/2: nothing to follow.
    pub fn step_aside(&mut self) {
        self.state = State::Off;
    }

    /// Every byte read so far belonged to a complete HTTP/1 request (head and body),
    /// and no replacement answer is being written: the connection is between two
    /// requests. False once the guard stepped aside (HTTP/2, a tunnel, a framing it
    /// does not follow).
    pub fn between_requests(&self) -> bool {
        matches!(&self.state, State::Head(buf) if buf.is_empty()) && self.replacing.is_none()
    }

    /// hyper is reading a request head here, or waiting for one: every earlier request
    /// was read whole (the head may have begun, `between_requests` tells).
    pub fn reading_head(&self) -> bool {
        matches!(&self.state, State::Head(_)) && self.replacing.is_none()
    }

    /// Frees the head buffer kept for reuse, while the connection waits.
    pub fn release_buffers(&mut self) {
        if let State::Head(buf) = &mut self.state {
            *buf = Vec::new();
        }
    }

    /// Follows the bytes hyper is about to read; `data` is still writable so that a
    /// request head can be mended in place before hyper parses it.
    fn observe(&mut self, mut data: &mut [u8]) {
        if self.first_read {
            self.first_read = false;
            if data.starts_with(b"PRI * HTTP/2.0") {
                self.state = State::Off;
            }
        }
        while !data.is_empty() {
            if let Some(end) = self.whole_head(data) {
                data = &mut std::mem::take(&mut data)[end..];
                continue;
            }
            let used = match &mut self.state {
                State::Off => return,
                State::Head(buf) => {
                    let start = buf.len().saturating_sub(3);
                    let chunk_at = buf.len();
                    buf.extend_from_slice(data);
                    match head_end(&buf[start..]) {
                        Some(i) => {
                            let end = start + i + 4;
                            let consumed_here = end - chunk_at;
                            // The buffer is reused for the next head: no allocation per request.
                            let mut head = std::mem::take(buf);
                            if let Some(at) = self.head_complete(&head[..end]) {
                                // Only bytes of this read are still ahead of hyper.
                                if let Some(field) = at.checked_sub(chunk_at) {
                                    proxy_connection::rewrite(&mut data[field..]);
                                }
                            }
                            if let State::Head(next) = &mut self.state {
                                head.clear();
                                *next = head;
                            }
                            consumed_here
                        }
                        None => {
                            if buf.len() > self.head_limit {
                                if target_longer_than(buf, self.header_limit) {
                                    self.oversize = Oversize::Target;
                                }
                                self.state = State::Off;
                            }
                            data.len()
                        }
                    }
                }
                State::Fixed(n) => {
                    let take = (*n).min(data.len() as u64);
                    *n -= take;
                    if *n == 0 {
                        self.state = State::Head(Vec::new());
                    }
                    take as usize
                }
                State::ChunkSize(line) => match data.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        line.extend_from_slice(&data[..=i]);
                        let size = httparse::parse_chunk_size(line);
                        self.state = match size {
                            Ok(httparse::Status::Complete((_, 0))) => State::Trailers(Vec::new()),
                            Ok(httparse::Status::Complete((_, n))) => State::ChunkData(n),
                            _ => State::Off,
                        };
                        i + 1
                    }
                    None => {
                        line.extend_from_slice(data);
                        if line.len() > 4096 {
                            self.state = State::Off;
                        }
                        data.len()
                    }
                },
                State::ChunkData(n) => {
                    let take = (*n).min(data.len() as u64);
                    *n -= take;
                    if *n == 0 {
                        self.state = State::ChunkDataEnd(2);
                    }
                    take as usize
                }
                State::ChunkDataEnd(left) => {
                    *left -= 1;
                    if *left == 0 {
                        self.state = State::ChunkSize(Vec::new());
                    }
                    1
                }
                State::Trailers(buf) => {
                    // Trailers end with an empty line: the section is "\r\n" alone, or
                    // fields followed by "\r\n\r\n".
                    let before = buf.len();
                    buf.extend_from_slice(data);
                    let end = if buf.starts_with(b"\r\n") {
                        Some(2)
                    } else {
                        head_end(buf).map(|i| i + 4)
                    };
                    match end {
                        Some(end) => {
                            self.state = State::Head(Vec::new());
                            end - before
                        }
                        None => {
                            if buf.len() > self.head_limit {
                                self.state = State::Off;
                            }
                            data.len()
                        }
                    }
                }
            };
            data = &mut std::mem::take(&mut data)[used..];
        }
    }

    /// The common case, a whole head at the start of `data` with nothing buffered
    /// before it: checked where it is (copying it into the buffer first cost a copy per
    /// request, and with pipelined requests a copy of all those behind it too). Returns
    /// the head's length; `None` leaves the bytes to the general path.
    fn whole_head(&mut self, data: &mut [u8]) -> Option<usize> {
        match &self.state {
            State::Head(buf) if buf.is_empty() => {}
            _ => return None,
        }
        let end = head_end(data)? + 4;
        if let Some(field) = self.head_complete(&data[..end]) {
            proxy_connection::rewrite(&mut data[field..]);
        }
        Some(end)
    }

    /// Takes note of a complete request head; returns the offset in `head` of a
    /// `Proxy-Connection` field to rewrite (see `proxy_connection`).
    fn head_complete(&mut self, whole: &[u8]) -> Option<usize> {
        // hyper skips empty lines before a request line; so do we.
        let mut head = whole;
        while head.starts_with(b"\r\n") {
            head = &head[2..];
        }
        // Uninitialised slots: this runs on every request, and filling 256 empty headers
        // first cost more than the parse.
        let mut fields =
            [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_REQUEST_FIELDS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(head, &mut fields) {
            Ok(httparse::Status::Complete(_)) => {}
            parsed => {
                if matches!(parsed, Err(httparse::Error::TooManyHeaders)) {
                    self.oversize = Oversize::Fields;
                }
                self.state = State::Off;
                return None;
            }
        }
        self.requests += 1;
        let mut chunked = false;
        let mut length = None;
        let mut has_length = false;
        for f in req.headers.iter() {
            if f.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = true;
            } else if f.name.eq_ignore_ascii_case("content-length") {
                has_length = true;
                length = std::str::from_utf8(f.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok());
            }
        }
        if chunked && has_length {
            let _ = self.report.first_ambiguous.compare_exchange(
                0,
                self.requests,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        let upgrade = req.method == Some("CONNECT")
            || req
                .headers
                .iter()
                .any(|f| f.name.eq_ignore_ascii_case("upgrade"));
        self.state = if upgrade {
            State::Off
        } else if chunked {
            State::ChunkSize(Vec::new())
        } else {
            match length {
                Some(0) | None if !has_length => State::Head(Vec::new()),
                Some(0) => State::Head(Vec::new()),
                Some(n) => State::Fixed(n),
                None => State::Off,
            }
        };
        proxy_connection::field_to_rewrite(&req)
            .map(|name| name.as_ptr() as usize - whole.as_ptr() as usize)
    }
}

/// Where a head (or a trailer section) ends: `\r\n\r\n`. Its searcher is built once:
/// `memmem::find` builds one on every call, which cost each request more than the
/// search itself.
fn head_end(hay: &[u8]) -> Option<usize> {
    static END: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));
    END.find(hay)
}

impl<IO: AsyncRead + Unpin> AsyncRead for FramingGuard<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            if !matches!(this.state, State::Off) {
                this.observe(&mut buf.filled_mut()[before..]);
            }
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> FramingGuard<IO> {
    /// Writes the replacement for hyper's answer; completes as if `len` bytes of
    /// hyper's were written.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, written, len)) = &mut self.replacing {
            if *written == bytes.len() {
                let len = *len;
                self.replacing = None;
                return Poll::Ready(Ok(len));
            }
            match Pin::new(&mut self.io).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => {
                    self.replacing = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }

    fn start_replacing(&mut self, head: &[u8]) -> bool {
        match replacement_for(head, self.header_limit, self.oversize) {
            Some((bytes, kind)) => {
                self.metrics.error(kind);
                self.replacing = Some((bytes, 0, head.len()));
                true
            }
            None => false,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FramingGuard<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_some()
            || (data.starts_with(b"HTTP/1.1 4") && this.start_replacing(data))
        {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.io).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        if this.replacing.is_some() {
            return this.poll_replacement(cx);
        }
        if first.starts_with(b"HTTP/1.1 4")
            && bufs.iter().filter(|b| !b.is_empty()).count() == 1
            && this.start_replacing(first)
        {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
