//! Why a job has no answer.
//!
//! Its own file because both sides of the pool report it: callers get it from
//! [`Pool::run`](crate::Pool::run), and the supervisor fails waiting jobs with it when
//! a helper dies or answers that a job failed.

use std::fmt;

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
