//! A small scripted ICAP server for tests, on 127.0.0.1: it reads each request (the
//! ICAP head, the encapsulated heads and the body's chunks up to the end of a
//! preview or of the body) and answers with what the test's handler returns, byte
//! for byte, so a test can send well-formed answers (modifications, 204 after a
//! preview, 100 Continue, a new ISTag) as well as malformed ones, or hang.
//!
//! Used by the module's unit tests and, through `#[path]`, by the `weir` binary's
//! integration tests: it depends on std and tokio only.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server read it.
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// `OPTIONS`, `REQMOD` or `RESPMOD`.
    pub method: String,
    /// The ICAP head, as text.
    pub head: String,
    /// The encapsulated HTTP heads, as text.
    pub http_heads: String,
    /// The body's bytes read so far (the preview, then the rest after a `100`).
    pub body: Vec<u8>,
    /// The preview ended with `0; ieof`.
    pub ieof: bool,
}

/// What the server does next for one request.
pub enum Step {
    /// Writes these bytes.
    Send(Vec<u8>),
    /// Reads the rest of the body (after sending `100 Continue`).
    ReadRest,
    /// Waits.
    Sleep(Duration),
    /// Closes the connection.
    Close,
}

type Handler = Arc<dyn Fn(&Received) -> Vec<Step> + Send + Sync>;

/// The server; it stops when dropped.
pub struct IcapServer {
    /// Its address.
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl IcapServer {
    /// A server offering `methods` (with `extra` OPTIONS lines, ISTag `t1`) that
    /// answers every other request with `answer`.
    pub async fn offering(
        methods: &'static str,
        extra: &'static str,
        answer: fn(&Received) -> Vec<Step>,
    ) -> IcapServer {
        IcapServer::start(move |r| {
            if r.method == "OPTIONS" {
                vec![Step::Send(options_answer(methods, "t1", extra))]
            } else {
                answer(r)
            }
        })
        .await
    }

    /// Starts a server whose answers `handler` scripts. Call within a tokio runtime.
    pub async fn start(
        handler: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static,
    ) -> IcapServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Handler = Arc::new(handler);
        let (r, c) = (received.clone(), connections.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, handler.clone(), r.clone()));
            }
        });
        IcapServer {
            addr,
            received,
            connections,
            task,
        }
    }

    /// `icap://127.0.0.1:PORT/{service}`
    pub fn url(&self, service: &str) -> String {
        format!("icap://{}/{service}", self.addr)
    }

    /// Every request read so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The requests of one method read so far.
    pub fn count(&self, method: &str) -> usize {
        self.received()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for IcapServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An OPTIONS answer offering `methods` (e.g. `"REQMOD, RESPMOD"`), with `extra`
/// header lines (each ending in CRLF).
pub fn options_answer(methods: &str, istag: &str, extra: &str) -> Vec<u8> {
    format!(
        "ICAP/1.0 200 OK\r\nMethods: {methods}\r\nISTag: \"{istag}\"\r\n{extra}Encapsulated: null-body=0\r\n\r\n"
    )
    .into_bytes()
}

/// A `200` answer encapsulating `http_head` (ending in a blank line) under `section`
/// (`res-hdr` or `req-hdr`), and `body` as one chunk (`None`: `null-body`).
pub fn modified_answer(
    istag: &str,
    section: &str,
    http_head: &str,
    body: Option<&[u8]>,
) -> Vec<u8> {
    let entity = match (body.is_some(), section) {
        (false, _) => "null-body",
        (true, "req-hdr") => "req-body",
        (true, _) => "res-body",
    };
    let mut out = format!(
        "ICAP/1.0 200 OK\r\nISTag: \"{istag}\"\r\nEncapsulated: {section}=0, {entity}={}\r\n\r\n{http_head}",
        http_head.len()
    )
    .into_bytes();
    if let Some(body) = body {
        if !body.is_empty() {
            out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// A `204` answer.
pub fn unmodified_answer(istag: &str) -> Vec<u8> {
    format!("ICAP/1.0 204 No Content\r\nISTag: \"{istag}\"\r\n\r\n").into_bytes()
}

/// `100 Continue`.
pub const CONTINUE: &[u8] = b"ICAP/1.0 100 Continue\r\n\r\n";

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn fill(&mut self) -> Option<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await.ok()?;
        (n > 0).then(|| self.buf.extend_from_slice(&chunk[..n]))
    }

    async fn until(&mut self, delimiter: &[u8]) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self
                .buf
                .windows(delimiter.len())
                .position(|w| w == delimiter)
            {
                return Some(self.buf.drain(..i + delimiter.len()).collect());
            }
            self.fill().await?;
        }
    }

    async fn exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            self.fill().await?;
        }
        Some(self.buf.drain(..n).collect())
    }

    /// Chunks up to the last one; returns whether it said `ieof`.
    async fn chunks(&mut self, into: &mut Vec<u8>) -> Option<bool> {
        loop {
            let line = String::from_utf8(self.until(b"\r\n").await?).ok()?;
            let (size, ext) = line
                .trim_end()
                .split_once(';')
                .unwrap_or((line.trim_end(), ""));
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                self.until(b"\r\n").await?; // the empty trailer
                return Some(ext.contains("ieof"));
            }
            let data = self.exact(size + 2).await?;
            into.extend_from_slice(&data[..size]);
        }
    }
}

async fn serve(stream: TcpStream, handler: Handler, log: Arc<Mutex<Vec<Received>>>) {
    let mut conn = Conn {
        stream,
        buf: Vec::new(),
    };
    while let Some(head) = conn.until(b"\r\n\r\n").await {
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut received = Received {
            method: head.split(' ').next().unwrap_or("").to_owned(),
            head: head.clone(),
            ..Received::default()
        };
        let encapsulated = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("encapsulated:")
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let last = encapsulated
            .rsplit(',')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        let (entity, offset) = last.split_once('=').unwrap_or(("null-body", "0"));
        let offset: usize = offset.trim().parse().unwrap_or(0);
        let Some(heads) = conn.exact(offset).await else {
            return;
        };
        received.http_heads = String::from_utf8_lossy(&heads).into_owned();
        if entity != "null-body" {
            let Some(ieof) = conn.chunks(&mut received.body).await else {
                return;
            };
            received.ieof = ieof;
        }
        log.lock().unwrap().push(received.clone());
        let index = log.lock().unwrap().len() - 1;
        for step in handler(&received) {
            match step {
                Step::Send(bytes) => {
                    if conn.stream.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Step::ReadRest => {
                    let mut rest = Vec::new();
                    if conn.chunks(&mut rest).await.is_none() {
                        return;
                    }
                    log.lock().unwrap()[index].body.extend_from_slice(&rest);
                }
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Close => return,
            }
        }
    }
}
