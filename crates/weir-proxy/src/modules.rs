//! The loaded modules and the calls into them at each event.
//!
//! One list of module indexes per event is built when the configuration loads, so an
//! event no module asked for costs one branch. Every call is guarded: a panic (or a
//! panicking future) fails only its transaction, or is skipped when the module is
//! optional, and is counted.

pub(crate) mod call;
pub(crate) mod load;
pub(crate) mod txn;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use weir_api::{engine, Decision, Event, Flow, Module, Reply, Txn};

use crate::metrics::{Metrics, ModuleEvents, ThreadCounts};

struct Loaded {
    module: Arc<dyn Module>,
    optional: bool,
    /// Where its calls are counted.
    events: Arc<ModuleEvents>,
}

/// The modules of one configuration, in the operator's order.
#[derive(Default)]
pub(crate) struct ModuleChain {
    modules: Vec<Loaded>,
    by_event: [Vec<u16>; Event::ALL.len()],
    /// Some module takes the request's credentials ([`Module::takes_credentials`]).
    takes_credentials: bool,
    /// How long a `Flow::Wait` future may take (zero: no limit).
    wait_limit: Duration,
}

/// What the modules decided at one event.
pub(crate) enum Hook {
    Continue,
    /// Boxed: rare, and a small `Hook` is cheap to return on every event.
    Respond(Box<Reply>),
    /// A module that is not optional failed (panicked).
    Failed(String),
}

impl Hook {
    /// Whether the modules let the transaction go on. Takes the hook, so that the
    /// common `Continue` is dropped with no call.
    #[inline]
    pub fn goes_on(self) -> bool {
        match self {
            Hook::Continue => true,
            Hook::Respond(reply) => {
                drop(reply);
                false
            }
            Hook::Failed(module) => {
                drop(module);
                false
            }
        }
    }
}

/// A callback of one event, applied to what that event works on.
pub(crate) type Callback<T> = for<'a> fn(&'a dyn Module, &'a mut Txn, &'a mut T) -> Flow<'a>;

/// The future of a module that returned [`Flow::Wait`], with its panic caught.
pub(crate) type Waiting<'a> = futures_util::future::CatchUnwind<
    AssertUnwindSafe<Pin<Box<dyn Future<Output = Decision> + Send + 'a>>>,
>;

/// What one module's callback asked for.
pub(crate) enum Step<'a> {
    /// Go on with the next module.
    Next,
    /// The event is decided: a reply, or a failure.
    Done(Hook),
    /// Await this, then hand its output to [`ModuleChain::waited`].
    Wait(Waiting<'a>),
}

/// Calls the modules of one event in order and evaluates to the [`Hook`] they decided.
/// Callbacks run as plain calls; the surrounding `async` code awaits only for a module
/// that returns `Flow::Wait`. A macro rather than an `async fn` so that a chain that
/// never waits builds no future of its own; not a plain function that hands the
/// waiting future back, because the borrow checker does not let a loop return a borrow
/// of what its next iteration uses (the future borrows the transaction and target).
macro_rules! run_event {
    // `$chain`: the transaction's chain handle (`modules/txn.rs`), which holds this
    // thread's counts of each module's calls.
    ($chain:expr, $event:expr, $txn:expr, $target:expr, $call:expr, $metrics:expr) => {{
        let chain = &*$chain;
        $crate::modules::run_event!(in chain.of($event), chain, $event, $txn, $target, $call, $metrics)
    }};
    // The modules in `$modules` only (a subset of the event's, in order).
    (in $modules:expr, $chain:expr, $event:expr, $txn:expr, $target:expr, $call:expr, $metrics:expr) => {{
        let chain = &*$chain;
        let (event, metrics) = ($event, $metrics);
        'run: {
            for &module in $modules {
                let counts = chain.counts(module);
                match chain.call_counted(event, module, &mut *$txn, &mut *$target, $call, metrics, counts) {
                    $crate::modules::Step::Next => {}
                    $crate::modules::Step::Done(decided) => break 'run decided,
                    $crate::modules::Step::Wait(waiting) => {
                        let waited = chain.bounded(waiting).await;
                        if let Some(decided) = chain.waited(event, module, waited, metrics) {
                            break 'run decided;
                        }
                    }
                }
            }
            $crate::modules::Hook::Continue
        }
    }};
}
pub(crate) use run_event;

impl ModuleChain {
    /// A chain of `modules` (module, optional, where its calls are counted), in order.
    /// `wait_limit`: how long a `Flow::Wait` future may take (zero: no limit).
    pub fn new(
        modules: Vec<(Arc<dyn Module>, bool, Arc<ModuleEvents>)>,
        wait_limit: Duration,
    ) -> ModuleChain {
        let mut chain = ModuleChain {
            wait_limit,
            ..ModuleChain::default()
        };
        for (i, (module, optional, events)) in modules.into_iter().enumerate() {
            let wanted = module.events();
            chain.takes_credentials |= module.takes_credentials();
            for event in Event::ALL {
                if wanted.contains(event) {
                    chain.by_event[event as usize].push(i as u16);
                }
            }
            chain.modules.push(Loaded {
                module,
                optional,
                events,
            });
        }
        chain
    }

