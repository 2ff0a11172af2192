//! The configuration file: its shape, its defaults, and its validation.
//!
//! Every setting is documented in `weir.example.toml` at the top of the repository.
//!
//! The files form layers, each using only those below it: the vocabulary (`units`,
//! `spans`, `values`, `error`), the sections (`access`, `cache`, `tls`, `origin`,
//! `listen`, `module`, `limits`, `process`, `cluster`), the whole [`Config`] (`whole`), its
//! validation (`validate`, with `paths` for what the settings name on disk), and its
//! loading (`load`). This file only declares them and
//! re-exports what the rest of the crate names.

mod access;
mod cache;
mod cluster;
mod error;
mod limits;
mod listen;
mod load;
mod module;
mod origin;
mod paths;
mod ports;
mod process;
mod refresh;
mod spans;
mod tls;
mod units;
mod validate;
mod values;
mod whole;

#[cfg(test)]
mod tests;

pub use access::AdminToken;
pub use cache::{CacheConfig, DiskConfig, RangeFill};
pub use cluster::{ClusterConfig, LocalCopies};
pub use error::ConfigError;
pub use limits::{LimitsConfig, TimeoutsConfig, UpstreamConfig};
pub use listen::{ListenConfig, ListenMode, RouteConfig};
pub use module::ModuleConfig;
pub use origin::{authority_port, load_ca_file, OriginConfig, OriginProtocol, OriginUrl};
pub use ports::PortSpec;
pub use process::{AdminConfig, LogConfig, LogDestination, LogFormat, Scheduler, ServerConfig};
pub use refresh::RefreshRule;
pub use tls::{CertConfig, TlsConfig};
pub use units::{ByteSize, Seconds};
pub use whole::Config;
