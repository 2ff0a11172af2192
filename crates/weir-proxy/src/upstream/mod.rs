//! Connections to origins, one set per origin (scheme, host and port), shared by all
//! workers: an HTTP/1.1 keep-alive pool (`h1.rs`, one request per connection at a
//! time, spoken by Weir's own client) and HTTP/2 connections carrying many requests
//! each (`h2.rs`, hyper's client), over TCP or TLS (`connect.rs`, `tls.rs`). Each
//! origin's `[[origin]]` section chooses the protocol.
//!
//! Here: how a request is dispatched to an origin. Bottom to top: the names
//! (`origin_addr.rs`, `error.rs`, `stream.rs`), HTTP/1.1's wire format (`h1_wire.rs`),
//! one HTTP/1.1 connection (`h1_conn.rs`), TLS settings and the pools' data (`tls.rs`,
//! `h1_pool.rs`, `h2_pool.rs`), the shared state (`origins.rs`), opening connections
//! (`connect.rs`), the pools (`h1.rs`, `h2.rs`), an HTTP/1.1 response body
//! (`h1_body.rs`), the response body (`body.rs`), sending on HTTP/1.1 (`h1_send.rs`).

mod body;
mod connect;
mod error;
mod h1;
mod h1_body;
mod h1_conn;
mod h1_pool;
mod h1_send;
mod h1_upgrade;
mod h1_wire;
mod h2;
mod h2_pool;
mod origin_addr;
mod origin_request;
mod origins;
mod owned;
mod stream;
mod timer;
mod tls;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use thread_local::ThreadLocal;

pub(crate) use owned::owns_its_bytes;

use http::{Request, Response};
use http_body::Body;

use crate::body::request::RequestBody;
use crate::config::{OriginConfig, OriginProtocol, TimeoutsConfig, UpstreamConfig};
use crate::interim::Interim;
use crate::metrics::Metrics;
use connect::Negotiated;
use origins::{Configured, Dispatch, Origin, HTTP1, HTTP2, RECENT_ORIGINS, UNKNOWN};
use tls::{Alpn, TlsConfigs};

use body::{Hold, Inner};
pub(crate) use body::{Resume, ResumeFrom, UpstreamBody};
pub(crate) use error::UpstreamError;
pub(crate) use h1_upgrade::UpgradeAnswer;
pub(crate) use origin_addr::OriginAddr;
pub(crate) use origin_request::{for_origin, OriginRequest};
pub(crate) use origins::Upstream;
use timer::ExchangeTimer;

