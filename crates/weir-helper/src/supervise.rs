//! Keeping one helper running: serving its socket, and restarting it with back-off
//! when it dies.

use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};

use crate::error::JobError;
use crate::shared::{Pending, Shared, Spawned};
use crate::wire::{Frame, FrameKind};

/// A helper that has lived this long counts as healthy: its next death restarts it
/// after the first back-off again.
const HEALTHY_AFTER: Duration = Duration::from_secs(10);

/// Serves helper `index` and restarts it whenever it dies, until the pool stops.
pub(crate) async fn supervise(
    shared: Arc<Shared>,
    index: usize,
    first: Spawned,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = shared.config.restart_backoff;
    let mut helper = Some(first);
    loop {
        let started = Instant::now();
        if let Some(h) = helper.take() {
            let pending = h.pending.clone();
            let mut child = h.child;
            let stopping = tokio::select! {
                _ = serve_link(h.socket, h.jobs, h.pending) => false,
                _ = stop.wait_for(|s| *s) => true,
            };
            shared.unlink(index, &pending);
            let _ = child.kill();
            let status = tokio::task::spawn_blocking(move || child.wait()).await;
            if stopping {
                return;
            }
            tracing::warn!("helper {index} stopped ({status:?}); restarting it");
        }
        if started.elapsed() >= HEALTHY_AFTER {
            backoff = shared.config.restart_backoff;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        backoff = (backoff * 2).min(shared.config.restart_backoff_max);
        match shared.spawn(index) {
            Ok(h) => {
                shared.restarts.fetch_add(1, Ordering::Relaxed);
                if let Some(hook) = &shared.config.on_restart {
                    hook();
                }
                helper = Some(h);
            }
            Err(e) => tracing::error!("cannot restart helper {index}: {e}"),
        }
    }
}

/// Moves frames between one helper's socket and its callers until the socket closes
/// or breaks.
async fn serve_link(
    socket: StdUnixStream,
    mut jobs: mpsc::UnboundedReceiver<Frame>,
    pending: Pending,
) {
    let socket = match socket
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(socket))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("helper socket: {e}");
            return;
        }
    };
    let (mut reader, mut writer) = socket.into_split();
    let write = async move {
        while let Some(frame) = jobs.recv().await {
            if frame.write_async(&mut writer).await.is_err() {
                return;
            }
        }
    };
    let read = async move {
        while let Ok(Some(frame)) = Frame::read_async(&mut reader).await {
            let answer = match frame.kind {
                FrameKind::Done => Ok(frame.payload),
                FrameKind::Failed => Err(JobError::Failed(
                    String::from_utf8_lossy(&frame.payload).into_owned(),
                )),
                // Only the proxy sends these: a helper that does is broken.
                FrameKind::Job | FrameKind::Cancel => return,
            };
            let waiter = pending.lock().expect("pending lock").remove(&frame.id);
            // No waiter: the job timed out or its caller went away.
            if let Some(tx) = waiter {
                let _ = tx.send(answer);
            }
        }
    };
    tokio::select! {
        _ = write => {}
        _ = read => {}
    }
}
