//! `ProxyBuilder`: writes a configuration for a test and starts `weir` on it; and the
//! `Proxy` constructors that go through it (`Proxy::builder`, `forward`, `reverse`).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::process::{free_port, temp_dir};
use super::proxy::{Launch, Proxy};

struct ListenerSpec {
    mode: &'static str,
    origin: Option<String>,
    allow: Option<Vec<String>>,
    connect_ports: Option<Vec<u16>>,
    routes: Vec<(Option<String>, String, String)>,
    /// Lines written as they are into the listener's section (`key = value`).
    extra: Vec<String>,
}

impl Proxy {
    /// A configuration to build; `start()` runs it.
    pub fn builder() -> ProxyBuilder {
        ProxyBuilder::new()
    }

    /// One forward listener, everything else default (except a free admin port and no
    /// access log).
    pub fn forward() -> Proxy {
        Proxy::builder().forward().start()
    }

    /// One reverse listener to `origin`.
    pub fn reverse(origin: &str) -> Proxy {
        Proxy::builder().reverse(origin).start()
    }
}

/// Builds a configuration; [`ProxyBuilder::start`] runs `weir` on it.
pub struct ProxyBuilder {
    listeners: Vec<ListenerSpec>,
    sections: BTreeMap<String, Vec<(String, String)>>,
    access_log: Option<&'static str>,
    /// TOML written after everything else (arrays of tables such as `[[origin]]`).
    raw: String,
}

/// Renders a value for TOML: numbers, booleans and arrays as they are, anything else
/// as a string.
fn toml_value(v: &str) -> String {
    let t = v.trim();
    if t.parse::<i64>().is_ok()
        || t.parse::<f64>().is_ok()
        || t == "true"
        || t == "false"
        || t.starts_with('[')
        || t.starts_with('{')
        || t.starts_with('"')
    {
        t.to_string()
    } else {
        format!("{t:?}")
    }
}

impl ProxyBuilder {
    pub(super) fn new() -> ProxyBuilder {
        ProxyBuilder {
            listeners: Vec::new(),
            sections: BTreeMap::new(),
            access_log: None,
            raw: String::new(),
        }
    }

    /// Adds a forward listener (default `allow` and `connect_ports`).
    pub fn forward(mut self) -> Self {
        self.listeners.push(ListenerSpec {
            mode: "forward",
            origin: None,
            allow: None,
            connect_ports: None,
            routes: Vec::new(),
            extra: Vec::new(),
        });
        self
    }

    /// Adds a reverse listener whose default origin is `origin` (e.g. `http://127.0.0.1:8081`).
    pub fn reverse(mut self, origin: &str) -> Self {
        self.listeners.push(ListenerSpec {
            mode: "reverse",
            origin: Some(origin.to_string()),
            allow: None,
            connect_ports: None,
            routes: Vec::new(),
            extra: Vec::new(),
        });
        self
    }

    fn last(&mut self) -> &mut ListenerSpec {
        self.listeners
            .last_mut()
            .expect("add a listener before configuring it")
    }

    /// Sets `allow` on the last listener added.
    pub fn allow(mut self, nets: &[&str]) -> Self {
        self.last().allow = Some(nets.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Sets `connect_ports` on the last listener added.
    pub fn connect_ports(mut self, ports: &[u16]) -> Self {
        self.last().connect_ports = Some(ports.to_vec());
        self
    }

    /// Writes `line` (e.g. `proxy_protocol = true`) into the last listener's section.
    pub fn listener_line(mut self, line: &str) -> Self {
        self.last().extra.push(line.to_string());
        self
    }

    /// Adds a `[[listen.route]]` to the last listener added.
    pub fn route(mut self, host: Option<&str>, path_prefix: &str, origin: &str) -> Self {
        self.last().routes.push((
            host.map(str::to_string),
            path_prefix.to_string(),
            origin.to_string(),
        ));
        self
    }

    /// Sets `[section] key = value` (strings are quoted for you).
    pub fn option(mut self, section: &str, key: &str, value: &str) -> Self {
        self.sections
            .entry(section.to_string())
            .or_default()
            .push((key.to_string(), toml_value(value)));
        self
    }

    /// Appends `toml` to the configuration as it is (e.g. an `[[origin]]` table).
    pub fn raw(mut self, toml: &str) -> Self {
        self.raw.push_str(toml);
        self.raw.push('\n');
        self
    }

    /// Writes the access log to `access.log` in the proxy's directory, in `format`.
    pub fn access_log(mut self, format: &'static str) -> Self {
        self.access_log = Some(format);
        self
    }

    /// Writes the configuration, starts `weir run --config`, and waits until every
    /// listener accepts connections.
    pub fn start(self) -> Proxy {
        Proxy::start_on_free_ports(|| self.launch())
    }

    /// The configuration written on ports found free now.
    fn launch(&self) -> Launch {
        let dir = temp_dir("proxy");
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut addrs = Vec::new();
        let mut text = String::new();
        let mut sections = self.sections.clone();
        let log = sections.entry("log".into()).or_default();
        if let Some(format) = self.access_log {
            let path = dir.join("access.log");
            log.push(("access".into(), format!("{:?}", path.display().to_string())));
            log.push(("format".into(), format!("{format:?}")));
        } else if !log.iter().any(|(k, _)| k == "access") {
            log.push(("access".into(), "\"off\"".into()));
        }
        // Tests share no disk: a disk tier only where a test asks for one.
        let cache = sections.entry("cache".into()).or_default();
        if !cache.iter().any(|(k, _)| k == "disk") {
            cache.push(("disk".into(), "\"off\"".into()));
        }
        let admin_section = sections.entry("admin".into()).or_default();
        if !admin_section.iter().any(|(k, _)| k == "listen") {
            admin_section.push(("listen".into(), format!("\"{admin}\"")));
        }
        for (name, entries) in &sections {
            text.push_str(&format!("[{name}]\n"));
            for (k, v) in entries {
                text.push_str(&format!("{k} = {v}\n"));
            }
            text.push('\n');
        }
        for l in &self.listeners {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            addrs.push((l.mode, addr));
            text.push_str(&format!(
                "[[listen]]\naddr = \"{addr}\"\nmode = \"{}\"\n",
                l.mode
            ));
            if let Some(origin) = &l.origin {
                text.push_str(&format!("origin = {origin:?}\n"));
            }
            if let Some(allow) = &l.allow {
                text.push_str(&format!("allow = {allow:?}\n"));
            }
            if let Some(ports) = &l.connect_ports {
                text.push_str(&format!("connect_ports = {ports:?}\n"));
            }
            for line in &l.extra {
                text.push_str(line);
                text.push('\n');
            }
            for (host, prefix, origin) in &l.routes {
                text.push_str("  [[listen.route]]\n");
                if let Some(host) = host {
                    text.push_str(&format!("  host = {host:?}\n"));
                }
                text.push_str(&format!(
                    "  path_prefix = {prefix:?}\n  origin = {origin:?}\n"
                ));
            }
            text.push('\n');
        }
        text.push_str(&self.raw);
        let admin = sections["admin"]
            .iter()
            .find(|(k, _)| k == "listen")
            .and_then(|(_, v)| v.trim_matches('"').parse().ok());
        let config = dir.join("weir.toml");
        std::fs::write(&config, &text).expect("write the configuration");
        Launch {
            dir,
            config,
            text,
            listeners: addrs,
            admin,
        }
    }
}
