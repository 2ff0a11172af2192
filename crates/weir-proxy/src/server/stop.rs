//! A connection's work, watched for the proxy's stop at the price of a comparison per
//! poll.
//!
//! hyper returns `Pending` to a connection's task several times per request (a miss:
//! four). Polling a wait on the stop channel each time took the channel's lock to
//! check the waker it had kept (about 130 instructions); a new wait each time also
//! registered and left again (about 160). The wait here is polled again only when the
//! task's waker is not the one it kept, or when something was sent on the channel: the
//! send is counted before its waiters are woken, so a task woken by it sees it.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Poll, Waker};

use tokio::sync::watch;

/// Drives `work` to its end. When the proxy stops meanwhile (or already has, by
/// `stopping`), `on_stop` is called once with the work, which then ends by itself (a
/// graceful shutdown). Returns the work's output and whether the proxy stopped.
///
/// Cancel-safe: dropping the future leaves `work` as it was last polled.
pub(super) async fn until_stop<F>(
    work: &mut F,
    stop: &mut watch::Receiver<bool>,
    mut stopping: bool,
    mut on_stop: impl FnMut(&mut F),
) -> (F::Output, bool)
where
    F: Future + Unpin,
{
    // What has been sent so far is seen: only a later send is news.
    stop.borrow_and_update();
    let mut watcher = stop.clone();
    let mut stopped = pin!(watcher.wait_for(|stop| *stop));
    // The waker the wait last kept.
    let mut kept: Option<Waker> = None;
    std::future::poll_fn(|cx| loop {
        if let Poll::Ready(output) = Pin::new(&mut *work).poll(cx) {
            return Poll::Ready((output, stopping));
        }
        if stopping {
            return Poll::Pending;
        }
        let same_waker = kept.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        match stop.has_changed() {
            Ok(false) if same_waker => return Poll::Pending,
            Ok(true) => {
                // A send that is not a stop is seen once.
                stop.borrow_and_update();
            }
            Ok(false) | Err(_) => {}
        }
        match stopped.as_mut().poll(cx) {
            Poll::Ready(_) => {
                // A stop, or the channel gone (the proxy is going away too).
                stopping = true;
                on_stop(work);
                // The work is polled again: a shutdown acts when it is polled.
            }
            Poll::Pending => {
                kept = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
    })
    .await
}

/// Whether the proxy is stopping, between a connection's requests. `seen_stop`: what
/// `stop` saw last (`borrow_and_update`). Until something else is sent, a load of the
/// channel's version answers; reading the value takes the channel's lock, two atomic
/// operations that every request paid twice.
pub(super) fn stopping(stop: &watch::Receiver<bool>, seen_stop: bool) -> bool {
    match stop.has_changed() {
        Ok(false) => seen_stop,
        Ok(true) | Err(_) => *stop.borrow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Work that ends when told to, after its shutdown was asked for.
    struct Work {
        shut_down: bool,
    }

    impl Future for Work {
        type Output = &'static str;

        fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<&'static str> {
            if self.shut_down {
                return Poll::Ready("shut down");
            }
            // Never woken by itself: only the stop can end it.
            let _ = cx;
            Poll::Pending
        }
    }

    /// `until_stop` on work only a stop can end, in a task of its own, once the task
    /// waits; the sender stays with the caller.
    async fn waiting() -> (
        watch::Sender<bool>,
        tokio::task::JoinHandle<(&'static str, bool)>,
    ) {
        let (tx, mut rx) = watch::channel(false);
        let mut work = Work { shut_down: false };
        let waiting = tokio::spawn(async move {
            until_stop(&mut work, &mut rx, false, |w| w.shut_down = true).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        (tx, waiting)
    }

    /// What the task ended with, at most five seconds on.
    async fn ended(
        waiting: tokio::task::JoinHandle<(&'static str, bool)>,
        why: &str,
    ) -> (&'static str, bool) {
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap_or_else(|_| panic!("{why}"))
            .unwrap()
    }

    #[tokio::test]
    async fn a_stop_sent_while_the_work_waits_shuts_it_down() {
        let (tx, waiting) = waiting().await;
        // A send that is not a stop changes nothing.
        tx.send(false).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "a send of `false` is no stop");
        tx.send(true).unwrap();
        let ended = ended(waiting, "the stop woke the work").await;
        assert_eq!(ended, ("shut down", true));
    }

    #[tokio::test]
    async fn the_channel_gone_counts_as_a_stop() {
        let (tx, waiting) = waiting().await;
        drop(tx);
        let ended = ended(waiting, "the closed channel woke the work").await;
        assert_eq!(ended, ("shut down", true));
    }

    #[tokio::test]
    async fn work_that_ends_by_itself_is_no_stop() {
        let (_tx, mut rx) = watch::channel(false);
        let mut work = std::future::ready("done");
        let (output, stopped) = until_stop(&mut work, &mut rx, false, |_| {}).await;
        assert_eq!((output, stopped), ("done", false));
    }

    #[test]
    fn stopping_is_what_was_seen_until_something_is_sent() {
        let (tx, mut rx) = watch::channel(false);
        let seen = *rx.borrow_and_update();
        assert!(!stopping(&rx, seen));
        tx.send(false).unwrap();
        assert!(!stopping(&rx, seen), "a send that is not a stop");
        tx.send(true).unwrap();
        assert!(stopping(&rx, seen));
        let seen = *rx.borrow_and_update();
        assert!(stopping(&rx, seen), "a stop seen stays a stop");
        drop(tx);
        assert!(stopping(&rx, seen), "the channel gone");
    }
}
