//! What every transaction shares (`Engine`): the cache and the fetches in flight, the
//! upstream pools, metrics, the access log, the limits, the refresh rules and the
//! listener's modules.
//! Above the upstream pools and the vocabulary; below everything that runs a
//! transaction (the record, module calls, the cache path, the transaction itself).

use std::sync::Arc;

use weir_cache::PolicyOptions;

use crate::access_log::AccessLog;
use crate::cluster::ClusterLink;
use crate::config::LimitsConfig;
use crate::flight::FlightHead;
use crate::hooks::budget::HeldBudget;
use crate::metrics::Metrics;
use crate::modules::txn::ListenerChains;
use crate::open_tunnels::OpenTunnels;
use crate::refresh::RefreshRules;
use crate::upstream::Upstream;

/// What every transaction shares.
pub(crate) struct Engine {
    pub cache: Arc<weir_cache::Cache>,
    pub flights: Arc<weir_cache::Coalescer<FlightHead>>,
    pub upstream: Arc<Upstream>,
    pub metrics: Arc<Metrics>,
    pub log: Option<Arc<AccessLog>>,
    pub limits: LimitsConfig,
    pub connect_timeout: std::time::Duration,
    /// `[timeouts] client_body_idle`.
    pub client_body_idle: std::time::Duration,
    /// `[timeouts] tunnel_idle`.
    pub tunnel_idle: std::time::Duration,
    /// The tunnels open on every listener, which a shutdown waits for, then closes.
    pub tunnels: Arc<OpenTunnels>,
    /// `[limits] module_body_total`, shared by every listener.
    pub held: Arc<HeldBudget>,
    /// The modules of this listener and its routes; a reload swaps them, transactions
    /// keep theirs.
    pub modules: arc_swap::ArcSwap<ListenerChains>,
    /// `[[cache.refresh]]`, shared by every listener.
    pub refresh: Arc<RefreshRules>,
    /// This node's cluster, with `[cluster]`.
    pub cluster: Option<Arc<ClusterLink>>,
}

impl Engine {
    pub(crate) fn upstream_connect_timeout(&self) -> std::time::Duration {
        self.connect_timeout
    }

    /// The storage policy's options for a response to `url`: the cache's, with the
    /// heuristic of the first refresh rule that matches.
    pub(crate) fn policy_options(&self, targeted: bool, url: &str) -> PolicyOptions<'_> {
        let mut options = self.cache.settings().policy_options(targeted);
        if !self.refresh.is_empty() {
            if let Some(h) = self.refresh.matching(url) {
                options.heuristic = h;
            }
        }
        options
    }
}
