//! Transparent interception for real: a network namespace made by the test, where an
//! iptables `REDIRECT` rule sends a client's connections to an origin address to
//! Weir, which finds the original destination with `SO_ORIGINAL_DST`.
//!
//! Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), `ip` and `iptables` (./test.sh
//! installs iproute2 and iptables). Where the machine forbids namespaces the test
//! prints `SKIPPED: …` and passes.
//!
//! Inside the namespace: the origin listens on 192.0.2.1:80 (TEST-NET-1, on `lo`);
//! the client connects from 192.0.2.2; the rule redirects TCP from 192.0.2.2 to port
//! 80 to Weir on 127.0.0.1. Weir's own connections to the origin come from 192.0.2.1,
//! so the rule leaves them alone. No packet leaves the namespace.

mod common;

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const ORIGIN_IP: &str = "192.0.2.1";
const CLIENT_IP: &str = "192.0.2.2";
const WEIR_PORT: u16 = 3129;

/// A network namespace, deleted on drop.
struct Netns {
    name: String,
}

fn run(cmd: &[&str]) -> Result<Output, String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`{}`: {e}", cmd.join(" ")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "`{}` failed: {}",
            cmd.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Creates the namespace with its addresses and the redirect rule; `Err` says why
    /// the machine does not allow it.
    fn create() -> Result<Netns, String> {
        let ns = Netns {
            name: format!("weir-tp-{}", std::process::id()),
        };
        let n = ns.name.as_str();
        run(&["ip", "netns", "add", n])?;
        run(&["ip", "-n", n, "link", "set", "lo", "up"])?;
        for ip in [ORIGIN_IP, CLIENT_IP] {
            run(&[
                "ip",
                "-n",
                n,
                "addr",
                "add",
                &format!("{ip}/32"),
                "dev",
                "lo",
            ])?;
        }
        run(&[
            "ip",
            "netns",
            "exec",
            n,
            "iptables",
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-p",
            "tcp",
            "-s",
            CLIENT_IP,
            "--dport",
            "80",
            "-j",
            "REDIRECT",
            "--to-ports",
            &WEIR_PORT.to_string(),
        ])?;
        Ok(ns)
    }

    /// Runs `f` on a thread that has entered the namespace: sockets it creates
    /// belong to the namespace (setns changes only the calling thread's).
    fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("open the namespace");
            nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("enter the namespace");
            f()
        })
        .join()
        .expect("namespace thread")
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// `weir` running inside the namespace, killed on drop (its stderr printed when the
/// test failed).
struct Weir {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Weir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- weir stderr:\n{}",
                std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
            );
        }
    }
}

/// curl inside the namespace from the client address: (status, cache-status, body).
fn fetch(ns: &Netns, url: &str, extra: &[&str]) -> (String, String, String) {
    let out = ns
        .command("curl")
        .args([
            "--silent",
            "--show-error",
            "--max-time",
            "10",
            "--noproxy",
            "",
        ])
        .args(["--interface", CLIENT_IP, "-D", "-"])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string();
    let cache_status = head
        .lines()
        .find_map(|l| l.strip_prefix("cache-status: "))
        .unwrap_or("")
        .to_string();
    (status, cache_status, body.to_string())
}

#[test]
fn redirected_connections_are_proxied_and_cached() {
    if !curl_available() {
        println!("SKIPPED: transparent test: `curl` is not on PATH");
        return;
    }
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(why) => {
            println!("SKIPPED: transparent test: this machine forbids network namespaces or iptables: {why}");
            eprintln!("SKIPPED: transparent test: {why}");
            return;
        }
    };
    let origin_addr: SocketAddr = format!("{ORIGIN_IP}:80").parse().unwrap();
    let origin = ns.inside(move || TestOrigin::start_on(origin_addr));
    origin.route("/t", Reply::ok("intercepted").cc("max-age=60"));
    origin.route("/u", Reply::ok("by address"));

    let dir = temp_dir("transparent");
    let config = dir.join("weir.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nlisten = \"off\"\n[cache]\ndisk = \"off\"\n[log]\naccess = \"access.log\"\n\n\
             [[listen]]\naddr = \"127.0.0.1:{WEIR_PORT}\"\nmode = \"transparent\"\n\
             allow = [\"{CLIENT_IP}/32\"]\n"
        ),
    )
    .unwrap();
    let child = ns
        .command(WEIR)
        .args(["run", "--config", &config.display().to_string()])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .expect("start weir in the namespace");
    let _weir = Weir {
        child,
        dir: dir.clone(),
    };
    let up = ns.inside(|| {
        let deadline = Instant::now() + Duration::from_secs(10);
        let addr: SocketAddr = format!("127.0.0.1:{WEIR_PORT}").parse().unwrap();
        while Instant::now() < deadline {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    });
    assert!(up, "weir did not listen in the namespace");

    // The client asks the origin's address; the kernel hands the connection to Weir.
    let url = format!("http://{ORIGIN_IP}/t");
    let (status, cs, body) = fetch(&ns, &url, &[]);
    assert_eq!((status.as_str(), body.as_str()), ("200", "intercepted"));
    assert!(cs.contains("fwd=miss") && cs.contains("stored"), "{cs}");
    let (status, cs, body) = fetch(&ns, &url, &[]);
    assert_eq!((status.as_str(), body.as_str()), ("200", "intercepted"));
    assert_eq!(cs, "weir; hit");
    assert_eq!(origin.count("/t"), 1);
    let seen = origin.last("/t").expect("the origin saw the request");
    assert!(seen.has_header("via"), "{:?}", seen.headers);

    // HTTP/1.0 without Host: only the original destination (SO_ORIGINAL_DST) can
    // name the origin.
    let (status, _, body) = fetch(
        &ns,
        &format!("http://{ORIGIN_IP}/u"),
        &["--http1.0", "-H", "Host:"],
    );
    assert_eq!((status.as_str(), body.as_str()), ("200", "by address"));
    let seen = origin.last("/u").expect("the origin saw the request");
    assert_eq!(seen.header("host").as_deref(), Some(ORIGIN_IP));

    // The access log names the client and the URL it meant.
    let log = dir.join("access.log");
    let mut text = String::new();
    wait_until(Duration::from_secs(5), || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().count() >= 3
    });
    let first = text.lines().next().unwrap_or("");
    assert!(
        first.contains(CLIENT_IP) && first.contains(&format!("http://{ORIGIN_IP}/t")),
        "{text}"
    );
}
