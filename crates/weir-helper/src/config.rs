//! What a pool runs and how: the settings a caller hands to
//! [`Pool::start`](crate::Pool::start).
//!
//! Its own file because the pool, the state it shares with its supervisors and the
//! supervisors themselves all read these settings.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::child::ChildOptions;

/// The program a helper runs: `program args… ` with the options in
/// [`OPTIONS_ENV`](crate::OPTIONS_ENV).
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
    /// refused with [`JobError::QueueFull`](crate::JobError::QueueFull).
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
