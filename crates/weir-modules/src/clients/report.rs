//! What the module publishes: JSON at `/admin/modules/clients`, and metrics with
//! bounded labels (totals, plus the ten busiest clients and users, chosen afresh at
//! every scrape).

use std::fmt::Write as _;
use std::hash::Hash;

use weir_api::AdminReport;

use super::settings::LimitBy;
use super::table::{Entry, Figures, Table};
use super::{lock, Shared};

/// Clients and users named in metric labels: enough to see who dominates, few enough
/// that the scraper's series stay bounded.
const METRIC_TOP: usize = 10;

impl AdminReport for Shared {
    fn json(&self) -> String {
        let mut out = String::with_capacity(4096);
        let c = &self.config;
        let _ = write!(
            out,
            "{{\"top\":{},\"limit_by\":\"{}\",\"limits\":{{",
            c.top,
            match c.by {
                LimitBy::Client => "client",
                LimitBy::User => "user",
            }
        );
        let mut limits = Vec::new();
        if let Some((rate, burst)) = c.rate {
            limits.push(format!("\"rate\":{rate},\"burst\":{burst}"));
        }
        if let Some((rate, burst)) = c.bandwidth {
            limits.push(format!("\"bandwidth\":{rate},\"bandwidth_burst\":{burst}"));
        }
        if let Some((quota, reset)) = c.quota {
            limits.push(format!(
                "\"quota\":{quota},\"quota_reset\":\"{:02}:{:02}\"",
                reset / 3600,
                reset % 3600 / 60
            ));
        }
        if let Some(cap) = c.concurrent {
            limits.push(format!("\"concurrent\":{cap}"));
        }
        out.push_str(&limits.join(","));
        out.push_str("},\"clients\":");
        table_json(&mut out, &lock(&self.clients), |ip| ip.to_string());
        out.push_str(",\"users\":");
        table_json(&mut out, &lock(&self.users), |u| u.to_string());
        out.push('}');
        out
    }

    fn metrics(&self, out: &mut String) {
        let clients = lock(&self.clients);
        top_metrics(out, "client", &clients, |ip| ip.to_string());
        drop(clients);
        top_metrics(out, "user", &lock(&self.users), |u| u.to_string());
    }
}

/// `{"tracked":n,"replaced":n,"entries":[…]}`, busiest first.
fn table_json<K: Hash + Eq + Clone>(
    out: &mut String,
    table: &Table<K>,
    name: impl Fn(&K) -> String,
) {
    let _ = write!(
        out,
        "{{\"tracked\":{},\"replaced\":{},\"entries\":[",
        table.len(),
        table.replaced()
    );
    for (i, e) in table.top(usize::MAX).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        entry_json(out, e, &name(&e.key));
    }
    out.push_str("]}");
}

fn entry_json<K>(out: &mut String, e: &Entry<K>, name: &str) {
    let f = &e.figures;
    out.push_str("{\"id\":");
    json_string(out, name);
    let _ = write!(
        out,
        ",\"requests\":{},\"exact\":{},\"error\":{},\"bytes_in\":{},\"bytes_out\":{},\
         \"hits\":{},\"misses\":{},\"denied\":{},\"rate_limited\":{},\"over_quota\":{},\
         \"over_concurrency\":{},\"shaped_ms\":{},\"in_flight\":{},\"quota_used\":{}}}",
        f.requests,
        f.error == 0,
        f.error,
        f.bytes_in,
        f.bytes_out,
        f.hits,
        f.misses,
        f.denied,
        f.rate_limited,
        f.over_quota,
        f.over_concurrency,
        f.shaped_ms,
        e.limits.in_flight,
        e.limits.quota_used,
    );
}

fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One gauge family of the busiest keys: name suffix, help, value.
type Series = (&'static str, &'static str, fn(&Figures) -> u64);

/// Gauges of the ten busiest keys of a table: `weir_module_clients_top_<what>{client="…"}`.
fn top_metrics<K: Hash + Eq + Clone>(
    out: &mut String,
    label: &str,
    table: &Table<K>,
    name: impl Fn(&K) -> String,
) {
    let top = table.top(METRIC_TOP);
    let names: Vec<String> = top.iter().map(|e| label_value(&name(&e.key))).collect();
    let series: [Series; 4] = [
        ("requests", "Requests", |f| f.requests),
        ("bytes_out", "Response body bytes sent", |f| f.bytes_out),
        ("hits", "Requests served from the cache", |f| f.hits),
        ("refused", "Requests refused by a limit", |f| {
            f.rate_limited + f.over_quota + f.over_concurrency
        }),
    ];
    let _ = writeln!(
        out,
        "# HELP weir_module_clients_{label}s_tracked {}s in the bounded statistics table\n\
         # TYPE weir_module_clients_{label}s_tracked gauge\n\
         weir_module_clients_{label}s_tracked {}",
        label,
        table.len()
    );
    for (what, help, value) in series {
        let metric = format!("weir_module_clients_top_{label}_{what}");
        let _ = writeln!(
            out,
            "# HELP {metric} {help}, for the {METRIC_TOP} busiest {label}s\n# TYPE {metric} gauge"
        );
        for (e, n) in top.iter().zip(&names) {
            let _ = writeln!(out, "{metric}{{{label}=\"{n}\"}} {}", value(&e.figures));
        }
    }
}

/// A label value escaped as the exposition format wants.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
