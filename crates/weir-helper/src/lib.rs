//! Helper processes for Weir: CPU-heavy module work (image transcoding) run in a pool
//! of child processes at the lowest CPU priority, so it only uses idle CPU and a
//! crash takes down a helper, never the proxy.
//!
//! - [`Pool`] (the proxy's side) starts the helpers, sends them jobs over Unix socket
//!   pairs with many jobs in flight per helper, matches answers to jobs by id, bounds
//!   the jobs in flight, times each job out, and restarts a dead helper with back-off.
//! - [`serve_stdin`] (the helper's side) is a helper's main loop: it lowers its own
//!   priority ([`Priority`]), then runs jobs with a [`Handler`] and answers each with
//!   its id.
//! - [`wire`] is the protocol between them.
//!
//! A helper is the proxy's own binary started with a hidden subcommand
//! ([`HelperCommand::current_exe`]), so there is nothing else to install.
#![deny(missing_docs)]

mod child;
mod config;
mod error;
mod pool;
mod priority;
mod shared;
mod supervise;
pub mod wire;

pub use child::{serve, serve_stdin, ChildOptions, Handler, OPTIONS_ENV};
pub use config::{HelperCommand, PoolConfig, RestartHook};
pub use error::JobError;
pub use pool::Pool;
pub use priority::Priority;
