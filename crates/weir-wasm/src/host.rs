//! What the host keeps for one filter instance: the filter's memory and allocator,
//! its limits, what the current callback works on (heads, body, a local response),
//! what the transaction knows (request line, client, cache lookup), and what every
//! instance of the filter shares (shared data, metrics, configuration).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::{Memory, StoreLimits, TypedFunc};
use weir_api::http::{HeaderMap, Method, StatusCode, Uri};
use weir_api::{CacheLookup, Counter, ModuleContext, Reply};

/// What every instance of one configured filter shares.
pub(crate) struct Shared {
    /// The filter's name (`plugin_name`).
    pub name: String,
    /// `vm_configuration` (buffer type 6).
    pub vm_configuration: Vec<u8>,
    /// `configuration` (buffer type 7).
    pub configuration: Vec<u8>,
    /// `proxy_get/set_shared_data`: value and compare-and-swap version per key.
    pub data: Mutex<HashMap<String, (Vec<u8>, u32)>>,
    /// `proxy_define_metric` and friends.
    pub metrics: Mutex<Vec<Metric>>,
    /// The tick period the root context asked for, in milliseconds (0: none).
    pub tick_ms: AtomicU32,
    /// The engine's services: the cache for `weir_invalidate`, counters for metrics.
    pub context: ModuleContext,
}

/// A metric a filter defined.
pub(crate) struct Metric {
    pub name: String,
    /// 0 counter, 1 gauge, 2 histogram.
    pub kind: i32,
    pub value: Arc<AtomicI64>,
    /// Counters are exported as `weir_module_<name>_total`.
    pub counter: Option<Counter>,
}

impl Shared {
    /// The metric called `name` of `kind`, defined on first use.
    pub fn define_metric(&self, kind: i32, name: &str) -> u32 {
        let mut metrics = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = metrics
            .iter()
            .position(|m| m.name == name && m.kind == kind)
        {
            return i as u32;
        }
        let counter = (kind == 0).then(|| {
            let exported: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            self.context
                .counter(&exported, "a counter defined by a proxy-wasm filter")
        });
        metrics.push(Metric {
            name: name.to_string(),
            kind,
            value: Arc::default(),
            counter,
        });
        (metrics.len() - 1) as u32
    }

    /// Runs `f` on metric `id`, if defined.
    pub fn with_metric<R>(&self, id: i32, f: impl FnOnce(&Metric) -> R) -> Option<R> {
        let metrics = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
        metrics.get(id as u32 as usize).map(f)
    }
}

impl Metric {
    /// `proxy_increment_metric`.
    pub fn add(&self, offset: i64) {
        self.value.fetch_add(offset, Ordering::Relaxed);
        if let (Some(c), Ok(n)) = (&self.counter, u64::try_from(offset)) {
            c.add(n);
        }
    }
}

/// Cache steering a filter asked for in a callback, applied to the transaction when
/// the callback returns.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct CacheSteer {
    pub skip: bool,
    pub ttl: Option<Duration>,
    pub variants: Vec<String>,
    pub tags: Vec<String>,
}

/// An HTTP callout a filter asked for, not yet sent (`callout.rs`).
pub(crate) struct PendingCall {
    pub token: u32,
    pub request: weir_api::http::Request<weir_api::Bytes>,
    pub timeout: Duration,
}

/// A callout's answer, during `proxy_on_http_call_response`.
pub(crate) struct Callout {
    /// `None` when the call failed.
    pub status: Option<StatusCode>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub trailers: HeaderMap,
}

impl CacheSteer {
    /// Applies what the filter asked of the cache to the transaction.
    pub fn apply(self, txn: &mut weir_api::Txn) {
        let cache = txn.cache();
        cache.skip |= self.skip;
        if self.ttl.is_some() {
            cache.ttl = self.ttl;
        }
        for v in self.variants {
            cache.variant = Some(match cache.variant.take() {
                Some(old) => format!("{old}+{v}").into(),
                None => v.into(),
            });
        }
        cache.tags.extend(self.tags);
    }
}

