//! A `weir` run on a configuration file that the test rewrites between reloads: a
//! reverse listener to an origin, a forward listener and an admin listener on free
//! ports (the part that stays), then whatever the test writes after them (the
//! `[[module]]` sections that change).

use std::net::SocketAddr;

use super::process::{free_port, temp_dir};
use super::proxy::{Launch, Proxy};

/// A running `weir` and the fixed part of its configuration file.
pub struct Reloadable {
    pub proxy: Proxy,
    head: String,
}

fn loopback() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

impl Reloadable {
    /// Starts `weir` on the fixed part followed by `tail` (e.g. `[[module]]` sections).
    /// `log` is the value of `[log] access` (`"off"`, or a file).
    pub fn start(origin: &str, log: &str, tail: &str) -> Reloadable {
        let mut head = String::new();
        let proxy = Proxy::start_on_free_ports(|| {
            let launch = Reloadable::launch(origin, log, tail);
            head = launch.1;
            launch.0
        });
        Reloadable { proxy, head }
    }

    /// The configuration written on ports found free now, and its fixed part.
    fn launch(origin: &str, log: &str, tail: &str) -> (Launch, String) {
        let dir = temp_dir("reload");
        let (admin, reverse, forward) = (loopback(), loopback(), loopback());
        let head = format!(
            "[admin]\nlisten = \"{admin}\"\n\n[log]\naccess = {log:?}\n\n\
             [[listen]]\naddr = \"{reverse}\"\nmode = \"reverse\"\norigin = {origin:?}\n\n\
             [[listen]]\naddr = \"{forward}\"\nmode = \"forward\"\n\n"
        );
        let text = format!("{head}{tail}");
        let config = dir.join("weir.toml");
        std::fs::write(&config, &text).expect("write the configuration");
        let listeners = vec![("reverse", reverse), ("forward", forward)];
        let launch = Launch {
            dir,
            config,
            text,
            listeners,
            admin: Some(admin),
        };
        (launch, head)
    }

    /// Replaces the file with the fixed part followed by `tail`.
    pub fn rewrite(&self, tail: &str) {
        std::fs::write(self.proxy.config_path(), format!("{}{tail}", self.head))
            .expect("rewrite the configuration");
    }

    /// The line number in the file of line `n` (1-based) of a `tail`.
    pub fn tail_line(&self, n: usize) -> usize {
        self.head.lines().count() + n
    }
}
