//! Runs a real c-icap server (Debian's `c-icap` package) for tests: on an ephemeral
//! port of 127.0.0.1, in the foreground, with a configuration written into a
//! directory of its own, serving the `echo` sample service. Not the system service.
//!
//! Used by the module's unit tests and, through `#[path]`, by the `weir` binary's
//! integration tests: it depends on std only.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running c-icap; stopped (SIGTERM, then SIGKILL) and its directory removed when
/// dropped.
pub struct CIcap {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

/// Where the sample services are: `<libdir>/c_icap` holding `srv_echo.so`, looked
/// for under the usual library directories (Debian puts them under its multiarch
/// directory).
fn services_dir() -> Option<PathBuf> {
    let mut candidates = vec![
        PathBuf::from("/usr/lib/c_icap"),
        PathBuf::from("/usr/local/lib/c_icap"),
    ];
    for lib in ["/usr/lib", "/usr/lib64", "/usr/local/lib"] {
        if let Ok(entries) = std::fs::read_dir(lib) {
            candidates.extend(entries.flatten().map(|e| e.path().join("c_icap")));
        }
    }
    candidates
        .into_iter()
        .find(|d| d.join("srv_echo.so").is_file())
}

/// The c-icap program, if installed.
fn program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("c-icap"))
        .find(|p| p.is_file())
}

impl CIcap {
    /// Starts c-icap, or says why it cannot (not installed, or it did not come up
    /// within a few seconds).
    pub fn start() -> Result<CIcap, String> {
        let program = program().ok_or("`c-icap` is not installed (Debian package c-icap)")?;
        let services = services_dir().ok_or("c-icap's srv_echo.so was not found")?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let dir = std::env::temp_dir().join(format!("weir-c-icap-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let config = configuration(&dir, addr, &services);
        let config_path = dir.join("c-icap.conf");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let child = Command::new(program)
            .arg("-N")
            .arg("-f")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("c-icap did not start: {e}"))?;
        let mut server = CIcap { addr, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline || server.child.try_wait().ok().flatten().is_some() {
                let log =
                    std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
                return Err(format!("c-icap did not listen on {addr}: {log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// `icap://127.0.0.1:PORT/echo`
    pub fn echo_url(&self) -> String {
        format!("icap://{}/echo", self.addr)
    }

    /// c-icap's own access log (one line per request it served).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

/// A configuration small enough for tests: one process, a few threads, logs and the
/// pid file in `dir`, no user switch.
fn configuration(dir: &Path, addr: SocketAddr, services: &Path) -> String {
    let d = dir.display();
    let s = services.display();
    format!(
        "PidFile {d}/c-icap.pid\n\
         CommandsSocket {d}/c-icap.ctl\n\
         Timeout 30\n\
         KeepAliveTimeout 30\n\
         MaxKeepAliveRequests 1000\n\
         StartServers 1\n\
         MaxServers 1\n\
         MinSpareThreads 2\n\
         MaxSpareThreads 8\n\
         ThreadsPerChild 8\n\
         Port {addr}\n\
         TmpDir {d}\n\
         MaxMemObject 1048576\n\
         DebugLevel 1\n\
         ModulesDir {s}\n\
         ServicesDir {s}\n\
         ServerLog {d}/server.log\n\
         AccessLog {d}/access.log\n\
         Service echo srv_echo.so\n"
    )
}

impl Drop for CIcap {
    fn drop(&mut self) {
        // SIGTERM lets c-icap stop its child processes; SIGKILL only if it lingers.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
