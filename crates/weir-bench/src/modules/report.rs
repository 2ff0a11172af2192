//! The report of `weir-bench modules`: per phase, the background's hit and miss times
//! (from the polymix client's samples in the phase's time window) and the side load's
//! throughput; the median over the rounds of each kind of phase, with the background's
//! times relative to the phase without side load.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::side::{Kind, SideStats};
use crate::polymix::client::{Outcome, Sample};
use crate::polymix::report::from_cache;
use crate::stats::{median, Latencies};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseKind {
    Baseline,
    FixedRate,
    FullDemand,
}

impl PhaseKind {
    const ALL: [PhaseKind; 3] = [
        PhaseKind::Baseline,
        PhaseKind::FixedRate,
        PhaseKind::FullDemand,
    ];

    fn name(self) -> &'static str {
        match self {
            PhaseKind::Baseline => "background only",
            PhaseKind::FixedRate => "+ side load, fixed rate",
            PhaseKind::FullDemand => "+ side load, full demand",
        }
    }
}

/// One measured phase, as it ended.
pub struct PhaseRecord {
    pub round: usize,
    pub kind: PhaseKind,
    /// Seconds since the load started, and the phase's length.
    pub start: f64,
    pub secs: f64,
    pub side_sent: u64,
    pub side_ok: u64,
    pub side_adapted: u64,
    /// Per kind that ran: its name, answers and adapted answers.
    pub side_by_kind: Vec<(&'static str, u64, u64)>,
    pub side_errors: u64,
    pub side_first_error: Option<String>,
    pub side_p50_ms: f64,
    pub side_p99_ms: f64,
    pub side_origin_requests: u64,
    /// Weir's CPU seconds in the phase.
    pub cpu: Option<f64>,
}

impl PhaseRecord {
    pub fn new(
        round: usize,
        kind: PhaseKind,
        start: f64,
        secs: f64,
        stats: &SideStats,
        cpu: Option<f64>,
        side_origin_requests: u64,
    ) -> PhaseRecord {
        let lat = stats.latencies.lock().unwrap();
        let quantile = |q| {
            if lat.len() > 0 {
                lat.quantile_ms(q)
            } else {
                f64::NAN
            }
        };
        PhaseRecord {
            round,
            kind,
            start,
            secs,
            side_sent: stats.sent.load(Ordering::Relaxed),
            side_ok: stats.ok.load(Ordering::Relaxed),
            side_adapted: stats.adapted.load(Ordering::Relaxed),
            side_by_kind: Kind::ALL
                .iter()
                .map(|k| {
                    let (ok, adapted) = &stats.by_kind[k.index()];
                    (
                        k.name(),
                        ok.load(Ordering::Relaxed),
                        adapted.load(Ordering::Relaxed),
                    )
                })
                .filter(|(_, ok, _)| *ok > 0)
                .collect(),
            side_errors: stats.errors.load(Ordering::Relaxed),
            side_first_error: stats.first_error.lock().unwrap().clone(),
            side_p50_ms: quantile(0.5),
            side_p99_ms: quantile(0.99),
            side_origin_requests,
            cpu,
        }
    }

