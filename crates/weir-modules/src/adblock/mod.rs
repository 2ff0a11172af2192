//! `adblock`: removes ads and trackers by the network rules of filter lists in Adblock
//! Plus / EasyList syntax (`||ads.example^$third-party,image`, `$domain=`, `@@`
//! exceptions), matched with Brave's `adblock` crate.
//!
//! A blocked request never reaches its origin. With `action = "image"` (the default)
//! a request that looks like an image gets a 1x1 transparent GIF, which the cache
//! stores under a variant of the ad's URL: the next request for the ad is a cache hit,
//! as in the paper's ad remover. Other blocked requests get `fallback` (`204` or
//! `403`). With `action = "204"` or `"403"` every blocked request gets that.
//!
//! ```toml
//! [[module]]
//! name = "adblock"
//! lists = ["/etc/weir/easylist.txt", "/etc/weir/easyprivacy.txt"]
//! rules = ["||ads.example^"]   # inline rules, added to the lists
//! action = "image"             # "image" | "204" | "403"
//! fallback = "204"             # for non-images when action = "image": "204" | "403"
//! image_ttl = 86400            # seconds the stored image stays fresh
//! ```
//!
//! Lists are read when the module is built: at startup and on every reload.

mod memo;
mod reply;
mod request_type;

pub use reply::{Action, BLANK_GIF};
pub use request_type::{describe, Described};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use adblock::lists::{FilterSet, ParseOptions, RuleTypes};
use adblock::request::Request;
use weir_api::http::{Method, StatusCode};
use weir_api::serde::Deserialize;
use weir_api::{
    BytesBody, CacheLookup, Counter, Decision, Event, Events, Flow, Module, ModuleContext,
    ModuleFactory, RequestHead, Settings, SettingsError, Txn,
};

use crate::variant;
use memo::Memo;
use reply::Replies;

/// The module variant the blank images are stored under, so that they never mix with
/// the real object of the same URL (a first-party request for it, say).
const VARIANT: &str = "adblock";

/// Builds [`Adblock`] from its settings (see the [module documentation](self)).
pub struct AdblockFactory;

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct AdblockSettings {
    #[serde(default)]
    lists: Vec<PathBuf>,
    #[serde(default)]
    rules: Vec<String>,
    #[serde(default = "default_action")]
    action: Action,
    #[serde(default = "default_fallback")]
    fallback: Action,
    #[serde(default = "default_image_ttl")]
    image_ttl: u64,
}

fn default_action() -> Action {
    Action::Image
}

fn default_fallback() -> Action {
    Action::NoContent
}

fn default_image_ttl() -> u64 {
    86_400
}

impl ModuleFactory for AdblockFactory {
    fn name(&self) -> &'static str {
        "adblock"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        Ok(Arc::new(Adblock::from_settings(settings, context)?))
    }
}

/// Blocks requests that the filter lists block. Immutable once built: one engine
/// serves every thread.
pub struct Adblock {
    engine: adblock::Engine,
    action: Action,
    fallback: Action,
    replies: Replies,
    blocked: Counter,
    stored: Counter,
    context: ModuleContext,
    memo: Memo,
}

/// What the lists decided about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Block it (a blocking rule matched, and no exception, or an `$important` one).
    pub block: bool,
    /// The request type it was matched as (`image`, `script`, ...).
    pub kind: &'static str,
    /// Its absolute URL.
    pub url: String,
}

/// What request headers leaves for the cache lookup of a blocked image request.
#[derive(Default)]
struct Blocked {
    url: String,
}

