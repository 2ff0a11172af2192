//! `weir-bench polymix`: a PolyMix-style workload (Web Polygraph's PolyMix-4, scaled
//! down to a short run on one machine) through a forward proxy, or a reverse proxy
//! that routes each virtual server's host name to its port (`--reverse`).
//!
//! The origin simulator serves many virtual servers on loopback; the client offers an
//! open-loop load (fill phase, then plateau) through the proxy; the report sets the
//! proxy's own account (`Cache-Status`) against the origin's counters and gives hit
//! ratios, response times of hits and misses, and requests per CPU-second of the
//! proxy. Everything is bounded by a global deadline; Ctrl-C, an unreachable proxy
//! or one that answers garbage end the run early with a partial report.

pub(crate) mod client;
pub(crate) mod model;
pub(crate) mod origin;
pub(crate) mod report;
mod svg;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::cpu::CpuMeter;
use crate::weir::{default_binary, WeirProcess};
use client::{Live, Plan};
use model::Model;
use origin::{Counts, Origin};
use report::RunInfo;

/// Options of `weir-bench polymix`.
#[derive(clap::Args)]
pub struct Args {
    /// The proxy to measure, host:port on loopback (e.g. 127.0.0.1:3128): a forward
    /// proxy, or with --reverse a reverse proxy.
    #[arg(long, conflicts_with = "weir", required_unless_present = "weir")]
    proxy: Option<SocketAddr>,
    /// More proxies beside --proxy (repeat): the client's connections are spread over
    /// all of them in turn, e.g. the nodes of a Weir cluster.
    #[arg(long, requires = "proxy")]
    also_proxy: Vec<SocketAddr>,
    /// Process ids of the proxy given by --proxy (repeat for several processes), for
    /// its CPU time; without them, requests per CPU-second are not reported.
    #[arg(long)]
    proxy_pid: Vec<u32>,
    /// Start Weir itself (the `weir` binary next to this one, or --weir-binary) as a
    /// forward proxy with a memory cache, and measure it.
    #[arg(long)]
    weir: bool,
    /// The `weir` binary for --weir.
    #[arg(long)]
    weir_binary: Option<PathBuf>,
    /// Weir's memory cache for --weir.
    #[arg(long, default_value = "256MiB")]
    cache_memory: String,
    /// Weir's worker threads for --weir (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Requests per second offered (Poisson arrivals), whatever the answers' speed.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds of the fill phase (reported apart: the cache starts empty).
    #[arg(long, default_value_t = 30.0)]
    fill_secs: f64,
    /// Seconds of the plateau, the phase the headline numbers come from.
    #[arg(long, default_value_t = 90.0)]
    plateau_secs: f64,
    /// Virtual origin servers, one loopback listener each.
    #[arg(long, default_value_t = 16)]
    servers: usize,
    /// Client connections to the proxy at most (one request in flight on each).
    #[arg(long, default_value_t = 512)]
    connections: usize,
    /// Scale of the origin's delays: PolyMix's norm(2.5 s, 1 s) times this.
    #[arg(long, default_value_t = 0.02)]
    delay_scale: f64,
    /// Seed of the content and the request stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Reverse mode: send origin-form requests (`GET /path`) whose Host header names
    /// the virtual server (`s0.polymix.test`, `s1.polymix.test`, ...), for a reverse
    /// proxy that routes each host to its backend (see --origin-base-port). With
    /// --weir, Weir gets a reverse listener with one route per server.
    #[arg(long)]
    reverse: bool,
    /// Listen with virtual server N on 127.0.0.1:(this port + N), so that a reverse
    /// proxy's configuration can name its backends (default: ephemeral ports).
    #[arg(long)]
    origin_base_port: Option<u16>,
    /// One request's bound, in seconds.
    #[arg(long, default_value_t = 10.0)]
    request_timeout_secs: f64,
    /// Where to write report.md, report.json and polymix.svg
    /// (default: bench/out/polymix-<Unix time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Stop everything after this many seconds (default: the phases plus 30 s).
    #[arg(long)]
    max_secs: Option<f64>,
}