    pub fn one_line(&self) -> String {
        format!(
            "round {} {}: {:.0} s, side {} answered ({} adapted, {} errors), weir CPU {}",
            self.round,
            self.kind.name(),
            self.secs,
            self.side_ok,
            self.side_adapted,
            self.side_errors,
            self.cpu.map_or("?".into(), |c| format!("{c:.2} s")),
        )
    }
}

/// The background's numbers in one phase's time window.
struct Background {
    requests: u64,
    errors: u64,
    hit: Latencies,
    miss: Latencies,
}

fn background(samples: &[Sample], r: &PhaseRecord) -> Background {
    let mut b = Background {
        requests: 0,
        errors: 0,
        hit: Latencies::new(),
        miss: Latencies::new(),
    };
    for s in samples
        .iter()
        .filter(|s| s.at >= r.start && s.at < r.start + r.secs)
    {
        b.requests += 1;
        match s.outcome {
            Outcome::Error => b.errors += 1,
            // Hit time: served from the store at once; collapsed requests wait as misses.
            _ if s.outcome != Outcome::Collapsed && from_cache(s) => b.hit.record(s.latency),
            _ => b.miss.record(s.latency),
        }
    }
    b
}

/// What the run was.
pub struct Summary {
    pub modules: Vec<String>,
    pub rate: f64,
    pub side_rate: f64,
    pub side_connections: usize,
    pub fill_secs: f64,
    pub phase_secs: f64,
    pub status: String,
}

/// The numbers of one phase as a flat row (for the medians and the JSON).
fn row(r: &PhaseRecord, samples: &[Sample]) -> Value {
    let b = background(samples, r);
    let q = |l: &Latencies, q| {
        if l.len() > 0 {
            l.quantile_ms(q)
        } else {
            f64::NAN
        }
    };
    let answered = (b.requests - b.errors + r.side_ok) as f64;
    json!({
        "round": r.round,
        "phase": r.kind.name(),
        "start_secs": r.start,
        "secs": r.secs,
        "background_requests": b.requests,
        "background_errors": b.errors,
        "background_hits": b.hit.len(),
        "hit_p50_ms": q(&b.hit, 0.5),
        "hit_p99_ms": q(&b.hit, 0.99),
        "miss_p50_ms": q(&b.miss, 0.5),
        "miss_p99_ms": q(&b.miss, 0.99),
        "side_sent": r.side_sent,
        "side_answered_per_sec": r.side_ok as f64 / r.secs,
        "side_adapted_per_sec": r.side_adapted as f64 / r.secs,
        "side_by_kind": r.side_by_kind.iter().map(|(k, ok, adapted)| {
            json!({"kind": k, "answered": ok, "adapted": adapted})
        }).collect::<Vec<_>>(),
        "side_errors": r.side_errors,
        "side_first_error": r.side_first_error,
        "side_p50_ms": r.side_p50_ms,
        "side_p99_ms": r.side_p99_ms,
        "side_origin_requests": r.side_origin_requests,
        "weir_cpu_secs": r.cpu,
        "weir_cores_busy": r.cpu.map(|c| c / r.secs),
        "requests_per_cpu_second": r.cpu.filter(|c| *c > 0.0).map(|c| answered / c),
    })
}

/// Writes report.md and report.json into `out` and prints the Markdown.
pub fn write(
    summary: &Summary,
    records: &[PhaseRecord],
    samples: &[Sample],
    out: &Path,
) -> Result<(), String> {
    let rows: Vec<Value> = records.iter().map(|r| row(r, samples)).collect();
    let med = |kind: PhaseKind, key: &str| -> f64 {
        let v: Vec<f64> = rows
            .iter()
            .zip(records)
            .filter(|(_, r)| r.kind == kind)
            .filter_map(|(row, _)| row[key].as_f64())
            .filter(|x| x.is_finite())
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            median(&v)
        }
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# weir-bench modules\n\nWeir with {}; background {} req/s (PolyMix-style, 16 \
         servers); side load {} req/s in the fixed-rate phase, {} clients at full demand; \
         fill {} s, phases of {} s. Status: {}.\n",
        summary.modules.join(", "),
        summary.rate,
        summary.side_rate,
        summary.side_connections,
        summary.fill_secs,
        summary.phase_secs,
        summary.status
    );
    let rounds = records.iter().map(|r| r.round).max().unwrap_or(0);
    let _ = writeln!(
        md,
        "Medians over {rounds} round(s). Background times in ms; \"vs base\" compares with \
         the phase without side load.\n"
    );
    let _ = writeln!(
        md,
        "| phase | bg hit p50 | vs base | bg hit p99 | vs base | bg miss p50 | bg miss p99 | \
         bg errors | side answered/s | adapted/s | side p50 | side errors | Weir cores busy | \
         req/CPU-s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let base_p50 = med(PhaseKind::Baseline, "hit_p50_ms");
    let base_p99 = med(PhaseKind::Baseline, "hit_p99_ms");
    let vs = |x: f64, base: f64| {
        if x.is_finite() && base.is_finite() && base > 0.0 {
            format!("{:+.1}%", (x / base - 1.0) * 100.0)
        } else {
            String::new()
        }
    };
    for kind in PhaseKind::ALL {
        if !records.iter().any(|r| r.kind == kind) {
            continue;
        }
        let m = |k: &str| med(kind, k);
        let side_p50 = m("side_p50_ms");
        let side_p50 = if side_p50.is_finite() {
            format!("{side_p50:.2}")
        } else {
            "–".into()
        };
        let _ = writeln!(
            md,
            "| {} | {:.2} | {} | {:.2} | {} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {} | \
             {:.0} | {:.2} | {:.0} |",
            kind.name(),
            m("hit_p50_ms"),
            if kind == PhaseKind::Baseline {
                String::new()
            } else {
                vs(m("hit_p50_ms"), base_p50)
            },
            m("hit_p99_ms"),
            if kind == PhaseKind::Baseline {
                String::new()
            } else {
                vs(m("hit_p99_ms"), base_p99)
            },
            m("miss_p50_ms"),
            m("miss_p99_ms"),
            m("background_errors"),
            m("side_answered_per_sec"),
            m("side_adapted_per_sec"),
            side_p50,
            m("side_errors"),
            m("weir_cores_busy"),
            m("requests_per_cpu_second"),
        );
    }
    for r in records.iter().filter(|r| !r.side_by_kind.is_empty()) {
        let kinds: Vec<String> = r
            .side_by_kind
            .iter()
            .map(|(k, ok, adapted)| format!("{k} {ok} answered, {adapted} adapted"))
            .collect();
        let _ = writeln!(
            md,
            "\nRound {} {}: {}.",
            r.round,
            r.kind.name(),
            kinds.join("; ")
        );
    }
    for r in records.iter().filter(|r| r.side_first_error.is_some()) {
        let _ = writeln!(
            md,
            "\nRound {} {}: {} side errors, the first: {}",
            r.round,
            r.kind.name(),
            r.side_errors,
            r.side_first_error.as_deref().unwrap_or_default()
        );
    }
    let json = json!({
        "modules": summary.modules,
        "rate": summary.rate,
        "side_rate": summary.side_rate,
        "side_connections": summary.side_connections,
        "fill_secs": summary.fill_secs,
        "phase_secs": summary.phase_secs,
        "status": summary.status,
        "phases": rows,
    });
    let write = |file: &str, text: &str| {
        let p = out.join(file);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    write("report.md", &md)?;
    write(
        "report.json",
        &serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
    )?;
    println!("{md}");
    println!("(report.md and report.json in {})", out.display());
    Ok(())
}
