//! The proxy's side: a pool of helper processes, each the same program started with a
//! hidden subcommand and fed over a Unix socket pair (its standard input). Many jobs
//! are in flight per helper; each answer is matched to its job by id.
//!
//! The pool owns one thread with a small async runtime that reads and writes every
//! helper's socket and restarts helpers that die. Callers on any runtime submit jobs
//! with [`Pool::run`]; nothing they do blocks on a helper.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::child::{ChildOptions, OPTIONS_ENV};
use crate::supervise::supervise;
use crate::wire::{Frame, FrameKind};

/// Why a job has no answer. Each means the caller keeps its original input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// As many jobs as the queue holds are already in flight.
    QueueFull,
    /// No helper is running (all are being restarted).
    NoHelper,
    /// The helper did not answer within the job timeout.
    Timeout,
    /// The helper died with the job in flight.
    HelperDied,
    /// The helper answered that the job failed, with its message.
    Failed(String),
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::QueueFull => f.write_str("the helper queue is full"),
            JobError::NoHelper => f.write_str("no helper is running"),
            JobError::Timeout => f.write_str("the helper did not answer in time"),
            JobError::HelperDied => f.write_str("the helper died"),
            JobError::Failed(m) => write!(f, "the job failed: {m}"),
        }
    }
}

impl std::error::Error for JobError {}

/// The program a helper runs: `program args… ` with the options in [`OPTIONS_ENV`].
#[derive(Debug, Clone)]
pub struct HelperCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments (for the proxy: the hidden subcommand and the job kind).
    pub args: Vec<OsString>,
}

impl HelperCommand {
    /// This very program with `args`: a helper is the proxy's own binary.
    pub fn current_exe<I: IntoIterator<Item = S>, S: Into<OsString>>(
        args: I,
    ) -> std::io::Result<HelperCommand> {
        Ok(HelperCommand {
            program: std::env::current_exe()?,
            args: args.into_iter().map(Into::into).collect(),
        })
    }
}

/// Called once each time a helper is restarted.
pub type RestartHook = Arc<dyn Fn() + Send + Sync>;

/// How a pool runs.
#[derive(Clone)]
pub struct PoolConfig {
    /// What each helper runs.
    pub command: HelperCommand,
    /// How many helper processes.
    pub helpers: usize,
    /// Each helper's priority and worker threads.
    pub child: ChildOptions,
    /// Jobs in flight over the whole pool (sent and not yet answered); one more is
    /// refused with [`JobError::QueueFull`].
    pub queue: usize,
    /// How long a job may take, from submission to answer.
    pub job_timeout: Duration,
    /// The first wait before restarting a dead helper; it doubles on each quick death
    /// up to `restart_backoff_max`, and starts over once a helper has run a while.
    pub restart_backoff: Duration,
    /// The longest wait before a restart.
    pub restart_backoff_max: Duration,
    /// Called on every restart (a metric, say).
    pub on_restart: Option<RestartHook>,
}

/// A helper that has lived this long counts as healthy: its next death restarts it
/// after the first back-off again.
pub(crate) const HEALTHY_AFTER: Duration = Duration::from_secs(10);

pub(crate) type Answer = Result<Vec<u8>, JobError>;
pub(crate) type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// A running helper as callers see it: where to send jobs, who waits for answers.
struct Link {
    jobs: mpsc::UnboundedSender<Frame>,
    pending: Pending,
    pid: u32,
}

pub(crate) struct Shared {
    pub(crate) config: PoolConfig,
    slots: Vec<Mutex<Option<Link>>>,
    permits: Arc<Semaphore>,
    next_id: AtomicU64,
    next_slot: AtomicUsize,
    pub(crate) restarts: AtomicU64,
}

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
    fn dispatch(
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
