//! `Proxy`: the `weir` binary run on a generated configuration, on free ports.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::raw::{RawConn, RawResponse};

/// The `weir` binary under test.
pub const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// How long the proxy may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A free port on 127.0.0.1 (bound, read, released), never the same twice in one test
/// binary.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let mut given = GIVEN.lock().unwrap();
        if given.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// A fresh directory under the system's temporary directory.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!(
        "weir-test-{tag}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// Runs `weir ARGS` to completion (killed after `timeout`) and returns its output.
pub fn run_weir(args: &[&str], timeout: Duration) -> Output {
    let mut child = Command::new(WEIR)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn weir");
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("wait for weir").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "`weir {}` did not finish within {timeout:?}; stderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect weir's output")
}

/// Waits (bounded) until `addr` accepts TCP connections; false on timeout.
pub fn wait_for_port(addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

/// Sends a signal (`TERM`, `INT`, `KILL` ...) to a process.
pub fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Reads a `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

struct ListenerSpec {
    mode: &'static str,
    origin: Option<String>,
    allow: Option<Vec<String>>,
    connect_ports: Option<Vec<u16>>,
    routes: Vec<(Option<String>, String, String)>,
}

/// Builds a configuration; [`ProxyBuilder::start`] runs `weir` on it.
pub struct ProxyBuilder {
    listeners: Vec<ListenerSpec>,
    sections: BTreeMap<String, Vec<(String, String)>>,
    access_log: Option<&'static str>,
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
        || t.starts_with('"')
    {
        t.to_string()
    } else {
        format!("{t:?}")
    }
}

impl ProxyBuilder {
    /// Adds a forward listener (default `allow` and `connect_ports`).
    pub fn forward(mut self) -> Self {
        self.listeners.push(ListenerSpec {
            mode: "forward",
            origin: None,
            allow: None,
            connect_ports: None,
            routes: Vec::new(),
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

    /// Writes the access log to `access.log` in the proxy's directory, in `format`.
    pub fn access_log(mut self, format: &'static str) -> Self {
        self.access_log = Some(format);
        self
    }

    /// Writes the configuration, starts `weir run --config`, and waits until every
    /// listener accepts connections.
    pub fn start(self) -> Proxy {
        let dir = temp_dir("proxy");
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut addrs = Vec::new();
        let mut text = String::new();
        let mut sections = self.sections;
        let log = sections.entry("log".into()).or_default();
        if let Some(format) = self.access_log {
            let path = dir.join("access.log");
            log.push(("access".into(), format!("{:?}", path.display().to_string())));
            log.push(("format".into(), format!("{format:?}")));
        } else if !log.iter().any(|(k, _)| k == "access") {
            log.push(("access".into(), "\"off\"".into()));
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
            text.push_str(&format!("[[listen]]\naddr = \"{addr}\"\nmode = \"{}\"\n", l.mode));
            if let Some(origin) = &l.origin {
                text.push_str(&format!("origin = {origin:?}\n"));
            }
            if let Some(allow) = &l.allow {
                text.push_str(&format!("allow = {allow:?}\n"));
            }
            if let Some(ports) = &l.connect_ports {
                text.push_str(&format!("connect_ports = {ports:?}\n"));
            }
            for (host, prefix, origin) in &l.routes {
                text.push_str("  [[listen.route]]\n");
                if let Some(host) = host {
                    text.push_str(&format!("  host = {host:?}\n"));
                }
                text.push_str(&format!("  path_prefix = {prefix:?}\n  origin = {origin:?}\n"));
            }
            text.push('\n');
        }
        let admin = sections["admin"]
            .iter()
            .find(|(k, _)| k == "listen")
            .and_then(|(_, v)| v.trim_matches('"').parse().ok());
        let config = dir.join("weir.toml");
        std::fs::write(&config, &text).expect("write the configuration");
        Proxy::spawn(dir, config, text, addrs, admin)
    }
}

/// A running `weir`, killed on drop. When the test panics, its configuration and
/// stderr are printed and its directory is kept.
pub struct Proxy {
    child: Child,
    dir: PathBuf,
    config: PathBuf,
    config_text: String,
    listeners: Vec<(&'static str, SocketAddr)>,
    admin: Option<SocketAddr>,
    exit: Option<ExitStatus>,
}

impl Proxy {
    pub fn builder() -> ProxyBuilder {
        ProxyBuilder {
            listeners: Vec::new(),
            sections: BTreeMap::new(),
            access_log: None,
        }
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

    fn spawn(
        dir: PathBuf,
        config: PathBuf,
        config_text: String,
        listeners: Vec<(&'static str, SocketAddr)>,
        admin: Option<SocketAddr>,
    ) -> Proxy {
        let stdout = File::create(dir.join("stdout.log")).unwrap();
        let stderr = File::create(dir.join("stderr.log")).unwrap();
        let child = Command::new(WEIR)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .env("WEIR_LOG", std::env::var("WEIR_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn weir");
        let mut proxy = Proxy {
            child,
            dir,
            config,
            config_text,
            listeners,
            admin,
            exit: None,
        };
        let mut addrs: Vec<SocketAddr> = proxy.listeners.iter().map(|(_, a)| *a).collect();
        addrs.extend(proxy.admin);
        let deadline = Instant::now() + START_TIMEOUT;
        for addr in addrs {
            loop {
                if let Some(status) = proxy.child.try_wait().unwrap() {
                    panic!(
                        "weir exited during start-up ({status}); config:\n{}\nstderr:\n{}",
                        proxy.config_text,
                        proxy.stderr_text()
                    );
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    panic!(
                        "weir did not listen on {addr} within {START_TIMEOUT:?}; stderr:\n{}",
                        proxy.stderr_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        proxy
    }

    /// The first listener of this mode.
    fn listener(&self, mode: &str) -> SocketAddr {
        self.listeners
            .iter()
            .find(|(m, _)| *m == mode)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("no {mode} listener configured"))
    }

    pub fn forward_addr(&self) -> SocketAddr {
        self.listener("forward")
    }

    pub fn reverse_addr(&self) -> SocketAddr {
        self.listener("reverse")
    }

    /// `http://<reverse listener>{path}`
    pub fn reverse_url(&self, path: &str) -> String {
        format!("http://{}{}", self.reverse_addr(), path)
    }

    /// `http://<forward listener>`, for a client's proxy setting.
    pub fn forward_url(&self) -> String {
        format!("http://{}", self.forward_addr())
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin.expect("no admin listener")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config_path(&self) -> &Path {
        &self.config
    }

    pub fn access_log_path(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    pub fn stdout_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default()
    }

    pub fn signal(&self, signal: &str) {
        send_signal(self.pid(), signal);
    }

    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit {
                return Some(status);
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exit = Some(status);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.exit.is_none() && self.wait_exit(Duration::ZERO).is_none()
    }

    /// Resident memory now, in KiB.
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmRSS").expect("read VmRSS")
    }

    /// Peak resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmHWM").expect("read VmHWM")
    }

    /// `GET /metrics` from the admin listener.
    pub fn metrics_response(&self) -> RawResponse {
        let mut conn = RawConn::connect(self.admin_addr());
        conn.send(
            format!(
                "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.admin_addr()
            )
            .as_bytes(),
        );
        conn.read_response(false).expect("read the /metrics response")
    }

    /// The text of `/metrics` (asserting 200).
    pub fn metrics(&self) -> String {
        let resp = self.metrics_response();
        assert_eq!(resp.status, 200, "GET /metrics: {}", resp.text());
        resp.text()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- weir config ({}):\n{}\n--- weir stderr:\n{}\n--- (files kept in {})",
                self.config.display(),
                self.config_text,
                self.stderr_text(),
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
