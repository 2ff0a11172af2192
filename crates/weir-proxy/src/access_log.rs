//! The access log: Squid's native format or the combined format, to a file or stdout.
//!
//! Lines are formatted on the calling task and handed to one background thread that owns
//! the `BufWriter`, so a transaction never waits on disk. The hand-off is a bounded
//! channel: when the writer falls behind, lines are dropped (and counted) rather than
//! letting memory grow or transactions stall.

use std::fmt::Write as _;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{LogConfig, LogDestination, LogFormat};
use crate::metrics::CacheOutcome;

/// Lines that may wait for the writer thread before new ones are dropped.
const QUEUE_LINES: usize = 64 * 1024;
/// Longest time a written line may sit in the buffer under continuous load.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How long [`AccessLog::flush`] waits for the writer thread.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// One finished transaction, as the access log sees it.
#[derive(Debug, Clone)]
pub struct LogRecord<'a> {
    /// When the request arrived.
    pub start: SystemTime,
    /// How long the transaction took.
    pub elapsed: Duration,
    /// The client's address.
    pub client: SocketAddr,
    /// Request method.
    pub method: &'a str,
    /// Request URL as the client gave it (absolute in forward mode; authority for CONNECT).
    pub url: &'a str,
    /// Request HTTP version.
    pub version: http::Version,
    /// Response status sent to the client.
    pub status: u16,
    /// Response bytes sent to the client (body).
    pub bytes_out: u64,
    /// The response body was not sent whole: the client went away, or the origin (or
    /// a module) cut it. Squid's `_ABORTED` suffix.
    pub aborted: bool,
    /// How it was served.
    pub outcome: CacheOutcome,
    /// The origin's host:port when one was contacted.
    pub upstream: Option<&'a str>,
    /// Response Content-Type.
    pub content_type: Option<&'a str>,
    /// Request User-Agent.
    pub user_agent: Option<&'a str>,
    /// Request Referer.
    pub referer: Option<&'a str>,
    /// The client's authenticated user, when a module set one (`Txn::set_user`).
    pub user: Option<&'a str>,
    /// Fields modules added (`Txn::log_field`), appended as `name=value`.
    pub fields: &'a [(&'static str, String)],
}

enum Message {
    Line(String),
    Flush(SyncSender<()>),
}

