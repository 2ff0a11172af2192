//! `weir-bench modules` end to end, short and on loopback: Weir with `compress`, the
//! background load and the side load in every phase; kinds that cannot run are
//! skipped with a message, and a run with none left stops at once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{finish, weir_binary, BENCH};

/// Runs `weir-bench modules ARGS --out OUT`, killed after `limit`.
fn run(args: &[&str], out: &Path, limit: Duration) -> (Output, Duration) {
    let _ = std::fs::remove_dir_all(out);
    let weir = weir_binary();
    let child = Command::new(BENCH)
        .arg("modules")
        .arg("--weir-binary")
        .arg(&weir)
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start weir-bench");
    finish(child, limit)
}

fn temp_dir(tag: &str) -> PathBuf {
    common::temp_dir("modules", tag)
}

#[test]
fn compress_adapts_the_side_load_in_both_side_phases() {
    let out = temp_dir("compress");
    let (output, _) = run(
        &[
            "--side",
            "compress,transcode",
            "--rate",
            "40",
            "--side-rate",
            "30",
            "--side-connections",
            "2",
            "--fill-secs",
            "1",
            "--phase-secs",
            "2",
        ],
        &out,
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // transcode has no image to work on (no --jpeg): skipped, not an error.
    assert!(stderr.contains("skipping transcode"), "{stderr}");
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["status"], "complete");
    assert_eq!(r["modules"], serde_json::json!(["compress"]));
    let phases = r["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3, "{phases:?}");
    let f = |i: usize, k: &str| phases[i][k].as_f64().unwrap_or(f64::NAN);
    // Background only: no side request.
    assert_eq!(f(0, "side_sent"), 0.0);
    assert!(f(0, "background_requests") > 40.0, "{}", phases[0]);
    for i in [1, 2] {
        assert_eq!(f(i, "side_errors"), 0.0, "{}", phases[i]);
        // Every side answer was compressed, and each one is a new URL: an origin fetch.
        assert!(f(i, "side_adapted_per_sec") > 0.0, "{}", phases[i]);
        assert_eq!(
            f(i, "side_adapted_per_sec"),
            f(i, "side_answered_per_sec"),
            "{}",
            phases[i]
        );
        assert_eq!(
            f(i, "side_origin_requests"),
            f(i, "side_sent"),
            "{}",
            phases[i]
        );
    }
    // About 30/s at the fixed rate; the closed loop goes as fast as it can.
    assert!(
        (f(1, "side_answered_per_sec") - 30.0).abs() < 10.0,
        "{}",
        phases[1]
    );
    for p in phases {
        assert_eq!(p["background_errors"].as_f64(), Some(0.0), "{p}");
        assert!(p["weir_cpu_secs"].as_f64().unwrap() > 0.0, "{p}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("+ side load, full demand"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn with_no_side_load_that_can_run_the_run_stops_at_once() {
    let out = temp_dir("none");
    let (output, took) = run(&["--side", "adblock"], &out, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("skipping adblock: no filter list"),
        "{stderr}"
    );
    assert!(stderr.contains("no side-load kind can run"), "{stderr}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let _ = std::fs::remove_dir_all(&out);
}
