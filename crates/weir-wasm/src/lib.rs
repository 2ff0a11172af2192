//! proxy-wasm filters as Weir modules: a filter compiled once to WebAssembly with a
//! proxy-wasm SDK (Rust, Go, C++, AssemblyScript) and built for ABI 0.2.1 is loaded at
//! run time with wasmtime, its HTTP-context callbacks called at Weir's events.
//!
//! ```toml
//! [[module]]
//! name = "wasm"
//! path = "/etc/weir/filters/add-header.wasm"
//! configuration = "x-filtered: yes"
//! ```
//!
//! Beyond the ABI, a filter reaches Weir's cache through foreign functions called
//! with `proxy_call_foreign_function` (see the [`foreign`] table): the lookup's
//! result, skipping the cache, the time to live, key variants, tags, invalidation.
//!
//! Each instance has a memory limit and each callback a deadline; a trap, an overrun
//! or a memory limit hit fails only its transaction (through the engine's handling of
//! a failed module: a 500, or passed by when `optional`), is counted, and the instance
//! is dropped: the next transaction gets a fresh one.
#![deny(missing_docs)]

mod abi;
mod callout;
mod filter;
pub mod foreign;
mod head;
mod headers;
mod host;
mod imports;
mod memory;
mod options;
mod pool;
mod properties;
mod recent;
mod settings;
mod trampoline;
mod vm;

pub use settings::WasmFactory;
