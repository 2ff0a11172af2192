//! Filter instances: one wasmtime engine for the process (with a thread that advances
//! its epoch, for callback deadlines), a compiled filter ready to instantiate, and an
//! instance with its root context started and configured.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::{
    Config, Engine, InstancePre, Linker, Module, Store, StoreLimitsBuilder, Trap, TypedFunc,
};

use crate::head::HeadUse;
use crate::host::{Host, Shared};
use crate::trampoline::{Entries, Trampoline};

/// How often the engine's epoch advances: the granularity of callback deadlines.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The process's wasmtime engine, made on first use: Cranelift, epoch interruption,
/// and a thread that advances the epoch every [`EPOCH_TICK`].
pub(crate) fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("wasmtime supports this machine");
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("weir-wasm-epoch".into())
            .spawn(move || loop {
                std::thread::sleep(EPOCH_TICK);
                match ticker.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => return,
                }
            })
            .expect("a thread can be started");
        engine
    })
}

/// `proxy_on_http_call_response(context, token, headers, body size, trailers)`.
pub(crate) type CallResponse = TypedFunc<(i32, i32, i32, i32, i32), ()>;

/// The filter's exported callbacks (`None`: not exported; the call is skipped).
#[derive(Clone, Default)]
pub(crate) struct Exports {
    pub context_create: Option<TypedFunc<(i32, i32), ()>>,
    pub vm_start: Option<TypedFunc<(i32, i32), i32>>,
    pub configure: Option<TypedFunc<(i32, i32), i32>>,
    pub tick: Option<TypedFunc<i32, ()>>,
    pub request_headers: Option<TypedFunc<(i32, i32, i32), i32>>,
    pub request_body: Option<TypedFunc<(i32, i32, i32), i32>>,
    pub response_headers: Option<TypedFunc<(i32, i32, i32), i32>>,
    pub response_body: Option<TypedFunc<(i32, i32, i32), i32>>,
    pub request_trailers: Option<TypedFunc<(i32, i32), i32>>,
    pub response_trailers: Option<TypedFunc<(i32, i32), i32>>,
    pub log: Option<TypedFunc<i32, ()>>,
    pub done: Option<TypedFunc<i32, i32>>,
    pub delete: Option<TypedFunc<i32, ()>>,
    pub http_call_response: Option<CallResponse>,
    /// The combined entries, when the filter exports two callbacks of a step.
    pub combined: Option<Entries>,
}

/// A compiled filter, ready to instantiate.
pub(crate) struct Template {
    pre: InstancePre<Host>,
    /// Whether the filter can read the cache lookup's result (it imports
    /// `proxy_call_foreign_function` or `proxy_get_property`); if not, the lookup
    /// event is not asked for.
    pub reads_lookup: bool,
    /// What the filter's imports let it do with heads.
    pub heads: HeadUse,
    pub shared: Arc<Shared>,
    trampoline: Option<Trampoline>,
    memory_limit: usize,
    /// Epoch ticks a callback may run.
    deadline_ticks: u64,
}

/// Why a filter could not be loaded or started.
pub(crate) type LoadError = String;