/// An open access log. Writing never blocks a transaction on disk I/O.
pub struct AccessLog {
    format: LogFormat,
    tx: SyncSender<Message>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("format", &self.format)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl AccessLog {
    /// Opens the log the configuration names; `Ok(None)` when it is off.
    pub fn open(config: &LogConfig) -> std::io::Result<Option<AccessLog>> {
        let out: Box<dyn Write + Send> = match config.destination() {
            LogDestination::Off => return Ok(None),
            LogDestination::Stdout => Box::new(std::io::stdout()),
            LogDestination::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        };
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        std::thread::Builder::new()
            .name("weir-access-log".into())
            .spawn(move || write_loop(rx, std::io::BufWriter::with_capacity(64 * 1024, out)))?;
        Ok(Some(AccessLog {
            format: config.format,
            tx,
            dropped: AtomicU64::new(0),
        }))
    }

    /// Appends one line.
    pub fn log(&self, record: &LogRecord<'_>) {
        let line = format_line(self.format, record);
        if self.tx.try_send(Message::Line(line)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines dropped because the writer thread could not keep up (or had stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes out whatever is buffered (called at shutdown).
    ///
    /// Waits at most a couple of seconds for the writer thread.
    pub fn flush(&self) {
        let deadline = Instant::now() + FLUSH_WAIT;
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let mut message = Message::Flush(ack_tx);
        // The queue may be full of lines; retry until the writer makes room.
        loop {
            match self.tx.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(m)) => {
                    if Instant::now() >= deadline {
                        return;
                    }
                    message = m;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let _ = ack_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

fn write_loop(rx: Receiver<Message>, mut out: impl Write) {
    let mut dirty = false;
    let mut last_flush = Instant::now();
    let mut failing = false;
    let mut report = |result: std::io::Result<()>| match result {
        Ok(()) => failing = false,
        // Only the first error of a run is reported so a full disk does not flood the log.
        Err(e) if !failing => {
            failing = true;
            tracing::warn!(error = %e, "access log write failed");
        }
        Err(_) => {}
    };
    loop {
        let message = match rx.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                // Idle: push out what we have before sleeping until there is more.
                if dirty {
                    report(out.flush());
                    last_flush = Instant::now();
                }
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            }
        };
        dirty = match message {
            Message::Line(line) => {
                report(out.write_all(line.as_bytes()));
                if last_flush.elapsed() >= FLUSH_INTERVAL {
                    report(out.flush());
                    last_flush = Instant::now();
                    false
                } else {
                    true
                }
            }
            Message::Flush(ack) => {
                report(out.flush());
                last_flush = Instant::now();
                let _ = ack.try_send(());
                false
            }
        };
    }
    report(out.flush());
}

/// One log line, newline included.
fn format_line(format: LogFormat, record: &LogRecord<'_>) -> String {
    let mut line = String::with_capacity(256);
    match format {
        LogFormat::Squid => squid(&mut line, record),
        LogFormat::Combined => combined(&mut line, record),
    }
    // Module fields go last, so tools that parse the standard fields are unaffected.
    for (name, value) in record.fields {
        line.push(' ');
        push_token(&mut line, name);
        line.push('=');
        push_token(&mut line, value);
    }
    line.push('\n');
    line
}

fn squid_code(outcome: CacheOutcome, status: u16) -> &'static str {
    match outcome {
        CacheOutcome::Hit => "TCP_MEM_HIT",
        CacheOutcome::DiskHit => "TCP_HIT",
        CacheOutcome::Miss | CacheOutcome::Bypass => "TCP_MISS",
        CacheOutcome::RefreshUnmodified => "TCP_REFRESH_UNMODIFIED",
        CacheOutcome::RefreshModified => "TCP_REFRESH_MODIFIED",
        // Squid's collapsed forwarding reports requests that joined another fetch as hits.
        CacheOutcome::Collapsed => "TCP_HIT",
        // Squid's code for a stale copy served because the refresh failed; a copy served
        // while it is refreshed is a hit as far as the client is concerned.
        CacheOutcome::StaleOnError => "TCP_REFRESH_FAIL_OLD",
        CacheOutcome::StaleRevalidating => "TCP_HIT",
        CacheOutcome::Tunnel => "TCP_TUNNEL",
        CacheOutcome::Denied => "TCP_DENIED",
        CacheOutcome::Error if status == 0 => "TCP_MISS_ABORTED",
        CacheOutcome::Error => "TCP_MISS",
    }
}

/// Squid marks a transaction whose response did not reach the client whole.
fn aborted_suffix(r: &LogRecord<'_>) -> &'static str {
    let already = r.outcome == CacheOutcome::Error && r.status == 0;
    if r.aborted && !already {
        "_ABORTED"
    } else {
        ""
    }
}

/// `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`
fn squid(line: &mut String, r: &LogRecord<'_>) {
    // Squid stamps the line when it logs it, i.e. when the transaction ended.
    let end = since_epoch(r.start + r.elapsed);
    let _ = write!(
        line,
        "{}.{:03} {:6} {} {}{}/{:03} {} ",
        end.as_secs(),
        end.subsec_millis(),
        r.elapsed.as_millis(),
        r.client.ip(),
        squid_code(r.outcome, r.status),
        aborted_suffix(r),
        r.status,
        r.bytes_out,
    );
    push_token(line, r.method);
    line.push(' ');
    push_token(line, r.url);
    line.push(' ');
    push_token(line, r.user.unwrap_or("-"));
    line.push(' ');
    match r.upstream {
        Some(upstream) => {
            line.push_str("HIER_DIRECT/");
            push_token(line, upstream);
        }
        None => line.push_str("HIER_NONE/-"),
    }
    line.push(' ');
    push_token(line, r.content_type.unwrap_or("-"));
}

/// Appends an unquoted field; whitespace and control bytes would split it, so they are
/// percent-encoded.
fn push_token(line: &mut String, value: &str) {
    if value.is_empty() {
        line.push('-');
        return;
    }
    for c in value.chars() {
        if c.is_ascii_control() || c == ' ' {
            let _ = write!(line, "%{:02X}", c as u32);
        } else {
            line.push(c);
        }
    }
}

/// `%h %l %u [%t] "%r" %>s %b "%{Referer}i" "%{User-agent}i"`
fn combined(line: &mut String, r: &LogRecord<'_>) {
    let _ = write!(line, "{} - ", r.client.ip());
    push_token(line, r.user.unwrap_or("-"));
    line.push_str(" [");
    push_clf_time(line, since_epoch(r.start).as_secs());
    line.push_str("] \"");
    push_quoted(line, r.method);
    line.push(' ');
    push_quoted(line, r.url);
    line.push(' ');
    line.push_str(version_str(r.version));
    let _ = write!(line, "\" {:03} ", r.status);
    // As Apache's `%b`: no body is `-`, not `0`.
    if r.bytes_out == 0 {
        line.push('-');
    } else {
        let _ = write!(line, "{}", r.bytes_out);
    }
    for field in [r.referer, r.user_agent] {
        line.push_str(" \"");
        match field {
            Some(value) => push_quoted(line, value),
            None => line.push('-'),
        }
        line.push('"');
    }
}

/// Appends the inside of a quoted field, escaped as Apache does so a client cannot forge
/// fields or lines.
fn push_quoted(line: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '"' => line.push_str("\\\""),
            '\\' => line.push_str("\\\\"),
            c if c.is_ascii_control() => {
                let _ = write!(line, "\\x{:02x}", c as u32);
            }
            c => line.push(c),
        }
    }
}

fn version_str(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `10/Oct/2000:13:55:36 +0000`, always UTC.
fn push_clf_time(line: &mut String, secs: u64) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let _ = write!(
        line,
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    );
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
#[path = "access_log_tests.rs"]
mod tests;
