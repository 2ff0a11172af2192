//! The numbers of a run, from the client's samples, the origin's counters and the
//! proxy's CPU time: a Markdown report, raw JSON, and the per-second series the chart
//! draws.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::client::{Outcome, Phase, Sample};
use super::model::{mix_mean_size, Class, Model};
use super::origin::{by_class, Counts};
use crate::stats::Latencies;

/// What the run was, and what was measured outside the client.
pub struct RunInfo {
    pub proxy: String,
    pub seed: u64,
    pub rate: f64,
    pub fill_secs: f64,
    pub plateau_secs: f64,
    pub servers: usize,
    pub max_connections: usize,
    pub delay_scale: f64,
    /// "complete", or why the run stopped early.
    pub status: String,
    pub wall_secs: f64,
    pub connections: u64,
    /// The proxy's CPU seconds in the fill phase and in the plateau (None: unknown pid).
    pub cpu_fill: Option<f64>,
    pub cpu_plateau: Option<f64>,
    pub origin_fill: [Counts; 4],
    pub origin_plateau: [Counts; 4],
    pub origin_unknown: u64,
    /// An infinite cache's hit ratio, by request and by byte, on the requests sent.
    pub ideal: (f64, f64),
    pub errors: Vec<(String, u64)>,
}

/// Whether the response came from the proxy's store: its own word when it gives one,
/// else the origin's serial number (seen before = a stored copy).
pub fn from_cache(s: &Sample) -> bool {
    match s.outcome {
        Outcome::Hit | Outcome::Collapsed => true,
        Outcome::Miss | Outcome::Validation | Outcome::Error => false,
        Outcome::Unlabelled => s.stored_copy,
    }
}

/// Whether it was served from the store at once: what "hit time" measures. A request
/// collapsed onto another's fetch saved the origin a request but waited as a miss does.
fn immediate_hit(s: &Sample) -> bool {
    s.outcome != Outcome::Collapsed && from_cache(s)
}

/// The numbers of one phase (or of the whole run).
pub struct PhaseStats {
    pub secs: f64,
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub outcomes: [u64; 6],
    pub bytes: u64,
    pub hit_bytes: u64,
    /// Answers from the store (collapsed ones included): the hit ratio's numerator.
    pub from_cache: u64,
    pub stored_copies: u64,
    pub all: Latencies,
    pub hits: Latencies,
    pub misses: Latencies,
    pub origin: Counts,
    pub cpu: Option<f64>,
}

impl PhaseStats {
    pub fn of(secs: f64, samples: &[&Sample], origin: Counts, cpu: Option<f64>) -> PhaseStats {
        let mut p = PhaseStats {
            secs,
            sent: samples.len() as u64,
            ok: 0,
            errors: 0,
            outcomes: [0; 6],
            bytes: 0,
            hit_bytes: 0,
            from_cache: 0,
            stored_copies: 0,
            all: Latencies::new(),
            hits: Latencies::new(),
            misses: Latencies::new(),
            origin,
            cpu,
        };
        for s in samples {
            let i = Outcome::ALL
                .iter()
                .position(|o| *o == s.outcome)
                .unwrap_or(5);
            p.outcomes[i] += 1;
            if s.outcome == Outcome::Error {
                p.errors += 1;
                continue;
            }
            p.ok += 1;
            p.bytes += s.bytes;
            p.stored_copies += u64::from(s.stored_copy);
            p.all.record(s.latency);
            if from_cache(s) {
                p.hit_bytes += s.bytes;
                p.from_cache += 1;
            }
            if immediate_hit(s) {
                p.hits.record(s.latency);
            } else {
                p.misses.record(s.latency);
            }
        }
        p
    }

    pub fn count(&self, o: Outcome) -> u64 {
        self.outcomes[Outcome::ALL.iter().position(|x| *x == o).unwrap_or(5)]
    }

    pub fn hit_ratio(&self) -> f64 {
        ratio(self.from_cache, self.ok)
    }

    pub fn byte_hit_ratio(&self) -> f64 {
        ratio(self.hit_bytes, self.bytes)
    }

    /// The origin's view: answers the client got whose body the origin did not send
    /// (hits, and validations the origin answered with 304).
    pub fn origin_hit_ratio(&self) -> f64 {
        1.0 - ratio(self.origin.ok, self.ok)
    }

