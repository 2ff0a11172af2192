//! The configuration file: its shape, its defaults, and its validation.
//!
//! Every setting is documented in `weir.example.toml` at the top of the repository.

mod access;
mod cache;
mod error;
mod origin;
mod spans;
mod tls;
mod units;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde::{Deserialize, Deserializer};

pub use access::AdminToken;
pub use cache::{CacheConfig, DiskConfig};
pub use error::ConfigError;
pub use origin::{load_ca_file, OriginConfig, OriginProtocol, OriginUrl};
pub use tls::{CertConfig, TlsConfig};
pub use units::{ByteSize, Seconds};

use spans::{Document, KeyPath};

/// The whole configuration, as loaded from a TOML file or from the embedded defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The process: worker threads.
    pub server: ServerConfig,
    /// The admin listener (metrics; later the admin API).
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
                modules: None,
                tls: None,
                proxy_protocol: false,
            }],
            cache: CacheConfig::default(),
            limits: LimitsConfig::default(),
            timeouts: TimeoutsConfig::default(),
            upstream: UpstreamConfig::default(),
            origin: Vec::new(),
            log: LogConfig::default(),
            module: Vec::new(),
            source: DEFAULT_SOURCE.into(),
        }
    }
}

/// [`Config::source`] of a configuration that was not parsed from a file.
const DEFAULT_SOURCE: &str = "<defaults>";

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
    /// scheduler). Measured the more efficient per CPU-second on a shared 2-core machine.
    #[default]
    WorkStealing,
    /// One single-threaded event loop per worker; a connection stays on the worker it
    /// was given (the nginx/HAProxy model: no cross-thread wake-ups on the hot path).
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

/// What a listener does with requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenMode {
    /// Clients name absolute `http://` URLs (and CONNECT for tunnels).
    Forward,
    /// Clients talk to Weir as if it were the origin; requests are routed by Host and path.
    Reverse,
    /// Connections redirected to Weir by the kernel (iptables `REDIRECT`): requests in
    /// origin form, named by their Host header (else the original destination), cached
    /// as in forward mode.
    Transparent,
}

impl ListenMode {
    /// The lowercase name, as in the configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ListenMode::Forward => "forward",
            ListenMode::Reverse => "reverse",
            ListenMode::Transparent => "transparent",
        }
    }
}

/// `[[listen]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// Address and port to accept connections on.
    pub addr: SocketAddr,
    /// `forward`, `reverse` or `transparent`.
    pub mode: ListenMode,
    /// Client networks allowed to use this listener; others get 403. A bare address
    /// in the file stands for that one host.
    #[serde(default = "default_allow", deserialize_with = "networks")]
    pub allow: Vec<IpNet>,
    /// Reverse mode: the default origin, e.g. `http://127.0.0.1:8081`.
    #[serde(default)]
    pub origin: Option<String>,
    /// Reverse mode: routes tried in order before the default origin.
    #[serde(default)]
    pub route: Vec<RouteConfig>,
    /// Forward mode: ports CONNECT may tunnel to.
    #[serde(default = "default_connect_ports")]
    pub connect_ports: Vec<u16>,
    /// The modules that apply to this listener, by `[[module]]` name. They run in the
    /// order of the `[[module]]` list, whatever the order here; disabled ones are not
    /// loaded. `None` (no `modules` key): every enabled module.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
    /// TLS termination: the listener speaks HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with
    /// these certificates. `None`: cleartext.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a load
    /// balancer, whose client address then stands for the peer's. Default: false.
    #[serde(default)]
    pub proxy_protocol: bool,
}

/// `[[module]]`: one module to load, and its settings.
///
/// `name`, `enabled` and `optional` are the engine's; every other key of the section
/// belongs to the module and is kept, unchecked, in [`settings`](Self::settings) for the
/// module's builder to read. That builder's errors are reported through
/// [`Config::module_error`], which finds their line in [`key_lines`](Self::key_lines).
#[derive(Debug, Clone, Deserialize)]
pub struct ModuleConfig {
    /// Which built-in module. Required; two enabled sections cannot share a name.
    pub name: String,
    /// `false` keeps the section configured but does not load the module. Default: true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// When the module fails in a transaction (a callback panics), `true` lets the
    /// transaction pass through as if the module were absent; `false` gives the client
    /// a 500. Default: false.
    #[serde(default)]
    pub optional: bool,
    /// The module's own settings: every key of the section other than `name`, `enabled`
    /// and `optional`, as written.
    #[serde(flatten)]
    pub settings: toml::Table,
    /// 1-based line of the section (its `[[module]]` header, or its inline table), when
    /// parsed from a file.
    #[serde(skip)]
    pub line: Option<usize>,
    /// 1-based line of every key written in the section, nested keys and array
    /// elements included, by their path relative to the section (`value`,
    /// `headers.x-a`, `list[2]`) as [`Config::module_error`] prints them. Empty when
    /// not parsed from a file.
    #[serde(skip)]
    pub key_lines: BTreeMap<String, usize>,
}

/// `[[listen.route]]`: the first route whose host and path prefix match wins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Host to match (without port, case-insensitive); any host when absent.
    #[serde(default)]
    pub host: Option<String>,
    /// Path prefix to match.
    #[serde(default = "default_path_prefix")]
    pub path_prefix: String,
    /// Origin to send matching requests to.
    pub origin: String,
    /// Which modules (by name, in `[[module]]` order) apply to requests this route
    /// matches; absent: the listener's.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
}

