//! The check on small workspaces written to a temporary directory.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::check::check;

/// A workspace with one crate, `crates/demo`, made of the given `(path, text)` files
/// under its `src/`; removed when dropped.
struct Fixture {
    root: PathBuf,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Fixture {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "layer-check-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let src = root.join("crates/demo/src");
        fs::create_dir_all(&src).unwrap();
        fs::write(
            root.join("crates/demo/Cargo.toml"),
            "[package]\nname = \"demo\"\n",
        )
        .unwrap();
        for (path, text) in files {
            let file = src.join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, text).unwrap();
        }
        Fixture { root }
    }

    fn problems(&self) -> Vec<String> {
        check(&self.root).problems
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

#[test]
fn a_one_way_crate_passes() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\npub use b::run;\n"),
        ("a.rs", "pub struct Word;\n"),
        (
            "b.rs",
            "use crate::a::Word;\npub fn run() -> Word { Word }\n",
        ),
    ]);
    assert_eq!(f.problems(), Vec::<String>::new());
}

#[test]
fn a_cycle_names_its_files_and_paths() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct Word;\npub fn f() { crate::b::g(); }\n"),
        ("b.rs", "pub fn g() { let _ = crate::a::Word; }\n"),
    ]);
    let problems = f.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert!(p.contains("a cycle of 2 files"), "{p}");
    assert!(
        p.contains("src/a.rs uses crates/demo/src/b.rs (crate::b::g)"),
        "{p}"
    );
    assert!(
        p.contains("src/b.rs uses crates/demo/src/a.rs (crate::a::Word)"),
        "{p}"
    );
}

#[test]
fn re_exports_lead_to_the_defining_file() {
    // `crate::Word` is defined in a.rs: b uses a, not the root that re-exports it.
    let f = Fixture::new(&[
        (
            "lib.rs",
            "mod a;\nmod b;\npub use a::Word;\npub use b::run;\n",
        ),
        ("a.rs", "pub struct Word;\n"),
        ("b.rs", "pub fn run() -> crate::Word { crate::Word }\n"),
    ]);
    assert_eq!(f.problems(), Vec::<String>::new());
}

#[test]
fn a_parent_that_children_look_up_at_is_a_cycle() {
    let f = Fixture::new(&[
        ("lib.rs", "mod x;\n"),
        ("x.rs", "mod y;\npub use y::Y;\npub struct Shared;\n"),
        ("x/y.rs", "pub struct Y(pub super::Shared);\n"),
    ]);
    let problems = f.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("src/x/y.rs uses crates/demo/src/x.rs (super::Shared)"));
}

#[test]
fn visibility_and_variables_are_no_uses() {
    // `pub(super)` names the parent and `a` is a variable: neither uses a module.
    let f = Fixture::new(&[
        (
            "lib.rs",
            "mod a;\npub fn f() -> u8 { let a = crate::a::one(); a }\n",
        ),
        (
            "a.rs",
            "pub(super) fn one() -> u8 { 1 }\npub(crate) struct Unused;\n",
        ),
    ]);
    assert_eq!(f.problems(), Vec::<String>::new());
}

#[test]
fn names_taken_through_a_glob_are_uses() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct Word;\npub fn f() { crate::b::g(); }\n"),
        ("b.rs", "use crate::a::*;\npub fn g() { let _ = Word; }\n"),
    ]);
    assert_eq!(f.problems().len(), 1);
}

#[test]
fn paths_in_macro_calls_are_uses() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub fn f() -> String { format!(\"{}\", crate::b::g()) }\n",
        ),
        (
            "b.rs",
            "pub fn g() -> u8 { assert!(crate::a::f().is_empty()); 1 }\n",
        ),
    ]);
    assert_eq!(f.problems().len(), 1);
}

#[test]
fn test_modules_may_use_their_parent() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", "pub fn f() -> u8 { 1 }\n#[cfg(test)]\nmod tests;\n"),
        (
            "a/tests.rs",
            "use super::*;\n#[test]\nfn one() { assert_eq!(f(), 1); }\n",
        ),
    ]);
    assert_eq!(f.problems(), Vec::<String>::new());
}

#[test]
fn a_file_over_the_limit_is_named() {
    let at_limit = "// line\n".repeat(crate::check::MAX_LINES);
    let over = "// line\n".repeat(crate::check::MAX_LINES + 1);
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", &at_limit),
        ("b.rs", &over),
    ]);
    let problems = f.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].ends_with("src/b.rs: 501 lines, over the limit of 500"));
}

#[test]
fn a_missing_module_file_is_reported() {
    let f = Fixture::new(&[("lib.rs", "mod gone;\n")]);
    let problems = f.problems();
    assert_eq!(problems.len(), 1);
    assert!(problems[0].contains("module `gone`"), "{problems:?}");
}

#[test]
fn layers_count_up_from_the_bottom() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\npub use b::run;\n"),
        ("a.rs", "pub struct Word;\n"),
        (
            "b.rs",
            "pub fn run() -> crate::a::Word { crate::a::Word }\n",
        ),
    ]);
    let lines = crate::check::layers(&f.root.join("crates/demo/src/lib.rs")).unwrap();
    assert_eq!(lines, vec![" 0: a.rs", " 1: b.rs", " 2: lib.rs"]);
}