    pub fn origin_byte_hit_ratio(&self) -> f64 {
        1.0 - ratio(self.origin.body_bytes, self.bytes)
    }

    pub fn throughput(&self) -> f64 {
        ratio(self.ok, 1) / self.secs.max(1e-9)
    }

    pub fn per_cpu_second(&self) -> Option<f64> {
        self.cpu.filter(|c| *c > 0.0).map(|c| self.ok as f64 / c)
    }

    fn json(&self) -> Value {
        let lat = |l: &Latencies| {
            json!({"count": l.len(), "mean_ms": l.mean_ms(), "p50_ms": l.quantile_ms(0.5),
                   "p90_ms": l.quantile_ms(0.9), "p99_ms": l.quantile_ms(0.99)})
        };
        let outcomes: serde_json::Map<String, Value> = Outcome::ALL
            .iter()
            .map(|o| (o.name().to_string(), json!(self.count(*o))))
            .collect();
        json!({
            "secs": self.secs, "sent": self.sent, "ok": self.ok, "errors": self.errors,
            "outcomes": outcomes, "bytes": self.bytes, "hit_bytes": self.hit_bytes,
            "stored_copies_by_serial": self.stored_copies,
            "hit_ratio": self.hit_ratio(), "byte_hit_ratio": self.byte_hit_ratio(),
            "origin": counts_json(&self.origin),
            "not_from_origin_ratio": self.origin_hit_ratio(),
            "not_from_origin_byte_ratio": self.origin_byte_hit_ratio(),
            "throughput_per_s": self.throughput(),
            "proxy_cpu_secs": self.cpu, "requests_per_cpu_second": self.per_cpu_second(),
            "latency": {"all": lat(&self.all), "hits": lat(&self.hits), "misses": lat(&self.misses)},
        })
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn counts_json(c: &Counts) -> Value {
    json!({"requests": c.requests, "ok": c.ok, "not_modified": c.not_modified, "body_bytes": c.body_bytes})
}

fn sum(counts: &[Counts; 4]) -> Counts {
    let mut t = Counts::default();
    counts.iter().for_each(|c| t.add(c));
    t
}

/// Per-second buckets (by scheduled time): requests, from cache, errors, and mean
/// response times of all answers, hits and misses, in ms.
pub struct Bucket {
    pub t: f64,
    pub requests: u64,
    pub hits: u64,
    pub errors: u64,
    pub mean_ms: f64,
    pub hit_ms: f64,
    pub miss_ms: f64,
}

pub fn series(samples: &[Sample], width: f64) -> Vec<Bucket> {
    let end = samples.iter().map(|s| s.at).fold(0.0, f64::max);
    let n = (end / width).floor() as usize + 1;
    // requests, from cache, errors, sums of ms (all, hits, others), immediate hits
    let mut acc = vec![(0u64, 0u64, 0u64, 0.0, 0.0, 0.0, 0u64); n];
    for s in samples {
        let b = &mut acc[((s.at / width) as usize).min(n - 1)];
        b.0 += 1;
        if s.outcome == Outcome::Error {
            b.2 += 1;
            continue;
        }
        let ms = s.latency.as_secs_f64() * 1000.0;
        b.3 += ms;
        b.1 += u64::from(from_cache(s));
        if immediate_hit(s) {
            b.4 += ms;
            b.6 += 1;
        } else {
            b.5 += ms;
        }
    }
    acc.into_iter()
        .enumerate()
        .map(|(i, (n, h, e, all, hit, miss, fast))| {
            let ok = n - e;
            Bucket {
                t: i as f64 * width,
                requests: n,
                hits: h,
                errors: e,
                mean_ms: if ok > 0 { all / ok as f64 } else { 0.0 },
                hit_ms: if fast > 0 { hit / fast as f64 } else { 0.0 },
                miss_ms: if ok > fast {
                    miss / (ok - fast) as f64
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// The phases' statistics: fill, plateau, whole run.
pub fn phases(info: &RunInfo, samples: &[Sample]) -> [PhaseStats; 3] {
    let of = |p: Option<Phase>| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| p.is_none_or(|p| s.phase == p))
            .collect()
    };
    let (fill_o, plat_o) = (sum(&info.origin_fill), sum(&info.origin_plateau));
    let mut whole_o = fill_o;
    whole_o.add(&plat_o);
    let whole_cpu = info.cpu_fill.zip(info.cpu_plateau).map(|(a, b)| a + b);
    let plateau_secs = (info.wall_secs - info.fill_secs).clamp(0.0, info.plateau_secs);
    [
        PhaseStats::of(
            info.fill_secs.min(info.wall_secs),
            &of(Some(Phase::Fill)),
            fill_o,
            info.cpu_fill,
        ),
        PhaseStats::of(
            plateau_secs,
            &of(Some(Phase::Plateau)),
            plat_o,
            info.cpu_plateau,
        ),
        PhaseStats::of(
            info.wall_secs.min(info.fill_secs + info.plateau_secs),
            &of(None),
            whole_o,
            whole_cpu,
        ),
    ]
}

pub fn to_json(info: &RunInfo, phases: &[PhaseStats; 3], buckets: &[Bucket]) -> Value {
    let mut origin = info.origin_fill;
    origin
        .iter_mut()
        .zip(&info.origin_plateau)
        .for_each(|(a, b)| a.add(b));
    let classes: serde_json::Map<String, Value> = by_class(&origin)
        .map(|(c, n)| (c.name().to_string(), counts_json(&n)))
        .collect();
    json!({
        "proxy": info.proxy, "seed": info.seed, "rate": info.rate,
        "fill_secs": info.fill_secs, "plateau_secs": info.plateau_secs,
        "servers": info.servers, "max_connections": info.max_connections,
        "delay_scale": info.delay_scale, "status": info.status, "wall_secs": info.wall_secs,
        "client_connections": info.connections,
        "ideal_hit_ratio": info.ideal.0, "ideal_byte_hit_ratio": info.ideal.1,
        "origin_unknown_requests": info.origin_unknown,
        "origin_by_class": classes,
        "errors": info.errors.iter().map(|(k, n)| json!({"kind": k, "count": n})).collect::<Vec<_>>(),
        "fill": phases[0].json(), "plateau": phases[1].json(), "whole": phases[2].json(),
        "series": buckets.iter().map(|b| json!({"t": b.t, "requests": b.requests, "hits": b.hits,
            "errors": b.errors, "mean_ms": b.mean_ms, "hit_ms": b.hit_ms, "miss_ms": b.miss_ms}))
            .collect::<Vec<_>>(),
    })
}

pub fn markdown(info: &RunInfo, phases: &[PhaseStats; 3], samples: &[Sample]) -> String {
    let mut m = String::new();
    let w = &mut m;
    let _ = writeln!(w, "# PolyMix-style run\n");
    let _ = writeln!(
        w,
        "Proxy {}; {:.0} requests/s offered (Poisson), fill {:.0} s then plateau {:.0} s; \
         {} virtual servers; at most {} client connections; origin delays norm(2.5 s, 1 s) \
         × {}; seed {}. Status: **{}** after {:.1} s.\n",
        info.proxy,
        info.rate,
        info.fill_secs,
        info.plateau_secs,
        info.servers,
        info.max_connections,
        info.delay_scale,
        info.seed,
        info.status,
        info.wall_secs
    );
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let ms = |l: &Latencies| {
        if l.len() == 0 {
            "–".to_string()
        } else {
            format!(
                "{:.2} / {:.2} / {:.2} / {:.2}",
                l.mean_ms(),
                l.quantile_ms(0.5),
                l.quantile_ms(0.9),
                l.quantile_ms(0.99)
            )
        }
    };
    let opt = |x: Option<f64>, prec: usize| x.map_or("–".into(), |v| format!("{v:.prec$}"));
    type Row<'a> = (&'a str, Box<dyn Fn(&PhaseStats) -> String + 'a>);
    let rows: Vec<Row> = vec![
        ("duration (s)", Box::new(|p| format!("{:.1}", p.secs))),
        ("requests sent", Box::new(|p| p.sent.to_string())),
        ("answered (200)", Box::new(|p| p.ok.to_string())),
        ("errors", Box::new(|p| p.errors.to_string())),
        (
            "throughput (answers/s, wall)",
            Box::new(|p| format!("{:.1}", p.throughput())),
        ),
        ("proxy CPU (s)", Box::new(move |p| opt(p.cpu, 2))),
        (
            "**requests per CPU-second of the proxy**",
            Box::new(move |p| opt(p.per_cpu_second(), 0)),
        ),
        (
            "hits / collapsed / validations / misses / unlabelled",
            Box::new(|p| {
                format!(
                    "{} / {} / {} / {} / {}",
                    p.count(Outcome::Hit),
                    p.count(Outcome::Collapsed),
                    p.count(Outcome::Validation),
                    p.count(Outcome::Miss),
                    p.count(Outcome::Unlabelled)
                )
            }),
        ),
        (
            "**hit ratio by request** (proxy's word)",
            Box::new(move |p| pct(p.hit_ratio())),
        ),
        (
            "hit ratio by byte (proxy's word)",
            Box::new(move |p| pct(p.byte_hit_ratio())),
        ),
        (
            "stored copies by the origin's serial",
            Box::new(move |p| pct(ratio(p.stored_copies, p.ok))),
        ),
        (
            "origin requests / 200 / 304",
            Box::new(|p| {
                format!(
                    "{} / {} / {}",
                    p.origin.requests, p.origin.ok, p.origin.not_modified
                )
            }),
        ),
        (
            "not sent by the origin, by request (hits and 304s; origin's counts)",
            Box::new(move |p| pct(p.origin_hit_ratio())),
        ),
        (
            "not sent by the origin, by byte (origin's counts)",
            Box::new(move |p| pct(p.origin_byte_hit_ratio())),
        ),
        (
            "response time, all: mean / p50 / p90 / p99 (ms)",
            Box::new(move |p| ms(&p.all)),
        ),
        (
            "hit time: mean / p50 / p90 / p99 (ms)",
            Box::new(move |p| ms(&p.hits)),
        ),
        (
            "miss time (validations, collapsed included) (ms)",
            Box::new(move |p| ms(&p.misses)),
        ),
    ];
    let _ = writeln!(w, "| | fill | plateau | whole run |\n|---|---:|---:|---:|");
    for (name, f) in &rows {
        let _ = writeln!(
            w,
            "| {name} | {} | {} | {} |",
            f(&phases[0]),
            f(&phases[1]),
            f(&phases[2])
        );
    }
    let _ = writeln!(
        w,
        "\nAn infinite cache that never sees a change would hit {} of these requests \
         ({} of the bytes); {} by construction of the model, whose objects' mean size is \
         {:.0} bytes.\n",
        pct(info.ideal.0),
        pct(info.ideal.1),
        pct(Model::new(info.seed, info.servers).ideal_hit_ratio()),
        mix_mean_size()
    );
    let _ = writeln!(w, "## By content class (whole run)\n");
    let _ = writeln!(w, "| class | answered | from cache | bytes to client | origin requests | origin 200 | origin 304 | origin bytes |\n|---|---:|---:|---:|---:|---:|---:|---:|");
    for class in Class::ALL {
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.class == class && s.outcome != Outcome::Error)
            .collect();
        let hits = mine.iter().filter(|s| from_cache(s)).count();
        let bytes: u64 = mine.iter().map(|s| s.bytes).sum();
        let mut o = info.origin_fill[class.index()];
        o.add(&info.origin_plateau[class.index()]);
        let _ = writeln!(
            w,
            "| {} | {} | {} ({}) | {} | {} | {} | {} | {} |",
            class.name(),
            mine.len(),
            hits,
            pct(ratio(hits as u64, mine.len() as u64)),
            bytes,
            o.requests,
            o.ok,
            o.not_modified,
            o.body_bytes
        );
    }
    if info.origin_unknown > 0 {
        let _ = writeln!(
            w,
            "\nThe origin got {} requests for unknown objects.",
            info.origin_unknown
        );
    }
    if !info.errors.is_empty() {
        let _ = writeln!(w, "\n## Errors\n\n| count | kind |\n|---:|---|");
        for (k, n) in &info.errors {
            let _ = writeln!(w, "| {n} | {} |", k.replace('|', "\\|"));
        }
    }
    let _ = writeln!(
        w,
        "\n![hit ratio and response time per second](polymix.svg)"
    );
    m
}
