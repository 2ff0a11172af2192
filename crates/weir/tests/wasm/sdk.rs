//! A real filter, built with a public proxy-wasm SDK: `examples/wasm-add-header`,
//! AssemblyScript with `@solo-io/proxy-runtime`, both from npm.

use std::path::PathBuf;
use std::process::Command;

use crate::common::module_config::reverse_with_modules;
use crate::common::*;

/// Builds the example with its build script; `None` (the test is skipped, saying
/// so) only when `npm` is not installed. `./test.sh` installs it.
fn build_example() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/wasm-add-header");
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED: npm is not installed, so the AssemblyScript example filter cannot be \
             built (apt-get install nodejs npm; ./test.sh does)"
        );
        return None;
    }
    let out = Command::new("sh")
        .arg(dir.join("build.sh"))
        .output()
        .expect("run the example's build script");
    assert!(
        out.status.success(),
        "examples/wasm-add-header/build.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir.join("build/add_header.wasm"))
}

#[tokio::test]
async fn a_filter_built_with_the_assemblyscript_sdk_runs_and_reads_the_cache() {
    let Some(wasm) = build_example() else { return };
    let origin = TestOrigin::start();
    origin.route("/sdk", Reply::ok("sdk").cc("max-age=60"));
    let proxy = reverse_with_modules(
        &origin.base(),
        &crate::section(&wasm, "configuration = \"built with AssemblyScript\""),
    );
    let client = direct_client();
    let miss = get(&client, &proxy.reverse_url("/sdk"), &[]).await;
    assert_eq!(miss.status, 200, "{}", proxy.stderr_text());
    assert_eq!(miss.text(), "sdk");
    assert_eq!(
        miss.header("x-wasm-sdk").as_deref(),
        Some("built with AssemblyScript")
    );
    assert_eq!(miss.header("x-cache-lookup").as_deref(), Some("miss"));
    let hit = get(&client, &proxy.reverse_url("/sdk"), &[]).await;
    assert_eq!(hit.header("x-cache-lookup").as_deref(), Some("fresh"));
    assert_eq!(hit.header_all("x-wasm-sdk"), ["built with AssemblyScript"]);
}
