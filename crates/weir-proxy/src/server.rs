//! Listeners: accepting connections, serving HTTP/1.1 and HTTP/2 (prior knowledge) on
//! them, and stopping gracefully.

mod accept;
mod connection;
mod date;
mod h1;
mod h1_request;
mod h1_response;
mod h2;
mod start_error;
mod stop;
mod workers;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::access_log::AccessLog;
pub use crate::admin::ReloadRequest;
use crate::config::{Config, ConfigError, ListenMode};
use crate::listener::tls::TlsListener;
use crate::metrics::Metrics;
use crate::open_tunnels::OpenTunnels;
use crate::route::Router;
use crate::service::{Engine, ListenerInfo};
use crate::upstream::Upstream;
use accept::{accept_loop, bind, ConnectionCount};
pub use start_error::StartError;
use workers::Workers;

/// A running proxy.
pub struct Server {
    /// What modules are built with (content management, metrics).
    context: weir_api::ModuleContext,
    /// Every loaded module, kept alive here (a module no listener names still runs
    /// its timers); replaced by a reload.
    loaded: std::sync::Mutex<crate::modules::load::LoadedModules>,
    metrics: Arc<Metrics>,
    /// Each listener's engine, with the address it was configured with.
    engines: Vec<(SocketAddr, Arc<Engine>)>,
    /// The certificates of each TLS listener, by configured address; a reload swaps them.
    tls: Vec<(SocketAddr, Arc<TlsListener>)>,
    reload_requests: Option<tokio::sync::mpsc::Receiver<ReloadRequest>>,
    log: Option<Arc<AccessLog>>,
    cache: Arc<weir_cache::Cache>,
    /// This node's cluster, with `[cluster]`.
    cluster: Option<Arc<crate::cluster::ClusterLink>>,
    accept_tasks: Vec<JoinHandle<()>>,
    admin_task: Option<JoinHandle<()>>,
    stop: watch::Sender<bool>,
    connections: Arc<ConnectionCount>,
    tunnels: Arc<OpenTunnels>,
    workers: Arc<Workers>,
    grace: Duration,
    addrs: Vec<SocketAddr>,
}

impl Server {
    /// Binds every listener in `config` and starts serving, with no modules available
    /// (a `[[module]]` section is then an error). Must be called inside a tokio runtime.
    pub async fn start(config: Config) -> Result<Server, StartError> {
        Self::start_with_modules(config, &[]).await
    }

