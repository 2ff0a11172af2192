//! `Proxy`: the `weir` binary run on a generated configuration, on free ports.

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::client::metric;
use super::process::{proc_status_kib, send_signal, START_TIMEOUT, WEIR};
use super::raw::{RawConn, RawResponse};

/// What a test starts `weir` on: its directory, the configuration's file and text,
/// the listeners to wait for (by mode) and the admin listener.
pub(super) struct Launch {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub text: String,
    pub listeners: Vec<(&'static str, SocketAddr)>,
    pub admin: Option<SocketAddr>,
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
    /// Starts `weir` on `config` (already written, its text `config_text`) and waits
    /// until every listener accepts connections. The constructors that build a
    /// configuration (`Proxy::builder`, `Proxy::forward`, `Proxy::reverse`) are in
    /// `builder.rs`, which looks down on this file.
    /// Starts `weir` on what `make` writes (see [`Launch`]), each time on ports found
    /// free just before: a port `free_port` released can be taken by another test's
    /// server before `weir` binds it, and `weir` then stops at start-up; it is started
    /// again on other ports, up to four times.
    pub(super) fn start_on_free_ports(mut make: impl FnMut() -> Launch) -> Proxy {
        let mut tries = 0;
        loop {
            tries += 1;
            match Proxy::spawn(make()) {
                Ok(proxy) => return proxy,
                Err(e) if tries < 4 && e.contains("Address already in use") => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn spawn(launch: Launch) -> Result<Proxy, String> {
        let Launch {
            dir,
            config,
            text: config_text,
            listeners,
            admin,
        } = launch;
        let stdout = File::create(dir.join("stdout.log")).unwrap();
        let stderr = File::create(dir.join("stderr.log")).unwrap();
        let child = Command::new(WEIR)
            .current_dir(&dir)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .env(
                "WEIR_LOG",
                std::env::var("WEIR_LOG").unwrap_or_else(|_| "info".into()),
            )
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
                    proxy.exit = Some(status);
                    return Err(format!(
                        "weir exited during start-up ({status}); config:\n{}\nstderr:\n{}",
                        proxy.config_text,
                        proxy.stderr_text()
                    ));
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
        // The disk tier's index is rebuilt in the background and the tier stores
        // nothing until it is done: wait, so that a test's first responses are stored
        // as on a proxy that has been running.
        if proxy.admin.is_some() {
            while Instant::now() < deadline {
                let r = proxy.metrics_response();
                let loading = metric(&r.text(), "weir_cache_disk_loading", &[]);
                if r.status != 200 || loading.unwrap_or(0.0) == 0.0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(proxy)
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

    /// Like [`Proxy::wait_exit`], for async tests (does not block the runtime).
    pub async fn exited(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.wait_exit(Duration::ZERO) {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
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
        conn.read_response(false)
            .expect("read the /metrics response")
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
