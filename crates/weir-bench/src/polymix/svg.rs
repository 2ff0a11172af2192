//! The run's chart as a standalone SVG, written by hand: hit ratio per second (with
//! the ideal cache's) above, mean response time of hits and of misses below.

use std::fmt::Write as _;

use super::report::Bucket;

const W: f64 = 900.0;
const PANEL_H: f64 = 220.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 56.0;
const GAP: f64 = 50.0;

struct Panel {
    top: f64,
    y_max: f64,
    t_max: f64,
}

impl Panel {
    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max.max(1e-9) * (W - LEFT - RIGHT)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + PANEL_H - (v / self.y_max.max(1e-9)).clamp(0.0, 1.0) * PANEL_H
    }

    fn frame(&self, out: &mut String, title: &str, unit: &str, fill_end: f64) {
        let _ = writeln!(
            out,
            r##"<rect x="{LEFT}" y="{}" width="{}" height="{PANEL_H}" fill="none" stroke="#888"/>"##,
            self.top,
            W - LEFT - RIGHT
        );
        let _ = writeln!(
            out,
            r#"<text x="{LEFT}" y="{}" font-size="14">{title}</text>"#,
            self.top - 8.0
        );
        for i in 0..=4 {
            let v = self.y_max * i as f64 / 4.0;
            let y = self.y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{v:.0}{unit}</text>"##,
                W - RIGHT,
                LEFT - 4.0,
                y + 4.0
            );
        }
        let steps = 6;
        for i in 0..=steps {
            let t = self.t_max * i as f64 / steps as f64;
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{t:.0} s</text>"#,
                self.x(t),
                self.top + PANEL_H + 14.0
            );
        }
        if fill_end > 0.0 && fill_end < self.t_max {
            let x = self.x(fill_end);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#999" stroke-dasharray="4 3"/><text x="{:.1}" y="{}" font-size="11">plateau →</text>"##,
                self.top,
                self.top + PANEL_H,
                x + 4.0,
                self.top + 12.0
            );
        }
    }

    fn line(&self, out: &mut String, points: &[(f64, f64)], color: &str, dash: &str) {
        if points.is_empty() {
            return;
        }
        let pts: Vec<String> = points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", self.x(*t), self.y(*v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}" points="{}"/>"#,
            pts.join(" ")
        );
    }
}

fn legend(out: &mut String, x: f64, y: f64, items: &[(&str, &str)]) {
    for (i, (color, name)) in items.iter().enumerate() {
        let x = x + i as f64 * 150.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="14" height="3" fill="{color}"/><text x="{}" y="{y}" font-size="12">{name}</text>"#,
            y - 4.0,
            x + 18.0
        );
    }
}

/// The chart of a run; `width` is the buckets' width in seconds.
pub fn chart(buckets: &[Bucket], width: f64, fill_end: f64, ideal: f64, title: &str) -> String {
    let t_max = buckets.len() as f64 * width;
    let mid = |b: &Bucket| b.t + width / 2.0;
    let mut out = String::new();
    let h = TOP + 2.0 * PANEL_H + GAP + 40.0;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="18" font-size="13">{}</text>"#,
        escape(title)
    );

    let top = Panel {
        top: TOP,
        y_max: 100.0,
        t_max,
    };
    top.frame(&mut out, "Hit ratio per second (%)", "", fill_end);
    let hits: Vec<(f64, f64)> = buckets
        .iter()
        .filter(|b| b.requests > b.errors)
        .map(|b| {
            (
                mid(b),
                100.0 * b.hits as f64 / (b.requests - b.errors) as f64,
            )
        })
        .collect();
    top.line(&mut out, &hits, "#1f77b4", "none");
    top.line(
        &mut out,
        &[(0.0, ideal * 100.0), (t_max, ideal * 100.0)],
        "#2ca02c",
        "6 4",
    );
    legend(
        &mut out,
        LEFT + 250.0,
        TOP - 8.0,
        &[("#1f77b4", "measured"), ("#2ca02c", "ideal cache")],
    );

    let max_ms = buckets
        .iter()
        .map(|b| b.miss_ms.max(b.hit_ms))
        .fold(1.0, f64::max);
    let bottom = Panel {
        top: TOP + PANEL_H + GAP,
        y_max: nice(max_ms * 1.1),
        t_max,
    };
    bottom.frame(&mut out, "Mean response time per second (ms)", "", fill_end);
    let series = |f: fn(&Bucket) -> f64| -> Vec<(f64, f64)> {
        buckets
            .iter()
            .filter(|b| f(b) > 0.0)
            .map(|b| (mid(b), f(b)))
            .collect()
    };
    bottom.line(&mut out, &series(|b| b.miss_ms), "#d62728", "none");
    bottom.line(&mut out, &series(|b| b.mean_ms), "#7f7f7f", "none");
    bottom.line(&mut out, &series(|b| b.hit_ms), "#1f77b4", "none");
    legend(
        &mut out,
        LEFT + 300.0,
        bottom.top - 8.0,
        &[
            ("#d62728", "misses"),
            ("#7f7f7f", "all"),
            ("#1f77b4", "hits"),
        ],
    );
    out.push_str("</svg>\n");
    out
}

/// A round axis maximum: 1, 2 or 5 times a power of ten, at least `v`.
fn nice(v: f64) -> f64 {
    let p = 10f64.powf(v.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|x| *x >= v)
        .unwrap_or(10.0 * p)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(super::nice(73.0), 100.0);
        assert_eq!(super::nice(101.0), 200.0);
        assert_eq!(super::nice(0.3), 0.5);
    }
}