/// `[limits]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request header section (request line and headers); larger gets 431.
    pub max_request_header: ByteSize,
    /// Largest request body; larger gets 413.
    pub max_request_body: ByteSize,
    /// Largest body a module may ask to receive whole (`Txn::whole_body`); a larger
    /// one passes through unchanged.
    pub module_body: ByteSize,
    /// The most body bytes modules may hold whole at once, over all transactions; a
    /// body that would go over it passes as one over `module_body` does.
    pub module_body_total: ByteSize,
    /// Longest a module's `Flow::Wait` future may take; after it, the module has
    /// failed (a 500, or pass-through when it is optional).
    pub module_wait: Seconds,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_request_header: ByteSize(32 << 10),
            max_request_body: ByteSize(1 << 30),
            module_body: ByteSize(16 << 20),
            module_body_total: ByteSize(256 << 20),
            module_wait: Seconds::from_secs(30.0),
        }
    }
}

/// `[timeouts]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsConfig {
    /// Connecting to an origin.
    pub connect: Seconds,
    /// A client connection's PROXY protocol header and TLS handshake must be done
    /// within this, counted from the accept.
    pub client_handshake: Seconds,
    /// Waiting for an origin's response header after the request was sent; 504 after.
    pub origin_response: Seconds,
    /// The longest an origin may pause in the middle of a response body; the body is
    /// then cut (and the connection closed).
    pub origin_body_idle: Seconds,
    /// A keep-alive client connection with nothing in flight is closed after this.
    pub client_idle: Seconds,
    /// The longest a client may pause while sending a request body; the request then
    /// fails with 408 and the connection is closed.
    pub client_body_idle: Seconds,
    /// On SIGTERM/SIGINT, how long in-flight transactions may take to finish.
    pub shutdown_grace: Seconds,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            connect: Seconds::from_secs(5.0),
            client_handshake: Seconds::from_secs(10.0),
            origin_response: Seconds::from_secs(60.0),
            origin_body_idle: Seconds::from_secs(60.0),
            client_idle: Seconds::from_secs(60.0),
            client_body_idle: Seconds::from_secs(60.0),
            shutdown_grace: Seconds::from_secs(10.0),
        }
    }
}

/// `[upstream]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Connections open to one origin at most (busy and idle); further requests wait.
    pub max_connections_per_origin: usize,
    /// Idle keep-alive connections kept per origin.
    pub max_idle_per_origin: usize,
    /// An idle keep-alive connection is closed after this (also an HTTP/2 connection
    /// with no stream open).
    pub idle_timeout: Seconds,
    /// HTTP/2 connections open to one origin at most. Each carries as many concurrent
    /// streams as the origin allows; another is opened when they are all in use.
    pub max_h2_connections_per_origin: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            max_connections_per_origin: 256,
            max_idle_per_origin: 64,
            idle_timeout: Seconds::from_secs(60.0),
            max_h2_connections_per_origin: 4,
        }
    }
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

fn default_allow() -> Vec<IpNet> {
    vec![
        "127.0.0.0/8".parse().expect("literal network"),
        "::1/128".parse().expect("literal network"),
    ]
}

fn default_connect_ports() -> Vec<u16> {
    vec![443]
}

fn default_true() -> bool {
    true
}

fn default_path_prefix() -> String {
    "/".into()
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

/// CIDR networks; a bare IP address is taken as a network of one.
fn networks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    // Element by element, so that an error carries the span of the bad element.
    struct Network(IpNet);
    impl<'de> Deserialize<'de> for Network {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            string_with(
                d,
                "a network such as \"10.0.0.0/8\" or an address",
                |text| {
                    text.parse::<IpNet>()
                        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                        .map(Network)
                        .map_err(|_| {
                            format!(
                                "`{text}` is not a network such as \"10.0.0.0/8\" or an address"
                            )
                        })
                },
            )
        }
    }
    let networks = Vec::<Network>::deserialize(d)?;
    Ok(networks.into_iter().map(|n| n.0).collect())
}

/// Deserializes a string through `parse`. The error is raised inside the visitor, where
/// `toml` still knows the value's span; raised after deserializing, it would only be
/// given the span of the enclosing table or array.
fn string_with<'de, D, T, F>(d: D, expecting: &'static str, parse: F) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(&str) -> Result<T, String>,
{
    struct V<F>(&'static str, F);
    impl<T, F: FnOnce(&str) -> Result<T, String>> serde::de::Visitor<'_> for V<F> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            (self.1)(v).map_err(E::custom)
        }
    }
    d.deserialize_str(V(expecting, parse))
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::whole_file(&file, format!("cannot read: {e}")))?;
        Config::parse(&text, &file)
    }

    /// Parses and validates configuration text; `file` names it in errors.
    ///
    /// The error names the line and dotted key of the problem. Of several semantic
    /// problems, the one written first in the file is reported.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let (doc, syntax_error) = Document::parse(text);
        if let Some(e) = syntax_error {
            return Err(ConfigError::from_syntax(&doc, file, &e));
        }
        let mut config = Config::deserialize(doc.deserializer())
            .map_err(|e| ConfigError::from_serde(&doc, file, &e))?;
        config.source = file.to_string();
        for (i, module) in config.module.iter_mut().enumerate() {
            let at = KeyPath::top("module").index(i);
            module.line = doc.line_of_path(&at);
            module.key_lines = doc.key_lines_under(&at);
        }
        config.validate_in(Some(&doc), file)?;
        Ok(config)
    }

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

    /// Checks a configuration built in code (e.g. from [`Config::default`]) the way
    /// [`Config::parse`] checks a file; errors name the key but no file or line.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_in(None, "<config>")
    }

    fn validate_in(&self, doc: Option<&Document<'_>>, file: &str) -> Result<(), ConfigError> {
        let first = validate::check(self)
            .into_iter()
            .map(|issue| ConfigError::from_issue(doc, file, issue))
            .min_by_key(|e| e.line.unwrap_or(usize::MAX));
        first.map_or(Ok(()), Err)
    }
}
