//! What the test origin answers (`Reply`) and what it records (`Recorded`), and the
//! generated body pattern.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::Version;

/// The body type the origin answers with.
pub type OriginBody = BoxBody<Bytes, std::io::Error>;

/// Size of the chunks a generated body is produced in.
pub const CHUNK: usize = 64 * 1024;

/// Generated bodies repeat this many distinct byte values: byte `i` is `i % 251`.
const PERIOD: usize = 251;

/// The generated body's content: `len` bytes, byte `i` being `(i % 251) as u8`.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % PERIOD) as u8).collect()
}

/// `n` bytes of the pattern starting at `offset`, without allocating (a slice of one
/// shared buffer).
pub(super) fn pattern_chunk(offset: u64, n: usize) -> Bytes {
    static BUF: OnceLock<Bytes> = OnceLock::new();
    let buf = BUF.get_or_init(|| Bytes::from(pattern(CHUNK + PERIOD)));
    let start = (offset % PERIOD as u64) as usize;
    buf.slice(start..start + n)
}

/// What a route's body is.
#[derive(Clone, Debug)]
pub enum BodySpec {
    /// These bytes.
    Bytes(Bytes),
    /// `len` bytes of [`pattern`], produced chunk by chunk (never held whole), with an
    /// optional pause before each chunk.
    Stream { len: u64, chunk_delay: Duration },
    /// The request's own body.
    Echo,
}

/// A programmable response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: BodySpec,
    /// Pause before the response head is sent.
    pub delay: Duration,
    /// Announce the whole length but cut the connection after this many body bytes.
    pub cut_after: Option<u64>,
    /// Send the body chunked (no Content-Length).
    pub chunked: bool,
    /// Echo every request header back as `x-echo-<name>`.
    pub echo_headers: bool,
    /// Trailer fields sent after the body (which is then sent chunked, with a
    /// `Trailer` field naming them). hyper sends them only to a client that asked
    /// with `TE: trailers`.
    pub trailers: Vec<(String, String)>,
}

impl Reply {
    /// `status` with an empty body.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: BodySpec::Bytes(Bytes::new()),
            delay: Duration::ZERO,
            cut_after: None,
            chunked: false,
            echo_headers: false,
            trailers: Vec::new(),
        }
    }

    /// 200 with this body.
    pub fn ok(body: impl Into<Bytes>) -> Reply {
        Reply::status(200).body(body)
    }

    /// 200 with a generated body of `len` bytes (see [`pattern`]).
    pub fn stream(len: u64) -> Reply {
        Reply::status(200).with_body(BodySpec::Stream {
            len,
            chunk_delay: Duration::ZERO,
        })
    }

    /// 200 echoing the request's body, and its headers as `x-echo-<name>`.
    pub fn echo() -> Reply {
        let mut r = Reply::status(200).with_body(BodySpec::Echo);
        r.echo_headers = true;
        r
    }

    pub fn body(self, body: impl Into<Bytes>) -> Reply {
        self.with_body(BodySpec::Bytes(body.into()))
    }

    pub fn with_body(mut self, body: BodySpec) -> Reply {
        self.body = body;
        self
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Shorthand for a `Cache-Control` header.
    pub fn cc(self, value: &str) -> Reply {
        self.header("cache-control", value)
    }

    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// For a generated body: pause this long before each chunk.
    pub fn chunk_delay(mut self, delay: Duration) -> Reply {
        if let BodySpec::Stream { chunk_delay, .. } = &mut self.body {
            *chunk_delay = delay;
        }
        self
    }

    pub fn cut_after(mut self, bytes: u64) -> Reply {
        self.cut_after = Some(bytes);
        self
    }

    pub fn chunked(mut self) -> Reply {
        self.chunked = true;
        self
    }

    /// Adds a trailer field (see [`Reply::trailers`]).
    pub fn trailer(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.trailers.push((name.to_string(), value.into()));
        self.chunked = true;
        self
    }
}

/// One request as the origin received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The request target as received (origin-form unless the proxy sent another form).
    pub uri: String,
    pub path: String,
    pub version: Version,
    /// In the order received, names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The trailer fields that followed the body, names lowercase.
    pub trailers: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }
}
