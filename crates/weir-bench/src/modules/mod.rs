//! `weir-bench modules`: what content-adaptation modules cost the traffic around them.
//!
//! Weir runs as a forward proxy with the modules of the chosen side-load kinds
//! configured. A PolyMix-style background load (the `polymix` workload) runs through
//! it at a fixed rate the whole time. After a fill phase, each round has three phases
//! of equal length: background alone; plus a side load of content the modules adapt
//! at a fixed rate; plus the same side load at full demand. The report gives the
//! background's hit and miss times per phase, set against the phase without side
//! load, and the side load's throughput. Everything is bounded in time; Ctrl-C ends
//! the run early with a partial report.

mod content;
mod report;
mod side;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::signal::unix::{signal, SignalKind};

use crate::cpu::CpuMeter;
use crate::polymix::client::{self, Live, Plan};
use crate::polymix::model::Model;
use crate::polymix::origin::Origin;
use crate::weir::{default_binary, WeirProcess};
use report::{PhaseKind, PhaseRecord};
use side::{Kind, SideClient, SideStats};

/// Options of `weir-bench modules`.
#[derive(clap::Args)]
pub struct Args {
    /// The side-load kinds, comma-separated: adblock, compress, transcode. A kind whose
    /// module this `weir` does not have (or cannot build) is skipped with a message.
    #[arg(long, default_value = "adblock,compress")]
    side: String,
    /// Filter lists for `adblock` (EasyList syntax), repeated; without one, adblock
    /// is skipped.
    #[arg(long)]
    adblock_list: Vec<PathBuf>,
    /// A JPEG file that the side origin serves for `transcode`; without one,
    /// transcode is skipped.
    #[arg(long)]
    jpeg: Option<PathBuf>,
    /// Bytes of each compressible text for `compress`.
    #[arg(long, default_value_t = 8192)]
    text_size: usize,
    /// The `weir` binary (default: the one next to this executable).
    #[arg(long)]
    weir_binary: Option<PathBuf>,
    /// Background requests per second (PolyMix-style, Poisson arrivals).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Side requests per second in the fixed-rate phase (all kinds together).
    #[arg(long, default_value_t = 100.0)]
    side_rate: f64,
    /// Side-load clients in the full-demand phase (one request in flight each).
    #[arg(long, default_value_t = 8)]
    side_connections: usize,
    /// Seconds of the background's fill phase before the measured phases.
    #[arg(long, default_value_t = 20.0)]
    fill_secs: f64,
    /// Seconds of each measured phase.
    #[arg(long, default_value_t = 20.0)]
    phase_secs: f64,
    /// Rounds of the three phases; the report gives the median per phase.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Seed of the background's content and requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write report.md and report.json (default: bench/out/modules-<Unix time>).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs the scenario and writes the report; an early stop is an error, after the
/// partial report is written.
pub fn run(args: Args) -> Result<(), String> {
    let kinds = side::parse_kinds(&args.side)?;
    if !(args.rate > 0.0 && args.side_rate > 0.0 && args.phase_secs > 0.0 && args.rounds > 0) {
        return Err("--rate, --side-rate, --phase-secs and --rounds must be positive".into());
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("bench/out/modules-{secs}"))
    });
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let out = std::fs::canonicalize(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let binary = args.weir_binary.clone().unwrap_or_else(default_binary);
    let binary = std::fs::canonicalize(&binary)
        .map_err(|e| format!("the weir binary {}: {e}", binary.display()))?;

    let jpeg = match &args.jpeg {
        Some(p) => Some(Bytes::from(
            std::fs::read(p).map_err(|e| format!("--jpeg {}: {e}", p.display()))?,
        )),
        None => None,
    };
    let mut sections = Vec::new();
    let mut active = Vec::new();
    for kind in kinds {
        match module_section(kind, &args) {
            Err(why) => eprintln!("modules: skipping {}: {why}", kind.name()),
            Ok(section) => match check_module(&binary, &out, kind, &section) {
                Err(why) => eprintln!("modules: skipping {}: {why}", kind.name()),
                Ok(()) => {
                    sections.push(section);
                    active.push(kind);
                }
            },
        }
    }
    if active.is_empty() {
        return Err("no side-load kind can run (see the messages above)".into());
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (mut sigint, mut sigterm) = {
        let _enter = runtime.enter();
        let catch = |k| signal(k).map_err(|e| format!("signal handler: {e}"));
        (
            catch(SignalKind::interrupt())?,
            catch(SignalKind::terminate())?,
        )
    };
    let model = Model::new(args.seed, 16);
    let origin = runtime.block_on(Origin::start(model.clone(), 0.02, None))?;
    let side_origin = runtime.block_on(content::start_origin(args.text_size, jpeg.clone()))?;
    let config = format!(
        "[admin]\nlisten = \"off\"\n\n[cache]\nmemory = \"256MiB\"\nmax_object = \"4MiB\"\n\
         disk = \"off\"\n\n[log]\naccess = \"off\"\n\n\
         [[listen]]\naddr = \"{{LISTEN}}\"\nmode = \"forward\"\n\n{}",
        sections.join("\n")
    );
    let weir = WeirProcess::start(&binary, &out, &config)?;
    let names: Vec<&str> = active.iter().map(|k| k.name()).collect();
    eprintln!(
        "modules: weir with {}; background {} req/s; side load {} req/s, then {} clients; \
         fill {} s, {} round(s) of 3 x {} s; report in {}",
        names.join(", "),
        args.rate,
        args.side_rate,
        args.side_connections,
        args.fill_secs,
        args.rounds,
        args.phase_secs,
        out.display()
    );

    let measured = args.rounds as f64 * 3.0 * args.phase_secs;
    let plan = Plan {
        proxy: weir.addr,
        also: Vec::new(),
        origins: origin.addrs.clone(),
        rate: args.rate,
        fill: Duration::from_secs_f64(args.fill_secs),
        plateau: Duration::from_secs_f64(measured),
        max_connections: 512,
        request_timeout: Duration::from_secs(10),
        reverse: false,
    };
    let live = Arc::new(Live::default());
    let side_client = Arc::new(SideClient::new(
        weir.addr,
        side_origin.addr,
        active.clone(),
        jpeg.as_ref().map_or(0, Bytes::len),
    ));
    let cpu = CpuMeter::new(&[weir.pid()]);
    let start = Instant::now();
    let deadline = Duration::from_secs_f64(args.fill_secs + measured + 30.0);

    let (records, status) = runtime.block_on(async {
        let background = tokio::spawn({
            let (model, plan, live) = (model.clone(), plan.clone(), live.clone());
            async move { client::run(&model, &plan, live, start).await }
        });
        let phases = run_phases(&args, &side_client, &cpu, &side_origin, start);
        tokio::pin!(phases);
        let stop = |why: &str| {
            side_client
                .stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
            live.request_stop();
            Some(why.to_string())
        };
        let mut status = None;
        let records = loop {
            tokio::select! {
                records = &mut phases => break records,
                _ = sigint.recv() => status = status.or_else(|| stop("interrupted (Ctrl-C)")),
                _ = sigterm.recv() => status = status.or_else(|| stop("interrupted (SIGTERM)")),
                _ = tokio::time::sleep_until((start + deadline).into()) => {
                    status = status.or_else(|| stop("global deadline reached"));
                }
            }
        };
        // The background's last requests (and its drain) end within one request timeout.
        live.request_stop();
        let _ = tokio::time::timeout(Duration::from_secs(12), background).await;
        (records, status)
    });
    drop(weir);
    runtime.shutdown_timeout(Duration::from_secs(1));

    let samples = std::mem::take(&mut *live.samples.lock().unwrap());
    let summary = report::Summary {
        modules: names.iter().map(|s| s.to_string()).collect(),
        rate: args.rate,
        side_rate: args.side_rate,
        side_connections: args.side_connections,
        fill_secs: args.fill_secs,
        phase_secs: args.phase_secs,
        status: status.clone().unwrap_or_else(|| "complete".into()),
    };
    report::write(&summary, &records, &samples, &out)?;
    match status {
        None => Ok(()),
        Some(why) => Err(format!("{why}; partial report in {}", out.display())),
    }
}

/// The measured phases after the fill: per round, background alone, with the side
/// load at a fixed rate, then at full demand. Stops early when asked to.
async fn run_phases(
    args: &Args,
    side_client: &Arc<SideClient>,
    cpu: &CpuMeter,
    side_origin: &content::SideOrigin,
    start: Instant,
) -> Vec<PhaseRecord> {
    let phase = Duration::from_secs_f64(args.phase_secs);
    let mut at = start + Duration::from_secs_f64(args.fill_secs);
    tokio::time::sleep_until(at.into()).await;
    let mut records = Vec::new();
    for round in 1..=args.rounds {
        for kind in [
            PhaseKind::Baseline,
            PhaseKind::FixedRate,
            PhaseKind::FullDemand,
        ] {
            if side_client.stop.load(std::sync::atomic::Ordering::Relaxed) {
                return records;
            }
            let end = at + phase;
            let stats = Arc::new(SideStats::default());
            let cpu0 = cpu.read();
            let origin0 = side_origin
                .requests
                .load(std::sync::atomic::Ordering::Relaxed);
            match kind {
                PhaseKind::Baseline => tokio::time::sleep_until(end.into()).await,
                PhaseKind::FixedRate => side_client.fixed_rate(args.side_rate, end, &stats).await,
                PhaseKind::FullDemand => {
                    side_client
                        .full_demand(args.side_connections, end, &stats)
                        .await
                }
            }
            tokio::time::sleep_until(end.into()).await;
            let secs = (Instant::now() - at).as_secs_f64();
            records.push(PhaseRecord::new(
                round,
                kind,
                (at - start).as_secs_f64(),
                secs,
                &stats,
                cpu0.zip(cpu.read()).map(|(a, b)| b - a),
                side_origin
                    .requests
                    .load(std::sync::atomic::Ordering::Relaxed)
                    - origin0,
            ));
            eprintln!("modules: {}", records.last().unwrap().one_line());
            at = Instant::now();
        }
    }
    records
}

/// The `[[module]]` section of a kind, or why it cannot run.
fn module_section(kind: Kind, args: &Args) -> Result<String, String> {
    match kind {
        Kind::Adblock if args.adblock_list.is_empty() => {
            Err("no filter list (give --adblock-list, e.g. EasyList)".into())
        }
        Kind::Adblock => {
            let lists: Vec<String> = args
                .adblock_list
                .iter()
                .map(|p| {
                    std::fs::canonicalize(p)
                        .map(|p| format!("{:?}", p.display().to_string()))
                        .map_err(|e| format!("--adblock-list {}: {e}", p.display()))
                })
                .collect::<Result<_, _>>()?;
            Ok(format!(
                "[[module]]\nname = \"adblock\"\nlists = [{}]\n",
                lists.join(", ")
            ))
        }
        Kind::Compress => Ok("[[module]]\nname = \"compress\"\n".into()),
        Kind::Transcode if args.jpeg.is_none() => {
            Err("no image to transcode (give --jpeg FILE)".into())
        }
        Kind::Transcode => Ok("[[module]]\nname = \"transcode\"\n".into()),
    }
}

/// Whether this `weir` loads the module: `weir check` on a configuration with it alone.
fn check_module(binary: &Path, dir: &Path, kind: Kind, section: &str) -> Result<(), String> {
    let path = dir.join(format!("check-{}.toml", kind.name()));
    std::fs::write(&path, format!("[admin]\nlisten = \"off\"\n\n{section}"))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let out = std::process::Command::new(binary)
        .arg("check")
        .arg("--config")
        .arg(&path)
        .env("WEIR_LOG", "error")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let _ = std::fs::remove_file(&path);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "this weir does not load it: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
