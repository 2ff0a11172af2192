//! `Server::reload` in one process, with modules defined here: reordering, enabling
//! and disabling, refused configurations, transactions in flight keeping the chain
//! they started with, timers started and stopped by reloads, and module counters
//! that survive a reload. Real engine on free ports, real origin, real client; each
//! test asserts what the client saw and how often the origin was asked.
#![cfg(feature = "modules")]

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::client::{direct_client, metric, send, Fetched};
use support::origin::TestOrigin;
use support::reply::Reply;
use support::{eventually, SOON};
use weir_api::http::{HeaderValue, StatusCode};
use weir_api::{
    Decision, Event, Events, Flow, Module, ModuleContext, ModuleFactory, RequestHead, ResponseHead,
    Settings, SettingsError, Timer, Txn,
};
use weir_proxy::{Config, Server};

/// The name configurations are parsed under (it appears in errors).
const FILE: &str = "reload-test.toml";

// ---------------------------------------------------------------------------------
// The harness: a reverse proxy in this process, reloaded with new `[[module]]`s.

type Build = Box<dyn Fn(&ModuleContext) -> Arc<dyn Module> + Send + Sync>;

/// Builds a new module on every (re)load; refuses any setting with the key `colour`
/// (the only one these tests write).
struct Factory {
    name: &'static str,
    build: Build,
}

impl Factory {
    fn boxed(
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
fn head(origin: &str, admin: SocketAddr) -> String {
    format!(
        "[server]\nworkers = 1\n\n[admin]\nlisten = \"{admin}\"\n\n\
         [timeouts]\nshutdown_grace = \"1s\"\n\n\
         [[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"reverse\"\norigin = {origin:?}\n\n"
    )
}

/// `[[module]]` sections for `names`, in order; a name may carry more lines after a
/// newline (`"second\nenabled = false"`).
fn modules(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| {
            let (name, rest) = n.split_once('\n').unwrap_or((n, ""));
            format!("[[module]]\nname = {name:?}\n{rest}\n\n")
        })
        .collect()
}

struct Weir {
    server: Server,
    head: String,
    addr: SocketAddr,
    admin: SocketAddr,
    factories: Vec<Box<dyn ModuleFactory>>,
    client: reqwest::Client,
}

async fn start(origin: &TestOrigin, factories: Vec<Box<dyn ModuleFactory>>, tail: &str) -> Weir {
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
    fn reload(&self, tail: &str) -> Result<String, String> {
        let text = format!("{}{tail}", self.head);
        let config = Config::parse(&text, FILE).map_err(|e| e.to_string())?;
        self.server
            .reload(&config, &self.factories)
            .map_err(|e| e.to_string())
    }

    /// Like [`Weir::reload`], which must succeed.
    fn reloaded(&self, tail: &str) -> String {
        self.reload(tail)
            .unwrap_or_else(|e| panic!("reload refused: {e}\n{tail}"))
    }

    /// The line in the file of line `n` (1-based) of a tail.
    fn tail_line(&self, n: usize) -> usize {
        self.head.lines().count() + n
    }

    async fn get(&self, path: &str) -> Fetched {
        let url = format!("http://{}{path}", self.addr);
        send(&self.client, "GET", &url, &[], None).await
    }

    async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        let m = send(&self.client, "GET", &url, &[], None).await;
        assert_eq!(m.status, StatusCode::OK, "{}", m.text());
        m.text()
    }

