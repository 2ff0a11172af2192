//! One ICAP service: its OPTIONS (asked at start, again when their TTL runs out or
//! the ISTag changes), its connections, and one REQMOD or RESPMOD exchange with
//! preview, `100 Continue` and `204`.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use weir_api::ModuleContext;

use super::metrics::Metrics;
use super::options::{ServiceOptions, Transfer};
use super::pool::{ConnectError, Pool};
use super::reader::{Answer, Limits, ReadError, Reader};
use super::settings::ServiceConfig;
use super::wire::{
    encode_chunk, encode_request, HttpHead, Outgoing, WireError, LAST_CHUNK, LAST_CHUNK_IEOF,
};

/// The ICAP head and the encapsulated HTTP heads of an answer together.
const MAX_HEAD: usize = 64 * 1024;

/// A message to adapt.
pub struct Message<'a> {
    /// The encapsulated HTTP request head (REQMOD always; RESPMOD when known).
    pub request: Option<Vec<u8>>,
    /// The encapsulated HTTP response head (RESPMOD).
    pub response: Option<Vec<u8>>,
    /// The body, or its beginning when `truncated`.
    pub body: &'a [u8],
    /// The body is longer than `body`.
    pub truncated: bool,
    /// The URL path, whose extension picks the `Transfer-*` list.
    pub path: &'a str,
}

/// What the service made of a message.
#[derive(Debug)]
pub enum Outcome {
    /// The service does not take this message (its OPTIONS do not list the method,
    /// or `Transfer-Ignore` names the extension).
    Skipped,
    /// `204`: use the message as it is. `istag` is the answer's ISTag.
    Unmodified { istag: Option<String> },
    /// `200`: the adapted message (or, to a REQMOD, a response), and its body.
    Modified {
        heads: Vec<HttpHead>,
        body: Option<Vec<u8>>,
        istag: Option<String>,
    },
    /// The body was truncated and the service wants more of it than the module has.
    WantsMore,
}

/// Why the service could not be used.
#[derive(Debug)]
pub enum Failure {
    /// Connecting failed (refused, unreachable, connect timeout).
    Connect,
    /// The exchange took longer than the service's timeout.
    Timeout,
    /// The socket failed in the middle of the exchange.
    Io,
    /// The answer was malformed, too large or cut short.
    Protocol(WireError),
    /// The service answered with an error status (or OPTIONS did not answer 200).
    Status(u16),
}

impl std::fmt::Display for Failure {
    /// `connect`, `timeout`, `io`, `protocol-<what>` or `status-<code>`: the
    /// `icap=failed:…` log field.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect => f.write_str("connect"),
            Failure::Timeout => f.write_str("timeout"),
            Failure::Io => f.write_str("io"),
            Failure::Protocol(e) => write!(f, "protocol-{}", e.name()),
            Failure::Status(s) => write!(f, "status-{s}"),
        }
    }
}

/// One configured service.
pub struct Service {
    /// Its settings.
    pub config: ServiceConfig,
    pool: Pool,
    options: RwLock<Option<Arc<ServiceOptions>>>,
    refresh: tokio::sync::Mutex<()>,
    metrics: Metrics,
    context: ModuleContext,
}

/// What follows a `100 Continue`.
#[derive(Clone, Copy)]
enum AfterContinue<'a> {
    /// The rest of the body.
    Send(&'a [u8]),
    /// Nothing: the module has no more of the body, and the `100` is the answer.
    Stop,
    /// Nothing was previewed (or the preview held the whole body): a `100` is wrong.
    Error,
}

/// An exchange that failed, and whether trying again on a new connection is safe (a
/// reused connection the server had closed before any answer byte).
struct Attempt {
    failure: Failure,
    retry: bool,
}

impl Service {
    /// A service with no connection and no OPTIONS yet.
    pub fn new(config: ServiceConfig, metrics: Metrics, context: ModuleContext) -> Service {
        let pool = Pool::new(
            config.authority.clone(),
            config.max_connections,
            config.connect_timeout,
        );
        Service {
            config,
            pool,
            options: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(()),
            metrics,
            context,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            head: MAX_HEAD,
            body: self.config.max_answer,
        }
    }

    fn cached_options(&self) -> Option<Arc<ServiceOptions>> {
        let guard = self.options.read().unwrap_or_else(|p| p.into_inner());
        guard.clone().filter(|o| o.expires > Instant::now())
    }

