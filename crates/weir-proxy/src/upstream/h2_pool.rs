//! One origin's HTTP/2 connections as the pool keeps them: each connection's streams
//! in use and the origin's stream limit, and which connection a new stream takes.
//! Below the shared state that holds it (`origins.rs`); opening connections and
//! sending on them, which need that state, is in `h2.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::client::conn::http2::SendRequest;
use tokio::sync::watch;

use super::error::UpstreamError;
use crate::body::request::RequestBody;

pub(super) type Ready = Option<Result<SendRequest<RequestBody>, UpstreamError>>;

/// One origin's HTTP/2 connections.
pub(super) struct Pool {
    pub(super) conns: Mutex<Vec<Arc<Entry>>>,
    /// The origin's stream limit as last seen on any of its connections: what a
    /// connection being opened is assumed to allow until its own SETTINGS arrive.
    pub(super) known_max_streams: Arc<AtomicUsize>,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            conns: Mutex::default(),
            known_max_streams: Arc::new(AtomicUsize::new(INITIAL_MAX_STREAMS)),
        }
    }
}

/// A connection, or one being opened.
pub(super) struct Entry {
    /// Streams taken (including requests waiting for the connection to open).
    in_flight: AtomicUsize,
    /// Since when no stream is open, for the idle timeout.
    idle_since: Mutex<Instant>,
    /// What the connection's task updates.
    pub(super) state: Arc<ConnState>,
    /// The connection once open (or why it could not be).
    pub(super) ready: watch::Receiver<Ready>,
}

/// What a connection's task knows and the pool reads.
pub(super) struct ConnState {
    /// The origin's limit on concurrent streams.
    pub(super) max_streams: AtomicUsize,
    /// GOAWAY received, the connection ended, or it never opened.
    pub(super) closed: AtomicBool,
}

/// A stream's place on a connection, given back when dropped: when the response body
/// has ended or was dropped, or when the request failed.
pub(super) struct StreamSlot(pub(super) Arc<Entry>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
    }
}

/// hyper's initial value until the origin's SETTINGS arrive.
pub(super) const INITIAL_MAX_STREAMS: usize = 100;

pub(super) enum Pick {
    Use(Arc<Entry>),
    Open(Arc<Entry>, watch::Sender<Ready>),
}

impl Pool {
    pub(super) fn new_entry(&self, in_flight: usize, ready: watch::Receiver<Ready>) -> Arc<Entry> {
        Arc::new(Entry {
            in_flight: AtomicUsize::new(in_flight),
            idle_since: Mutex::new(Instant::now()),
            state: Arc::new(ConnState {
                max_streams: AtomicUsize::new(self.known_max_streams.load(Ordering::Acquire)),
                closed: AtomicBool::new(false),
            }),
            ready,
        })
    }

    /// Takes a stream: on the first connection with room, else on a new connection
    /// if the limit allows, else on the least busy one.
    pub(super) fn pick(&self, max_conns: usize) -> Pick {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|e| !e.state.closed.load(Ordering::Acquire));
        let room = conns.iter().find(|e| {
            e.in_flight.load(Ordering::Acquire) < e.state.max_streams.load(Ordering::Acquire)
        });
        if let Some(e) = room {
            e.in_flight.fetch_add(1, Ordering::AcqRel);
            return Pick::Use(e.clone());
        }
        if conns.len() < max_conns {
            let (tx, rx) = watch::channel(None);
            let e = self.new_entry(1, rx);
            conns.push(e.clone());
            return Pick::Open(e, tx);
        }
        let e = conns
            .iter()
            .min_by_key(|e| e.in_flight.load(Ordering::Acquire))
            .expect("max_h2_connections_per_origin is at least 1")
            .clone();
        e.in_flight.fetch_add(1, Ordering::AcqRel);
        Pick::Use(e)
    }

    /// Whether the pool holds no connection (open, opening or idle).
    pub(super) fn is_empty(&self) -> bool {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Closes connections with no stream open for `timeout` (dropping the last sender
    /// makes hyper close the connection gracefully).
    pub(super) fn close_expired_idle(&self, timeout: Duration) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|e| {
            let idle = e.in_flight.load(Ordering::Acquire) == 0
                && e.idle_since
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed()
                    >= timeout;
            !e.state.closed.load(Ordering::Acquire) && !idle
        });
    }
}

/// Marks the connection of `slot` as closed (it refused a request without sending it).
pub(super) fn retire(slot: &StreamSlot) {
    slot.0.state.closed.store(true, Ordering::Release);
}
