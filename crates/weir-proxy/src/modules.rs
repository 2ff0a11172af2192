//! The loaded modules and the calls into them at each event.
//!
//! One list of module indexes per event is built when the configuration loads, so an
//! event no module asked for costs one branch. Every call is guarded: a panic (or a
//! panicking future) fails only its transaction, or is skipped when the module is
//! optional, and is counted.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use weir_api::{engine, Decision, Event, Flow, Module, Reply, Txn};

use crate::config::{Config, ConfigError, ListenConfig};
use crate::metrics::Metrics;

/// The modules a configuration loads, built once and shared by the listeners' chains.
pub(crate) struct LoadedModules {
    /// (name, module, optional), in configuration order, enabled ones only.
    modules: Vec<(String, Arc<dyn Module>, bool)>,
}

impl LoadedModules {
    /// Starts the timers the modules asked for. Each stops when its module is gone
    /// (unloaded by a reload and no longer used by any transaction).
    pub fn start_timers(&self, metrics: &Arc<Metrics>) {
        for (name, module, _) in &self.modules {
            for timer in module.timers() {
                let module = Arc::downgrade(module);
                let (name, metrics) = (name.clone(), metrics.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(timer.after).await;
                    loop {
                        let Some(m) = module.upgrade() else { return };
                        if let Err(panic) = guarded(|| m.on_timer(timer.id)) {
                            metrics.module_failed(&name);
                            tracing::error!(module = %name, event = "timer", "module panicked: {}", panic_text(&panic));
                        }
                        drop(m);
                        match timer.every {
                            Some(period) => {
                                tokio::time::sleep(period.max(std::time::Duration::from_millis(1)))
                                    .await
                            }
                            None => return,
                        }
                    }
                });
            }
        }
    }

    /// The chains of one listener: its own (the modules it names, in `[[module]]`
    /// order, or every loaded module when it names none) and one per route that
    /// names modules of its own.
    pub fn chains_for(&self, listener: &ListenConfig) -> Arc<ListenerChains> {
        let routes = listener
            .route
            .iter()
            .map(|r| r.modules.as_deref().map(|names| self.chain_of(Some(names))))
            .collect();
        Arc::new(ListenerChains {
            listener: self.chain_of(listener.modules.as_deref()),
            routes,
        })
    }

    fn chain_of(&self, names: Option<&[String]>) -> Arc<ModuleChain> {
        let chosen = self
            .modules
            .iter()
            .filter(|(name, ..)| names.is_none_or(|names| names.contains(name)))
            .map(|(_, m, optional)| (m.clone(), *optional))
            .collect();
        Arc::new(ModuleChain::new(chosen))
    }
}

