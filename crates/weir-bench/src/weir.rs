//! The `weir` binary, run as a child process on a generated configuration, killed
//! when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `weir`.
pub struct WeirProcess {
    child: Child,
    pub addr: SocketAddr,
}

impl WeirProcess {
    /// Writes `config` (with `{LISTEN}` replaced by a free loopback address) to
    /// `dir/weir.toml`, starts `binary` on it and waits until it accepts connections.
    pub fn start(binary: &Path, dir: &Path, config: &str) -> Result<WeirProcess, String> {
        let addr = free_addr()?;
        let path = dir.join("weir.toml");
        std::fs::write(&path, config.replace("{LISTEN}", &addr.to_string()))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let stderr = std::fs::File::create(dir.join("weir.stderr")).map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .current_dir(dir)
            .arg("run")
            .arg("--config")
            .arg(&path)
            .env("WEIR_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut weir = WeirProcess { child, addr };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = weir.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("weir.stderr")).unwrap_or_default();
                return Err(format!("weir exited at start ({status}):\n{log}"));
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(weir);
            }
            if Instant::now() > deadline {
                return Err(format!("weir did not listen on {addr} within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id, for its CPU time in /proc.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory so far (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

impl Drop for WeirProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_addr() -> Result<SocketAddr, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))
}

/// `weir` next to this executable (both are built into the same target directory).
pub fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("weir")))
        .unwrap_or_else(|| PathBuf::from("weir"))
}
