//! `weir-bench dispatcher`: the dispatcher patterns of an endpoint proxy (blocking vs
//! correlated), measured through Weir.
//!
//! A loopback origin answers every request after a fixed delay. Weir runs as a reverse
//! proxy in front of it, once with `protocol = "http1"` (a keep-alive pool of at most
//! `--pool` connections: one request per connection at a time) and once with
//! `protocol = "http2"` (many streams per connection). Each run sends a burst of
//! `--requests` concurrent misses, then `--requests` sequential misses, all to distinct
//! uncacheable URLs, and reads Weir's peak resident memory from /proc. A fresh Weir
//! process serves each mode of each run; the modes alternate in order between runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::origin::DelayOrigin;
use crate::stats::{median, Latencies};
use crate::weir::{default_binary, WeirProcess};

/// Options of `weir-bench dispatcher`.
#[derive(clap::Args)]
pub struct Args {
    /// Requests in the burst, and in the sequential run.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// The origin's delay before each answer, in milliseconds.
    #[arg(long, default_value_t = 10)]
    delay_ms: u64,
    /// Weir's HTTP/1.1 pool size (`max_connections_per_origin`).
    #[arg(long, default_value_t = 32)]
    pool: usize,
    /// Runs of both modes; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Origin over TLS (HTTP/2 negotiated by ALPN) instead of clear text (h2c).
    #[arg(long)]
    tls: bool,
    /// Weir's worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// The `weir` binary; default: the one next to this executable.
    #[arg(long)]
    weir: Option<PathBuf>,
    /// Stop with an error after this many seconds in all.
    #[arg(long, default_value_t = 600)]
    max_secs: u64,
}

/// Client connections to Weir (h2c); each carries at most this many of the burst's
/// streams, under Weir's limit of 256 per connection.
const STREAMS_PER_CLIENT_CONNECTION: usize = 128;

/// One request's bound.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Http1,
    Http2,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Http1 => "http1",
            Mode::Http2 => "http2",
        }
    }
}

struct RunResult {
    mode: Mode,
    burst_ms: f64,
    burst_p50: f64,
    burst_p99: f64,
    seq_ms: f64,
    seq_p50: f64,
    seq_p99: f64,
    rss_mib: f64,
    origin_connections: usize,
}

/// Runs the benchmark and prints its results.
pub fn run(args: Args) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

