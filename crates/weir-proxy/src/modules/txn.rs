//! A transaction's module context, and the chains a transaction takes it from.
//!
//! A transaction keeps its chain alive (a reload may replace the chain meanwhile), so
//! it holds a counted reference. One reference count that every transaction on every
//! worker thread increments and decrements is a cache line the cores take from each
//! other twice per request, and the chain's fields beside it were read from memory
//! each time too. So a chain hands out one handle per thread ([`ChainHandle`]), each
//! its own allocation with its own count: a transaction counts on its thread's handle,
//! and the handles share the chain, which nothing writes after it is built. The handle
//! also holds the thread's counts of each module's calls, so that counting a call
//! needs no lookup.

use std::ops::Deref;
use std::sync::Arc;

use thread_local::ThreadLocal;
use weir_api::{engine, Event, Txn};

use super::ModuleChain;
use crate::metrics::{Metrics, ThreadCounts};

/// A transaction's module context: the chain it started with and its [`Txn`]. Held
/// inline by the transaction, so a chain costs no allocation per transaction.
pub(crate) struct ModTxn {
    pub chain: Arc<ChainHandle>,
    pub txn: Txn,
}

impl ModTxn {
    /// Whether this transaction's chain wants `event`.
    #[inline]
    pub fn wants(&self, event: Event) -> bool {
        self.chain.wants(event)
    }
}

/// One thread's reference to a chain (see the module's documentation).
pub(crate) struct ChainHandle {
    chain: Arc<ModuleChain>,
    /// This thread's counts of each module's calls, by index.
    counts: Box<[Arc<ThreadCounts>]>,
}

impl Deref for ChainHandle {
    type Target = ModuleChain;

    #[inline]
    fn deref(&self) -> &ModuleChain {
        &self.chain
    }
}

impl ChainHandle {
    fn new(chain: &Arc<ModuleChain>) -> ChainHandle {
        ChainHandle {
            counts: chain
                .modules
                .iter()
                .map(|m| m.events.this_thread())
                .collect(),
            chain: chain.clone(),
        }
    }

    /// This thread's counts of module `i`'s calls, for [`ModuleChain::call_counted`].
    #[inline(always)]
    pub fn counts(&self, i: u16) -> &ThreadCounts {
        &self.counts[i as usize]
    }

    /// Calls every module's `on_log` (see [`ModuleChain::log_counted`]).
    pub fn log(&self, txn: &mut Txn, metrics: &Metrics, completion: weir_api::Completion) {
        self.chain
            .log_counted(txn, metrics, completion, &self.counts)
    }

    /// A transaction on this chain (a client's, or a fill's own), when it has modules
    /// at all.
    pub fn new_txn(self: &Arc<Self>, client: std::net::SocketAddr) -> Option<ModTxn> {
        (!self.is_empty()).then(|| ModTxn {
            chain: self.clone(),
            txn: engine::new_txn(client, self.modules.len()),
        })
    }
}

/// A chain as a listener or route keeps it, with the handles its threads took.
pub(crate) struct SharedChain {
    chain: Arc<ModuleChain>,
    handles: ThreadLocal<Arc<ChainHandle>>,
}

impl SharedChain {
    /// Shares `chain`.
    pub fn new(chain: ModuleChain) -> SharedChain {
        SharedChain {
            chain: Arc::new(chain),
            handles: ThreadLocal::new(),
        }
    }

    /// A transaction context bound to this chain, when it has modules at all. The
    /// transaction keeps using this chain even if a reload replaces it meanwhile.
    #[inline]
    pub fn new_txn(&self, client: std::net::SocketAddr) -> Option<ModTxn> {
        if self.chain.is_empty() {
            return None;
        }
        self.handles
            .get_or(|| Arc::new(ChainHandle::new(&self.chain)))
            .new_txn(client)
    }
}

/// The module chains of one listener: a reload replaces them together.
pub(crate) struct ListenerChains {
    listener: SharedChain,
    /// Per route (configuration order): its own chain when it names modules.
    routes: Vec<Option<SharedChain>>,
}

impl Default for ListenerChains {
    fn default() -> ListenerChains {
        ListenerChains::new(SharedChain::new(ModuleChain::default()), Vec::new())
    }
}

impl ListenerChains {
    /// The listener's own chain and its routes'.
    pub fn new(listener: SharedChain, routes: Vec<Option<SharedChain>>) -> ListenerChains {
        ListenerChains { listener, routes }
    }

    /// Whether some route has modules of its own (else the route need not be found).
    pub fn by_route(&self) -> bool {
        self.routes.iter().any(Option::is_some)
    }

    /// Whether a chain of the listener or one of its routes takes the request's
    /// credentials: its HTTP/1.1 parser then sets them aside (the route is found
    /// after parsing; a route whose chain does not take them gets them back).
    pub fn takes_credentials(&self) -> bool {
        std::iter::once(&self.listener)
            .chain(self.routes.iter().flatten())
            .any(|c| c.chain.takes_credentials())
    }

    /// The chain for a request that matched route `route` (`None`: no route, or a
    /// forward listener).
    pub fn for_route(&self, route: Option<usize>) -> &SharedChain {
        route
            .and_then(|i| self.routes.get(i))
            .and_then(Option::as_ref)
            .unwrap_or(&self.listener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module that asks for no event.
    struct Idle;

    impl weir_api::Module for Idle {
        fn name(&self) -> &str {
            "idle"
        }

        fn events(&self) -> weir_api::Events {
            weir_api::Events::NONE
        }
    }

    #[test]
    fn each_thread_takes_its_own_handle_and_a_thread_keeps_one() {
        let module: Arc<dyn weir_api::Module> = Arc::new(Idle);
        let chain = ModuleChain::new(
            vec![(module, false, Default::default())],
            Default::default(),
        );
        let shared = Arc::new(SharedChain::new(chain));
        let client = "127.0.0.1:1".parse().unwrap();
        let a = shared.new_txn(client).expect("a chain with a module");
        let b = shared.new_txn(client).expect("a chain with a module");
        assert!(Arc::ptr_eq(&a.chain, &b.chain), "one handle per thread");
        let other = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.new_txn(client).expect("a module").chain)
                .join()
                .unwrap()
        };
        assert!(
            !Arc::ptr_eq(&a.chain, &other),
            "another thread's own handle"
        );
        // A transaction outlives its chain's replacement.
        drop(shared);
        assert_eq!(a.chain.modules.len(), 1);
    }
}
