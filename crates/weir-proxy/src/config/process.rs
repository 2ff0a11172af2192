//! The process's own sections: `[server]` (worker threads), `[admin]` (the admin
//! listener) and `[log]` (the access log).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

use super::access::AdminToken;
use super::values::string_with;

/// `[server]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Worker threads serving client connections; 0 means one per CPU core.
    pub workers: usize,
    /// How the worker threads share the connections.
    pub scheduler: Scheduler,
}

/// How worker threads share client connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// One runtime whose threads steal work from each other (tokio's multi-threaded
    /// scheduler): a busy worker's connections are helped by an idle one.
    WorkStealing,
    /// One single-threaded event loop per worker; a connection stays on the worker it
    /// was given (the nginx/HAProxy model: no cross-thread wake-ups on the hot path).
    /// The default: it served more hits and more misses per CPU-second than work
    /// stealing, side by side (docs/benchmarks.md, session 23).
    #[default]
    PerCore,
}

impl ServerConfig {
    /// The number of worker threads to start.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// `[admin]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Address of the admin listener; `metrics` are served at `/metrics`. `None`
    /// (written `"off"`) runs no admin listener.
    #[serde(deserialize_with = "admin_address")]
    pub listen: Option<SocketAddr>,
    /// The bearer token the `/admin/` endpoints require (`Authorization: Bearer
    /// <token>`); `/metrics` and `/healthz` stay open. Required when `listen` is not a
    /// loopback address. Default: none.
    pub token: Option<AdminToken>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: Some("127.0.0.1:9090".parse().expect("literal address")),
            token: None,
        }
    }
}

/// `"off"` or a socket address.
fn admin_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    string_with(
        d,
        "an address such as \"127.0.0.1:9090\" or \"off\"",
        |text| {
            if text == "off" {
                return Ok(None);
            }
            text.parse().map(Some).map_err(|_| {
                format!("`{text}` is not an address such as \"127.0.0.1:9090\" (or \"off\")")
            })
        },
    )
}

/// Access log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Squid's native `access.log` format.
    Squid,
    /// The NCSA combined format.
    Combined,
}

/// `[log]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `"stdout"`, `"off"`, or a file path.
    pub access: String,
    /// `squid` or `combined`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            access: "off".into(),
            format: LogFormat::Squid,
        }
    }
}

impl LogConfig {
    /// Where access log lines go.
    pub fn destination(&self) -> LogDestination {
        match self.access.as_str() {
            "off" => LogDestination::Off,
            "stdout" | "-" => LogDestination::Stdout,
            path => LogDestination::File(PathBuf::from(path)),
        }
    }
}

/// Where access log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogDestination {
    /// Nowhere.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to this file.
    File(PathBuf),
}
