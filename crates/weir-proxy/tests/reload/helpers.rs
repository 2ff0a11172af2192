//! The harness: a reverse proxy in this process, reloaded with new `[[module]]`s.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::support;
use crate::support::client::{direct_client, send, Fetched};
use crate::support::origin::TestOrigin;
use weir_api::http::StatusCode;
use weir_api::{Module, ModuleContext, ModuleFactory, Settings, SettingsError};
use weir_proxy::{Config, Server};

/// The name configurations are parsed under (it appears in errors).
pub const FILE: &str = "reload-test.toml";

pub type Build = Box<dyn Fn(&ModuleContext) -> Arc<dyn Module> + Send + Sync>;

/// Builds a new module on every (re)load; refuses any setting with the key `colour`
/// (the only one these tests write).
pub struct Factory {
    name: &'static str,
    build: Build,
}

impl Factory {
    pub fn boxed(
        name: &'static str,
        build: impl Fn(&ModuleContext) -> Arc<dyn Module> + Send + Sync + 'static,
    ) -> Box<dyn ModuleFactory> {
        Box::new(Factory {
            name,
            build: Box::new(build),
        })
    }
}

impl ModuleFactory for Factory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        if !settings.is_empty() {
            return Err(SettingsError::at("colour", "test modules take no colour"));
        }
        Ok((self.build)(context))
    }
}

/// The fixed part of every configuration: one reverse listener and an admin listener.
pub fn head(origin: &str, admin: SocketAddr) -> String {
    format!(
        "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\n\n\
         [timeouts]\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"reverse\"\norigin = {origin:?}\n\n"
    )
}

/// `[[module]]` sections for `names`, in order; a name may carry more lines after a
/// newline (`"second\nenabled = false"`).
pub fn modules(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| {
            let (name, rest) = n.split_once('\n').unwrap_or((n, ""));
            format!("[[module]]\nname = {name:?}\n{rest}\n\n")
        })
        .collect()
}

pub struct Weir {
    server: Server,
    head: String,
    addr: SocketAddr,
    admin: SocketAddr,
    factories: Vec<Box<dyn ModuleFactory>>,
    client: reqwest::Client,
}

pub async fn start(
    origin: &TestOrigin,
    factories: Vec<Box<dyn ModuleFactory>>,
    tail: &str,
) -> Weir {
    let base = origin.base();
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        format!("{}{tail}", head(&base, admin))
    };
    let (server, admin, text) = support::start_server(FILE, true, text_for, &factories).await;
    let admin = admin.expect("an admin listener");
    let head = text.strip_suffix(tail).unwrap_or(&text).to_string();
    let addr = server.local_addrs()[0];
    Weir {
        server,
        head,
        addr,
        admin,
        factories,
        client: direct_client(),
    }
}

impl Weir {
    /// Reloads the fixed part followed by `tail`: the summary, or the error.
    pub fn reload(&self, tail: &str) -> Result<String, String> {
        let text = format!("{}{tail}", self.head);
        let config = Config::parse(&text, FILE).map_err(|e| e.to_string())?;
        self.server
            .reload(&config, &self.factories)
            .map_err(|e| e.to_string())
    }

    /// Like [`Weir::reload`], which must succeed.
    pub fn reloaded(&self, tail: &str) -> String {
        self.reload(tail)
            .unwrap_or_else(|e| panic!("reload refused: {e}\n{tail}"))
    }

    /// The line in the file of line `n` (1-based) of a tail.
    pub fn tail_line(&self, n: usize) -> usize {
        self.head.lines().count() + n
    }

    pub async fn get(&self, path: &str) -> Fetched {
        let url = format!("http://{}{path}", self.addr);
        send(&self.client, "GET", &url, &[], None).await
    }

    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        let m = send(&self.client, "GET", &url, &[], None).await;
        assert_eq!(m.status, StatusCode::OK, "{}", m.text());
        m.text()
    }

    pub async fn stop(self) {
        drop(self.client);
        self.server.shutdown().await;
    }
}
