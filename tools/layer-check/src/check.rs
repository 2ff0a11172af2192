//! The whole check over one workspace directory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::graph::FileGraph;
use crate::tree::CrateTree;

/// The longest a source file may be.
pub const MAX_LINES: usize = 500;

/// Directories whose subdirectories are crates.
const CRATE_PARENTS: &[&str] = &["crates", "tools", "examples"];

/// What the check found.
pub struct Report {
    /// Crate roots read (libraries, binaries, test and example targets).
    pub crate_roots: usize,
    /// One message per cycle, long file or unreadable source.
    pub problems: Vec<String>,
}

/// Checks every crate under `root`'s `crates/`, `tools/` and `examples/`.
pub fn check(root: &Path) -> Report {
    let mut problems = Vec::new();
    let mut crate_roots = 0;
    for dir in crate_dirs(root) {
        for crate_root in crate_roots_of(&dir) {
            crate_roots += 1;
            match CrateTree::read(&crate_root) {
                // Test crates that share helper files report their cycles once.
                Ok(tree) => {
                    for c in cycles(root, &tree) {
                        if !problems.contains(&c) {
                            problems.push(c);
                        }
                    }
                }
                Err(e) => problems.push(e),
            }
        }
        for file in rust_files(&dir) {
            let lines = fs::read_to_string(&file)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if lines > MAX_LINES {
                problems.push(format!(
                    "{}: {lines} lines, over the limit of {MAX_LINES}",
                    shown(root, &file)
                ));
            }
        }
    }
    Report {
        crate_roots,
        problems,
    }
}

/// The files of the crate whose root is `crate_root`, by level (see
/// [`FileGraph::levels`]), one line per level from the bottom, names relative to the
/// crate's `src/`.
pub fn layers(crate_root: &Path) -> Result<Vec<String>, String> {
    let tree = CrateTree::read(crate_root)?;
    let graph = FileGraph::build(&tree);
    let levels = graph.levels();
    let src = crate_root.parent().unwrap_or(Path::new("."));
    let top = levels.iter().copied().max().unwrap_or(0);
    Ok((0..=top)
        .map(|l| {
            let mut names: Vec<String> = (0..tree.files.len())
                .filter(|&f| levels[f] == l)
                .map(|f| {
                    let p = &tree.files[f];
                    p.strip_prefix(src).unwrap_or(p).display().to_string()
                })
                .collect();
            names.sort();
            format!("{l:>2}: {}", names.join(" "))
        })
        .collect())
}

/// One message per cycle: its files, and one use behind each edge inside it.
fn cycles(root: &Path, tree: &CrateTree) -> Vec<String> {
    let graph = FileGraph::build(tree);
    graph
        .cycles()
        .into_iter()
        .map(|group| {
            let mut msg = format!("a cycle of {} files:", group.len());
            for &from in &group {
                for &to in &group {
                    if let Some(path) = graph.edge(from, to) {
                        msg.push_str(&format!(
                            "\n    {} uses {} ({path})",
                            shown(root, &tree.files[from]),
                            shown(root, &tree.files[to])
                        ));
                    }
                }
            }
            msg
        })
        .collect()
}

fn shown(root: &Path, file: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let file = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    file.strip_prefix(&root)
        .unwrap_or(&file)
        .display()
        .to_string()
}

fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = CRATE_PARENTS
        .iter()
        .filter_map(|p| fs::read_dir(root.join(p)).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The root files of a crate's targets: library, binaries, tests, examples, benches.
fn crate_roots_of(dir: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|p| dir.join(p))
        .filter(|p| p.exists())
        .collect();
    for sub in ["src/bin", "tests", "examples", "benches"] {
        let Ok(entries) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter_map(|p| {
                if p.extension().is_some_and(|e| e == "rs") {
                    Some(p)
                } else if p.join("main.rs").exists() {
                    Some(p.join("main.rs"))
                } else {
                    None
                }
            })
            .collect();
        found.sort();
        roots.extend(found);
    }
    roots
}

/// Every `.rs` file under a crate directory, build outputs excluded.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target" && n != ".git") {
                    todo.push(p);
                }
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
