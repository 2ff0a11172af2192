//! A real browser for the admin pages: headless Chromium (Debian's `chromium`,
//! installed by ./test.sh), which loads a page, runs its script and prints the DOM.

use std::path::PathBuf;
use std::process::{Command, Output};

use super::process::TempDir;

/// The Chromium binary, when it is installed.
pub fn chromium() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
}

/// Loads `url` in `browser` with `virtual_ms` of virtual time (which runs the page's
/// timers quickly and waits for each real fetch), and returns what it printed: the
/// DOM as the script left it, on stdout. Blocks; a profile of its own each time.
pub fn dump_dom(browser: &std::path::Path, url: &str, virtual_ms: u32) -> Output {
    let profile = TempDir::new("chromium-profile");
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.path().display()),
            &format!("--virtual-time-budget={virtual_ms}"),
            "--dump-dom",
            url,
        ])
        .output()
        .expect("chromium runs")
}

/// The value of `attribute` on the element with `id` in `dom`.
pub fn attribute<'a>(dom: &'a str, id: &str, attribute: &str) -> Option<&'a str> {
    let element = &dom[dom.find(&format!("id=\"{id}\""))?..];
    let element = &element[..element.find('>')?];
    let start = element.find(&format!("{attribute}=\""))? + attribute.len() + 2;
    let len = element[start..].find('"')?;
    Some(&element[start..start + len])
}
