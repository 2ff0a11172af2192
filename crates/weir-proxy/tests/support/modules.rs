//! The in-process module harness: modules built by a test, handed to the real engine
//! (`Server::start_with_modules`) on free ports, and a recorder that writes down every
//! callback it gets.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::client::{direct_client, send, Fetched};
use super::eventually;
use super::origin::TestOrigin;
use weir_api::http::{HeaderMap, HeaderValue, StatusCode};
use weir_api::{
    BodyChunk, Bytes, CacheLookup, Events, Flow, Module, ModuleFactory, RequestHead, ResponseHead,
    Settings, SettingsError, Txn, WholeBody,
};
use weir_proxy::Server;

// ---------------------------------------------------------------------------------
// The harness: a proxy in this process, configured with modules built here.

/// Hands the engine a module built by the test, so the test keeps a handle on it.
pub struct Prebuilt {
    pub name: &'static str,
    pub module: Arc<dyn Module>,
}

impl ModuleFactory for Prebuilt {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(
        &self,
        settings: &Settings,
        _context: &weir_api::ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        if !settings.is_empty() {
            return Err(SettingsError {
                key: None,
                message: "test modules take no settings".into(),
            });
        }
        Ok(self.module.clone())
    }
}

/// What to start: reverse listeners to one origin, and `[[module]]` sections.
pub struct Setup {
    pub origin: String,
    /// Each listener's `modules` key (`None`: no key, every module).
    pub listeners: Vec<Option<Vec<&'static str>>>,
    /// (name, module, extra keys of its section)
    pub modules: Vec<(&'static str, Arc<dyn Module>, &'static str)>,
    pub admin: bool,
    /// Routes of the first listener: (path prefix, its `modules` key).
    pub routes: Vec<(&'static str, Option<Vec<&'static str>>)>,
    /// More configuration, appended as it is.
    pub extra: &'static str,
}

impl Setup {
    /// One reverse listener to `origin`, every module on it, no admin listener.
    pub fn new(origin: &TestOrigin) -> Setup {
        Setup {
            origin: origin.base(),
            listeners: vec![None],
            modules: Vec::new(),
            admin: false,
            routes: Vec::new(),
            extra: "",
        }
    }

    /// Adds a route to the first listener (to the same origin) with its own modules.
    pub fn route(mut self, path_prefix: &'static str, modules: Option<&[&'static str]>) -> Setup {
        self.routes.push((path_prefix, modules.map(<[_]>::to_vec)));
        self
    }

    /// Appends configuration text (e.g. a `[limits]` section).
    pub fn extra(mut self, text: &'static str) -> Setup {
        self.extra = text;
        self
    }

    /// Adds `[[module]] name = "<name>"`, built as `module`.
    pub fn module(self, name: &'static str, module: impl Module) -> Setup {
        self.module_with(name, module, "")
    }

    /// Adds `[[module]] name = "<name>"` with more keys (`optional = true`).
    pub fn module_with(
        mut self,
        name: &'static str,
        module: impl Module,
        keys: &'static str,
    ) -> Setup {
        self.modules.push((name, Arc::new(module), keys));
        self
    }

    /// Replaces the listeners: one per entry, with that `modules` key.
    pub fn listeners(mut self, listeners: &[Option<&[&'static str]>]) -> Setup {
        self.listeners = listeners.iter().map(|l| l.map(<[_]>::to_vec)).collect();
        self
    }

    /// Runs the admin listener (for `/metrics`) on a free port.
    pub fn admin(mut self) -> Setup {
        self.admin = true;
        self
    }

    pub fn config_text(&self, admin: Option<SocketAddr>) -> String {
        let admin = admin.map_or("\"off\"".to_string(), |a| format!("\"{a}\""));
        let mut text = format!(
            "[server]\nworkers = 1\n\n[admin]\nlisten = {admin}\n\n\
             [timeouts]\nshutdown_grace = \"1s\"\n\n"
        );
        for modules in &self.listeners {
            text.push_str(&format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"reverse\"\norigin = {:?}\n",
                self.origin
            ));
            if let Some(names) = modules {
                text.push_str(&format!("modules = {names:?}\n"));
            }
            text.push('\n');
            if std::ptr::eq(modules, &self.listeners[0]) {
                for (prefix, names) in &self.routes {
                    text.push_str(&format!(
                        "[[listen.route]]\npath_prefix = {prefix:?}\norigin = {:?}\n",
                        self.origin
                    ));
                    if let Some(names) = names {
                        text.push_str(&format!("modules = {names:?}\n"));
                    }
                    text.push('\n');
                }
            }
        }
        text.push_str(self.extra);
        text.push('\n');
        for (name, _, keys) in &self.modules {
            text.push_str(&format!("[[module]]\nname = {name:?}\n{keys}\n\n"));
        }
        text
    }

    pub async fn start(self) -> Weir {
        let factories: Vec<Box<dyn ModuleFactory>> = self
            .modules
            .iter()
            .map(|(name, module, _)| {
                Box::new(Prebuilt {
                    name,
                    module: module.clone(),
                }) as Box<dyn ModuleFactory>
            })
            .collect();
        let (server, admin, _) = super::start_server(
            "modules-test.toml",
            self.admin,
            |admin| self.config_text(admin),
            &factories,
        )
        .await;
        let addrs = server.local_addrs().to_vec();
        Weir {
            server,
            addrs,
            admin,
            client: direct_client(),
        }
    }
}