/// The state of one filter instance, in its wasmtime store.
pub(crate) struct Host {
    pub memory: Option<Memory>,
    /// `proxy_on_memory_allocate` (or `malloc`). Shared, so that a host call that hands
    /// the filter data clones a pointer, not the function (whose clone registers its
    /// type again).
    pub alloc: Option<Arc<TypedFunc<i32, i32>>>,
    pub limits: StoreLimits,
    pub shared: Arc<Shared>,
    /// The request line, for `:method`, `:path`, `:authority` and properties.
    pub method: Method,
    pub uri: Uri,
    /// The request headers, when `request_in`: during request callbacks, and after
    /// them a copy kept for filters that read heads, or the empty map that a filter
    /// which cannot read writes to (see `head.rs`). Otherwise an empty map, which
    /// `head.rs` swaps with the transaction's.
    pub request_headers: HeaderMap,
    /// The request line and headers entered the instance in this transaction.
    pub request_in: bool,
    /// The response status, once known.
    pub status: Option<StatusCode>,
    /// The response headers, during a response callback (`response_in`); otherwise
    /// an empty map, swapped with the transaction's as the request's is.
    pub response_headers: HeaderMap,
    pub response_in: bool,
    /// The trailers (request's or response's, as the map type says), during a trailers
    /// callback.
    pub trailers: Option<(crate::abi::MapType, HeaderMap)>,
    /// The body buffer of the current body callback (request or response).
    pub body: Option<(crate::abi::BufferType, Vec<u8>)>,
    /// The arguments of the foreign function being called.
    pub call_data: Vec<u8>,
    pub client: Option<SocketAddr>,
    pub lookup: Option<CacheLookup>,
    /// Set by `proxy_send_local_response`.
    pub local_response: Option<Reply>,
    /// Set by the `weir_` cache functions.
    pub steer: Option<Box<CacheSteer>>,
    /// Callouts asked for in the current callback.
    pub calls: Vec<PendingCall>,
    /// The last callout token handed out.
    pub next_token: u32,
    /// The answer being handed to `proxy_on_http_call_response`.
    pub callout: Option<Callout>,
    /// Header names and values the filter wrote lately, parsed: kept from one
    /// transaction to the next.
    pub recent: crate::recent::Recent,
}

impl Host {
    pub fn new(shared: Arc<Shared>, limits: StoreLimits) -> Host {
        Host {
            memory: None,
            alloc: None,
            limits,
            shared,
            method: Method::GET,
            uri: Uri::default(),
            request_headers: HeaderMap::new(),
            request_in: false,
            status: None,
            response_headers: HeaderMap::new(),
            response_in: false,
            trailers: None,
            body: None,
            call_data: Vec::new(),
            client: None,
            lookup: None,
            local_response: None,
            steer: None,
            calls: Vec::new(),
            next_token: 0,
            callout: None,
            recent: Default::default(),
        }
    }

    /// The cache steering of this callback, made on first use.
    pub fn steer(&mut self) -> &mut CacheSteer {
        self.steer.get_or_insert_with(Box::default)
    }

    /// Forgets what the last transaction left (an instance serves one after another).
    pub fn reset_transaction(&mut self) {
        // Only a filter whose heads enter the instance leaves a request line and
        // headers here (a copy, or what it wrote after the request phase): for the
        // others, nothing need be dropped and made again.
        if std::mem::take(&mut self.request_in) {
            self.method = Method::GET;
            self.uri = Uri::default();
            self.request_headers.clear();
        }
        self.status = None;
        self.response_in = false;
        self.trailers = None;
        self.body = None;
        self.client = None;
        self.lookup = None;
        self.local_response = None;
        self.steer = None;
        self.calls.clear();
        self.callout = None;
    }
}
