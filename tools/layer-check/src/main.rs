//! `layer-check`: keeps the shape of the code one-way.
//!
//! For every crate of the workspace (libraries, binaries, integration tests and the
//! examples), reads the module tree from the source and resolves every path the code
//! names (`use` statements, paths in code and in macro calls, following re-exports to
//! where an item is defined) to the file that defines it. Files that reach each other
//! through such uses form a cycle, and the check fails, naming each file of the cycle
//! and one path behind each of its uses. It also fails when a Rust source file is over
//! [`MAX_LINES`](check::MAX_LINES) lines.
//!
//! Run from anywhere in the workspace: `cargo run -p layer-check` (or give it another
//! workspace's directory).

mod check;
mod graph;
mod resolve;
mod tree;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::process::ExitCode;

use check::{check, MAX_LINES};

fn main() -> ExitCode {
    let root = match std::env::args_os().nth(1) {
        Some(dir) => Path::new(&dir).to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    };
    let report = check(&root);
    if report.problems.is_empty() {
        println!(
            "layer-check: {} crate roots, no module cycles, no file over {MAX_LINES} lines",
            report.crate_roots
        );
        return ExitCode::SUCCESS;
    }
    for p in &report.problems {
        eprintln!("layer-check: {p}");
    }
    ExitCode::FAILURE
}
