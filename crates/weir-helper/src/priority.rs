//! The CPU priority a helper gives itself before it starts any thread: a nice level,
//! and on Linux the SCHED_IDLE policy, so that its work only uses CPU time nobody
//! else wants. Threads started afterwards inherit both.

use std::io;

/// How a helper process is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// The nice level, 0 (normal) to 19 (lowest).
    pub nice: i32,
    /// Whether to ask for SCHED_IDLE as well (Linux only; ignored elsewhere).
    pub sched_idle: bool,
}

impl Default for Priority {
    /// The lowest priority there is: nice 19 and SCHED_IDLE.
    fn default() -> Priority {
        Priority {
            nice: 19,
            sched_idle: true,
        }
    }
}

impl Priority {
    /// Applies this priority to the calling thread (and so to every thread it starts).
    /// Call it first thing in a helper's `main`, before any other thread exists.
    pub fn apply(self) -> io::Result<()> {
        if self.sched_idle {
            set_sched_idle()?;
        }
        // After the policy: changing policy may reset the nice level.
        rustix::process::setpriority_process(None, self.nice)?;
        Ok(())
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_sched_idle() -> io::Result<()> {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadPriority, ThreadSchedulePolicy,
    };
    set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
    )
    .map_err(|e| io::Error::other(format!("cannot switch to SCHED_IDLE: {e:?}")))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_sched_idle() -> io::Result<()> {
    Ok(())
}