impl Adblock {
    /// Reads the lists and builds the matching engine (what the factory does; public
    /// for benchmarks and tools that match without a proxy).
    pub fn from_settings(
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Adblock, SettingsError> {
        let s: AdblockSettings = settings.get()?;
        if s.lists.is_empty() && s.rules.is_empty() {
            return Err(SettingsError::at(
                "lists",
                "name at least one filter list (or give `rules`)",
            ));
        }
        if s.fallback == Action::Image {
            return Err(SettingsError::at(
                "fallback",
                "must be \"204\" or \"403\": it answers requests that are not images",
            ));
        }
        if s.image_ttl == 0 {
            return Err(SettingsError::at("image_ttl", "must be at least 1 second"));
        }
        // Only network rules: a proxy cannot hide elements in a page.
        let options = ParseOptions {
            rule_types: RuleTypes::NetworkOnly,
            ..ParseOptions::default()
        };
        let mut set = FilterSet::new(false);
        for (i, path) in s.lists.iter().enumerate() {
            let text = std::fs::read_to_string(path).map_err(|e| {
                SettingsError::at(format!("lists[{i}]"), format!("{}: {e}", path.display()))
            })?;
            set.add_filter_list(text, options);
        }
        if !s.rules.is_empty() {
            set.add_filter_list(s.rules.join("\n"), options);
        }
        Ok(Adblock {
            engine: adblock::Engine::new_with_filter_set(set),
            action: s.action,
            fallback: s.fallback,
            replies: Replies::new(Duration::from_secs(s.image_ttl)),
            blocked: context.counter("adblock_blocked", "requests the ad remover blocked"),
            stored: context.counter(
                "adblock_images_stored",
                "blank images the ad remover stored in the cache",
            ),
            context: context.clone(),
            memo: Memo::new(),
        })
    }

    /// What the lists say about `request`; `None` when it has no absolute URL the
    /// lists could match.
    pub fn check(&self, request: &RequestHead) -> Option<Verdict> {
        let d = describe(request)?;
        let mut r = Request::new(&d.url, &d.source, d.kind, request.method.as_str()).ok()?;
        if let Some(third_party) = d.third_party {
            r.is_third_party = third_party;
        }
        Some(Verdict {
            block: self.engine.check_network_request(&r).should_block(),
            kind: d.kind,
            url: d.url,
        })
    }
}

impl Adblock {
    /// [`Adblock::check`], through the memo of verdicts: a request seen before costs
    /// a hash and a lookup (and, when blocked, the request type again).
    pub fn check_remembered(&self, request: &RequestHead) -> Option<Verdict> {
        let key = self.memo.key(request);
        match self.memo.get(key) {
            Some(false) => Some(Verdict {
                block: false,
                kind: "",
                url: String::new(),
            }),
            Some(true) => describe(request).map(|d| Verdict {
                block: true,
                kind: d.kind,
                url: d.url,
            }),
            None => {
                let verdict = self.check(request)?;
                self.memo.put(key, verdict.block);
                Some(verdict)
            }
        }
    }
}

impl Module for Adblock {
    fn name(&self) -> &str {
        "adblock"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::CacheLookup])
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        // A tunnel shows only a host and port; filter lists are about URLs.
        if request.method == Method::CONNECT {
            return Flow::Continue;
        }
        let Some(Verdict {
            block: true,
            kind,
            url,
        }) = self.check_remembered(request)
        else {
            return Flow::Continue;
        };
        self.blocked.inc();
        txn.log_field("adblock", "blocked");
        let action = match self.action {
            Action::Image if !request_type::is_image(kind) => self.fallback,
            other => other,
        };
        if action != Action::Image {
            return Flow::Respond(self.replies.for_action(action));
        }
        // The cache answers it if the blank image is stored; the lookup event stores
        // it otherwise.
        variant::add(txn, VARIANT);
        txn.state::<Blocked>().url = url;
        Flow::Continue
    }

    fn on_cache_lookup<'a>(&'a self, txn: &'a mut Txn, lookup: CacheLookup) -> Flow<'a> {
        let marked = txn
            .cache_overrides()
            .variant
            .as_deref()
            .is_some_and(|v| variant::has(v, VARIANT));
        if !marked {
            return Flow::Continue;
        }
        match lookup {
            // The image stored by an earlier block: a hit.
            CacheLookup::Fresh => Flow::Continue,
            // Not a cache candidate (a Range request, say): answer it as it is.
            CacheLookup::Bypass => Flow::Respond(self.replies.image()),
            CacheLookup::Miss | CacheLookup::Stale => {
                let url = std::mem::take(&mut txn.state::<Blocked>().url);
                // The whole variant, other modules' parts included: the key the
                // next request computes.
                let key = txn.cache_overrides().variant.clone().unwrap_or_default();
                Flow::wait(async move {
                    let stored = self
                        .context
                        .content()
                        .inject_variant(
                            &url,
                            &key,
                            StatusCode::OK,
                            self.replies.image_headers(),
                            BytesBody::boxed(BLANK_GIF),
                        )
                        .await;
                    if stored.is_ok() {
                        self.stored.inc();
                    }
                    Decision::Respond(self.replies.image())
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