impl Upstream {
    /// The pools, with the `[[origin]]` sections' settings. Fails when a `ca_file`
    /// cannot be read (it was readable when the configuration was checked).
    pub fn new(
        settings: &UpstreamConfig,
        timeouts: &TimeoutsConfig,
        origins: &[OriginConfig],
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, String> {
        let mut configured = HashMap::new();
        for o in origins {
            let url = o.origin_url()?;
            let tls = match (&o.ca_file, o.verifies()) {
                _ if !url.tls => None,
                (_, false) => {
                    tracing::warn!(
                        origin = %o.url,
                        "tls_verify = false: any certificate is accepted from this origin"
                    );
                    Some(Arc::new(TlsConfigs::new(tls::Trust::Anyone)?))
                }
                (Some(path), true) => Some(Arc::new(
                    TlsConfigs::from_ca_file(path)
                        .map_err(|e| format!("origin {}: ca_file: {e}", o.url))?,
                )),
                (None, true) => None,
            };
            configured.insert(
                OriginAddr::from_url(&url),
                Configured {
                    protocol: o.protocol,
                    tls,
                },
            );
        }
        let upstream = Arc::new(Upstream {
            origins: Mutex::new(HashMap::new()),
            recent: ThreadLocal::new(),
            configured,
            system_tls: OnceLock::new(),
            settings: settings.clone(),
            connect_timeout: timeouts.connect.0,
            response_timeout: timeouts.origin_response.0,
            body_idle: timeouts.origin_body_idle.0,
            metrics,
        });
        let weak = Arc::downgrade(&upstream);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let Some(up) = weak.upgrade() else { return };
                up.close_expired_idle();
            }
        });
        Ok(upstream)
    }

    /// Reads the system's root certificates now, so that the first request to an
    /// `https://` origin does not wait for it; says so when there are none.
    pub fn load_system_roots(&self) {
        if let Err(e) = self.system_tls() {
            tracing::warn!("https:// origins without a ca_file cannot be verified: {e}");
        }
    }

    fn system_tls(&self) -> Result<Arc<TlsConfigs>, String> {
        self.system_tls
            .get_or_init(|| TlsConfigs::system().map(Arc::new))
            .clone()
    }

    /// Closes idle connections past the idle timeout, then forgets the origins that
    /// nothing holds any more (see [`Upstream::origins`]).
    fn close_expired_idle(&self) {
        let timeout = self.settings.idle_timeout.0;
        let origins: Vec<Arc<Origin>> = self
            .origins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for origin in origins {
            origin.h1.close_expired_idle(timeout);
            origin.h2.close_expired_idle(timeout);
        }
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock, an origin held by the map alone cannot be taken by anyone:
        // a request finds it through the map (this lock) or through a thread's recent
        // origins, whose weak reference must be upgraded first (then it is not alone).
        origins.retain(|addr, o| {
            Arc::strong_count(o) > 1
                || o.h1.open() > 0
                || !o.h2.is_empty()
                || self.configured.contains_key(addr)
        });
        self.metrics.set_origins(origins.len());
    }

    fn origin(&self, addr: &OriginAddr) -> Arc<Origin> {
        let recent = self.recent.get_or_default();
        if let Some(o) = recent.borrow().get(addr).and_then(Weak::upgrade) {
            return o;
        }
        let o = self.shared_origin(addr);
        let mut recent = recent.borrow_mut();
        if recent.len() >= RECENT_ORIGINS {
            recent.clear();
        }
        recent.insert(addr.clone(), Arc::downgrade(&o));
        o
    }

    fn shared_origin(&self, addr: &OriginAddr) -> Arc<Origin> {
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = origins.get(addr) {
            return o.clone();
        }
        let configured = self.configured.get(addr);
        let tls = addr
            .tls
            .then(|| match configured.and_then(|c| c.tls.clone()) {
                Some(t) => Ok(t),
                None => self.system_tls(),
            });
        let o = Arc::new(Origin {
            addr: addr.clone(),
            protocol: configured.map_or(OriginProtocol::Auto, |c| c.protocol),
            tls,
            learned: AtomicU8::new(UNKNOWN),
            probe: tokio::sync::Mutex::new(()),
            h1: h1_pool::Pool::new(self.settings.max_idle_per_origin),
            h2: h2_pool::Pool::default(),
        });
        origins.insert(addr.clone(), o.clone());
        self.metrics.set_origins(origins.len());
        o
    }

    /// Sends `request` (origin-form URI, headers ready) to `origin` and waits for the
    /// response head. The 1xx responses an HTTP/1.1 origin sends before it go to
    /// `interim` (hyper's HTTP/2 client does not report them).
    pub async fn send(
        &self,
        addr: &OriginAddr,
        request: OriginRequest,
        interim: Option<&Interim>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let origin = self.origin(addr);
        // The future of this call is part of every caller's (a spawned fill's
        // included), and moved whole when that is spawned: the paths that are not a
        // reused HTTP/1.1 connection are boxed so that it stays small.
        match origin.dispatch() {
            Dispatch::Http1 => self.send_h1(&origin, None, request, interim).await,
            Dispatch::Http2 => {
                crate::boxed::in_place(|| self.send_h2(&origin, request.into_request())).await
            }
            Dispatch::Probe => {
                crate::boxed::in_place(|| self.send_probed(&origin, request, interim)).await
            }
        }
    }

    async fn send_probed(
        &self,
        origin: &Arc<Origin>,
        request: OriginRequest,
        interim: Option<&Interim>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        loop {
            match origin.dispatch() {
                Dispatch::Http1 => return self.send_h1(origin, None, request, interim).await,
                Dispatch::Http2 => return self.send_h2(origin, request.into_request()).await,
                Dispatch::Probe => {
                    if let Some(conn) = self.probe(origin).await? {
                        return self.send_h1(origin, Some(conn), request, interim).await;
                    }
                }
            }
        }
    }

    /// Opens one connection to an `auto` origin over TLS offering both protocols. An
    /// HTTP/2 connection goes to the pool; an HTTP/1.1 one is returned for the request
    /// that found out.
    async fn probe(&self, origin: &Arc<Origin>) -> Result<Option<h1::PooledConn>, UpstreamError> {
        let _one = tokio::time::timeout(self.response_timeout, origin.probe.lock())
            .await
            .map_err(|_| UpstreamError::Timeout)?;
        if !matches!(origin.dispatch(), Dispatch::Probe) {
            return Ok(None);
        }
        let found = tokio::time::timeout(self.connect_timeout, async {
            let (io, negotiated) = connect::connect(origin, Alpn::Both).await?;
            if negotiated == Negotiated::Http2 {
                h2::adopt(self, origin, io).await?;
                return Ok((HTTP2, None));
            }
            let place = origin.h1.reserve();
            Ok((HTTP1, Some(h1::adopt(self, origin, io, place))))
        })
        .await
        .unwrap_or_else(|_| {
            Err(UpstreamError::Connect(format!(
                "connecting to {} timed out",
                origin.addr
            )))
        })?;
        origin.learned.store(found.0, Ordering::Release);
        Ok(found.1)
    }

    /// HTTP/2: a stream on a shared connection. A request the origin refused unprocessed
    /// (GOAWAY past it, REFUSED_STREAM), or that hyper could not send because the
    /// connection was closing, is sent once more on another connection. A reset of the
    /// stream fails this request only.
    async fn send_h2(
        &self,
        origin: &Arc<Origin>,
        mut request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let mut timer = ExchangeTimer::new(self.response_timeout);
        let deadline = timer.deadline();
        let mut retried = false;
        loop {
            let copy = if retried {
                None
            } else {
                h2::copy_request(&request)
            };
            let method = request.method().clone();
            let (slot, mut sender) = h2::acquire(self, origin, deadline).await?;
            let sent = timer.bound(sender.try_send_request(request)).await;
            match sent {
                None => return Err(UpstreamError::Timeout),
                Some(Ok(resp)) => {
                    let hold = if resp.body().is_end_stream() {
                        Hold::None
                    } else {
                        Hold::Http2 { _slot: slot }
                    };
                    let idle = timer.into_idle(self.body_idle);
                    return Ok(resp.map(|inner| UpstreamBody {
                        inner: Inner::Http2(inner),
                        hold,
                        idle,
                        resume: None,
                        trailers: None,
                    }));
                }
                Some(Err(mut e)) => {
                    let unsent = e.take_message();
                    let error = e.into_error();
                    if retried {
                        return Err(classify(error));
                    }
                    if let Some(unsent) = unsent {
                        h2_pool::retire(&slot);
                        request = unsent;
                    } else if let Some(copy) =
                        copy.filter(|_| h2::refused_unprocessed(&error, &method))
                    {
                        h2_pool::retire(&slot);
                        request = copy;
                    } else {
                        return Err(classify(error));
                    }
                    retried = true;
                }
            }
        }
    }
}

