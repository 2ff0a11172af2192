//! Accepting client connections: binding a listener's socket, and the loop that hands
//! each connection to a worker to be served.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use super::connection;
use super::start_error::StartError;
use super::workers::Workers;
use crate::framing::FramingGuard;
use crate::service::{ConnInfo, Engine, ListenerInfo};

/// The client connections open on every listener, so that shutdown can wait for them.
pub(super) struct ConnectionCount {
    pub(super) open: AtomicUsize,
    pub(super) closed: Notify,
}

/// A client connection counted open, on its listeners' count and its worker's, until
/// dropped: it goes with whatever serves the connection to its end.
struct Counted {
    connections: Arc<ConnectionCount>,
    worker_open: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.connections.open.fetch_sub(1, Ordering::AcqRel);
        self.connections.closed.notify_waiters();
        self.worker_open.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(super) fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| StartError(format!("cannot listen on {addr}: {e}")))?;
    let setup = || -> std::io::Result<()> {
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(4096)
    };
    setup().map_err(|e| StartError(format!("cannot listen on {addr}: {e}")))?;
    TcpListener::from_std(socket.into())
        .map_err(|e| StartError(format!("cannot listen on {addr}: {e}")))
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    info: Arc<ListenerInfo>,
    engine: Arc<Engine>,
    protocols: Arc<connection::Protocols>,
    stop: watch::Receiver<bool>,
    connections: Arc<ConnectionCount>,
    workers: Arc<Workers>,
) {
    let header_limit = engine.limits.max_request_header.0 as usize;
    loop {
        let (stream, client) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors or similar: keep serving the connections we have.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // The socket moves to the worker's event loop; it is registered there.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot hand over a connection: {e}");
                continue;
            }
        };
        connections.open.fetch_add(1, Ordering::AcqRel);
        let worker = workers.least_busy();
        worker.open.fetch_add(1, Ordering::Relaxed);
        let counted = Counted {
            connections: connections.clone(),
            worker_open: worker.open.clone(),
        };
        let (info, engine, protocols, stop) = (
            info.clone(),
            engine.clone(),
            protocols.clone(),
            stop.clone(),
        );
        worker.handle.spawn(async move {
            let established = match TcpStream::from_std(stream) {
                Ok(stream) => {
                    crate::listener::establish(stream, client, &info.setup, &engine.metrics).await
                }
                Err(_) => None,
            };
            if let Some(est) = established {
                let (stream, framing) =
                    FramingGuard::new(est.io, header_limit, engine.metrics.clone());
                // Checked against the client a PROXY header named, when there was one.
                let ip = est.client.ip().to_canonical();
                let conn = Arc::new(ConnInfo {
                    engine,
                    client: est.client,
                    original_dst: est.original_dst,
                    allowed: info.allow.iter().any(|n| n.contains(&ip)),
                    listener: info,
                    framing,
                    requests: AtomicU64::new(0),
                    interim: Default::default(),
                });
                connection::serve(stream, conn, protocols, stop, counted).await;
            }
        });
    }
}