    /// The service's OPTIONS, asked for when there are none yet or they expired. One
    /// OPTIONS request at a time: the others wait for its answer.
    pub async fn options(&self) -> Result<Arc<ServiceOptions>, Failure> {
        if let Some(o) = self.cached_options() {
            return Ok(o);
        }
        let _single = self.refresh.lock().await;
        if let Some(o) = self.cached_options() {
            return Ok(o);
        }
        self.metrics.options.inc();
        let out = Outgoing {
            method: "OPTIONS",
            url: &self.config.url,
            host: &self.config.authority,
            preview: None,
            request: None,
            response: None,
            body: false,
        };
        let head = encode_request(&out);
        let answer = self.send(&head, AfterContinue::Error).await?;
        if answer.status != 200 {
            return Err(Failure::Status(answer.status));
        }
        let options = Arc::new(ServiceOptions::from_headers(
            &answer.headers,
            Instant::now(),
        ));
        self.pool.limit_to(options.max_connections);
        *self.options.write().unwrap_or_else(|p| p.into_inner()) = Some(options.clone());
        Ok(options)
    }

    /// Sends `message` to the service and reads its final answer, all within the
    /// service's timeout.
    pub async fn adapt(&self, message: &Message<'_>) -> Result<Outcome, Failure> {
        tokio::time::timeout(self.config.timeout, self.exchange(message))
            .await
            .unwrap_or(Err(Failure::Timeout))
    }

    async fn exchange(&self, message: &Message<'_>) -> Result<Outcome, Failure> {
        let options = self.options().await?;
        if !options.methods.contains(&self.config.method) {
            return Ok(Outcome::Skipped);
        }
        let has_body = !message.body.is_empty() || message.truncated;
        let transfer = if has_body {
            options.transfer(message.path, self.config.preview)
        } else {
            Transfer::Complete
        };
        let preview = match transfer {
            Transfer::Ignore => return Ok(Outcome::Skipped),
            Transfer::Preview(n) => Some(n),
            // All of a truncated body cannot be sent.
            Transfer::Complete if message.truncated => return Ok(Outcome::WantsMore),
            Transfer::Complete => None,
        };
        if message.truncated && preview.is_some_and(|n| n > message.body.len()) {
            return Ok(Outcome::WantsMore);
        }
        // The Preview header says how many bytes the preview holds (RFC 3507, 4.5).
        let preview = preview.map(|n| n.min(message.body.len()));
        let out = Outgoing {
            method: self.config.method.as_str(),
            url: &self.config.url,
            host: &self.config.authority,
            preview,
            request: message.request.clone(),
            response: message.response.clone(),
            body: has_body,
        };
        let mut first = encode_request(&out);
        let mut rest = Vec::new();
        match preview {
            Some(n) if has_body => {
                encode_chunk(&mut first, &message.body[..n]);
                let whole = n == message.body.len() && !message.truncated;
                first.extend_from_slice(if whole { LAST_CHUNK_IEOF } else { LAST_CHUNK });
                if !whole {
                    encode_chunk(&mut rest, &message.body[n..]);
                    rest.extend_from_slice(LAST_CHUNK);
                }
            }
            _ if has_body => {
                encode_chunk(&mut first, message.body);
                first.extend_from_slice(LAST_CHUNK);
            }
            _ => {}
        }
        self.metrics.requests.inc();
        let after_continue = if message.truncated {
            // After a preview of a truncated body there is nothing more to send.
            AfterContinue::Stop
        } else if rest.is_empty() {
            AfterContinue::Error
        } else {
            AfterContinue::Send(&rest)
        };
        let answer = self.send(&first, after_continue).await?;
        let istag = answer
            .headers
            .get("istag")
            .and_then(|v| v.to_str().ok())
            .map(|t| t.trim().to_owned());
        self.check_istag(&options, istag.as_deref());
        match answer.status {
            100 => Ok(Outcome::WantsMore),
            204 => Ok(Outcome::Unmodified { istag }),
            200 => Ok(Outcome::Modified {
                heads: answer.heads,
                body: answer.body,
                istag,
            }),
            other => Err(Failure::Status(other)),
        }
    }

