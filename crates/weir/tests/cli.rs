//! The `weir` command line: embedded defaults, `run --config`, `check --config`.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// The configuration shape from the documentation, every section present.
const FULL_EXAMPLE: &str = r#"
[admin]
listen = "127.0.0.1:9090"

[[listen]]
addr = "127.0.0.1:3128"
mode = "forward"
allow = ["127.0.0.0/8", "::1/128"]
connect_ports = [443]

[[listen]]
addr = "127.0.0.1:8080"
mode = "reverse"
origin = "http://127.0.0.1:8081"
  [[listen.route]]
  host = "img.example"
  path_prefix = "/"
  origin = "http://127.0.0.1:8082"

[cache]
memory = "256MiB"
max_object = "64MiB"

[limits]
max_request_header = "32KiB"
max_request_body = "1GiB"

[timeouts]
connect = "5s"
origin_response = "60s"
client_idle = "60s"
shutdown_grace = "10s"

[upstream]
max_connections_per_origin = 256
max_idle_per_origin = 64
idle_timeout = "60s"

[log]
access = "off"
format = "squid"
"#;

/// A `weir` process killed on drop.
struct Running {
    child: Child,
    dir: std::path::PathBuf,
}

impl Running {
    fn spawn(args: &[&str], dir: &Path) -> Running {
        let child = Command::new(WEIR)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("stdout.log")).unwrap())
            .stderr(File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .expect("spawn weir");
        Running {
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    fn stop(mut self) -> Option<i32> {
        send_signal(self.child.id(), "TERM");
        let ok = wait_until(Duration::from_secs(10), || {
            self.child.try_wait().unwrap().is_some()
        });
        assert!(
            ok,
            "weir did not exit after SIGTERM; stderr:\n{}",
            self.stderr()
        );
        self.child.wait().unwrap().code()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- weir stderr:\n{}", self.stderr());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_arguments_runs_on_embedded_defaults() {
    let forward: std::net::SocketAddr = "127.0.0.1:3128".parse().unwrap();
    let admin: std::net::SocketAddr = "127.0.0.1:9090".parse().unwrap();
    for addr in [forward, admin] {
        if std::net::TcpListener::bind(addr).is_err() {
            eprintln!("SKIPPED: {addr} (a default port) is in use on this machine");
            return;
        }
    }
    let origin = TestOrigin::start();
    origin.route("/defaults", Reply::ok("defaults").cc("max-age=60"));
    let echo = EchoServer::start();
    let dir = temp_dir("defaults");

    // `weir` with no arguments, then `weir run` with no file: the same defaults.
    for (i, args) in [&[][..], &["run"][..]].into_iter().enumerate() {
        let running = Running::spawn(args, &dir);
        assert!(
            wait_for_port(forward, Duration::from_secs(10)),
            "`weir {}` is not listening on {forward}; stderr:\n{}",
            args.join(" "),
            running.stderr()
        );
        assert!(
            wait_for_port(admin, Duration::from_secs(10)),
            "admin on {admin}"
        );

        let client = proxied_client(forward);
        let r = get(&client, &origin.url("/defaults"), &[]).await;
        assert_eq!((r.status.as_u16(), r.text().as_str()), (200, "defaults"));
        assert!(r.header_all("via").join(",").contains("1.1 weir"));
        if i == 0 {
            // A fresh directory: the first request is a miss, stored.
            assert!(
                cs_has(&r.cache_status(), "stored", None),
                "{:?}",
                r.cache_status()
            );
        } else {
            // The defaults keep a disk tier under ./weir-cache: the second process
            // finds what the first one stored.
            assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
        }
        let r = get(&client, &origin.url("/defaults"), &[]).await;
        assert!(is_hit(&r.cache_status()), "{:?}", r.cache_status());
        assert_eq!(origin.count("/defaults"), 1);
        assert!(dir.join("weir-cache").is_dir());

        // Default connect_ports: 443 only.
        let r = raw_exchange(
            forward,
            format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n", echo.addr()).as_bytes(),
        );
        assert_eq!(r.status, 403);
        assert_eq!(echo.accepted(), 0);

        let mut metrics = RawConn::connect(admin);
        metrics.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nConnection: close\r\n\r\n");
        let m = metrics.read_final(false).expect("metrics");
        assert_eq!(m.status, 200);
        assert!(m.text().contains("weir_requests_total"), "{}", m.text());

        drop(client);
        assert_eq!(running.stop(), Some(0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_accepts_a_valid_configuration() {
    let dir = temp_dir("check-ok");
    let path = dir.join("weir.toml");
    std::fs::write(&path, FULL_EXAMPLE).unwrap();
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `weir: FILE:LINE: key `KEY`: message` line in `stderr`, split into its parts.
fn error_line(stderr: &str, file: &Path) -> (usize, String, String) {
    let prefix = format!("weir: {}:", file.display());
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in stderr:\n{stderr}"));
    let rest = &line[prefix.len()..];
    let (number, rest) = rest
        .split_once(": key `")
        .unwrap_or_else(|| panic!("expected `LINE: key `KEY`: message`: {line}"));
    let (key, message) = rest
        .split_once("`: ")
        .unwrap_or_else(|| panic!("expected `key `KEY`: message`: {line}"));
    let number = number
        .parse()
        .unwrap_or_else(|_| panic!("line number {number:?}: {line}"));
    (number, key.to_string(), message.to_string())
}

#[test]
fn check_reports_file_line_and_key_of_the_first_error() {
    let dir = temp_dir("check-bad");
    let cases: [(&str, usize, &str); 3] = [
        (
            "[admin]\nlisten = \"127.0.0.1:9090\"\n\n[cache]\nmemory = \"lots\"\nmax_object = \"1MiB\"\n",
            5,
            "cache.memory",
        ),
        (
            "[timeouts]\nconnect = \"5s\"\nconect = \"5s\"\n",
            3,
            "timeouts.conect",
        ),
        (
            "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n\n[[listen]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\norigin = \"ftp://127.0.0.1:8081\"\n",
            8,
            "listen[*].origin",
        ),
    ];
    for (i, (text, line, key)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("bad-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = run_weir(
            &["check", "--config", path.to_str().unwrap()],
            Duration::from_secs(10),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}; stderr:\n{stderr}");
        let (got_line, got_key, message) = error_line(&stderr, &path);
        assert_eq!(got_line, line, "case {i}: line; stderr:\n{stderr}");
        if let Some(suffix) = key.strip_prefix("listen[*]") {
            assert!(
                got_key.starts_with("listen[") && got_key.ends_with(suffix),
                "case {i}: key {got_key:?}, expected listen[N]{suffix}"
            );
        } else {
            assert_eq!(got_key, key, "case {i}: key; stderr:\n{stderr}");
        }
        assert!(
            !message.trim().is_empty(),
            "case {i}: a message; stderr:\n{stderr}"
        );
    }

    // A file that cannot be read.
    let missing = dir.join("missing.toml");
    let out = run_weir(
        &["check", "--config", missing.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("weir: {}", missing.display())));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_refuses_paths_that_run_could_not_use() {
    let dir = temp_dir("check-paths");
    let file = dir.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let cases = [
        (
            format!(
                "[log]\naccess = {:?}\n",
                dir.join("no-such-dir/access.log").display().to_string()
            ),
            2,
            "log.access",
            "does not exist",
        ),
        (
            format!("[log]\naccess = {:?}\n", dir.display().to_string()),
            2,
            "log.access",
            "is a directory",
        ),
        (
            format!(
                "[cache]\ndisk = {{ path = {:?}, size = \"100MiB\" }}\n",
                file.display().to_string()
            ),
            2,
            "cache.disk",
            "is not a directory",
        ),
        (
            // Its parent is a file: the directory could never be made.
            format!(
                "[cache]\ndisk = {{ path = {:?}, size = \"100MiB\" }}\n",
                file.join("cache").display().to_string()
            ),
            2,
            "cache.disk",
            "cannot be created",
        ),
    ];
    for (i, (text, line, key, needle)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("paths-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        for command in ["check", "run"] {
            let out = run_weir(
                &[command, "--config", path.to_str().unwrap()],
                Duration::from_secs(10),
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command} {i}; stderr:\n{stderr}"
            );
            let (got_line, got_key, message) = error_line(&stderr, &path);
            assert_eq!((got_line, got_key.as_str()), (line, key), "{command} {i}");
            assert!(message.contains(needle), "{command} {i}: {message}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_refuses_an_invalid_configuration() {
    let dir = temp_dir("run-bad");
    let path = dir.join("weir.toml");
    std::fs::write(&path, "[cache]\nmemory = \"lots\"\n").unwrap();
    let out = run_weir(
        &["run", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    let (line, key, _) = error_line(&stderr, &path);
    assert_eq!((line, key.as_str()), (2, "cache.memory"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_refuses_an_admin_listener_open_to_other_hosts_without_a_token() {
    let dir = temp_dir("run-admin-token");
    let path = dir.join("weir.toml");
    let port = free_port();
    std::fs::write(&path, format!("[admin]\nlisten = \"0.0.0.0:{port}\"\n")).unwrap();
    let out = run_weir(
        &["run", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    let (line, key, message) = error_line(&stderr, &path);
    assert_eq!((line, key.as_str()), (2, "admin.listen"));
    assert!(message.contains("token"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}
