//! The proxy's side: a pool of helper processes, each the same program started with a
//! hidden subcommand and fed over a Unix socket pair (its standard input). Many jobs
//! are in flight per helper; each answer is matched to its job by id.
//!
//! The pool owns one thread with a small async runtime that reads and writes every
//! helper's socket and restarts helpers that die. Callers on any runtime submit jobs
//! with [`Pool::run`]; nothing they do blocks on a helper.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::config::PoolConfig;
use crate::error::JobError;
use crate::shared::{Answer, Pending, Shared};
use crate::supervise::supervise;
use crate::wire::{Frame, FrameKind};

/// A pool of helper processes; dropping it stops them.
pub struct Pool {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl Pool {
    /// Starts `config.helpers` helpers (the processes exist when this returns) and the
    /// thread that serves their sockets.
    pub fn start(config: PoolConfig) -> std::io::Result<Pool> {
        let helpers = config.helpers.max(1);
        let shared = Arc::new(Shared {
            permits: Arc::new(Semaphore::new(config.queue.max(1))),
            slots: (0..helpers).map(|_| Mutex::new(None)).collect(),
            config,
            next_id: AtomicU64::new(1),
            next_slot: AtomicUsize::new(0),
            restarts: AtomicU64::new(0),
        });
        let mut first = Vec::with_capacity(helpers);
        for index in 0..helpers {
            first.push(shared.spawn(index)?);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = watch::channel(false);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("weir-helpers".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let tasks: Vec<_> = first
                        .into_iter()
                        .enumerate()
                        .map(|(i, h)| tokio::spawn(supervise(s.clone(), i, h, stopped.clone())))
                        .collect();
                    for t in tasks {
                        let _ = t.await;
                    }
                });
            })?;
        Ok(Pool { shared, stop })
    }

    /// Runs one job on a helper and returns its answer. Never waits for a queue slot:
    /// a full queue answers [`JobError::QueueFull`] at once.
    ///
    /// Cancel-safe: dropping the future forgets the job (its slot in the queue is
    /// freed at once, and the helper's answer, when it comes, is discarded). A job
    /// forgotten before its answer came (a timeout, a caller gone) is cancelled in the
    /// helper too, which drops it if it has not started it: work nobody waits for does
    /// not hold up the jobs behind it.
    pub async fn run(&self, payload: Vec<u8>) -> Answer {
        let _permit = self
            .shared
            .permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| JobError::QueueFull)?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let (pending, jobs) = self.shared.dispatch(
            Frame {
                id,
                kind: FrameKind::Job,
                payload,
            },
            tx,
        )?;
        let _forget = Forget { pending, jobs, id };
        match tokio::time::timeout(self.shared.config.job_timeout, rx).await {
            Err(_) => Err(JobError::Timeout),
            Ok(Err(_)) => Err(JobError::HelperDied),
            Ok(Ok(answer)) => answer,
        }
    }

    /// The process ids of the helpers running now.
    pub fn pids(&self) -> Vec<u32> {
        self.shared
            .slots
            .iter()
            .filter_map(|s| s.lock().ok()?.as_ref().map(|l| l.pid))
            .collect()
    }

    /// Helpers restarted so far.
    pub fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::Relaxed)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Removes a job's entry when its caller stops waiting, however it stops, and
/// cancels the job in its helper when no answer came.
struct Forget {
    pending: Pending,
    /// The helper's job channel, for the cancel.
    jobs: mpsc::UnboundedSender<Frame>,
    id: u64,
}

impl Drop for Forget {
    fn drop(&mut self) {
        let unanswered = self
            .pending
            .lock()
            .is_ok_and(|mut p| p.remove(&self.id).is_some());
        if unanswered {
            // A helper that is gone has nothing to cancel: ignore a closed channel.
            let _ = self.jobs.send(Frame {
                id: self.id,
                kind: FrameKind::Cancel,
                payload: Vec::new(),
            });
        }
    }
}
