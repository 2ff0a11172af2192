//! What the engine gives a module when it builds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::content::{
    BodyReader, ContentError, ContentFuture, ContentManager, ObjectInfo, StoredResponse,
};

/// Services the engine offers a module: the cache's content management and metrics.
#[derive(Clone)]
pub struct ModuleContext {
    content: Arc<dyn ContentManager>,
    metrics: Arc<dyn MetricsRegistry>,
    spawner: Option<Arc<dyn Spawner>>,
}

/// Runs a module's background work on the proxy's async runtime (implemented by the
/// engine).
pub trait Spawner: Send + Sync {
    /// Starts `work`; it runs until it completes.
    fn spawn(&self, work: Pin<Box<dyn Future<Output = ()> + Send>>);
}

impl ModuleContext {
    /// A context (built by the engine).
    pub fn new(
        content: Arc<dyn ContentManager>,
        metrics: Arc<dyn MetricsRegistry>,
        spawner: Arc<dyn Spawner>,
    ) -> ModuleContext {
        ModuleContext {
            content,
            metrics,
            spawner: Some(spawner),
        }
    }

    /// Runs `work` in the background on the proxy's runtime: non-blocking I/O, such
    /// as a content-management call started from a timer. Returns `false` (and runs
    /// nothing) in a detached context.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) -> bool {
        match &self.spawner {
            Some(s) => {
                s.spawn(Box::pin(work));
                true
            }
            None => false,
        }
    }

    /// A context outside a running proxy, for building a module to check its
    /// settings (`weir check`) or to unit-test its callbacks: every content-management
    /// call answers [`ContentError::Origin`] ("not attached to a running proxy") and
    /// counters count but are not exported.
    pub fn detached() -> ModuleContext {
        ModuleContext {
            content: Arc::new(Detached),
            metrics: Arc::new(Detached),
            spawner: None,
        }
    }

    /// The cache: query, preload, validate, expire, delete, inject, read.
    pub fn content(&self) -> &Arc<dyn ContentManager> {
        &self.content
    }

    /// A counter exported as `weir_module_<name>_total` on the admin listener's
    /// `/metrics`. Asking twice for one name gives the same counter.
    pub fn counter(&self, name: &str, help: &str) -> Counter {
        self.metrics.counter(name, help)
    }

    /// Publishes what an administration module knows: [`AdminReport::json`] is served
    /// at `/admin/modules/<name>` on the admin listener (behind the admin token), and
    /// [`AdminReport::metrics`] is added to `/metrics`, both computed when asked for.
    /// The engine keeps only a weak reference: the report disappears with the module
    /// (on a reload that drops it), and a later report of the same name replaces it.
    pub fn publish(&self, name: &str, report: Weak<dyn AdminReport>) {
        self.metrics.publish(name, report);
    }
}

/// A module's report on the admin listener (see [`ModuleContext::publish`]). Called on
/// the admin listener's task when a client asks: keep it quick, never block.
pub trait AdminReport: Send + Sync {
    /// A JSON document (an object), served as `application/json`.
    fn json(&self) -> String;

    /// Lines in the Prometheus text format appended to `/metrics`: `# HELP`, `# TYPE`
    /// and samples, names starting `weir_module_`. Keep label sets bounded: every
    /// distinct label value is a time series to the scraper. The default adds nothing.
    fn metrics(&self, out: &mut String) {
        let _ = out;
    }
}

/// Where module metrics are registered (implemented by the engine).
pub trait MetricsRegistry: Send + Sync {
    /// The counter called `name`, created on first use.
    fn counter(&self, name: &str, help: &str) -> Counter;

    /// Keeps `report` for the admin listener (see [`ModuleContext::publish`]). The
    /// default drops it: a detached context publishes nothing.
    fn publish(&self, name: &str, report: Weak<dyn AdminReport>) {
        let _ = (name, report);
    }
}

/// A monotonically increasing count. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a detached context answers.
struct Detached;

fn detached<T>() -> Result<T, ContentError> {
    Err(ContentError::Origin(
        "not attached to a running proxy".into(),
    ))
}

impl ContentManager for Detached {
    fn query(&self, _url: &str) -> Result<ObjectInfo, ContentError> {
        detached()
    }
    fn fetch<'a>(&'a self, _url: &'a str) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(async { detached() })
    }
    fn validate<'a>(&'a self, _url: &'a str) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(async { detached() })
    }
    fn set_expiry(&self, _url: &str, _ttl: Duration) -> Result<(), ContentError> {
        detached()
    }
    fn delete(&self, _url: &str) -> Result<(), ContentError> {
        detached()
    }
    fn purge_prefix(&self, _prefix: &str) -> Result<usize, ContentError> {
        detached()
    }
    fn ban_tag(&self, _tag: &str) -> Result<usize, ContentError> {
        detached()
    }
    fn inject<'a>(
        &'a self,
        _url: &'a str,
        _status: StatusCode,
        _headers: HeaderMap,
        _body: Box<dyn BodyReader>,
    ) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(async { detached() })
    }
    fn read(&self, _url: &str) -> Result<StoredResponse, ContentError> {
        detached()
    }
}

impl MetricsRegistry for Detached {
    fn counter(&self, _name: &str, _help: &str) -> Counter {
        Counter::default()
    }
}
