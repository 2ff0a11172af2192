//! What is recorded of a transaction: the request details the access log needs, and
//! the record completed (counted, logged, the modules' log event) when the response
//! body ends or the client goes away. Above the engine's state (a record holds the
//! client's connection, and through it the engine, to count and log); below the
//! response body that completes it.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use http::header::{self, HeaderValue};
use http::{Method, Request};

use crate::access_log::LogRecord;
use crate::conn::ConnInfo;
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::modules::txn::ModTxn;

/// A transaction's module context, shared by the handler and the body it sends (the
/// deliver-body events run as the body streams; the log event when it ends).
pub(crate) type TxnSlot = Arc<Mutex<Option<ModTxn>>>;

/// Request details kept for the access log (only when it is on).
pub(crate) struct LogInfo {
    pub(crate) start: SystemTime,
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) version: http::Version,
    pub(crate) upstream: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) user_agent: Option<String>,
    pub(crate) referer: Option<String>,
}

impl LogInfo {
    pub(crate) fn new<B>(req: &Request<B>, https: bool) -> LogInfo {
        let header = |name| {
            req.headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        LogInfo {
            start: SystemTime::now(),
            method: req.method().to_string(),
            url: log_url(req, https),
            version: req.version(),
            upstream: None,
            content_type: None,
            user_agent: header(header::USER_AGENT),
            referer: header(header::REFERER),
        }
    }
}

/// The URL as Squid logs it: absolute, also for origin-form requests to a reverse
/// listener (built from the Host header; `https` on a TLS listener).
fn log_url<B>(req: &Request<B>, https: bool) -> String {
    let uri = req.uri();
    if uri.scheme().is_some() || req.method() == Method::CONNECT {
        return uri.to_string();
    }
    match req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    {
        Some(host) if https => format!("https://{host}{uri}"),
        Some(host) => format!("http://{host}{uri}"),
        None => uri.to_string(),
    }
}

/// A transaction in progress, completed when its response body ends or is dropped.
pub(crate) struct TxnRecord {
    /// The client's connection: its engine, listener and address.
    pub(crate) conn: Arc<ConnInfo>,
    pub(crate) outcome: CacheOutcome,
    pub(crate) status: u16,
    pub(crate) start: Instant,
    pub(crate) bytes_in: u64,
    pub(crate) log: Option<Box<LogInfo>>,
    /// The whole body was sent.
    pub completed: bool,
    /// The body failed mid-way (origin cut it).
    pub body_failed: bool,
    /// The modules' view of the transaction, for the log event.
    pub(crate) txn: Option<ModTxn>,
    /// Where it went while body events stream (see `deliver`).
    pub(crate) shared: Option<TxnSlot>,
}

impl TxnRecord {
    pub(crate) fn finish(&mut self, bytes_out: u64) {
        let elapsed = self.start.elapsed();
        let m = &self.conn.engine.metrics;
        let outcome = if self.body_failed {
            m.error(ErrorKind::OriginProtocol);
            CacheOutcome::Error
        } else {
            if !self.completed {
                m.error(ErrorKind::ClientAborted);
            }
            self.outcome
        };
        m.request_done(
            self.conn.listener.mode,
            outcome,
            elapsed,
            self.bytes_in,
            bytes_out,
        );
        if let Some(slot) = self.shared.take() {
            self.txn = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        if let Some(ModTxn { chain, txn }) = self.txn.as_mut() {
            let completion = weir_api::Completion {
                status: self.status,
                bytes_in: self.bytes_in,
                bytes_out,
                outcome: outcome.for_modules(),
            };
            chain.log(txn, m, completion);
        }
        let fields = self.txn.as_ref().map_or(&[][..], |t| t.txn.log_fields());
        if let (Some(log), Some(access_log)) = (&self.log, &self.conn.engine.log) {
            access_log.log(&LogRecord {
                start: log.start,
                elapsed,
                client: self.conn.client,
                method: &log.method,
                url: &log.url,
                version: log.version,
                status: self.status,
                bytes_out,
                aborted: self.body_failed || !self.completed,
                outcome,
                upstream: log.upstream.as_deref(),
                content_type: log.content_type.as_deref(),
                user_agent: log.user_agent.as_deref(),
                referer: log.referer.as_deref(),
                user: self.txn.as_ref().and_then(|t| t.txn.user()),
                fields,
            });
        }
    }
}

/// The record of a tunnel's transaction (CONNECT, or a protocol switch), held by the
/// response that opened it and by the task that relays its bytes: completed when its
/// last holder lets go, i.e. when the tunnel ends, with the bytes it carried, as Squid
/// logs a tunnel when it closes.
#[derive(Default)]
pub(crate) struct TunnelRecord {
    record: Mutex<Option<Box<TxnRecord>>>,
    /// Bytes from the client to the server.
    pub(crate) up: AtomicU64,
    /// Bytes from the server to the client.
    pub(crate) down: AtomicU64,
    /// The client's side was joined: the tunnel was open.
    pub(crate) joined: AtomicBool,
}

impl TunnelRecord {
    /// Keeps `record` until the tunnel ends.
    pub(crate) fn keep(&self, record: Box<TxnRecord>) {
        *self.record.lock().unwrap_or_else(|e| e.into_inner()) = Some(record);
    }

    /// Lends the relay the transaction's module context when its chain wants
    /// `event`; [`TunnelRecord::give_back`] returns it before the record completes.
    pub(crate) fn lend_txn(&self, event: weir_api::Event) -> Option<ModTxn> {
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        let r = record.as_mut()?;
        if let Some(slot) = r.shared.take() {
            r.txn = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        if r.txn.as_ref()?.wants(event) {
            r.txn.take()
        } else {
            None
        }
    }

    /// Returns what [`TunnelRecord::lend_txn`] lent, for the log event.
    pub(crate) fn give_back(&self, txn: ModTxn) {
        if let Some(r) = self
            .record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            r.txn = Some(txn);
        }
    }
}

impl Drop for TunnelRecord {
    fn drop(&mut self) {
        let record = self.record.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut r) = record.take() {
            r.bytes_in = *self.up.get_mut();
            r.completed = *self.joined.get_mut();
            r.finish(*self.down.get_mut());
        }
    }
}
