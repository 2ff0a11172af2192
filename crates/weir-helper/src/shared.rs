//! The state a pool's callers and its supervisors share: one slot per helper (where
//! to send its jobs, who waits for their answers), and how a helper is started.
//!
//! Its own file so that the pool (which sends jobs) and the supervisor (which serves
//! sockets and restarts helpers) both build on it without reaching into each other.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::child::OPTIONS_ENV;
use crate::config::PoolConfig;
use crate::error::JobError;
use crate::wire::Frame;

pub(crate) type Answer = Result<Vec<u8>, JobError>;
pub(crate) type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// A running helper as callers see it: where to send jobs, who waits for answers.
pub(crate) struct Link {
    pub(crate) jobs: mpsc::UnboundedSender<Frame>,
    pub(crate) pending: Pending,
    pub(crate) pid: u32,
}

pub(crate) struct Shared {
    pub(crate) config: PoolConfig,
    pub(crate) slots: Vec<Mutex<Option<Link>>>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) next_id: AtomicU64,
    pub(crate) next_slot: AtomicUsize,
    pub(crate) restarts: AtomicU64,
}

/// A helper just spawned, before the runtime takes its socket.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) socket: StdUnixStream,
    pub(crate) jobs: mpsc::UnboundedReceiver<Frame>,
    pub(crate) pending: Pending,
}

impl Shared {
    /// Starts helper `index` and publishes its link, so jobs can be sent at once (they
    /// wait in the link's channel until its writer runs).
    pub(crate) fn spawn(&self, index: usize) -> std::io::Result<Spawned> {
        let (ours, theirs) = StdUnixStream::pair()?;
        let command = &self.config.command;
        let child = Command::new(&command.program)
            .args(&command.args)
            .env(OPTIONS_ENV, self.config.child.to_env())
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (tx, jobs) = mpsc::unbounded_channel();
        let pending = Pending::default();
        tracing::info!(
            pid = child.id(),
            "helper {index} started: {}",
            command.program.display()
        );
        *self.slots[index].lock().expect("slot lock") = Some(Link {
            jobs: tx,
            pending: pending.clone(),
            pid: child.id(),
        });
        Ok(Spawned {
            child,
            socket: ours,
            jobs,
            pending,
        })
    }

    /// Sends `job` to a running helper (round robin) and registers who waits for it.
    /// Returns that helper's pending answers and its job channel.
    pub(crate) fn dispatch(
        &self,
        job: Frame,
        answer: oneshot::Sender<Answer>,
    ) -> Result<(Pending, mpsc::UnboundedSender<Frame>), JobError> {
        let n = self.slots.len();
        let start = self.next_slot.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let slot = self.slots[(start + i) % n].lock().expect("slot lock");
            let Some(link) = slot.as_ref() else { continue };
            link.pending
                .lock()
                .expect("pending lock")
                .insert(job.id, answer);
            let id = job.id;
            if link.jobs.send(job).is_err() {
                // The writer is gone: the helper is dying and its supervisor will fail
                // whatever waits on it; this job was never sent.
                link.pending.lock().expect("pending lock").remove(&id);
                return Err(JobError::HelperDied);
            }
            return Ok((link.pending.clone(), link.jobs.clone()));
        }
        Err(JobError::NoHelper)
    }

    /// Unpublishes helper `index` and fails every job waiting on it.
    pub(crate) fn unlink(&self, index: usize, pending: &Pending) {
        self.slots[index].lock().expect("slot lock").take();
        let waiting: Vec<_> = pending.lock().expect("pending lock").drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(JobError::HelperDied));
        }
    }
}
