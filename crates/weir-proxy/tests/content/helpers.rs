//! The harness: a forward proxy in this process, with modules built by the test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::support;
use crate::support::client::{proxied_client, send, Fetched};
use weir_api::http::StatusCode;
use weir_api::{Module, ModuleContext, ModuleFactory, Settings, SettingsError};
use weir_proxy::Server;

/// Builds a module with the context the engine gives it.
pub struct Factory {
    pub name: &'static str,
    pub build: fn(&ModuleContext) -> Arc<dyn Module>,
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
            return Err(SettingsError {
                key: None,
                message: "test modules take no settings".into(),
            });
        }
        Ok((self.build)(context))
    }
}

/// A proxy running in this process: one forward listener.
pub struct Weir {
    server: Server,
    admin: SocketAddr,
    pub client: reqwest::Client,
}

/// Starts a forward proxy (and an admin listener) with `factories`, one
/// `[[module]]` each, writing its access log to `access_log` when given.
pub async fn start(factories: Vec<Factory>, access_log: Option<&PathBuf>) -> Weir {
    let log = access_log.map_or("off".to_string(), |p| p.display().to_string());
    let names: Vec<&'static str> = factories.iter().map(|f| f.name).collect();
    let text_for = |admin: Option<SocketAddr>| {
        let admin = admin.expect("an admin listener");
        let mut text = format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\n\n[log]\naccess = {log:?}\n\n\
         [timeouts]\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\n\n"
        );
        for name in &names {
            text.push_str(&format!("[[module]]\nname = {name:?}\n\n"));
        }
        text
    };
    let factories: Vec<Box<dyn ModuleFactory>> = factories
        .into_iter()
        .map(|f| Box::new(f) as Box<dyn ModuleFactory>)
        .collect();
    let (server, admin, _) =
        support::start_server("content-test.toml", true, text_for, &factories).await;
    let admin = admin.expect("an admin listener");
    let addr = server.local_addrs()[0];
    Weir {
        server,
        admin,
        client: proxied_client(addr),
    }
}

impl Weir {
    /// `GET url` through the proxy.
    pub async fn get(&self, url: &str) -> Fetched {
        send(&self.client, "GET", url, &[], None).await
    }

    /// Asks `control` for `op` on `url`, with `headers` as the call's arguments;
    /// returns its answer (`status=... size=... ttl=... variants=...`, `ok`, or
    /// `error=<ContentError>`).
    pub async fn control(&self, op: &str, url: &str, headers: &[(&str, &str)]) -> String {
        let r = self.control_response(op, url, headers).await;
        assert_eq!(r.status, StatusCode::OK, "{op} {url}: {}", r.text());
        r.text()
    }

    pub async fn control_response(&self, op: &str, url: &str, headers: &[(&str, &str)]) -> Fetched {
        let control = format!("http://control/{op}?{url}");
        send(&self.client, "GET", &control, headers, None).await
    }

    /// The text of the admin listener's `/metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        let m = send(&support::client::direct_client(), "GET", &url, &[], None).await;
        assert_eq!(m.status, StatusCode::OK, "{}", m.text());
        m.text()
    }

    pub async fn stop(self) {
        drop(self.client);
        self.server.shutdown().await;
    }
}