/// Builds every enabled `[[module]]` of `config` with the factory of its name. Errors
/// name the file, line and key.
pub(crate) fn load(
    config: &Config,
    factories: &[Box<dyn weir_api::ModuleFactory>],
    context: &weir_api::ModuleContext,
) -> Result<LoadedModules, ConfigError> {
    let mut modules = Vec::new();
    for (i, section) in config.module.iter().enumerate() {
        if !section.enabled {
            continue;
        }
        let Some(factory) = factories.iter().find(|f| f.name() == section.name) else {
            let known: Vec<&str> = factories.iter().map(|f| f.name()).collect();
            return Err(config.module_error(
                i,
                Some("name"),
                format!(
                    "no module named `{}` (available: {})",
                    section.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        let settings = weir_api::Settings::from_table(section.settings.clone());
        let module = factory
            .build(&settings, context)
            .map_err(|e| config.module_error(i, e.key.as_deref(), e.message))?;
        modules.push((section.name.clone(), module, section.optional));
    }
    if !cfg!(feature = "modules") && !modules.is_empty() {
        return Err(config.module_error(0, None, "this build of Weir has no module support"));
    }
    Ok(LoadedModules { modules })
}

struct Loaded {
    module: Arc<dyn Module>,
    optional: bool,
}

/// The modules of one configuration, in the operator's order.
#[derive(Default)]
pub(crate) struct ModuleChain {
    modules: Vec<Loaded>,
    by_event: [Vec<u16>; 8],
}

/// The module chains of one listener: a reload replaces them together.
#[derive(Default)]
pub(crate) struct ListenerChains {
    listener: Arc<ModuleChain>,
    /// Per route (configuration order): its own chain when it names modules.
    routes: Vec<Option<Arc<ModuleChain>>>,
}

impl ListenerChains {
    /// Whether some route has modules of its own (else the route need not be found).
    pub fn by_route(&self) -> bool {
        self.routes.iter().any(Option::is_some)
    }

    /// The chain for a request that matched route `route` (`None`: no route, or a
    /// forward listener).
    pub fn for_route(&self, route: Option<usize>) -> &Arc<ModuleChain> {
        route
            .and_then(|i| self.routes.get(i))
            .and_then(Option::as_ref)
            .unwrap_or(&self.listener)
    }
}

/// A transaction's module context: the chain it started with and its [`Txn`].
pub(crate) struct ModTxn {
    pub chain: Arc<ModuleChain>,
    pub txn: Txn,
}

impl ModTxn {
    /// Whether this transaction's chain wants `event`.
    pub fn wants(&self, event: Event) -> bool {
        self.chain.wants(event)
    }
}

/// What the modules decided at one event.
pub(crate) enum Hook {
    Continue,
    Respond(Reply),
    /// A module that is not optional failed (panicked).
    Failed(String),
}

/// A callback of one event, applied to what that event works on.
pub(crate) type Callback<T> = for<'a> fn(&'a dyn Module, &'a mut Txn, &'a mut T) -> Flow<'a>;

impl ModuleChain {
    /// A chain of `modules` (module, optional), in order.
    pub fn new(modules: Vec<(Arc<dyn Module>, bool)>) -> ModuleChain {
        let mut chain = ModuleChain::default();
        for (i, (module, optional)) in modules.into_iter().enumerate() {
            let wanted = module.events();
            for event in Event::ALL {
                if wanted.contains(event) {
                    chain.by_event[event as usize].push(i as u16);
                }
            }
            chain.modules.push(Loaded { module, optional });
        }
        chain
    }

    /// Whether any module is loaded.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !cfg!(feature = "modules") || self.modules.is_empty()
    }

    /// Whether any module wants `event`.
    #[inline]
    pub fn wants(&self, event: Event) -> bool {
        cfg!(feature = "modules") && !self.by_event[event as usize].is_empty()
    }

    /// A transaction context bound to this chain, when it has modules at all. The
    /// transaction keeps using this chain even if a reload replaces it meanwhile.
    pub fn new_txn(self: &Arc<Self>, client: std::net::SocketAddr) -> Option<Box<ModTxn>> {
        (!self.is_empty()).then(|| {
            Box::new(ModTxn {
                chain: self.clone(),
                txn: engine::new_txn(client, self.modules.len()),
            })
        })
    }

    /// Calls every module that wants `event`, in order, on `target`.
    pub async fn run<T>(
        &self,
        event: Event,
        txn: &mut Txn,
        target: &mut T,
        call: Callback<T>,
        metrics: &Metrics,
    ) -> Hook {
        for &i in &self.by_event[event as usize] {
            let loaded = &self.modules[i as usize];
            engine::set_current(txn, i as usize);
            let module = &*loaded.module;
            let called = guarded(|| call(module, txn, target));
            let decision = match called {
                Ok(Flow::Continue) => continue,
                Ok(Flow::Respond(reply)) => Ok(Decision::Respond(reply)),
                Ok(Flow::Wait(pending)) => AssertUnwindSafe(pending).catch_unwind().await,
                Err(panic) => Err(panic),
            };
            match decision {
                Ok(Decision::Continue) => {}
                Ok(Decision::Respond(reply)) => return Hook::Respond(reply),
                Err(panic) => {
                    let name = loaded.module.name().to_string();
                    metrics.module_failed(&name);
                    tracing::error!(module = %name, event = event.name(), "module panicked: {}", panic_text(&panic));
                    if !loaded.optional {
                        return Hook::Failed(name);
                    }
                }
            }
        }
        Hook::Continue
    }

    /// Calls every module's `on_log`.
    pub fn log(&self, txn: &mut Txn, metrics: &Metrics) {
        for &i in &self.by_event[Event::Log as usize] {
            let loaded = &self.modules[i as usize];
            engine::set_current(txn, i as usize);
            let txn: &Txn = txn;
            if let Err(panic) =
                std::panic::catch_unwind(AssertUnwindSafe(|| loaded.module.on_log(txn)))
            {
                let name = loaded.module.name();
                metrics.module_failed(name);
                tracing::error!(module = %name, event = "log", "module panicked: {}", panic_text(&panic));
            }
        }
    }
}

/// Runs `f`, turning a panic into an error. Taking `FnOnce` makes the closure one,
/// so what it returns may borrow what it captured.
fn guarded<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The callbacks of each event, as [`Callback`]s.
pub(crate) mod call {
    use weir_api::{BodyChunk, CacheLookup, Flow, Module, RequestHead, ResponseHead, Txn};

    pub fn request_headers<'a>(
        m: &'a dyn Module,
        t: &'a mut Txn,
        r: &'a mut RequestHead,
    ) -> Flow<'a> {
        m.on_request_headers(t, r)
    }
    pub fn cache_lookup<'a>(m: &'a dyn Module, t: &'a mut Txn, l: &'a mut CacheLookup) -> Flow<'a> {
        m.on_cache_lookup(t, *l)
    }
    pub fn upstream_request<'a>(
        m: &'a dyn Module,
        t: &'a mut Txn,
        r: &'a mut RequestHead,
    ) -> Flow<'a> {
        m.on_upstream_request(t, r)
    }
    pub fn response_headers<'a>(
        m: &'a dyn Module,
        t: &'a mut Txn,
        r: &'a mut ResponseHead,
    ) -> Flow<'a> {
        m.on_response_headers(t, r)
    }
    pub fn response_body<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
        m.on_response_body(t, c)
    }
    pub fn deliver_headers<'a>(
        m: &'a dyn Module,
        t: &'a mut Txn,
        r: &'a mut ResponseHead,
    ) -> Flow<'a> {
        m.on_deliver_headers(t, r)
    }
    pub fn deliver_body<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
        m.on_deliver_body(t, c)
    }
}