impl Template {
    /// Compiles `wasm` and links it against the host calls.
    pub fn new(
        wasm: &[u8],
        shared: Arc<Shared>,
        memory_limit: usize,
        deadline: Duration,
    ) -> Result<Template, LoadError> {
        let engine = engine();
        let module =
            Module::new(engine, wasm).map_err(|e| format!("not a WebAssembly module: {e:#}"))?;
        let abi = ["proxy_abi_version_0_2_1", "proxy_abi_version_0_2_0"];
        if !module.exports().any(|e| abi.contains(&e.name())) {
            return Err("not a proxy-wasm filter: it exports neither proxy_abi_version_0_2_1 nor proxy_abi_version_0_2_0".into());
        }
        let mut linker = Linker::new(engine);
        crate::imports::define(&mut linker).map_err(|e| format!("{e:#}"))?;
        crate::callout::link(&mut linker).map_err(|e| format!("{e:#}"))?;
        let mut scratch = Store::new(engine, Host::new(shared.clone(), Default::default()));
        crate::imports::stub_unknown(&mut linker, &module, &mut scratch)
            .map_err(|e| format!("{e:#}"))?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| format!("cannot link the filter: {e:#}"))?;
        let reads_lookup = module.imports().any(|i| {
            matches!(
                i.name(),
                "proxy_call_foreign_function" | "proxy_get_property"
            )
        });
        let heads = HeadUse::of(&module);
        let trampoline = Trampoline::new(engine, &module)?;
        let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64;
        Ok(Template {
            pre,
            reads_lookup,
            heads,
            shared,
            trampoline,
            memory_limit,
            // One more: the first tick may come at once.
            deadline_ticks: ticks + 1,
        })
    }

    /// A new instance with its root context (id 1) started and configured.
    pub fn instantiate(&self) -> Result<Vm, LoadError> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.memory_limit)
            // The filter's and its trampoline's.
            .instances(2)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(engine(), Host::new(self.shared.clone(), limits));
        store.limiter(|h| &mut h.limits);
        store.set_epoch_deadline(self.deadline_ticks);
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| format!("cannot instantiate the filter: {e:#}"))?;
        let mut typed_err = None;
        macro_rules! get {
            ($name:literal) => {
                match instance.get_func(&mut store, $name) {
                    None => None,
                    Some(f) => match f.typed(&store) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            typed_err = Some(format!("`{}` has the wrong type: {e}", $name));
                            None
                        }
                    },
                }
            };
        }
        let exports = Exports {
            context_create: get!("proxy_on_context_create"),
            vm_start: get!("proxy_on_vm_start"),
            configure: get!("proxy_on_configure"),
            tick: get!("proxy_on_tick"),
            request_headers: get!("proxy_on_request_headers"),
            request_body: get!("proxy_on_request_body"),
            response_headers: get!("proxy_on_response_headers"),
            response_body: get!("proxy_on_response_body"),
            request_trailers: get!("proxy_on_request_trailers"),
            response_trailers: get!("proxy_on_response_trailers"),
            log: get!("proxy_on_log"),
            done: get!("proxy_on_done"),
            delete: get!("proxy_on_delete"),
            http_call_response: get!("proxy_on_http_call_response"),
            combined: None,
        };
        if let Some(e) = typed_err {
            return Err(e);
        }
        let combined = match &self.trampoline {
            Some(t) => Some(
                t.instantiate(&mut store, &instance)
                    .map_err(|e| format!("cannot link the filter's trampoline: {e:#}"))?,
            ),
            None => None,
        };
        let start = ["_initialize", "_start"]
            .iter()
            .find_map(|n| instance.get_typed_func::<(), ()>(&mut store, n).ok());
        let mut vm = Vm {
            store,
            exports: Exports {
                combined,
                ..exports
            },
            next_context: 2,
            deadline_ticks: self.deadline_ticks,
            unopened: false,
        };
        let failed = |what: &str, e: wasmtime::Error| format!("{what} failed: {}", describe(&e));
        if let Some(start) = start {
            vm.store.set_epoch_deadline(vm.deadline_ticks);
            start
                .call(&mut vm.store, ())
                .map_err(|e| failed("_start", e))?;
        }
        vm.call(|e| e.context_create.as_ref(), (ROOT, 0))
            .map_err(|e| failed("proxy_on_context_create", e))?;
        let sizes = (
            self.shared.vm_configuration.len() as i32,
            self.shared.configuration.len() as i32,
        );
        if vm
            .call(|e| e.vm_start.as_ref(), (ROOT, sizes.0))
            .map_err(|e| failed("proxy_on_vm_start", e))?
            == Some(0)
        {
            return Err("the filter's proxy_on_vm_start refused to start".into());
        }
        if vm
            .call(|e| e.configure.as_ref(), (ROOT, sizes.1))
            .map_err(|e| failed("proxy_on_configure", e))?
            == Some(0)
        {
            return Err(
                "the filter rejected its configuration (proxy_on_configure returned false)".into(),
            );
        }
        Ok(vm)
    }

    /// The tick period the filter asked for.
    pub fn tick_period(&self) -> Option<Duration> {
        match self.shared.tick_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms.into())),
        }
    }
}

/// The root context's id in every instance.
pub(crate) const ROOT: i32 = 1;

/// One instance of a filter.
pub(crate) struct Vm {
    pub store: Store<Host>,
    pub exports: Exports,
    next_context: i32,
    deadline_ticks: u64,
    /// The newest HTTP context's `proxy_on_context_create` is left to the combined
    /// start entry ([`Vm::request_headers`]).
    unopened: bool,
}

