//! Raw HTTP/1.1 over `std::net::TcpStream`: for what a well-behaved client library won't
//! send (malformed or ambiguous requests, pipelining, Expect: 100-continue, huge headers).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Reads block at most this long.
pub const RAW_TIMEOUT: Duration = Duration::from_secs(15);

/// A response as read off the wire.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The trailer fields after a chunked body.
    pub trailers: Vec<(String, String)>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of a trailer field (name case-insensitive).
    pub fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One client connection.
pub struct RawConn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> RawConn {
        RawConn::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr) -> io::Result<RawConn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(RAW_TIMEOUT))?;
        stream.set_write_timeout(Some(RAW_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            buf: Vec::new(),
        })
    }

    /// A connection to the forward listener `proxy` on which a CONNECT to
    /// `127.0.0.1:port` was answered 200.
    pub fn tunnel(proxy: SocketAddr, port: u16) -> RawConn {
        let mut conn = RawConn::connect(proxy);
        conn.send(
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
                .as_bytes(),
        );
        let head = conn.read_head().expect("CONNECT response");
        assert_eq!(head.status, 200, "CONNECT to an allowed port");
        conn
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the proxy");
    }

    /// Like `send`, but reports errors (the peer may already have closed).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn fill_exact(&mut self, len: usize) -> io::Result<()> {
        while self.buf.len() < len {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed mid-message",
                ));
            }
        }
        Ok(())
    }

    fn take_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                self.buf.drain(..pos + 2);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before a full line",
                ));
            }
        }
    }

    /// Reads only a response head (status line and headers), e.g. a `100 Continue`.
    pub fn read_head(&mut self) -> io::Result<RawResponse> {
        let status_line = self.take_line()?;
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, status_line.clone()))?;
        let reason = parts.next().unwrap_or_default().to_string();
        let mut headers = Vec::new();
        loop {
            let line = self.take_line()?;
            if line.is_empty() {
                break;
            }
            let (n, v) = line.split_once(':').unwrap_or((line.as_str(), ""));
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        Ok(RawResponse {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            trailers: Vec::new(),
        })
    }

    /// Reads one response, 1xx included, with its body (none after HEAD, 1xx, 204, 304;
    /// chunked, Content-Length or until close otherwise).
    pub fn read_response(&mut self, after_head_request: bool) -> io::Result<RawResponse> {
        let mut resp = self.read_head()?;
        if after_head_request || resp.status < 200 || resp.status == 204 || resp.status == 304 {
            return Ok(resp);
        }
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if chunked {
            let mut body = Vec::new();
            loop {
                let size_line = self.take_line()?;
                let size_hex = size_line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_hex, 16).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("chunk size {size_line:?}"),
                    )
                })?;
                if size == 0 {
                    // Trailers, then the empty line.
                    loop {
                        let line = self.take_line()?;
                        if line.is_empty() {
                            break;
                        }
                        let (n, v) = line.split_once(':').unwrap_or((line.as_str(), ""));
                        resp.trailers
                            .push((n.trim().to_string(), v.trim().to_string()));
                    }
                    break;
                }
                self.fill_exact(size + 2)?;
                body.extend_from_slice(&self.buf[..size]);
                self.buf.drain(..size + 2);
            }
            resp.body = body;
        } else if let Some(len) = resp.header("content-length") {
            let len: usize = len
                .trim()
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "content-length"))?;
            self.fill_exact(len)?;
            resp.body = self.buf.drain(..len).collect();
        } else {
            while self.fill()? > 0 {}
            resp.body = std::mem::take(&mut self.buf);
        }
        Ok(resp)
    }

    /// Reads the next final (non-1xx) response, skipping interim ones.
    pub fn read_final(&mut self, after_head_request: bool) -> io::Result<RawResponse> {
        loop {
            let resp = self.read_response(after_head_request)?;
            if resp.status >= 200 {
                return Ok(resp);
            }
        }
    }

    /// Reads exactly `len` bytes (e.g. through a tunnel).
    pub fn read_bytes(&mut self, len: usize) -> io::Result<Vec<u8>> {
        self.fill_exact(len)?;
        Ok(self.buf.drain(..len).collect())
    }

    /// Reads whatever arrives until the peer closes or `timeout` passes.
    pub fn read_until_close(&mut self, timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        self.stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        while Instant::now() < deadline {
            match self.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        self.stream.set_read_timeout(Some(RAW_TIMEOUT)).unwrap();
        std::mem::take(&mut self.buf)
    }

    /// Whether the peer closes the connection (EOF or reset) within `timeout`, with
    /// nothing else arriving first.
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        // A read that times out (`WouldBlock` or `TimedOut`) means still open.
        let closed = match self.fill() {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        } && self.buf.is_empty();
        self.stream.set_read_timeout(Some(RAW_TIMEOUT)).unwrap();
        closed
    }

    /// Waits up to `timeout` for any bytes; true if some arrived.
    pub fn has_data_within(&mut self, timeout: Duration) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let got = matches!(self.fill(), Ok(n) if n > 0);
        self.stream.set_read_timeout(Some(RAW_TIMEOUT)).unwrap();
        got
    }
}

/// A chunked POST of `body` (one chunk) to `path` on `host`, ending in `trailers`;
/// its `Trailer` field names `declared` (an HTTP/1.1 hop forwards only those).
pub fn chunked_post(
    path: &str,
    host: impl std::fmt::Display,
    body: &str,
    declared: &[&str],
    trailers: &[(&str, &str)],
) -> Vec<u8> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\
         Trailer: {}\r\n\r\n{:x}\r\n{body}\r\n0\r\n",
        declared.join(", "),
        body.len()
    );
    for (name, value) in trailers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.into_bytes()
}

/// Sends `request` on a new connection and reads one final response.
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> RawResponse {
    let mut conn = RawConn::connect(addr);
    conn.send(request);
    conn.read_final(request.starts_with(b"HEAD "))
        .unwrap_or_else(|e| panic!("reading the response to {:?}: {e}", preview(request)))
}

/// Like `raw_exchange`, but the response may legitimately not come (the proxy may
/// close instead); returns the error then.
pub fn try_raw_exchange(addr: SocketAddr, request: &[u8]) -> io::Result<RawResponse> {
    let mut conn = RawConn::connect(addr);
    conn.try_send(request)?;
    conn.read_final(request.starts_with(b"HEAD "))
}

fn preview(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    s.replace("\r\n", "\\r\\n")
}
