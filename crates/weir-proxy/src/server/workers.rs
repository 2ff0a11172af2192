//! The worker threads that serve client connections, and how a new connection picks
//! one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::start_error::StartError;
use crate::config::Scheduler;

/// Threads that serve client connections, by `[server] scheduler`: per core, one
/// single-threaded event loop per thread (the default), or one work-stealing runtime
/// whose threads share every connection.
///
/// Per core, a connection stays on the worker it was given, so its tasks never
/// migrate and waking one never wakes another thread: the model of nginx and HAProxy.
/// Either way the cache and the origin pools are shared by all workers.
pub(super) struct Workers {
    workers: Vec<Worker>,
}

pub(super) struct Worker {
    pub(super) handle: tokio::runtime::Handle,
    /// Connections this worker serves now (for choosing the least busy).
    pub(super) open: Arc<AtomicUsize>,
    exit: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Workers {
    pub(super) fn start(count: usize, scheduler: Scheduler) -> Result<Workers, StartError> {
        // Work stealing: one runtime whose `count` threads share the connections.
        // Per core: `count` single-threaded runtimes, each keeping its connections.
        let runtimes = match scheduler {
            Scheduler::WorkStealing => 1,
            Scheduler::PerCore => count,
        };
        let mut workers = Vec::with_capacity(runtimes);
        for i in 0..runtimes {
            let runtime = match scheduler {
                Scheduler::WorkStealing => tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(count)
                    .thread_name("weir-worker")
                    .enable_all()
                    .build(),
                Scheduler::PerCore => tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build(),
            }
            .map_err(|e| StartError(format!("cannot start worker {i}: {e}")))?;
            let handle = runtime.handle().clone();
            let (exit, exited) = tokio::sync::oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("weir-worker-{i}"))
                .spawn(move || {
                    if scheduler == Scheduler::PerCore {
                        crate::worker::set_current(i as u16 + 1);
                    }
                    runtime.block_on(async {
                        let _ = exited.await;
                    });
                    // Dropping the runtime cancels what is left after the grace period.
                })
                .map_err(|e| StartError(format!("cannot start worker {i}: {e}")))?;
            workers.push(Worker {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                exit: std::sync::Mutex::new(Some(exit)),
                thread: std::sync::Mutex::new(Some(thread)),
            });
        }
        Ok(Workers { workers })
    }

    pub(super) fn least_busy(&self) -> &Worker {
        self.workers
            .iter()
            .min_by_key(|w| w.open.load(Ordering::Relaxed))
            .expect("at least one worker")
    }

    pub(super) fn stop(&self) {
        for w in &self.workers {
            if let Some(exit) = w.exit.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = exit.send(());
            }
        }
        for w in &self.workers {
            if let Some(t) = w.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = t.join();
            }
        }
    }
}