/// A callback that failed: its name and the trap or error.
pub(crate) type Failed = (&'static str, wasmtime::Error);

impl Vm {
    /// Calls the export `pick` chooses, with the callback deadline armed; `Ok(None)`
    /// when the filter does not export it. Borrowed, not cloned: a `TypedFunc`'s clone
    /// and drop (its type's registration counted up and down) cost about as much as
    /// the call.
    pub fn call<P, R>(
        &mut self,
        pick: impl FnOnce(&Exports) -> Option<&TypedFunc<P, R>>,
        args: P,
    ) -> wasmtime::Result<Option<R>>
    where
        P: wasmtime::WasmParams,
        R: wasmtime::WasmResults,
    {
        let Some(f) = pick(&self.exports) else {
            return Ok(None);
        };
        self.store.set_epoch_deadline(self.deadline_ticks);
        f.call(&mut self.store, args).map(Some)
    }

    fn next_id(&mut self) -> i32 {
        let id = self.next_context;
        self.next_context = if id == i32::MAX { 2 } else { id + 1 };
        id
    }

    /// A fresh HTTP context, child of the root context.
    pub fn new_context(&mut self) -> wasmtime::Result<i32> {
        let id = self.next_id();
        self.call(|e| e.context_create.as_ref(), (id, ROOT))?;
        Ok(id)
    }

    /// A fresh HTTP context whose creation is left to [`Vm::request_headers`] when the
    /// filter has a combined start entry (else created now, as [`Vm::new_context`]).
    pub fn open_context(&mut self) -> wasmtime::Result<i32> {
        match self
            .exports
            .combined
            .as_ref()
            .is_some_and(|c| c.start.is_some())
        {
            true => {
                self.unopened = true;
                Ok(self.next_id())
            }
            false => self.new_context(),
        }
    }

    /// `proxy_on_request_headers`, after the context's creation when
    /// [`Vm::open_context`] left it: then both in one entry, under one deadline.
    pub fn request_headers(&mut self, ctx: i32, count: usize, end: bool) -> Result<(), Failed> {
        let args = (ctx, count as i32, end as i32);
        if !std::mem::take(&mut self.unopened) {
            return match self.call(|e| e.request_headers.as_ref(), args) {
                Ok(_) => Ok(()),
                Err(e) => Err(("proxy_on_request_headers", e)),
            };
        }
        let args = (ctx, ROOT, args.1, args.2);
        match self.call(|e| e.combined.as_ref()?.start.as_ref(), args) {
            Ok(_) => Ok(()),
            Err(e) => Err((self.failed_in(), e)),
        }
    }

    /// `proxy_on_log`, `proxy_on_done` and `proxy_on_delete` of an HTTP context: in
    /// one entry, under one deadline, when the filter exports two or three of them.
    pub fn end_stream(&mut self, ctx: i32) -> Result<(), Failed> {
        if self
            .exports
            .combined
            .as_ref()
            .is_some_and(|c| c.end.is_some())
        {
            return match self.call(|e| e.combined.as_ref()?.end.as_ref(), ctx) {
                Ok(_) => Ok(()),
                Err(e) => Err((self.failed_in(), e)),
            };
        }
        self.call(|e| e.log.as_ref(), ctx)
            .map_err(|e| ("proxy_on_log", e))?;
        self.call(|e| e.done.as_ref(), ctx)
            .map_err(|e| ("proxy_on_done", e))?;
        self.call(|e| e.delete.as_ref(), ctx)
            .map_err(|e| ("proxy_on_delete", e))?;
        Ok(())
    }

    fn failed_in(&mut self) -> &'static str {
        match &self.exports.combined {
            Some(c) => c.failed_in(&mut self.store),
            None => "a callback",
        }
    }
}

/// A trap or error in words: a deadline overrun is named as such.
pub(crate) fn describe(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "the callback ran past its deadline".into(),
        _ => format!("{e:#}"),
    }
}

/// Whether `e` is a deadline overrun.
pub(crate) fn is_timeout(e: &wasmtime::Error) -> bool {
    e.downcast_ref::<Trap>() == Some(&Trap::Interrupt)
}