    /// Binds every listener in `config` and starts serving, building the configured
    /// `[[module]]`s from `factories` (the built-in ones, and any a custom binary
    /// adds). Must be called inside a tokio runtime.
    pub async fn start_with_modules(
        config: Config,
        factories: &[Box<dyn weir_api::ModuleFactory>],
    ) -> Result<Server, StartError> {
        let started = std::time::Instant::now();
        let metrics = Arc::new(Metrics::new());
        let log = AccessLog::open(&config.log).map_err(|e| {
            StartError(format!(
                "cannot open the access log `{}`: {e}",
                config.log.access
            ))
        })?;
        let log = log.map(Arc::new);
        let cache = Arc::new(weir_cache::Cache::new(weir_cache::CacheSettings {
            memory_bytes: config.cache.memory.0,
            max_object_bytes: config.cache.max_object.0,
            heuristic_fraction: config.cache.heuristic_fraction,
            heuristic_max: config.cache.heuristic_max.0,
            collapse: config.cache.collapse,
            refuse_set_cookie: config.cache.refuse_set_cookie,
            targeted_fields: config
                .cache
                .targeted_field
                .iter()
                .cloned()
                .chain([http::HeaderName::from_static(
                    weir_cache::targeted::CDN_CACHE_CONTROL,
                )])
                .collect(),
            max_memory_object_bytes: config.cache.max_memory_object.0,
            fill_memory_bytes: config.cache.fill_memory_bytes(),
            range_fill_whole: config.cache.range_fill == crate::config::RangeFill::Whole,
            disk: match &config.cache.disk {
                crate::config::DiskConfig::Off => None,
                crate::config::DiskConfig::On { path, size } => Some(weir_cache::DiskSettings {
                    path: path.clone(),
                    size_bytes: size.0,
                }),
            },
            stale_while_revalidate: config.cache.stale_while_revalidate.0,
            stale_if_error: config.cache.stale_if_error.0,
            tag_headers: config.cache.tag_headers.clone(),
        }));
        let flights = Arc::new(weir_cache::Coalescer::new());
        let refresh = Arc::new(crate::refresh::RefreshRules::new(&config.cache));
        let cluster = crate::cluster::ClusterLink::start(&config, &cache).map_err(StartError)?;
        crate::purge::detach_flights_on_invalidation(&cache, &flights, cluster.clone());
        if let Some(c) = &cluster {
            let c = Arc::downgrade(&c.cluster);
            metrics.set_cluster_source(Box::new(move || {
                c.upgrade().map(|c| c.figures()).unwrap_or_default()
            }));
        }
        let upstream = Upstream::new(
            &config.upstream,
            &config.timeouts,
            &config.origin,
            metrics.clone(),
        )
        .map_err(StartError)?;
        if uses_system_roots(&config) {
            upstream.load_system_roots();
        }
        // One engine per listener: the same cache, pool and log, each with the modules
        // its listener names.
        let held = Arc::new(crate::hooks::HeldBudget::new(
            config.limits.module_body_total.0,
        ));
        let tunnels = Arc::new(OpenTunnels::default());
        let engine_for = |modules| {
            Arc::new(Engine {
                cache: cache.clone(),
                flights: flights.clone(),
                upstream: upstream.clone(),
                metrics: metrics.clone(),
                log: log.clone(),
                limits: config.limits.clone(),
                connect_timeout: config.timeouts.connect.0,
                client_body_idle: config.timeouts.client_body_idle.0,
                tunnel_idle: config.timeouts.tunnel_idle.0,
                tunnels: tunnels.clone(),
                held: held.clone(),
                modules: arc_swap::ArcSwap::new(modules),
                refresh: refresh.clone(),
                cluster: cluster.clone(),
            })
        };
        let weak = Arc::downgrade(&cache);
        metrics.set_cache_source(Box::new(move || match weak.upgrade() {
            Some(c) => crate::metrics::CacheFigures {
                memory_bytes: c.size_bytes(),
                memory_objects: c.object_count(),
                disk: c.disk_stats().unwrap_or_default(),
                fill_bytes: c.fill_budget().held(),
                fills_passed: c.fill_budget().passed(),
            },
            None => Default::default(),
        }));
        let weak = Arc::downgrade(&cache);
        metrics.set_purge_source(Box::new(move || {
            weak.upgrade().map(|c| c.purge_stats()).unwrap_or_default()
        }));
        let content = crate::content::EngineContent::new(cache.clone());
        let context = weir_api::ModuleContext::new(
            content.clone(),
            metrics.clone(),
            Arc::new(RuntimeSpawner(tokio::runtime::Handle::current())),
        );
        let loaded = crate::modules::load::load(&config, factories, &context)
            .map_err(|e| StartError(e.to_string()))?;
        // Content management fetches through an engine without modules; it is connected
        // before the modules' timers start, so their first call finds it.
        content.set_engine(engine_for(Arc::default()));
        loaded.start_timers(&metrics);

        let (stop, _) = watch::channel(false);
        let connections = Arc::new(ConnectionCount {
            open: AtomicUsize::new(0),
            closed: Notify::new(),
        });
        let protocols = Arc::new(connection::Protocols::new(&config));
        let workers = Arc::new(Workers::start(
            config.server.worker_count(),
            config.server.scheduler,
        )?);
        let mut accept_tasks = Vec::new();
        let mut engines = Vec::new();
        let mut tls_listeners = Vec::new();
        let mut addrs = Vec::new();
        for l in config
            .listen
            .iter()
            .chain(crate::cluster::peer_listener(&config).as_ref())
        {
            let tls = match &l.tls {
                Some(t) => {
                    let t = Arc::new(TlsListener::new(t).map_err(|e| {
                        StartError(format!("listener {}: tls: {}", l.addr, e.message))
                    })?);
                    tls_listeners.push((l.addr, t.clone()));
                    Some(t)
                }
                None => None,
            };
            let router = match l.mode {
                ListenMode::Reverse => Some(
                    Router::from_config(l)
                        .map_err(|e| StartError(format!("listener {}: {e}", l.addr)))?,
                ),
                ListenMode::Forward | ListenMode::Transparent => None,
            };
            let info = Arc::new(ListenerInfo {
                mode: l.mode,
                allow: l.allow.clone(),
                connect_ports: l.connect_ports.clone(),
                safe_ports: l.safe_port_ranges(),
                router,
                purge_from: config.cache.purge_from.clone(),
                targeted_fields: l.obeys_targeted_fields(),
                peers: l.peers,
                setup: crate::listener::Setup {
                    proxy_protocol: l.proxy_protocol,
                    tls,
                    transparent: l.mode == ListenMode::Transparent,
                    handshake_timeout: config.timeouts.client_handshake.0,
                },
            });
            let listener = bind(l.addr)?;
            addrs.push(
                listener
                    .local_addr()
                    .map_err(|e| StartError(e.to_string()))?,
            );
            tracing::info!(
                addr = %l.addr,
                mode = l.mode.as_str(),
                tls = l.tls.is_some(),
                proxy_protocol = l.proxy_protocol,
                "listening"
            );
            let engine = engine_for(loaded.chains_for(l, &metrics));
            engines.push((l.addr, engine.clone()));
            accept_tasks.push(tokio::spawn(accept_loop(
                listener,
                info,
                engine,
                protocols.clone(),
                stop.subscribe(),
                connections.clone(),
                workers.clone(),
            )));
        }
        let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(4);
        let admin_task = match config.admin.listen {
            Some(addr) => {
                let listener = bind(addr)?;
                tracing::info!(addr = %addr, "admin listening");
                let admin = crate::admin::Admin {
                    metrics: metrics.clone(),
                    reload: reload_tx.clone(),
                    content: content.clone(),
                    cluster: cluster.as_ref().map(|c| c.cluster.clone()),
                    token: config.admin.token.as_ref().map(|t| t.0.clone()),
                    status: crate::admin::StatusFacts {
                        started,
                        memory: config.cache.memory.0,
                        disk: match &config.cache.disk {
                            crate::config::DiskConfig::On { size, .. } => size.0,
                            crate::config::DiskConfig::Off => 0,
                        },
                    },
                };
                Some(tokio::spawn(crate::admin::serve(listener, Arc::new(admin))))
            }
            None => None,
        };
        Ok(Server {
            loaded: std::sync::Mutex::new(loaded),
            context,
            metrics: metrics.clone(),
            engines,
            tls: tls_listeners,
            reload_requests: Some(reload_rx),
            log,
            cache,
            cluster,
            accept_tasks,
            admin_task,
            stop,
            connections,
            tunnels,
            workers,
            grace: config.timeouts.shutdown_grace.0,
            addrs,
        })
    }

