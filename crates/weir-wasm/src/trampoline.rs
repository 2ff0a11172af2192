//! Combined entries: a small module made at load, instantiated next to each filter
//! instance in the same store, that calls the filter's callbacks of one step in a row.
//!
//! Each entry into WebAssembly from the host (trap handling set up, deadline armed)
//! costs a cached hit about 140 instructions, and a transaction makes six: the
//! context's creation and request headers at the start, `proxy_on_log`,
//! `proxy_on_done` and `proxy_on_delete` at the end. Called from WebAssembly instead,
//! through the trampoline's imports, each of these costs a few instructions, so a
//! transaction enters three times (start, response headers, end). The calls keep
//! their order, their arguments and what is done with their results (none is used:
//! `proxy_on_done`'s is dropped, as the host does without a trampoline). The
//! trampoline records which callback it is in, so that a trap or an overrun is
//! reported with the callback's name.

use wasmtime::{Engine, Extern, Global, Instance, Module, Store, TypedFunc, Val};

use crate::host::Host;

/// The callbacks the trampoline can chain, in the order they are called: each with
/// its signature in WebAssembly text and the step it belongs to (0: start, 1: end).
const CALLBACKS: [(&str, &str, usize); 5] = [
    ("proxy_on_context_create", "(param i32 i32)", 0),
    (
        "proxy_on_request_headers",
        "(param i32 i32 i32) (result i32)",
        0,
    ),
    ("proxy_on_log", "(param i32)", 1),
    ("proxy_on_done", "(param i32) (result i32)", 1),
    ("proxy_on_delete", "(param i32)", 1),
];

/// `start(context, parent, header count, end of stream)`: the context's creation then
/// `proxy_on_request_headers`, whose result it returns.
pub(crate) type Start = TypedFunc<(i32, i32, i32, i32), i32>;
/// `end(context)`: `proxy_on_log`, `proxy_on_done`, `proxy_on_delete`.
pub(crate) type End = TypedFunc<i32, ()>;

/// The trampoline module of one filter, compiled at load.
pub(crate) struct Trampoline {
    module: Module,
    /// The filter's exports it imports, in order.
    imports: Vec<&'static str>,
    start: bool,
    end: bool,
}

/// One instance's combined entries (`None`: the step has fewer than two callbacks,
/// which are called directly).
#[derive(Clone)]
pub(crate) struct Entries {
    pub start: Option<Start>,
    pub end: Option<End>,
    /// The index in [`CALLBACKS`] of the callback being called.
    stage: Global,
}

impl Trampoline {
    /// The trampoline for `filter`, or `None` when no step has two callbacks exported
    /// (a combined entry would save nothing).
    pub fn new(engine: &Engine, filter: &Module) -> Result<Option<Trampoline>, String> {
        let exported = |name: &str| filter.exports().any(|e| e.name() == name);
        let present: Vec<usize> = (0..CALLBACKS.len())
            .filter(|&i| exported(CALLBACKS[i].0))
            .collect();
        let in_step = |step: usize| present.iter().filter(|&&i| CALLBACKS[i].2 == step).count();
        let (start, end) = (in_step(0) == 2, in_step(1) >= 2);
        if !start && !end {
            return Ok(None);
        }
        let mut wat = String::from("(module\n");
        for &i in &present {
            let (name, sig, _) = CALLBACKS[i];
            wat += &format!("  (import \"filter\" \"{name}\" (func ${i} {sig}))\n");
        }
        wat += "  (global $stage (export \"stage\") (mut i32) (i32.const 0))\n";
        let step = |i: usize| format!("    (global.set $stage (i32.const {i}))\n");
        if start {
            wat += "  (func (export \"start\") (param i32 i32 i32 i32) (result i32)\n";
            wat += &step(0);
            wat += "    (call $0 (local.get 0) (local.get 1))\n";
            wat += &step(1);
            wat += "    (call $1 (local.get 0) (local.get 2) (local.get 3)))\n";
        }
        if end {
            wat += "  (func (export \"end\") (param i32)\n";
            for &i in present.iter().filter(|&&i| CALLBACKS[i].2 == 1) {
                wat += &step(i);
                wat += &match i {
                    3 => format!("    (drop (call ${i} (local.get 0)))\n"),
                    _ => format!("    (call ${i} (local.get 0))\n"),
                };
            }
            wat += "  )\n";
        }
        wat += ")\n";
        let binary = wat::parse_str(&wat).map_err(|e| format!("trampoline: {e}"))?;
        let module = Module::new(engine, binary).map_err(|e| format!("trampoline: {e:#}"))?;
        Ok(Some(Trampoline {
            module,
            imports: present.iter().map(|&i| CALLBACKS[i].0).collect(),
            start,
            end,
        }))
    }

    /// The entries for `filter`, an instance in `store`.
    pub fn instantiate(
        &self,
        store: &mut Store<Host>,
        filter: &Instance,
    ) -> wasmtime::Result<Entries> {
        let mut imports = Vec::with_capacity(self.imports.len());
        for name in &self.imports {
            let f = filter
                .get_func(&mut *store, name)
                .ok_or_else(|| wasmtime::Error::msg(format!("`{name}` is not a function")))?;
            imports.push(Extern::Func(f));
        }
        let instance = Instance::new(&mut *store, &self.module, &imports)?;
        let start = match self.start {
            true => Some(instance.get_typed_func(&mut *store, "start")?),
            false => None,
        };
        let end = match self.end {
            true => Some(instance.get_typed_func(&mut *store, "end")?),
            false => None,
        };
        let stage = instance
            .get_global(&mut *store, "stage")
            .ok_or_else(|| wasmtime::Error::msg("the trampoline exports its stage"))?;
        Ok(Entries { start, end, stage })
    }
}

impl Entries {
    /// The callback a combined entry was in when it failed: read only then.
    pub fn failed_in(&self, store: &mut Store<Host>) -> &'static str {
        match self.stage.get(store) {
            Val::I32(i) => CALLBACKS.get(i as usize).map_or("a callback", |c| c.0),
            _ => "a callback",
        }
    }
}
