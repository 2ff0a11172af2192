//! Running processes and finding resources: the `weir` binary, free ports, temporary
//! directories, signals, memory use.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `weir` binary under test.
pub const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// How long the proxy may take to start listening.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);

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

/// A temporary directory (see [`temp_dir`]) removed with everything in it when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory named after `tag`.
    pub fn new(tag: &str) -> TempDir {
        TempDir(temp_dir(tag))
    }

    /// Where it is.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `weir ARGS` to completion (killed after `timeout`) and returns its output.
pub fn run_weir(args: &[&str], timeout: Duration) -> Output {
    // A directory of its own, so that relative paths in defaults (the disk tier's
    // `weir-cache`) never land in the source tree.
    let cwd = TempDir::new("run");
    let mut child = Command::new(WEIR)
        .args(args)
        .current_dir(cwd.path())
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
