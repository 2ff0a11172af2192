//! `weir-bench idle`: what idle client connections cost the proxy.
//!
//! Opens `--conns` connections to a listener on loopback, completes one request on
//! each (HTTP/1.1 keep-alive, or HTTP/2 by prior knowledge or by ALPN over TLS), or
//! sends nothing at all (`bare`), then holds them all open, idle, for `--hold-secs`
//! and closes them. It prints `held` once every connection is open and idle, so a
//! script can read the proxy's memory meanwhile; with `--pid` it reads the proxy's
//! VmRSS and VmHWM from /proc itself, before, while held and after the close.
//!
//! Each connection is one file descriptor here and one in the proxy: raise the open
//! file limit of both (`ulimit -n`) above `--conns`. This process raises its own soft
//! limit to the hard one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// What each connection does before it waits.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum Mode {
    /// One HTTP/1.1 request, the connection kept alive.
    H1,
    /// One HTTP/2 request (prior knowledge in clear text, ALPN `h2` with `--tls`).
    H2,
    /// Nothing: connect (and finish the TLS handshake with `--tls`), send no request.
    Bare,
}

/// Options of `weir-bench idle`.
#[derive(clap::Args)]
pub struct Args {
    /// The listener to connect to (a loopback address).
    #[arg(long)]
    addr: SocketAddr,
    /// What each connection does before it waits.
    #[arg(long, value_enum, default_value = "h1")]
    mode: Mode,
    /// Connections to hold.
    #[arg(long, default_value_t = 10_000)]
    conns: usize,
    /// The request's path.
    #[arg(long, default_value = "/")]
    path: String,
    /// The request's Host (authority); default: `--addr`.
    #[arg(long)]
    host: Option<String>,
    /// Seconds to hold the connections once all are open.
    #[arg(long, default_value_t = 10)]
    hold_secs: u64,
    /// Connections being set up at once.
    #[arg(long, default_value_t = 200)]
    parallel: usize,
    /// Connect with TLS, trusting the CA certificate (PEM) in this file.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// The proxy's process id: report its VmRSS and VmHWM from /proc.
    #[arg(long)]
    pid: Option<u32>,
    /// Stop with an error after this many seconds in all.
    #[arg(long, default_value_t = 300)]
    max_secs: u64,
}

/// A bound on setting up one connection and its request.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// After the last connection is set up (or closed), time for the proxy to settle
/// before its memory is read.
const SETTLE: Duration = Duration::from_secs(1);

/// One held connection (a stream, or an HTTP/2 client's handle whose task holds the
/// stream); dropping it closes it.
type Held = Box<dyn std::any::Any + Send>;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Runs the benchmark and prints its results.
pub fn run(args: Args) -> Result<(), String> {
    if !args.addr.ip().is_loopback() {
        return Err(format!("{} is not a loopback address", args.addr));
    }
    raise_fd_limit(args.conns)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let limit = Duration::from_secs(args.max_secs);
    runtime.block_on(async {
        tokio::time::timeout(limit, run_all(&args))
            .await
            .map_err(|_| format!("gave up after {} s (--max-secs)", args.max_secs))?
    })
}

pub fn raise_fd_limit(conns: usize) -> Result<(), String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| e.to_string())?;
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let need = conns as u64 + 64;
    if hard < need {
        return Err(format!(
            "{conns} connections need an open file limit of {need}; the hard limit is {hard} (ulimit -Hn)"
        ));
    }
    Ok(())
}

