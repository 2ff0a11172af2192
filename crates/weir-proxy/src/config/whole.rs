//! [`Config`]: every section together, its defaults, and how an error in a module's
//! section is located. Validation (`validate.rs`) reads a `Config` and loading
//! (`load.rs`) runs validation, so both live in layers above this one.

use serde::Deserialize;

use super::cache::CacheConfig;
use super::cluster::ClusterConfig;
use super::error::ConfigError;
use super::limits::{LimitsConfig, TimeoutsConfig, UpstreamConfig};
use super::listen::{default_connect_ports, ListenConfig, ListenMode};
use super::module::ModuleConfig;
use super::origin::OriginConfig;
use super::process::{AdminConfig, LogConfig, ServerConfig};
use super::spans::KeyPath;
use super::values::default_allow;

/// The whole configuration, as loaded from a TOML file or from the embedded defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The process: worker threads.
    pub server: ServerConfig,
    /// The admin listener (metrics, health, reload and the admin API).
    pub admin: AdminConfig,
    /// Client-facing listeners.
    pub listen: Vec<ListenConfig>,
    /// The cache.
    pub cache: CacheConfig,
    /// Limits on what clients may send.
    pub limits: LimitsConfig,
    /// Timeouts.
    pub timeouts: TimeoutsConfig,
    /// Connections to origin servers.
    pub upstream: UpstreamConfig,
    /// Per-origin settings: protocol and TLS (TOML: `[[origin]]`). Default: none.
    pub origin: Vec<OriginConfig>,
    /// The access log.
    pub log: LogConfig,
    /// Modules, in the order they run (TOML: `[[module]]`). Default: none.
    pub module: Vec<ModuleConfig>,
    /// This node's place in a cluster (TOML: `[cluster]`). Default: none, a single node.
    pub cluster: Option<ClusterConfig>,
    /// The file this configuration was parsed from, as given to [`Config::parse`] (or
    /// the path given to [`Config::load`]); `<defaults>` for a configuration built in
    /// code. [`Config::module_error`] names it. Not a key of the file.
    #[serde(skip)]
    pub source: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server: ServerConfig::default(),
            admin: AdminConfig::default(),
            listen: vec![ListenConfig {
                addr: "127.0.0.1:3128".parse().expect("literal address"),
                mode: ListenMode::Forward,
                allow: default_allow(),
                origin: None,
                route: Vec::new(),
                connect_ports: default_connect_ports(),
                safe_ports: super::ports::default_safe_ports(),
                modules: None,
                tls: None,
                proxy_protocol: false,
                targeted_cache_control: None,
                peers: false,
            }],
            cache: CacheConfig::default(),
            limits: LimitsConfig::default(),
            timeouts: TimeoutsConfig::default(),
            upstream: UpstreamConfig::default(),
            origin: Vec::new(),
            log: LogConfig::default(),
            module: Vec::new(),
            cluster: None,
            source: DEFAULT_SOURCE.into(),
        }
    }
}

/// [`Config::source`] of a configuration that was not parsed from a file.
const DEFAULT_SOURCE: &str = "<defaults>";

impl Config {
    /// An error in the `[[module]]` section at `index` in [`Config::module`], for the
    /// engine to report what a module's builder rejected, e.g.
    /// ``weir.toml:12: key `module[0].value`: …``.
    ///
    /// `key` is relative to the section (`value`, `headers.x-a`); the line is that
    /// key's when it was written in the file, else the nearest enclosing key's, else
    /// the section's. The file is [`Config::source`]. Without a file (a configuration
    /// built in code) the error has no line.
    pub fn module_error(
        &self,
        index: usize,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> ConfigError {
        let key = key.filter(|key| !key.is_empty());
        let module = self.module.get(index);
        let section = KeyPath::top("module").index(index).to_string();
        let key_line = key.and_then(|key| {
            let lines = &module?.key_lines;
            let mut path = key;
            loop {
                if let Some(line) = lines.get(path) {
                    return Some(*line);
                }
                // The enclosing key: drop the last `.key` or `[n]`.
                path = &path[..path.rfind(['.', '['])?];
            }
        });
        ConfigError {
            file: self.source.clone(),
            line: key_line.or_else(|| module.and_then(|m| m.line)),
            key: Some(match key {
                Some(key) if key.starts_with('[') => format!("{section}{key}"),
                Some(key) => format!("{section}.{key}"),
                None => section,
            }),
            message: message.into(),
        }
    }
}