/// Runs the workload and writes the report; an early stop is an error, after the
/// partial report is written.
pub fn run(args: Args) -> Result<(), String> {
    if !(args.rate > 0.0 && args.fill_secs >= 0.0 && args.plateau_secs > 0.0) {
        return Err("--rate and --plateau-secs must be positive".into());
    }
    // The origins listen on 127.0.0.1 only, and no benchmark traffic leaves the machine.
    if let Some(p) = args
        .proxy
        .iter()
        .chain(&args.also_proxy)
        .find(|p| !p.ip().is_loopback())
    {
        return Err(format!(
            "--proxy {p}: give a loopback address (127.0.0.1:PORT)"
        ));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("bench/out/polymix-{secs}"))
    });
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    // Weir runs in `out`: relative paths would no longer point where they were given.
    let out = std::fs::canonicalize(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // Catch SIGINT and SIGTERM from here on, before Weir is started: dying of one while
    // it starts would leave the child running.
    let signals = {
        let _enter = runtime.enter();
        let catch = |k| signal(k).map_err(|e| format!("signal handler: {e}"));
        (
            catch(SignalKind::interrupt())?,
            catch(SignalKind::terminate())?,
        )
    };
    let ports = args
        .origin_base_port
        .map(|base| origin::origin_ports(base, args.servers))
        .transpose()?;
    let model = Model::new(args.seed, args.servers);
    // The origin starts first: Weir's reverse routes name its ports.
    let origin = runtime.block_on(Origin::start(
        model.clone(),
        args.delay_scale,
        ports.as_deref(),
    ))?;
    // Weir is a child process: started here, killed when `weir` drops at the end.
    let weir = if args.weir {
        let binary = args.weir_binary.clone().unwrap_or_else(default_binary);
        let binary = std::fs::canonicalize(&binary)
            .map_err(|e| format!("the weir binary {}: {e}", binary.display()))?;
        let config = weir_config(&args, &origin.addrs);
        Some(WeirProcess::start(&binary, &out, &config)?)
    } else {
        None
    };
    let (proxy, pids, name) = match (&weir, args.proxy) {
        (Some(w), _) => (w.addr, vec![w.pid()], format!("weir (started, {})", w.addr)),
        (None, Some(p)) => {
            let mut name = p.to_string();
            for also in &args.also_proxy {
                name.push_str(&format!(" + {also}"));
            }
            (p, args.proxy_pid.clone(), name)
        }
        (None, None) => return Err("give --proxy ADDR or --weir".into()),
    };
    let name = if args.reverse {
        format!("{name}, reverse")
    } else {
        name
    };
    let result = runtime.block_on(run_load(
        &args, model, origin, proxy, &pids, name, &out, signals,
    ));
    drop(weir);
    // Tasks still blocked on a dead proxy must not hold the process.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Weir's configuration for --weir: a memory cache only, no access log, and a forward
/// listener, or with --reverse a reverse listener routing each virtual host to its
/// server.
fn weir_config(args: &Args, origins: &[SocketAddr]) -> String {
    let mut config = format!(
        "[server]\nworkers = {}\n\n[admin]\nlisten = \"off\"\n\n\
         [cache]\nmemory = \"{}\"\ndisk = \"off\"\n\n[log]\naccess = \"off\"\n\n\
         [[listen]]\naddr = \"{{LISTEN}}\"\n",
        args.workers, args.cache_memory
    );
    if !args.reverse {
        config.push_str("mode = \"forward\"\n");
        return config;
    }
    // Requests for a host no route names go to server 0, which answers 404 for
    // objects it does not have: they show up as errors, not as wrong hits.
    config.push_str(&format!(
        "mode = \"reverse\"\norigin = \"http://{}\"\n",
        origins[0]
    ));
    for (server, addr) in origins.iter().enumerate() {
        config.push_str(&format!(
            "\n[[listen.route]]\nhost = \"{}\"\norigin = \"http://{addr}\"\n",
            client::virtual_host(server)
        ));
    }
    config
}

#[allow(clippy::too_many_arguments)]
async fn run_load(
    args: &Args,
    model: Model,
    origin: Origin,
    proxy: SocketAddr,
    pids: &[u32],
    name: String,
    out: &std::path::Path,
    (mut sigint, mut sigterm): (Signal, Signal),
) -> Result<(), String> {
    let plan = Plan {
        proxy,
        also: args.also_proxy.clone(),
        origins: origin.addrs.clone(),
        rate: args.rate,
        fill: Duration::from_secs_f64(args.fill_secs),
        plateau: Duration::from_secs_f64(args.plateau_secs),
        max_connections: args.connections.max(1),
        request_timeout: Duration::from_secs_f64(args.request_timeout_secs),
        reverse: args.reverse,
    };
    let total = args.fill_secs + args.plateau_secs;
    let deadline = Duration::from_secs_f64(args.max_secs.unwrap_or(total + 30.0));
    let live = Arc::new(Live::default());
    let stop_reason: Arc<Mutex<Option<String>>> = Arc::default();
    let stop = |why: String| {
        let mut r = stop_reason.lock().unwrap();
        if r.is_none() {
            *r = Some(why);
        }
        live.request_stop();
    };

    // Only whether it connects: the connection is closed at once, as a proxy that
    // serves one connection at a time would otherwise wait on it for the whole run.
    let reachable = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(proxy),
    )
    .await
    .map(|r| r.map(drop));
    let cpu = CpuMeter::new(pids);
    let cpu0 = cpu.read();
    let start = Instant::now();
    let mut fill_snapshot: Option<([Counts; 4], Option<f64>)> = None;
    match reachable {
        Ok(Ok(_)) => {
            eprintln!(
                "polymix: {name}, {} req/s, fill {} s + plateau {} s, {} servers, report in {}",
                args.rate,
                args.fill_secs,
                args.plateau_secs,
                args.servers,
                out.display()
            );
            let load = tokio::spawn({
                let (model, plan, live) = (model.clone(), plan.clone(), live.clone());
                async move { client::run(&model, &plan, live, start).await }
            });
            tokio::pin!(load);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let tty = std::io::stderr().is_terminal();
            let mut stopped_at = None;
            loop {
                tokio::select! {
                    _ = &mut load => break,
                    _ = sigint.recv() => stop("interrupted (Ctrl-C)".into()),
                    _ = sigterm.recv() => stop("interrupted (SIGTERM)".into()),
                    _ = tick.tick() => {
                        let t = start.elapsed().as_secs_f64();
                        let cpu_now = cpu.read();
                        if fill_snapshot.is_none() && t >= args.fill_secs {
                            fill_snapshot = Some((origin.counts(), cpu_now));
                        }
                        progress(&live, t, args.fill_secs, total, tty);
                        if let Some(why) = hopeless(&live, t) {
                            stop(why);
                        }
                        if t > deadline.as_secs_f64() {
                            stop(format!("global deadline of {:.0} s reached", deadline.as_secs_f64()));
                        }
                        // After a stop, the client drains for at most one request timeout;
                        // this is the backstop should it not.
                        if live.stop.load(Ordering::SeqCst) {
                            let since = *stopped_at.get_or_insert(t);
                            if t > since + args.request_timeout_secs + 2.0 {
                                load.abort();
                                break;
                            }
                        }
                    }
                }
            }
            if tty {
                eprintln!();
            }
        }
        Ok(Err(e)) => stop(format!("cannot connect to the proxy at {proxy}: {e}")),
        Err(_) => stop(format!(
            "cannot connect to the proxy at {proxy}: no answer within 3 s"
        )),
    }
    let wall = start.elapsed().as_secs_f64();
    let end_counts = origin.counts();
    let end_cpu = cpu.read();
    let (fill_counts, fill_cpu) = fill_snapshot.unwrap_or((end_counts, end_cpu));
    let plateau_counts: [Counts; 4] = std::array::from_fn(|i| end_counts[i].minus(&fill_counts[i]));
    let samples = std::mem::take(&mut *live.samples.lock().unwrap());
    let mut errors: Vec<(String, u64)> = live
        .error_kinds
        .lock()
        .unwrap()
        .clone()
        .into_iter()
        .collect();
    errors.sort_by_key(|e| std::cmp::Reverse(e.1));
    let status = stop_reason.lock().unwrap().clone();
    let info = RunInfo {
        proxy: name,
        seed: args.seed,
        rate: args.rate,
        fill_secs: args.fill_secs,
        plateau_secs: args.plateau_secs,
        servers: args.servers,
        max_connections: plan.max_connections,
        delay_scale: args.delay_scale,
        status: status.clone().unwrap_or_else(|| "complete".into()),
        wall_secs: wall,
        connections: live.connections.load(Ordering::Relaxed),
        cpu_fill: cpu0.zip(fill_cpu).map(|(a, b)| b - a),
        cpu_plateau: fill_cpu.zip(end_cpu).map(|(a, b)| b - a),
        origin_fill: fill_counts,
        origin_plateau: plateau_counts,
        origin_unknown: origin.unknown(),
        ideal: model::simulate_ideal(&model, samples.len()),
        errors,
    };
    write_report(&info, &samples, out)?;
    match status {
        None => Ok(()),
        Some(why) => Err(format!("{why}; partial report in {}", out.display())),
    }
}