    async fn stop(self) {
        drop(self.client);
        self.server.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------
// Modules.

/// Appends its name to the `x-order` response header at deliver headers, so the
/// header's values show the chain's order.
struct Stamp(&'static str);

impl Module for Stamp {
    fn name(&self) -> &str {
        self.0
    }

    fn events(&self) -> Events {
        Events::of(&[Event::DeliverHeaders])
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        r.headers
            .append("x-order", HeaderValue::from_static(self.0));
        Flow::Continue
    }
}

fn stamps() -> Vec<Box<dyn ModuleFactory>> {
    vec![
        Factory::boxed("first", |_| Arc::new(Stamp("first"))),
        Factory::boxed("second", |_| Arc::new(Stamp("second"))),
        Factory::boxed("third", |_| Arc::new(Stamp("third"))),
    ]
}

fn order(r: &Fetched) -> Vec<String> {
    r.header_all("x-order")
}

/// What the test shares with a [`Holder`]: requests for `/held*` wait at request
/// headers until the test releases them.
struct Gate {
    entered: AtomicUsize,
    release: tokio::sync::Semaphore,
    /// Timer firings.
    ticks: AtomicUsize,
    /// Firings of the one-shot timer.
    once: AtomicUsize,
    /// Modules built, and dropped.
    built: AtomicUsize,
    dropped: AtomicUsize,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            entered: AtomicUsize::new(0),
            release: tokio::sync::Semaphore::new(0),
            ticks: AtomicUsize::new(0),
            once: AtomicUsize::new(0),
            built: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        }
    }
}

/// Holds `/held*` requests at request headers until released; adds `x-holder` at
/// deliver headers; asks for a 20 ms periodic timer (id 7) and a one-shot (id 1).
struct Holder {
    gate: Arc<Gate>,
    /// Timer ids this instance has seen, to catch one it did not ask for.
    wrong_timer: AtomicBool,
}

impl Holder {
    fn factory(gate: &Arc<Gate>) -> Box<dyn ModuleFactory> {
        let gate = gate.clone();
        Factory::boxed("holder", move |_| {
            gate.built.fetch_add(1, Ordering::SeqCst);
            Arc::new(Holder {
                gate: gate.clone(),
                wrong_timer: AtomicBool::new(false),
            })
        })
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        assert!(!self.wrong_timer.load(Ordering::SeqCst), "unknown timer id");
        self.gate.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Module for Holder {
    fn name(&self) -> &str {
        "holder"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::DeliverHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if !r.uri.path().starts_with("/held") {
            return Flow::Continue;
        }
        Flow::wait(async move {
            self.gate.entered.fetch_add(1, Ordering::SeqCst);
            self.gate
                .release
                .acquire()
                .await
                .expect("the gate stays open")
                .forget();
            Decision::Continue
        })
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        r.headers
            .insert("x-holder", HeaderValue::from_static("yes"));
        Flow::Continue
    }

    fn timers(&self) -> Vec<Timer> {
        vec![
            Timer {
                id: 7,
                after: Duration::ZERO,
                every: Some(Duration::from_millis(20)),
            },
            Timer {
                id: 1,
                after: Duration::from_millis(30),
                every: None,
            },
        ]
    }

    fn on_timer(&self, id: u32) {
        match id {
            7 => self.gate.ticks.fetch_add(1, Ordering::SeqCst),
            1 => self.gate.once.fetch_add(1, Ordering::SeqCst),
            _ => {
                self.wrong_timer.store(true, Ordering::SeqCst);
                0
            }
        };
    }
}

/// Counts every request in `weir_module_counting_requests_total`.
struct Counting(weir_api::Counter);

impl Module for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        self.0.inc();
        Flow::Continue
    }
}

// ---------------------------------------------------------------------------------
// Order, enabling, disabling.

#[tokio::test]
async fn a_reload_reorders_enables_and_disables_modules() {
    let origin = TestOrigin::start();
    origin.route("/o/*", Reply::ok("ordered").cc("max-age=60"));
    let weir = start(&origin, stamps(), &modules(&["first", "second"])).await;

    let r = weir.get("/o/1").await;
    assert_eq!(r.text(), "ordered");
    assert_eq!(order(&r), ["first", "second"]);

    let summary = weir.reloaded(&modules(&["second", "first"]));
    assert!(summary.contains("[second, first]"), "{summary}");
    // The stored response and a new one alike: deliver headers is not stored.
    for path in ["/o/1", "/o/2"] {
        assert_eq!(order(&weir.get(path).await), ["second", "first"], "{path}");
    }

    // Disabled: gone from the chain and from the summary.
    let summary = weir.reloaded(&modules(&["first", "second\nenabled = false", "third"]));
    assert!(summary.contains("[first, third]"), "{summary}");
    assert_eq!(order(&weir.get("/o/1").await), ["first", "third"]);

    // Enabled again, in a new place.
    weir.reloaded(&modules(&["second\nenabled = true", "third", "first"]));
    assert_eq!(order(&weir.get("/o/1").await), ["second", "third", "first"]);

    // None at all.
    let summary = weir.reloaded("");
    assert!(summary.contains("[]"), "{summary}");
    let r = weir.get("/o/3").await;
    assert_eq!(r.text(), "ordered");
    assert!(order(&r).is_empty(), "{:?}", r.headers);

    assert_eq!(origin.count("/o/1"), 1);
    assert_eq!(origin.count("/o/2"), 1);
    assert_eq!(origin.count("/o/3"), 1);
    weir.stop().await;
}

#[tokio::test]
async fn a_refused_reload_changes_nothing() {
    let origin = TestOrigin::start();
    origin.route("/x/*", Reply::ok("same").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let mut factories = stamps();
    factories.push(Holder::factory(&gate));
    let weir = start(&origin, factories, &modules(&["first", "second"])).await;
    assert_eq!(order(&weir.get("/x/0").await), ["first", "second"]);

    // An unknown module, after one that builds: the error names its line and key.
    let error = weir
        .reload(&modules(&["holder", "second", "fourth"]))
        .unwrap_err();
    let at = format!("{FILE}:{}: key `module[2].name`", weir.tail_line(10));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert!(error.contains("fourth"), "{error}");
    assert_eq!(order(&weir.get("/x/1").await), ["first", "second"]);

    // A setting the factory refuses.
    let error = weir
        .reload(&modules(&["second", "first\ncolour = \"red\""]))
        .unwrap_err();
    let at = format!("{FILE}:{}: key `module[1].colour`", weir.tail_line(7));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert_eq!(order(&weir.get("/x/2").await), ["first", "second"]);

    // A syntax error.
    let error = weir.reload("[[module]]\nname = second\n").unwrap_err();
    let at = format!("{FILE}:{}: key `module[0].name`", weir.tail_line(2));
    assert!(error.starts_with(&at), "expected {at:?}: {error}");
    assert_eq!(order(&weir.get("/x/3").await), ["first", "second"]);

    // The holder built by the refused reload was dropped and its timers never ran.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gate.built.load(Ordering::SeqCst), 1);
    assert_eq!(gate.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(gate.ticks.load(Ordering::SeqCst), 0);
    assert_eq!(gate.once.load(Ordering::SeqCst), 0);

    for n in 0..4 {
        assert_eq!(origin.count(&format!("/x/{n}")), 1);
    }
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Transactions in flight.

#[tokio::test]
async fn a_transaction_in_flight_keeps_its_chain() {
    let origin = TestOrigin::start();
    origin.route("/held", Reply::ok("held").cc("no-store"));
    origin.route("/free/*", Reply::ok("free").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let mut factories = stamps();
    factories.push(Holder::factory(&gate));
    let weir = Arc::new(start(&origin, factories, &modules(&["first", "holder"])).await);

    let held = {
        let weir = weir.clone();
        tokio::spawn(async move { weir.get("/held").await })
    };
    eventually("the request to wait at request headers", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    // Without the holder: new requests do not wait and are not stamped by it.
    weir.reloaded(&modules(&["second"]));
    let r = weir.get("/free/1").await;
    assert_eq!(r.text(), "free");
    assert_eq!(order(&r), ["second"]);
    assert_eq!(r.header("x-holder"), None);
    assert_eq!(origin.count("/held"), 0, "still held");

    // Released, the held transaction finishes with the chain it started with.
    gate.release.add_permits(1);
    let r = tokio::time::timeout(SOON, held)
        .await
        .expect("the held request ends")
        .unwrap();
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "held"));
    assert_eq!(order(&r), ["first"]);
    assert_eq!(r.header("x-holder").as_deref(), Some("yes"));
    assert_eq!(origin.count("/held"), 1);
    assert_eq!(origin.count("/free/1"), 1);

    // A /held request now passes straight through the new chain.
    let r = tokio::time::timeout(SOON, weir.get("/held"))
        .await
        .expect("no holder: not held");
    assert_eq!(order(&r), ["second"]);
    assert_eq!(gate.entered.load(Ordering::SeqCst), 1);
    let Ok(weir) = Arc::try_unwrap(weir) else {
        panic!("the held request's task still has the proxy")
    };
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Timers.

/// Ticks counted by `gate` stay the same for `window` (after a short settle).
async fn ticks_stop(gate: &Gate, window: Duration) -> usize {
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = gate.ticks.load(Ordering::SeqCst);
    tokio::time::sleep(window).await;
    let after = gate.ticks.load(Ordering::SeqCst);
    assert_eq!(after, before, "the timer still fires");
    after
}

/// Ticks counted by `gate` grow by at least `n` within [`SOON`].
async fn ticks_grow(gate: &Gate, n: usize) {
    let from = gate.ticks.load(Ordering::SeqCst);
    eventually(&format!("{n} more ticks after {from}"), || {
        gate.ticks.load(Ordering::SeqCst) >= from + n
    })
    .await;
}

#[tokio::test]
async fn timers_start_with_the_module_and_stop_when_a_reload_unloads_it() {
    let origin = TestOrigin::start();
    origin.route("/held", Reply::ok("held").cc("no-store"));
    let gate = Arc::new(Gate::default());
    let weir = Arc::new(start(&origin, vec![Holder::factory(&gate)], &modules(&["holder"])).await);
    ticks_grow(&gate, 5).await;
    eventually("the one-shot timer", || {
        gate.once.load(Ordering::SeqCst) == 1
    })
    .await;

    // Unloaded: no more ticks.
    weir.reloaded("");
    ticks_stop(&gate, Duration::from_millis(300)).await;
    assert_eq!(gate.dropped.load(Ordering::SeqCst), 1);

    // Loaded again: a new instance, with its own timers (the one-shot fires again).
    weir.reloaded(&modules(&["holder"]));
    ticks_grow(&gate, 5).await;
    eventually("the new one-shot timer", || {
        gate.once.load(Ordering::SeqCst) == 2
    })
    .await;

    // Unloaded while a transaction still uses it: its timers go on until that
    // transaction is over.
    let held = {
        let weir = weir.clone();
        tokio::spawn(async move { weir.get("/held").await })
    };
    eventually("the request to wait", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    weir.reloaded("");
    ticks_grow(&gate, 5).await;
    gate.release.add_permits(1);
    let r = tokio::time::timeout(SOON, held)
        .await
        .expect("the held request ends")
        .unwrap();
    assert_eq!(r.text(), "held");
    assert_eq!(r.header("x-holder").as_deref(), Some("yes"));
    eventually("the last holder to be dropped", || {
        gate.dropped.load(Ordering::SeqCst) == 2
    })
    .await;
    ticks_stop(&gate, Duration::from_millis(300)).await;
    assert_eq!(gate.built.load(Ordering::SeqCst), 2);
    assert_eq!(gate.once.load(Ordering::SeqCst), 2);
    assert_eq!(origin.count("/held"), 1);
    let Ok(weir) = Arc::try_unwrap(weir) else {
        panic!("the held request's task still has the proxy")
    };
    weir.stop().await;
}

// ---------------------------------------------------------------------------------
// Counters.

#[tokio::test]
async fn a_module_counter_keeps_counting_across_reloads() {
    let origin = TestOrigin::start();
    origin.route("/c/*", Reply::ok("counted").cc("no-store"));
    let factories = vec![Factory::boxed("counting", |context| {
        Arc::new(Counting(
            context.counter("counting_requests", "requests the test module saw"),
        ))
    })];
    let weir = start(&origin, factories, &modules(&["counting"])).await;
    let name = "weir_module_counting_requests_total";
    weir.get("/c/1").await;
    weir.get("/c/2").await;
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(2.0));

    // Rebuilt by the reload, the module gets the same counter back.
    weir.reloaded(&modules(&["counting"]));
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(2.0));
    weir.get("/c/3").await;
    let text = weir.metrics().await;
    assert_eq!(metric(&text, name, &[]), Some(3.0), "{text}");
    assert_eq!(text.matches(&format!("\n{name} ")).count(), 1, "{text}");

    // Unloaded: the counter stays, and stops.
    weir.reloaded("");
    weir.get("/c/4").await;
    assert_eq!(metric(&weir.metrics().await, name, &[]), Some(3.0));
    for n in 1..=4 {
        assert_eq!(origin.count(&format!("/c/{n}")), 1);
    }
    weir.stop().await;
}
