//! Loading the configured modules, and the chains each listener and route calls.
//! Every `[[module]]` is built once by its factory; the chains share them.

use std::sync::Arc;
use std::time::Duration;

use weir_api::Module;

use super::txn::{ListenerChains, SharedChain};
use super::{guarded, panic_text, ModuleChain};
use crate::config::{Config, ConfigError, ListenConfig};
use crate::metrics::Metrics;

/// The modules a configuration loads, built once and shared by the listeners' chains.
pub(crate) struct LoadedModules {
    /// (name, module, optional), in configuration order, enabled ones only.
    modules: Vec<(String, Arc<dyn Module>, bool)>,
    /// `[limits] module_wait`.
    wait_limit: Duration,
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
    /// The modules' calls are counted in `metrics`.
    pub fn chains_for(&self, listener: &ListenConfig, metrics: &Metrics) -> Arc<ListenerChains> {
        let routes = listener
            .route
            .iter()
            .map(|r| {
                r.modules
                    .as_deref()
                    .map(|names| self.chain_of(Some(names), metrics))
            })
            .collect();
        Arc::new(ListenerChains::new(
            self.chain_of(listener.modules.as_deref(), metrics),
            routes,
        ))
    }

    fn chain_of(&self, names: Option<&[String]>, metrics: &Metrics) -> SharedChain {
        let chosen = self
            .modules
            .iter()
            .filter(|(name, ..)| names.is_none_or(|names| names.contains(name)))
            .map(|(name, m, optional)| (m.clone(), *optional, metrics.module_events(name)))
            .collect();
        SharedChain::new(ModuleChain::new(chosen, self.wait_limit))
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
    Ok(LoadedModules {
        modules,
        wait_limit: config.limits.module_wait.0,
    })
}