/// A proxy running in this process.
pub struct Weir {
    pub server: Server,
    pub addrs: Vec<SocketAddr>,
    pub admin: Option<SocketAddr>,
    pub client: reqwest::Client,
}

impl Weir {
    pub fn url_on(&self, listener: usize, path: &str) -> String {
        format!("http://{}{path}", self.addrs[listener])
    }

    pub async fn get(&self, path: &str) -> Fetched {
        self.get_with(path, &[]).await
    }

    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Fetched {
        send(&self.client, "GET", &self.url_on(0, path), headers, None).await
    }

    pub async fn get_on(&self, listener: usize, path: &str) -> Fetched {
        send(&self.client, "GET", &self.url_on(listener, path), &[], None).await
    }

    pub async fn post(&self, path: &str, body: &[u8]) -> Fetched {
        let url = self.url_on(0, path);
        send(&self.client, "POST", &url, &[], Some(body.to_vec())).await
    }

    /// The text of the admin listener's `/metrics`.
    pub async fn metrics(&self) -> String {
        let admin = self.admin.expect("start with .admin()");
        let url = format!("http://{admin}/metrics");
        let m = send(&self.client, "GET", &url, &[], None).await;
        assert_eq!(m.status, StatusCode::OK, "{}", m.text());
        m.text()
    }

    pub async fn stop(self) {
        drop(self.client);
        self.server.shutdown().await;
    }
}

pub fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("a valid header value")
}

/// The request's path.
pub fn path(request: &RequestHead) -> &str {
    request.uri.path()
}

// ---------------------------------------------------------------------------------
// A recorder: writes down every callback it gets, with the body bytes it saw.

/// What a recorder saw, in order: the event (`cache_lookup(Miss)`,
/// `response_body(last)` ...) and, for body events, the chunk's bytes.
#[derive(Clone, Default)]
pub struct Journal(pub Arc<Mutex<Vec<(String, Bytes)>>>);

impl Journal {
    pub fn note(&self, what: impl Into<String>, data: Bytes) {
        self.0.lock().unwrap().push((what.into(), data));
    }

    pub fn chunk(&self, event: &str, chunk: &BodyChunk) {
        let name = if chunk.last {
            format!("{event}(last)")
        } else {
            event.to_string()
        };
        self.note(name, chunk.data.clone());
    }

    pub fn entries(&self) -> Vec<(String, Bytes)> {
        self.0.lock().unwrap().clone()
    }

    pub fn names(&self) -> Vec<String> {
        self.entries().into_iter().map(|(n, _)| n).collect()
    }

    /// Takes what was written so far, once the transaction's `log` event is in.
    pub async fn take_transaction(&self) -> Vec<(String, Bytes)> {
        eventually("the log event", || self.names().iter().any(|n| n == "log")).await;
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A one-line summary of a journal, for failure messages and the test output.
pub fn summary(journal: &[(String, Bytes)]) -> String {
    journal
        .iter()
        .map(|(n, d)| {
            if n.contains("_body") {
                format!("{n}[{}]", d.len())
            } else {
                n.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every callback notes itself in the journal, whatever `events` says, so a call for
/// an event it did not register for would show.
pub struct Recorder {
    pub name: &'static str,
    pub events: Events,
    pub journal: Journal,
}

impl Recorder {
    pub fn new(name: &'static str, events: Events) -> (Recorder, Journal) {
        let journal = Journal::default();
        let recorder = Recorder {
            name,
            events,
            journal: journal.clone(),
        };
        (recorder, journal)
    }
}

impl Module for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    fn events(&self) -> Events {
        self.events
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        self.journal.note("request_headers", Bytes::new());
        Flow::Continue
    }

    fn on_whole_request<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _r: &'a mut RequestHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.journal.note("whole_request", body.data.clone());
        Flow::Continue
    }

    fn on_request_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.journal.chunk("request_body", chunk);
        Flow::Continue
    }

    fn on_cache_lookup<'a>(&'a self, _txn: &'a mut Txn, lookup: CacheLookup) -> Flow<'a> {
        self.journal
            .note(format!("cache_lookup({lookup:?})"), Bytes::new());
        Flow::Continue
    }

    fn on_upstream_request<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        self.journal.note("upstream_request", Bytes::new());
        Flow::Continue
    }

    fn on_response_headers<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut ResponseHead) -> Flow<'a> {
        self.journal.note("response_headers", Bytes::new());
        Flow::Continue
    }

    fn on_whole_response<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _r: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.journal.note("whole_response", body.data.clone());
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.journal.chunk("response_body", chunk);
        Flow::Continue
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut ResponseHead) -> Flow<'a> {
        self.journal.note("deliver_headers", Bytes::new());
        Flow::Continue
    }

    fn on_deliver_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.journal.chunk("deliver_body", chunk);
        Flow::Continue
    }

    fn on_request_trailers<'a>(&'a self, _txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        self.journal.note("request_trailers", trailer_text(t));
        Flow::Continue
    }

    fn on_response_trailers<'a>(&'a self, _txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        self.journal.note("response_trailers", trailer_text(t));
        Flow::Continue
    }

    fn on_log(&self, _txn: &Txn) {
        self.journal.note("log", Bytes::new());
    }
}

/// Trailer fields as `name: value` lines, for the journal.
pub fn trailer_text(trailers: &HeaderMap) -> Bytes {
    let mut text = String::new();
    for (name, value) in trailers {
        text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
    }
    Bytes::from(text)
}
