//! The `[[module]] name = "wasm"` section and the factory that loads its filter.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use weir_api::{Module, ModuleContext, ModuleFactory, Settings, SettingsError};

use crate::filter::Filter;
use crate::host::Shared;
use crate::options::{Options, ResponsePhase};
use crate::vm::Template;

/// The section's keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    /// The filter: a `.wasm` file.
    path: String,
    /// Given to `proxy_on_configure` (buffer type 7).
    #[serde(default)]
    configuration: String,
    /// Given to `proxy_on_vm_start` (buffer type 6).
    #[serde(default)]
    vm_configuration: String,
    /// The filter's name in logs and the `plugin_name` property.
    #[serde(default)]
    root_id: Option<String>,
    /// `deliver` (default) or `origin`.
    #[serde(default = "deliver")]
    response: String,
    #[serde(default)]
    request_body: bool,
    #[serde(default)]
    response_body: bool,
    #[serde(default = "memory_limit")]
    memory_limit_mib: u64,
    #[serde(default = "deadline")]
    deadline_ms: u64,
    #[serde(default = "pool")]
    pool: usize,
}

fn deliver() -> String {
    "deliver".into()
}
fn memory_limit() -> u64 {
    64
}
fn deadline() -> u64 {
    100
}
fn pool() -> usize {
    64
}

/// Builds a `wasm` module: reads, compiles and starts the filter (`proxy_on_vm_start`,
/// `proxy_on_configure`), so that `weir check` and a reload report a filter that
/// cannot load.
pub struct WasmFactory;

impl ModuleFactory for WasmFactory {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let s: Section = settings.get()?;
        let phase = match s.response.as_str() {
            "deliver" => ResponsePhase::Deliver,
            "origin" => ResponsePhase::Origin,
            other => {
                return Err(SettingsError::at(
                    "response",
                    format!("`{other}` is neither \"deliver\" nor \"origin\""),
                ))
            }
        };
        if !(1..=4096).contains(&s.memory_limit_mib) {
            return Err(SettingsError::at("memory_limit_mib", "must be 1 to 4096"));
        }
        if !(1..=60_000).contains(&s.deadline_ms) {
            return Err(SettingsError::at("deadline_ms", "must be 1 to 60000"));
        }
        let wasm = std::fs::read(&s.path)
            .map_err(|e| SettingsError::at("path", format!("cannot read `{}`: {e}", s.path)))?;
        let name = s.root_id.clone().unwrap_or_else(|| {
            std::path::Path::new(&s.path)
                .file_stem()
                .map_or("wasm".into(), |n| n.to_string_lossy().into_owned())
        });
        let shared = Arc::new(Shared {
            name,
            vm_configuration: s.vm_configuration.into_bytes(),
            configuration: s.configuration.into_bytes(),
            data: Default::default(),
            metrics: Default::default(),
            tick_ms: Default::default(),
            context: context.clone(),
        });
        let template = Template::new(
            &wasm,
            shared,
            (s.memory_limit_mib as usize) << 20,
            Duration::from_millis(s.deadline_ms),
        )
        .map_err(|e| SettingsError::at("path", format!("`{}`: {e}", s.path)))?;
        let root = template
            .instantiate()
            .map_err(|e| SettingsError::at("path", format!("`{}`: {e}", s.path)))?;
        let options = Options {
            phase,
            request_body: s.request_body,
            response_body: s.response_body,
            pool: s.pool,
        };
        let failures = context.counter(
            "wasm_failures",
            "proxy-wasm callbacks that trapped, ran past their deadline or hit their memory limit",
        );
        let timeouts = context.counter(
            "wasm_timeouts",
            "proxy-wasm callbacks that ran past their deadline",
        );
        Ok(Arc::new(Filter::new(
            template, root, options, failures, timeouts,
        )))
    }
}