fn write_report(
    info: &RunInfo,
    samples: &[client::Sample],
    out: &std::path::Path,
) -> Result<(), String> {
    let phases = report::phases(info, samples);
    let width = ((info.fill_secs + info.plateau_secs) / 300.0)
        .ceil()
        .max(1.0);
    let buckets = report::series(samples, width);
    let md = report::markdown(info, &phases, samples);
    let json = report::to_json(info, &phases, &buckets);
    let title = format!("weir-bench polymix: {}, {:.0} req/s", info.proxy, info.rate);
    let chart = svg::chart(&buckets, width, info.fill_secs, info.ideal.0, &title);
    let write = |file: &str, text: &str| {
        let p = out.join(file);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    write("report.md", &md)?;
    write(
        "report.json",
        &serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
    )?;
    write("polymix.svg", &chart)?;
    println!("{md}");
    println!(
        "(report.md, report.json and polymix.svg in {})",
        out.display()
    );
    Ok(())
}

/// A proxy that has answered nothing after a few seconds and many tries will not: stop
/// instead of running the whole plan into timeouts.
fn hopeless(live: &Live, t: f64) -> Option<String> {
    let ok = live.ok.load(Ordering::Relaxed);
    let errors = live.errors.load(Ordering::Relaxed);
    if t < 3.0 || ok > 0 || errors < 10 {
        return None;
    }
    let first = live
        .error_kinds
        .lock()
        .unwrap()
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, _)| k.clone())
        .unwrap_or_default();
    Some(format!(
        "the proxy answered none of {errors} requests correctly (most often: {first})"
    ))
}

fn progress(live: &Live, t: f64, fill: f64, total: f64, tty: bool) {
    let done = live.done.load(Ordering::Relaxed);
    let ok = live.ok.load(Ordering::Relaxed);
    let line = format!(
        "[{} {:>5.0}/{:.0} s] sent {} done {} hits {:.1}% errors {} in flight {} connections {}",
        if t < fill { "fill   " } else { "plateau" },
        t,
        total,
        live.sent.load(Ordering::Relaxed),
        done,
        100.0 * live.hits.load(Ordering::Relaxed) as f64 / ok.max(1) as f64,
        live.errors.load(Ordering::Relaxed),
        live.sent.load(Ordering::Relaxed) - done,
        live.connections.load(Ordering::Relaxed),
    );
    if tty {
        eprint!("\r{line}   ");
    } else if (t as u64).is_multiple_of(10) {
        eprintln!("{line}");
    }
}
