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
//! workspace's directory). `cargo run -p layer-check -- --layers crates/x/src/lib.rs`
//! prints one crate's files by level, from the bottom: what `docs/architecture.md`
//! draws.
//!
//! What it cannot see: a method call resolves through the receiver's type, which
//! takes a compiler to know, so a file that adds methods to a type defined elsewhere
//! (`impl Cache` in another file) and is called from the type's own file makes a cycle
//! this check misses. Keep such extension files leaves: the type's file does not call
//! them.

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
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "--layers") {
        // `--layers crates/weir-proxy/src/lib.rs`: the files of one crate by level.
        let Some(root) = args.get(1) else {
            eprintln!("layer-check: --layers needs a crate root file");
            return ExitCode::FAILURE;
        };
        return match check::layers(Path::new(root)) {
            Ok(lines) => {
                lines.iter().for_each(|l| println!("{l}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("layer-check: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let root = match args.pop() {
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
