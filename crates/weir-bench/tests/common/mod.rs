//! What the end-to-end tests of `weir-bench` share: the binaries, scratch
//! directories, waiting for a run with a time limit, and its JSON report.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BENCH: &str = env!("CARGO_BIN_EXE_weir-bench");

/// The `weir` binary of the same build (cargo puts every binary of the workspace in one
/// directory); built here when this package's tests run alone.
pub fn weir_binary() -> PathBuf {
    let dir = Path::new(BENCH).parent().expect("a directory");
    let weir = dir.join(format!("weir{}", std::env::consts::EXE_SUFFIX));
    if !weir.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "weir", "--bin", "weir"])
            .status()
            .expect("run cargo build");
        assert!(status.success(), "cargo build -p weir failed");
    }
    weir
}

/// An empty scratch directory named after the test binary and `tag`.
pub fn temp_dir(scenario: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weir-{scenario}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Waits for `child` at most `limit` (then kills it and fails the test); its output
/// and the time taken.
pub fn finish(mut child: Child, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "weir-bench did not stop within {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().unwrap(), start.elapsed())
}

/// The run's `report.json` in `out`.
pub fn report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json written");
    serde_json::from_str(&text).expect("valid JSON")
}

/// Waits for a run that must succeed and complete; its report.
pub fn completed(child: Child, out: &Path, limit: Duration) -> Value {
    let (output, _) = finish(child, limit);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let r = report(out);
    assert_eq!(r["status"], "complete");
    r
}