    /// Reload requests from the admin listener (`POST /admin/reload`); the caller that
    /// owns the configuration file answers them (the `weir` binary does). Taken once.
    pub fn take_reload_requests(&mut self) -> Option<tokio::sync::mpsc::Receiver<ReloadRequest>> {
        self.reload_requests.take()
    }

    /// Applies the modules and TLS certificates of a new configuration: loads,
    /// unloads, reorders, enables and disables modules and changes their settings,
    /// and installs each listener's new certificates (loaded before any module is
    /// built). Transactions in flight finish with the modules they started with; no
    /// connection is dropped. On an error nothing changes. Other settings (listeners,
    /// cache, limits) are read at start only. Returns a one-line summary.
    pub fn reload(
        &self,
        config: &Config,
        factories: &[Box<dyn weir_api::ModuleFactory>],
    ) -> Result<String, ConfigError> {
        // Certificates first: if any fails, nothing at all changes.
        let certificates =
            crate::listener::tls::reload_plan(&config.listen, &config.source, &self.tls)?;
        let loaded = crate::modules::load::load(config, factories, &self.context)?;
        loaded.start_timers(&self.metrics);
        let mut current = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        *current = loaded;
        let loaded = &*current;
        let mut swapped = 0;
        for (addr, engine) in &self.engines {
            if let Some(l) = config.listen.iter().find(|l| l.addr == *addr) {
                engine.modules.store(loaded.chains_for(l, &self.metrics));
                swapped += 1;
            }
        }
        let names: Vec<&str> = config
            .module
            .iter()
            .filter(|m| m.enabled)
            .map(|m| m.name.as_str())
            .collect();
        let certificates = crate::listener::tls::apply(certificates);
        Ok(format!(
            "reloaded modules on {swapped} of {} listeners: [{}]; {certificates}other settings apply after a restart",
            self.engines.len(),
            names.join(", ")
        ))
    }

