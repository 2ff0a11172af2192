//! Weir's engine: client listeners, the transaction that serves each request from the
//! cache or an origin, upstream connection pooling, the admin listener, metrics and
//! the access log.
//!
//! The binary (`weir`) loads a [`Config`] and calls [`Server::start`].
#![deny(missing_docs)]

pub mod access_log;
mod admin;
mod body;
mod boxed;
mod cached;
mod callout;
mod cluster;
pub mod config;
mod conn;
mod content;
mod deliver;
mod engine;
mod error;
mod field_name;
mod flight;
mod forward;
mod framing;
mod headers;
mod hooks;
mod hop;
mod interim;
mod listener;
pub mod metrics;
mod modules;
mod open_tunnels;
mod purge;
mod record;
mod refresh;
mod relay;
mod route;
mod served;
mod server;
mod service;
mod socket;
mod target;
mod tunnel;
mod upgrade;
mod upstream;
mod via;
mod wire;
mod worker;

pub use config::{Config, ConfigError};
pub use server::{ReloadRequest, Server, StartError};

/// Checks that every enabled `[[module]]` of `config` names one of `factories` and
/// that its settings are valid (by building it), as `weir check` does.
pub fn check_modules(
    config: &Config,
    factories: &[Box<dyn weir_api::ModuleFactory>],
) -> Result<(), ConfigError> {
    // Modules are built for real, detached from any running proxy: a module's build
    // never serves traffic, so this is the check and nothing more.
    let context = weir_api::ModuleContext::detached();
    modules::load::load(config, factories, &context).map(|_| ())
}