async fn run_all(args: &Args) -> Result<(), String> {
    let tls = match &args.tls_ca {
        Some(path) => Some(tls_connector(path, args.mode)?),
        None => None,
    };
    let host = args.host.clone().unwrap_or_else(|| args.addr.to_string());
    let rss_before = args.pid.and_then(|p| memory(p).ok());
    let started = Instant::now();
    let mut setups = JoinSet::new();
    let mut held = Vec::with_capacity(args.conns);
    let mut drivers = Vec::new();
    let mut failures = 0usize;
    let mut first_error = None;
    let mut launched = 0;
    while held.len() + failures < args.conns {
        while launched < args.conns && setups.len() < args.parallel {
            let (addr, mode, tls) = (args.addr, args.mode, tls.clone());
            let (host, path) = (host.clone(), args.path.clone());
            setups.spawn(async move {
                tokio::time::timeout(SETUP_TIMEOUT, setup(addr, mode, tls, &host, &path))
                    .await
                    .unwrap_or_else(|_| Err("setup timed out".into()))
            });
            launched += 1;
        }
        match setups.join_next().await {
            Some(Ok(Ok((conn, driver)))) => {
                held.push(conn);
                drivers.extend(driver);
            }
            Some(Ok(Err(e))) => {
                failures += 1;
                first_error.get_or_insert(e);
            }
            Some(Err(e)) => {
                failures += 1;
                first_error.get_or_insert(e.to_string());
            }
            None => break,
        }
    }
    let mode = match args.mode {
        Mode::H1 => "h1",
        Mode::H2 => "h2",
        Mode::Bare => "bare",
    };
    println!(
        "opened mode={mode} tls={} conns={} failed={failures} secs={:.1}",
        tls.is_some(),
        held.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some(e) = &first_error {
        println!("first error: {e}");
    }
    tokio::time::sleep(SETTLE).await;
    let rss_held = args.pid.and_then(|p| memory(p).ok());
    println!("held");
    tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    drop(held);
    for d in &drivers {
        d.abort();
    }
    println!("closed");
    tokio::time::sleep(SETTLE).await;
    if let Some(pid) = args.pid {
        let after = memory(pid)?;
        let kib = |m: Option<(u64, u64)>| m.map_or("?".into(), |(rss, _)| rss.to_string());
        println!(
            "rss_kib before={} held={} after={} hwm={}",
            kib(rss_before),
            kib(rss_held),
            after.0,
            after.1
        );
        if let (Some((b, _)), Some((h, _))) = (rss_before, rss_held) {
            let per = (h.saturating_sub(b) * 1024) as f64 / held_count(args, failures) as f64;
            println!("bytes_per_connection={per:.0}");
        }
    }
    if failures > 0 {
        return Err(format!("{failures} of {} connections failed", args.conns));
    }
    Ok(())
}

fn held_count(args: &Args, failures: usize) -> usize {
    (args.conns - failures).max(1)
}

async fn setup(
    addr: SocketAddr,
    mode: Mode,
    tls: Option<tokio_rustls::TlsConnector>,
    host: &str,
    path: &str,
) -> Result<(Held, Option<tokio::task::AbortHandle>), String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let mut io: Box<dyn Io> = match tls {
        None => Box::new(tcp),
        Some(c) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            Box::new(
                c.connect(name, tcp)
                    .await
                    .map_err(|e| format!("tls: {e}"))?,
            )
        }
    };
    match mode {
        Mode::Bare => Ok((Box::new(io), None)),
        Mode::H1 => {
            h1_exchange(&mut io, host, path).await?;
            Ok((Box::new(io), None))
        }
        Mode::H2 => {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
                    .await
                    .map_err(|e| format!("h2 handshake: {e}"))?;
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            let uri = format!("http://{host}{path}");
            let req = http::Request::get(uri)
                .body(Empty::<Bytes>::new())
                .map_err(|e| e.to_string())?;
            let fail = |e: String| {
                driver.abort();
                e
            };
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| fail(format!("h2 request: {e}")))?;
            if resp.status() != http::StatusCode::OK {
                return Err(fail(format!("h2: status {}", resp.status())));
            }
            resp.into_body()
                .collect()
                .await
                .map_err(|e| fail(format!("h2 body: {e}")))?;
            Ok((Box::new(sender), Some(driver.abort_handle())))
        }
    }
}

/// Sends one GET and reads the whole answer (Content-Length framing).
async fn h1_exchange(io: &mut Box<dyn Io>, host: &str, path: &str) -> Result<(), String> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: weir-bench-idle\r\n\r\n");
    io.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = io
            .read(&mut chunk)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed before the answer".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => continue,
            Err(e) => return Err(format!("bad answer: {e}")),
        };
        if resp.code != Some(200) {
            return Err(format!("status {:?}", resp.code));
        }
        let length = resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| {
                std::str::from_utf8(h.value)
                    .ok()?
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .ok_or("the answer has no Content-Length")?;
        let mut left = (head_len + length).saturating_sub(buf.len());
        while left > 0 {
            let n = io
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed in the body".into());
            }
            left = left.saturating_sub(n);
        }
        return Ok(());
    }
}

fn tls_connector(ca: &std::path::Path, mode: Mode) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))? {
        roots
            .add(cert.map_err(|e| format!("{}: {e}", ca.display()))?)
            .map_err(|e| e.to_string())?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = match mode {
        Mode::H2 => vec![b"h2".to_vec()],
        Mode::H1 | Mode::Bare => vec![b"http/1.1".to_vec()],
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The process's (VmRSS, VmHWM) in KiB.
pub fn memory(pid: u32) -> Result<(u64, u64), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}
