//! The bytes of a CONNECT tunnel or a protocol switch (a WebSocket), relayed both ways
//! between the client's connection and the server's in a task of their own, until
//! either side closes or neither has sent anything for `[timeouts] tunnel_idle` (as
//! Squid's `read_timeout` and HAProxy's `timeout tunnel`: a peer that vanished without
//! closing would otherwise hold both connections for ever). The bytes are copied with
//! buffers a waiting tunnel does not hold (`copy`), and go through the modules when
//! the transaction's chain asks for them (`modules`).

mod copy;
mod modules;

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use weir_api::Event;

use crate::body::{ClientTunnel, ProxyBody};
use crate::engine::Engine;
use crate::record::TunnelRecord;

/// Joins the client's side of the tunnel that `req` asked for to `server`: once the
/// response accepting it has been sent, bytes are copied both ways until either side
/// closes, or until both have been silent for the engine's `tunnel_idle` (then both
/// connections are closed). `what` names the tunnel in the debug log. Returns the
/// body of the response that accepts the tunnel: the transaction's record goes through
/// it to the tunnel, and is completed with the bytes each way when the tunnel ends.
pub(crate) fn join<B, S>(
    engine: &Engine,
    req: http::Request<B>,
    server: S,
    what: &'static str,
) -> ProxyBody
where
    B: Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let idle = engine.tunnel_idle;
    let metrics = engine.metrics.clone();
    let tunnels = engine.tunnels.clone();
    let record = Arc::new(TunnelRecord::default());
    let body = ProxyBody::tunnel(record.clone());
    tokio::spawn(async move {
        let client = match ClientTunnel::accepted(req).await {
            Ok(client) => client,
            Err(e) => {
                tracing::debug!("the client's side of {what} failed: {e}");
                return;
            }
        };
        // Counted before the record, so that it is dropped after it: a stopping proxy
        // that sees no tunnel open has their log lines.
        let counted = tunnels.opened();
        let _open = metrics.tunnel_opened();
        record.joined.store(true, Ordering::Relaxed);
        let heard = Heard::new();
        let mut client = Watched {
            io: client,
            heard: &heard,
            bytes: &record.up,
        };
        let mut server = Watched {
            io: server,
            heard: &heard,
            bytes: &record.down,
        };
        // Lent only now: the record reaches the tunnel with the response that accepted it.
        let lent = record
            .lend_txn(Event::TunnelData)
            .map(tokio::sync::Mutex::new);
        let relayed = async {
            match &lent {
                Some(txn) => modules::relay(&mut client, &mut server, txn, &metrics).await,
                None => {
                    if let Err(e) = copy::copy_both_ways(&mut client, &mut server).await {
                        tracing::debug!("{what} closed: {e}");
                    }
                }
            }
        };
        tokio::select! {
            () = relayed => {}
            () = heard.silent_for(idle) => {
                tracing::debug!("{what} closed: nothing either way for {idle:?}");
                metrics.tunnel_idle_closed();
            }
            () = tunnels.closing() => {
                tracing::debug!("{what} closed: the proxy is stopping");
            }
        }
        if let Some(txn) = lent {
            record.give_back(txn.into_inner());
        }
        // The last holder completes the record: the tunnel is logged before it is
        // counted closed.
        drop(record);
        drop(counted);
    });
    body
}

/// When either side last sent something.
struct Heard {
    start: Instant,
    /// Nanoseconds from `start`; atomic only because the relay's future must be `Send`
    /// (both sides are polled by the one task).
    last: AtomicU64,
}

impl Heard {
    fn new() -> Heard {
        Heard {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn note(&self) {
        let nanos = u64::try_from(self.now().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(nanos, Ordering::Relaxed);
    }

    /// Returns once nothing has been heard for `idle`.
    async fn silent_for(&self, idle: Duration) {
        loop {
            let last = Duration::from_nanos(self.last.load(Ordering::Relaxed));
            let quiet = self.now().saturating_sub(last);
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    }
}

/// One side of a relay, noting in `heard` each time it has bytes to give, and
/// counting them in `bytes`.
struct Watched<'a, S> {
    io: S,
    heard: &'a Heard,
    bytes: &'a AtomicU64,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.heard.note();
            self.bytes.fetch_add(read as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn silence_is_measured_from_the_last_bytes() {
        let heard = Heard::new();
        tokio::time::advance(Duration::from_secs(4)).await;
        heard.note();
        let started = Instant::now();
        heard.silent_for(Duration::from_secs(10)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }
}