async fn run_all(args: &Args) -> Result<(), String> {
    let binary = args.weir.clone().unwrap_or_else(default_binary);
    let dir = std::env::temp_dir().join(format!("weir-bench-dispatcher-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = run_in(args, &binary, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run_in(args: &Args, binary: &Path, dir: &Path) -> Result<(), String> {
    let origin = DelayOrigin::start(
        Duration::from_millis(args.delay_ms),
        args.tls.then_some(dir),
    )
    .await?;
    println!(
        "dispatcher: {} requests, origin delay {} ms, HTTP/1.1 pool {}, origin {} ({}), {} runs",
        args.requests,
        args.delay_ms,
        args.pool,
        origin.addr,
        if args.tls { "TLS" } else { "clear text" },
        args.runs
    );
    println!(
        "run mode   burst_ms burst_p50 burst_p99   seq_ms seq_p50 seq_p99 peak_rss_mib origin_conns"
    );
    let mut results = Vec::new();
    for run in 0..args.runs {
        let order = if run % 2 == 0 {
            [Mode::Http1, Mode::Http2]
        } else {
            [Mode::Http2, Mode::Http1]
        };
        for mode in order {
            let r = one_run(args, binary, dir, &origin, mode, run).await?;
            println!(
                "{:>3} {:<6} {:>8.1} {:>9.2} {:>9.2} {:>8.1} {:>7.2} {:>7.2} {:>12.1} {:>12}",
                run + 1,
                mode.name(),
                r.burst_ms,
                r.burst_p50,
                r.burst_p99,
                r.seq_ms,
                r.seq_p50,
                r.seq_p99,
                r.rss_mib,
                r.origin_connections
            );
            results.push(r);
        }
    }
    summarize(&results);
    Ok(())
}

fn summarize(results: &[RunResult]) {
    println!("\nmedians of {} runs:", results.len() / 2);
    println!("| mode | burst total (ms) | burst p50 (ms) | burst p99 (ms) | sequential total (ms) | sequential p50 (ms) | sequential p99 (ms) | peak RSS (MiB) | origin connections |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut medians = Vec::new();
    for mode in [Mode::Http1, Mode::Http2] {
        let of = |f: fn(&RunResult) -> f64| {
            let v: Vec<f64> = results.iter().filter(|r| r.mode == mode).map(f).collect();
            median(&v)
        };
        let m = [
            of(|r| r.burst_ms),
            of(|r| r.burst_p50),
            of(|r| r.burst_p99),
            of(|r| r.seq_ms),
            of(|r| r.seq_p50),
            of(|r| r.seq_p99),
            of(|r| r.rss_mib),
            of(|r| r.origin_connections as f64),
        ];
        println!(
            "| {} | {:.1} | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0} |",
            mode.name(),
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            m[6],
            m[7]
        );
        medians.push(m);
    }
    let speedup = medians[0][0] / medians[1][0];
    let slowdown = (medians[1][3] / medians[0][3] - 1.0) * 100.0;
    println!(
        "\nburst: http2 {speedup:.2}x faster than http1 (target: at least 2x) — {}",
        if speedup >= 2.0 { "met" } else { "NOT met" }
    );
    println!(
        "sequential: http2 {slowdown:+.2}% vs http1 (target: at most +5%) — {}",
        if slowdown <= 5.0 { "met" } else { "NOT met" }
    );
}

async fn one_run(
    args: &Args,
    binary: &Path,
    dir: &Path,
    origin: &DelayOrigin,
    mode: Mode,
    run: usize,
) -> Result<RunResult, String> {
    let scheme = if args.tls { "https" } else { "http" };
    let origin_url = format!("{scheme}://{}", origin.addr);
    let ca = if args.tls {
        format!("ca_file = {:?}\n", dir.join("ca.pem").display().to_string())
    } else {
        String::new()
    };
    let config = format!(
        "[server]\nworkers = {workers}\n\n[admin]\nlisten = \"off\"\n\n\
         [cache]\ndisk = \"off\"\n\n[log]\naccess = \"off\"\n\n\
         [timeouts]\norigin_response = \"60s\"\n\n\
         [upstream]\nmax_connections_per_origin = {pool}\nmax_idle_per_origin = {pool}\n\n\
         [[origin]]\nurl = \"{origin_url}\"\nprotocol = \"{mode}\"\n{ca}\n\
         [[listen]]\naddr = \"{{LISTEN}}\"\nmode = \"reverse\"\norigin = \"{origin_url}\"\n",
        workers = args.workers,
        pool = args.pool,
        mode = mode.name(),
    );
    let weir = WeirProcess::start(binary, dir, &config)?;
    let before = origin.connections();
    let authority = weir.addr.to_string();
    let conns = args.requests.div_ceil(STREAMS_PER_CLIENT_CONNECTION).max(1);
    let mut clients = Vec::with_capacity(conns);
    for _ in 0..conns {
        clients.push(h2c_client(weir.addr).await?);
    }
    let prefix = format!("/r{run}/{}", mode.name());
    // One request first: Weir has then connected to the origin once in both modes.
    fetch(
        &mut clients[0].clone(),
        &authority,
        &format!("{prefix}/warm"),
    )
    .await?;

    let mut latencies = Latencies::new();
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(args.requests);
    for i in 0..args.requests {
        let mut client = clients[i % conns].clone();
        let (authority, path) = (authority.clone(), format!("{prefix}/burst/{i}"));
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            fetch(&mut client, &authority, &path)
                .await
                .map(|_| t.elapsed())
        }));
    }
    for t in tasks {
        latencies.record(t.await.map_err(|e| e.to_string())??);
    }
    let burst = start.elapsed();
    let burst_latencies = latencies;

    let mut latencies = Latencies::new();
    let mut client = clients[0].clone();
    let start = Instant::now();
    for i in 0..args.requests {
        let t = Instant::now();
        fetch(&mut client, &authority, &format!("{prefix}/seq/{i}")).await?;
        latencies.record(t.elapsed());
    }
    let seq = start.elapsed();
    debug_assert_eq!(latencies.len(), args.requests as u64);
    let rss = weir.peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
    Ok(RunResult {
        mode,
        burst_ms: burst.as_secs_f64() * 1000.0,
        burst_p50: burst_latencies.quantile_ms(0.5),
        burst_p99: burst_latencies.quantile_ms(0.99),
        seq_ms: seq.as_secs_f64() * 1000.0,
        seq_p50: latencies.quantile_ms(0.5),
        seq_p99: latencies.quantile_ms(0.99),
        rss_mib: rss,
        origin_connections: origin.connections() - before,
    })
}

async fn h2c_client(addr: std::net::SocketAddr) -> Result<SendRequest<Empty<Bytes>>, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect to weir at {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .map_err(|e| format!("h2c handshake with weir: {e}"))?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One GET through Weir, its body read to the end; anything but a 200 is an error.
async fn fetch(
    client: &mut SendRequest<Empty<Bytes>>,
    authority: &str,
    path: &str,
) -> Result<(), String> {
    let req = http::Request::get(format!("http://{authority}{path}"))
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let resp = client
            .send_request(req)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        if status != http::StatusCode::OK {
            return Err(format!(
                "{path}: status {status}: {}",
                String::from_utf8_lossy(&body.to_bytes())
            ));
        }
        Ok(())
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{path}: no answer within {REQUEST_TIMEOUT:?}"))?
}