fn classify(e: hyper::Error) -> UpstreamError {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(s) = source {
        if s.is::<crate::body::request::BodyTooLarge>() {
            return UpstreamError::BodyTooLarge;
        }
        if let Some(t) = s.downcast_ref::<crate::body::request::ClientBodyTimeout>() {
            return UpstreamError::ClientTimeout(t.0);
        }
        source = s.source();
    }
    UpstreamError::Protocol(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_origin_is_one_object_for_every_thread_and_past_the_recent_list() {
        let config = crate::Config::default();
        let upstream = Upstream::new(
            &config.upstream,
            &config.timeouts,
            &config.origin,
            Arc::new(Metrics::new()),
        )
        .unwrap();
        let first = upstream.origin(&OriginAddr::http("a.example", 80));
        assert!(Arc::ptr_eq(
            &first,
            &upstream.origin(&OriginAddr::http("a.example", 80))
        ));
        // Enough others to empty this thread's recent list.
        for i in 0..RECENT_ORIGINS * 2 {
            upstream.origin(&OriginAddr::http(format!("o{i}.example"), 80));
        }
        let other = OriginAddr::http("a.example", 8080);
        assert!(!Arc::ptr_eq(&first, &upstream.origin(&other)));
        let u = upstream.clone();
        let elsewhere = std::thread::spawn(move || u.origin(&OriginAddr::http("a.example", 80)))
            .join()
            .unwrap();
        assert!(Arc::ptr_eq(&first, &elsewhere));
        assert!(Arc::ptr_eq(
            &first,
            &upstream.origin(&OriginAddr::http("a.example", 80))
        ));
    }

    #[tokio::test]
    async fn the_sweep_forgets_only_the_origins_nothing_holds() {
        let config = crate::Config::default();
        let metrics = Arc::new(Metrics::new());
        let upstream = Upstream::new(&config.upstream, &config.timeouts, &[], metrics).unwrap();
        let (held, gone) = (
            OriginAddr::http("held.example", 80),
            OriginAddr::http("gone.example", 80),
        );
        let kept = upstream.origin(&held);
        let first = upstream.origin(&gone);
        let weak = Arc::downgrade(&first);
        drop(first);
        upstream.close_expired_idle();
        let known = |a: &OriginAddr| upstream.origins.lock().unwrap().contains_key(a);
        assert!(known(&held), "an origin a request holds is kept");
        assert!(
            !known(&gone),
            "an origin only the map and a recent list held is forgotten"
        );
        assert!(weak.upgrade().is_none(), "and freed");
        // Asked for again, it is made anew; the one held is still the same object.
        assert!(known(&upstream.origin(&gone).addr));
        assert!(Arc::ptr_eq(&kept, &upstream.origin(&held)));
    }
}
