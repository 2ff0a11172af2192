//! What every configuration test file uses: parsing a file that must load, and
//! asserting where one that must not fails. In a file of its own so that the test files
//! look down at it rather than up at `tests.rs`, which declares them.

use std::net::SocketAddr;

use crate::config::Config;

pub(super) fn parse(text: &str) -> Config {
    Config::parse(text, "weir.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts that `text` fails at `line` on `key`, with a message containing `needle`.
#[track_caller]
pub(super) fn fails(text: &str, line: usize, key: &str, needle: &str) {
    let e = match Config::parse(text, "weir.toml") {
        Ok(_) => panic!("expected an error at line {line}, key {key}"),
        Err(e) => e,
    };
    assert_eq!(e.file, "weir.toml", "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(needle), "`{needle}` not in: {e}");
}

pub(super) fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// A forward listener and a reverse one with a route: a file many tests change one
/// thing in.
pub(super) const TWO_LISTENERS: &str = r#"[[listen]]
addr = "127.0.0.1:3128"
mode = "forward"

[[listen]]
addr = "127.0.0.1:8080"
mode = "reverse"
origin = "http://127.0.0.1:8081"
  [[listen.route]]
  origin = "http://127.0.0.1:8082"
"#;
