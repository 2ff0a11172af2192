//! Proxies with `[[module]]` sections, which [`ProxyBuilder`](super::ProxyBuilder)
//! cannot write: the configuration is written here and `weir` started on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::process::{free_port, run_weir, temp_dir};
use super::proxy::{Launch, Proxy};

/// Starts `weir` with one reverse listener to `origin` (e.g. `http://127.0.0.1:8081`),
/// an admin listener, no access log, and `modules` appended as written: the
/// `[[module]]` sections, e.g. `"[[module]]\nname = \"add-headers\"\n"`.
pub fn reverse_with_modules(origin: &str, modules: &str) -> Proxy {
    Proxy::start_on_free_ports(|| reverse_launch(origin, modules))
}

fn reverse_launch(origin: &str, modules: &str) -> Launch {
    let dir = temp_dir("modules");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let text = format!(
        "[admin]\nlisten = \"{admin}\"\n\n[log]\naccess = \"off\"\n\n\
         [[listen]]\naddr = \"{addr}\"\nmode = \"reverse\"\norigin = {origin:?}\n\n{modules}\n"
    );
    let config = dir.join("weir.toml");
    std::fs::write(&config, &text).expect("write the configuration");
    Launch {
        dir,
        config,
        text,
        listeners: vec![("reverse", addr)],
        admin: Some(admin),
    }
}

/// Writes `text` as `name` in `dir` (for `weir check`), returning its path.
pub fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// Starts `weir` with a forward listener, a reverse listener to `origin`, an admin
/// listener, the access log in `access.log` (Squid format), and `modules` appended
/// as written.
pub fn forward_and_reverse_with_modules(origin: &str, modules: &str) -> Proxy {
    Proxy::start_on_free_ports(|| forward_and_reverse_launch(origin, modules))
}

fn forward_and_reverse_launch(origin: &str, modules: &str) -> Launch {
    let dir = temp_dir("modules");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let forward: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let reverse: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = dir.join("access.log");
    let text = format!(
        "[admin]\nlisten = \"{admin}\"\n\n[log]\naccess = {:?}\nformat = \"squid\"\n\n\
         [cache]\ndisk = \"off\"\n\n\
         [[listen]]\naddr = \"{forward}\"\nmode = \"forward\"\n\n\
         [[listen]]\naddr = \"{reverse}\"\nmode = \"reverse\"\norigin = {origin:?}\n\n{modules}\n",
        log.display().to_string()
    );
    let config = dir.join("weir.toml");
    std::fs::write(&config, &text).expect("write the configuration");
    Launch {
        dir,
        config,
        text,
        listeners: vec![("forward", forward), ("reverse", reverse)],
        admin: Some(admin),
    }
}

/// `weir check` on a file of one forward listener and `module` (its `[[module]]`
/// sections), expecting an error at `line` for `key`; returns the message.
pub fn check_module_error(module: &str, line: usize, key: &str) -> String {
    let dir = temp_dir("module-check");
    let text = format!("[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n\n{module}");
    let path = write_config(&dir, "weir.toml", &text);
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        std::time::Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    let expected = format!("weir: {}:{line}: key `{key}`: ", path.display());
    let found = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&expected))
        .unwrap_or_else(|| panic!("no line starting with {expected:?} in:\n{stderr}"));
    let _ = std::fs::remove_dir_all(&dir);
    found.to_string()
}
