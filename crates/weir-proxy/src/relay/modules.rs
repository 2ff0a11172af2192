//! A tunnel's bytes through the modules that asked for [`Event::TunnelData`]: each read
//! from either side goes through their callbacks before it is written to the other.
//! Only a tunnel whose chain asks for the event pays for this (a copy of each read, so
//! that the modules own what they are given); the others are copied straight from
//! socket to socket (`copy.rs`).

use std::io;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use weir_api::{Event, TunnelChunk, TunnelDirection};

use crate::metrics::Metrics;
use crate::modules::txn::ModTxn;
use crate::modules::{call, run_event, Hook};

/// Relays both ways until both sides have closed, either fails, or a module closes
/// the tunnel. The two directions share `txn`: the callbacks of one (and what they
/// wait for) run while the other's wait, but each direction's bytes flow on their
/// own, so a client that neither reads nor stops sending cannot wedge the other way.
///
/// Cancel-safe: dropping the future leaves the transaction in `txn`.
pub(super) async fn relay<C, S>(client: C, server: S, txn: &Mutex<ModTxn>, metrics: &Metrics)
where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_in, mut client_out) = tokio::io::split(client);
    let (mut server_in, mut server_out) = tokio::io::split(server);
    let up = pump(
        &mut client_in,
        &mut server_out,
        TunnelDirection::ToServer,
        txn,
        metrics,
    );
    let down = pump(
        &mut server_in,
        &mut client_out,
        TunnelDirection::ToClient,
        txn,
        metrics,
    );
    if let Err(e) = tokio::try_join!(up, down) {
        tracing::debug!("tunnel closed: {e}");
    }
}

/// Moves one direction's bytes until its reader ends (then closes the writer's
/// sending side, as `copy_bidirectional` does) or something fails.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    direction: TunnelDirection,
    txn: &Mutex<ModTxn>,
    metrics: &Metrics,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let Some(data) = super::copy::read_some(from).await? else {
            return to.shutdown().await;
        };
        let mut chunk = TunnelChunk { direction, data };
        let decided = {
            let mut held = txn.lock().await;
            let ModTxn { chain, txn } = &mut *held;
            run_event!(
                chain,
                Event::TunnelData,
                txn,
                &mut chunk,
                call::tunnel_data,
                metrics
            )
        };
        match decided {
            Hook::Continue => {}
            Hook::Respond(_) => return Err(io::Error::other("a module closed it")),
            Hook::Failed(module) => {
                return Err(io::Error::other(format!("module {module} failed")))
            }
        }
        to.write_all(&chunk.data).await?;
        // Out now: a TLS or HTTP/2 writer may hold what it was given until flushed,
        // and the next read may wait long.
        to.flush().await?;
    }
}