    /// A changed ISTag means the service changed (RFC 3507, 4.7): its OPTIONS are
    /// asked again, and the responses the cache stored after the old service adapted
    /// them are removed.
    /// Exchanges that overlap the change all see it: only the first one, which still
    /// finds the options it started with, acts on it.
    fn check_istag(&self, options: &Arc<ServiceOptions>, tag: Option<&str>) {
        let (Some(tag), Some(known)) = (tag, options.istag.as_deref()) else {
            return;
        };
        if tag == known {
            return;
        }
        {
            let mut current = self.options.write().unwrap_or_else(|p| p.into_inner());
            if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, options)) {
                return;
            }
            *current = None;
        }
        self.metrics.istag_changes.inc();
        let _ = self.context.content().ban_tag(&self.cache_tag(known));
    }

    /// The cache tag of responses this service adapted (or passed with a `204`)
    /// under `istag`.
    pub fn cache_tag(&self, istag: &str) -> String {
        format!("icap:{}#{}", self.config.url, istag.trim_matches('"'))
    }

    /// Writes `first` and reads the answer, and after a `100 Continue` what
    /// `after_continue` says. Retries once on a new connection when a reused one
    /// turns out closed.
    async fn send(
        &self,
        first: &[u8],
        after_continue: AfterContinue<'_>,
    ) -> Result<Answer, Failure> {
        let mut conn = self.pool.get().await.map_err(connect_failure)?;
        loop {
            let reused = conn.reused;
            match self.attempt(&mut conn.stream, first, after_continue).await {
                Ok((answer, reusable)) => {
                    if reusable {
                        self.pool.put_back(conn);
                    }
                    return Ok(answer);
                }
                Err(a) if a.retry && reused => {
                    drop(conn);
                    conn = self.pool.fresh().await.map_err(connect_failure)?;
                }
                Err(a) => return Err(a.failure),
            }
        }
    }

    async fn attempt(
        &self,
        stream: &mut tokio::net::TcpStream,
        first: &[u8],
        after_continue: AfterContinue<'_>,
    ) -> Result<(Answer, bool), Attempt> {
        let limits = self.limits();
        let (read_half, mut write_half) = stream.split();
        let mut reader = Reader::new(read_half);
        let (mut answer, mut written) =
            write_while_reading(&mut reader, &mut write_half, first, limits)
                .await
                .map_err(|e| attempt_failure(e, reader.started))?;
        if answer.status == 100 {
            match after_continue {
                AfterContinue::Send(rest) => {
                    (answer, written) =
                        write_while_reading(&mut reader, &mut write_half, rest, limits)
                            .await
                            .map_err(|e| attempt_failure(e, true))?;
                    if answer.status == 100 {
                        return Err(Attempt {
                            failure: Failure::Protocol(WireError::StatusLine),
                            retry: false,
                        });
                    }
                }
                // The server waits for the rest of a truncated body: the connection
                // is left in the middle of a message and must not be reused.
                AfterContinue::Stop => return Ok((answer, false)),
                AfterContinue::Error => {
                    return Err(Attempt {
                        failure: Failure::Protocol(WireError::StatusLine),
                        retry: false,
                    })
                }
            }
        }
        let reusable = written && answer.keeps_alive() && !reader.has_leftover();
        Ok((answer, reusable))
    }
}

/// Writes `bytes` while reading an answer, so that a server answering before it has
/// read everything (or streaming its answer back) never deadlocks with the client.
/// Returns the answer and whether all of `bytes` was written.
async fn write_while_reading<R, W>(
    reader: &mut Reader<R>,
    writer: &mut W,
    bytes: &[u8],
    limits: Limits,
) -> Result<(Answer, bool), ReadError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let write = writer.write_all(bytes);
    let read = reader.answer(limits);
    tokio::pin!(write, read);
    let mut write_done = false;
    let mut written = false;
    loop {
        tokio::select! {
            result = &mut write, if !write_done => {
                write_done = true;
                written = result.is_ok();
            }
            answer = &mut read => return answer.map(|a| (a, written)),
        }
    }
}

fn connect_failure(e: ConnectError) -> Failure {
    match e {
        ConnectError::Timeout | ConnectError::Failed => Failure::Connect,
    }
}

fn attempt_failure(e: ReadError, started: bool) -> Attempt {
    match e {
        ReadError::Io => Attempt {
            failure: Failure::Io,
            retry: !started,
        },
        ReadError::Wire(WireError::Truncated) => Attempt {
            failure: Failure::Protocol(WireError::Truncated),
            retry: !started,
        },
        ReadError::Wire(w) => Attempt {
            failure: Failure::Protocol(w),
            retry: false,
        },
    }
}