    /// The addresses the client listeners are bound to, in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Stops accepting, lets transactions in flight (and tunnels open) finish within
    /// the grace period, closes the tunnels still open (logging them), then returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in &self.accept_tasks {
            t.abort();
        }
        let deadline = tokio::time::Instant::now() + self.grace;
        loop {
            let closed = self.connections.closed.notified();
            let tunnel_closed = self.tunnels.closed();
            tokio::pin!(closed, tunnel_closed);
            closed.as_mut().enable();
            tunnel_closed.as_mut().enable();
            let open = self.connections.open.load(Ordering::Acquire);
            let tunnels = self.tunnels.count();
            if open == 0 && tunnels == 0 {
                break;
            }
            let either = async {
                tokio::select! {
                    () = closed => {}
                    () = tunnel_closed => {}
                }
            };
            if tokio::time::timeout_at(deadline, either).await.is_err() {
                tracing::warn!(
                    open,
                    tunnels,
                    "grace period over; closing remaining connections and tunnels"
                );
                break;
            }
        }
        // Tunnels still open are closed now, and waited for (briefly) until each has
        // closed, so that they are logged before the access log's last flush.
        self.tunnels.close_all();
        let closing = Duration::from_secs(1);
        if tokio::time::timeout(closing, self.tunnels.all_closed())
            .await
            .is_err()
        {
            tracing::warn!(
                tunnels = self.tunnels.count(),
                "tunnels did not close within {closing:?} of being told to"
            );
        }
        if let Some(t) = &self.admin_task {
            t.abort();
        }
        if let Some(log) = &self.log {
            log.flush();
        }
        // What was stored is on disk before the process exits, so a restart finds it.
        let cache = self.cache.clone();
        let _ = tokio::task::spawn_blocking(move || cache.flush()).await;
        if let Some(c) = &self.cluster {
            c.cluster.leave().await;
        }
        self.workers.stop();
    }
}

/// Module background work runs on the main runtime (accept loop, admin, timers).
struct RuntimeSpawner(tokio::runtime::Handle);

impl weir_api::Spawner for RuntimeSpawner {
    fn spawn(&self, work: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>) {
        self.0.spawn(work);
    }
}

/// Whether an `https://` origin of a listener or route has no `ca_file` (nor
/// `tls_verify = false`), so that its certificate is checked against the system's roots.
fn uses_system_roots(config: &Config) -> bool {
    let own_trust = |url: &crate::config::OriginUrl| {
        config.origin.iter().any(|o| {
            (o.ca_file.is_some() || !o.verifies())
                && o.origin_url().is_ok_and(|u| u.same_origin(url))
        })
    };
    config
        .listen
        .iter()
        .flat_map(|l| l.origin.iter().chain(l.route.iter().map(|r| &r.origin)))
        .filter_map(|text| crate::config::OriginUrl::parse(text).ok())
        .any(|url| url.tls && !own_trust(&url))
}