    /// Whether any module is loaded.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !cfg!(feature = "modules") || self.modules.is_empty()
    }

    /// Whether some module takes the request's credentials, which the engine then
    /// sets aside for it when it can.
    #[inline]
    pub fn takes_credentials(&self) -> bool {
        !self.is_empty() && self.takes_credentials
    }

    /// Whether any module wants `event`.
    #[inline]
    pub fn wants(&self, event: Event) -> bool {
        cfg!(feature = "modules") && !self.by_event[event as usize].is_empty()
    }

    /// The modules that want `event`, by index, in order.
    #[inline]
    pub fn of(&self, event: Event) -> &[u16] {
        &self.by_event[event as usize]
    }

    /// Calls module `i` (from [`ModuleChain::of`]) on `target` (see [`run_event`]),
    /// counted in `counts`, this thread's counts of the module. Always inlined: `call`
    /// is then a known function and the module's callback a direct virtual call.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn call_counted<'a, T>(
        &'a self,
        event: Event,
        i: u16,
        txn: &'a mut Txn,
        target: &'a mut T,
        call: Callback<T>,
        metrics: &Metrics,
        counts: &ThreadCounts,
    ) -> Step<'a> {
        let i = i as usize;
        engine::set_current(txn, i);
        let module = &*self.modules[i].module;
        let timing = counts.start(event);
        // The flow becomes a `Step` inside the guard: the guard copies its result
        // through memory, and a `Step` is far smaller than a `Flow`.
        let step = guarded(|| match call(module, txn, target) {
            Flow::Continue => Step::Next,
            Flow::Respond(reply) => Step::Done(Hook::Respond(Box::new(reply))),
            Flow::Wait(pending) => Step::Wait(AssertUnwindSafe(pending).catch_unwind()),
        });
        counts.end(event, timing);
        match step {
            Ok(step) => step,
            Err(panic) => self
                .failed(event, i, panic, metrics)
                .map_or(Step::Next, Step::Done),
        }
    }

    /// Awaits a module's `Flow::Wait` future for at most `[limits] module_wait`; a future
    /// that takes longer has failed, as if it had panicked (it is dropped, so what it
    /// was doing is cancelled).
    pub async fn bounded(&self, waiting: Waiting<'_>) -> std::thread::Result<Decision> {
        if self.wait_limit.is_zero() {
            return waiting.await;
        }
        match tokio::time::timeout(self.wait_limit, waiting).await {
            Ok(decided) => decided,
            Err(_) => Err(Box::new(format!(
                "its Flow::Wait future took longer than {:?} ([limits] module_wait)",
                self.wait_limit
            ))),
        }
    }

    /// What module `i` decided after it waited; `None`: go on.
    pub fn waited(
        &self,
        event: Event,
        i: u16,
        decided: std::thread::Result<Decision>,
        metrics: &Metrics,
    ) -> Option<Hook> {
        match decided {
            Ok(Decision::Continue) => None,
            Ok(Decision::Respond(reply)) => Some(Hook::Respond(Box::new(reply))),
            Err(panic) => self.failed(event, i as usize, panic, metrics),
        }
    }

    /// Counts and logs a module's panic; `None` when the module is optional (the chain
    /// goes on without it).
    #[cold]
    fn failed(
        &self,
        event: Event,
        module: usize,
        panic: Box<dyn std::any::Any + Send>,
        metrics: &Metrics,
    ) -> Option<Hook> {
        let loaded = &self.modules[module];
        let name = loaded.module.name().to_string();
        metrics.module_failed(&name);
        tracing::error!(module = %name, event = event.name(), "module failed: {}", panic_text(&panic));
        (!loaded.optional).then_some(Hook::Failed(name))
    }

    /// The modules of a whole-message event that want this transaction's message, in
    /// order (`ask` is the module's `wants_whole_*`). `Err(name)` when a module that is
    /// not optional panicked while asked; an optional one that panics is left out.
    pub fn choose(
        &self,
        event: Event,
        txn: &mut Txn,
        metrics: &Metrics,
        mut ask: impl FnMut(&dyn Module, &mut Txn) -> bool,
    ) -> Result<Vec<u16>, String> {
        let mut chosen = Vec::new();
        for &i in self.of(event) {
            engine::set_current(txn, i as usize);
            let module = &*self.modules[i as usize].module;
            match guarded(|| ask(module, txn)) {
                Ok(true) => chosen.push(i),
                Ok(false) => {}
                Err(panic) => {
                    if let Some(Hook::Failed(name)) = self.failed(event, i as usize, panic, metrics)
                    {
                        return Err(name);
                    }
                }
            }
        }
        Ok(chosen)
    }

    /// Calls every module's `on_log`, with how the transaction ended; `counts`: this
    /// thread's counts of each module, by index.
    pub fn log_counted(
        &self,
        txn: &mut Txn,
        metrics: &Metrics,
        completion: weir_api::Completion,
        counts: &[Arc<ThreadCounts>],
    ) {
        let listeners = &self.by_event[Event::Log as usize];
        if listeners.is_empty() {
            return;
        }
        engine::set_completion(txn, completion);
        for &i in listeners {
            let loaded = &self.modules[i as usize];
            engine::set_current(txn, i as usize);
            let txn: &Txn = txn;
            let counts = &counts[i as usize];
            let timing = counts.start(Event::Log);
            let logged = std::panic::catch_unwind(AssertUnwindSafe(|| loaded.module.on_log(txn)));
            counts.end(Event::Log, timing);
            if let Err(panic) = logged {
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
