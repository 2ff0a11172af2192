//! `preload`: keeps a list of URLs in the cache, as an operator warming a cache would.
//!
//! When the module is loaded, and again every `every` seconds if set, it GETs each URL
//! through the cache (a fresh copy is left alone, a stale one is validated, a missing
//! one is fetched), in the background, one at a time. It counts what it did in
//! `weir_module_preload_fetched_total` and `weir_module_preload_failed_total`.
//!
//! ```toml
//! [[module]]
//! name = "preload"
//! urls = ["http://origin.example/app.js", "http://origin.example/logo.png"]
//! every = 300   # seconds; absent: once, when loaded
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir_api::serde::Deserialize;
use weir_api::{
    Counter, Events, Module, ModuleContext, ModuleFactory, Settings, SettingsError, Timer,
};

/// Builds [`Preload`] from `urls` and `every`.
pub struct PreloadFactory;

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct PreloadSettings {
    urls: Vec<String>,
    #[serde(default)]
    every: Option<u64>,
}

impl ModuleFactory for PreloadFactory {
    fn name(&self) -> &'static str {
        "preload"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let s: PreloadSettings = settings.get()?;
        if s.urls.is_empty() {
            return Err(SettingsError::at("urls", "name at least one URL"));
        }
        for (i, url) in s.urls.iter().enumerate() {
            let ok = url
                .parse::<weir_api::http::Uri>()
                .is_ok_and(|u| u.scheme_str() == Some("http") && u.authority().is_some());
            if !ok {
                return Err(SettingsError::at(
                    format!("urls[{i}]"),
                    format!("`{url}` is not an absolute http:// URL"),
                ));
            }
        }
        if s.every == Some(0) {
            return Err(SettingsError::at("every", "must be at least 1 second"));
        }
        Ok(Arc::new(Preload {
            urls: Arc::new(s.urls),
            every: s.every.map(Duration::from_secs),
            running: Arc::new(AtomicBool::new(false)),
            fetched: context.counter(
                "preload_fetched",
                "URLs the preload module kept in the cache",
            ),
            failed: context.counter("preload_failed", "URLs the preload module could not fetch"),
            context: context.clone(),
        }))
    }
}

/// Keeps its URLs in the cache.
pub struct Preload {
    urls: Arc<Vec<String>>,
    every: Option<Duration>,
    /// A round still running when the timer fires again is not doubled.
    running: Arc<AtomicBool>,
    fetched: Counter,
    failed: Counter,
    context: ModuleContext,
}

impl Module for Preload {
    fn name(&self) -> &str {
        "preload"
    }

    fn events(&self) -> Events {
        Events::NONE
    }

    fn timers(&self) -> Vec<Timer> {
        vec![Timer {
            id: 0,
            after: Duration::ZERO,
            every: self.every,
        }]
    }

    fn on_timer(&self, _id: u32) {
        if self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let (urls, running) = (self.urls.clone(), self.running.clone());
        let (fetched, failed) = (self.fetched.clone(), self.failed.clone());
        let content = self.context.content().clone();
        let started = self.context.spawn(async move {
            for url in urls.iter() {
                match content.fetch(url).await {
                    Ok(_) => fetched.inc(),
                    Err(_) => failed.inc(),
                }
            }
            running.store(false, Ordering::Release);
        });
        if !started {
            self.running.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
        PreloadFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
    }

    #[test]
    fn settings_are_checked() {
        assert!(build("urls = [\"http://a.example/x\"]\nevery = 60").is_ok());
        let e = build("urls = []").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("urls"));
        let e = build("urls = [\"http://a/\", \"ftp://b/\"]").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("urls[1]"));
        let e = build("urls = [\"http://a/\"]\nevery = 0").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("every"));
        let e = build("urls = [\"http://a/\"]\nevry = 5").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("evry"));
    }

    #[test]
    fn asks_for_one_timer_and_no_event() {
        let m = build("urls = [\"http://a.example/x\"]\nevery = 60").unwrap();
        assert_eq!(m.events(), Events::NONE);
        assert_eq!(
            m.timers(),
            vec![Timer {
                id: 0,
                after: Duration::ZERO,
                every: Some(Duration::from_secs(60))
            }]
        );
        // Detached: nothing runs, and a later firing is not blocked.
        m.on_timer(0);
        m.on_timer(0);
    }
}
