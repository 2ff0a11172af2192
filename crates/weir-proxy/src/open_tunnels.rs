//! The tunnels open on every listener (CONNECT tunnels and switched connections), so
//! that stopping the proxy can wait for them within its grace period, as it waits for
//! client connections, and then close them. A tunnel's transaction is logged when it
//! closes, so each is closed (and logged) before the access log's last flush, rather
//! than dropped with the worker threads and its line lost. Shared vocabulary of the
//! engine's state, the relay and the server.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{watch, Notify};

/// The count of open tunnels, and the signal that closes them.
pub(crate) struct OpenTunnels {
    open: AtomicUsize,
    /// Woken each time a tunnel closes.
    closed: Notify,
    /// Set once, when the proxy stops waiting for tunnels.
    closing: watch::Sender<bool>,
}

impl Default for OpenTunnels {
    fn default() -> Self {
        OpenTunnels {
            open: AtomicUsize::new(0),
            closed: Notify::new(),
            closing: watch::Sender::new(false),
        }
    }
}

/// One open tunnel, counted until dropped.
pub(crate) struct TunnelOpen<'a>(&'a OpenTunnels);

impl Drop for TunnelOpen<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.closed.notify_waiters();
    }
}

impl OpenTunnels {
    /// Counts a tunnel open until the guard is dropped.
    pub(crate) fn opened(&self) -> TunnelOpen<'_> {
        self.open.fetch_add(1, Ordering::AcqRel);
        TunnelOpen(self)
    }

    /// Tunnels open now.
    pub(crate) fn count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Returns once a tunnel was closed after the call (`enable` it before counting,
    /// so that a close in between is not missed).
    pub(crate) fn closed(&self) -> tokio::sync::futures::Notified<'_> {
        self.closed.notified()
    }

    /// Returns when [`OpenTunnels::close_all`] is called (at once if it was).
    pub(crate) async fn closing(&self) {
        let mut closing = self.closing.subscribe();
        let _ = closing.wait_for(|closing| *closing).await;
    }

    /// Tells every tunnel, open now or opened later, to close.
    pub(crate) fn close_all(&self) {
        self.closing.send_replace(true);
    }

    /// Returns once no tunnel is open.
    pub(crate) async fn all_closed(&self) {
        loop {
            let closed = self.closed();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            closed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[tokio::test]
    async fn a_tunnel_told_to_close_before_it_listens_still_hears_it() {
        let tunnels = OpenTunnels::default();
        let open = tunnels.opened();
        assert_eq!(tunnels.count(), 1);
        tunnels.close_all();
        tokio::time::timeout(std::time::Duration::from_secs(1), tunnels.closing())
            .await
            .expect("closing returns at once");
        let all_closed = tunnels.all_closed();
        tokio::pin!(all_closed);
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(all_closed.as_mut().poll(cx)));
        assert!(polled.await.is_pending(), "a tunnel is still open");
        drop(open);
        all_closed.await;
        assert_eq!(tunnels.count(), 0);
    }
}
