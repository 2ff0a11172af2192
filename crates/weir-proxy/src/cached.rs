//! The cache path of a transaction: lookup, coalesced fetch or validation, store.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{request, Method, Response, StatusCode};
use weir_cache::{CacheKey, CachedObject, FlightReader, Join, Lookup, StaleUse, StoragePolicy};

use crate::body::{ProxyBody, RequestBody};
use crate::error::ProxyError;
use crate::headers;
use crate::hooks;
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::modules::ModTxn;
use crate::service::{forward_hooked, upstream_error, upstream_request, Engine, Served, Target};
use crate::upstream::OriginAddr;
use weir_api::{CacheLookup, Event, Reply};

/// What a flight's readers learn when the origin's response head arrives.
pub(crate) type FlightHead = Arc<FlightOutcome>;

pub(crate) enum FlightOutcome {
    Response(FetchedHead),
    Failed(ProxyErrorParts),
}

/// A fetch's failure as its readers learn it (already counted by the fetch).
pub(crate) struct ProxyErrorParts {
    status: StatusCode,
    reason: String,
    /// The `Cache-Status` detail, when the status alone does not tell.
    detail: Option<&'static str>,
}

pub(crate) struct FetchedHead {
    status: StatusCode,
    headers: HeaderMap,
    /// May other clients be served from this fetch (it is being stored)?
    shareable: bool,
    outcome: CacheOutcome,
    cache_status: HeaderValue,
    /// The request headers the response varies on, and the leader's variant key.
    vary: Option<(Vec<http::HeaderName>, CacheKey)>,
}

/// GET and HEAD requests that may be answered from the cache.
pub(crate) fn is_cache_candidate(parts: &request::Parts) -> bool {
    (parts.method == Method::GET || parts.method == Method::HEAD)
        && !parts.headers.contains_key(header::RANGE)
        && !request_directive(&parts.headers, "no-store")
}

fn request_directive(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .any(|d| {
            d.trim()
                .split('=')
                .next()
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(name))
        })
}

pub(crate) fn cache_key(target: &Target) -> CacheKey {
    CacheKey::for_url(
        "http",
        target.host.to_str().unwrap_or(""),
        &target.path_and_query,
    )
}

/// Serves a GET or HEAD through the cache.
pub(crate) async fn serve(
    engine: &Arc<Engine>,
    parts: request::Parts,
    target: Target,
    txn: &mut Option<ModTxn>,
) -> Result<Served, ProxyError> {
    let mut key = cache_key(&target);
    if let Some(variant) = txn
        .as_ref()
        .and_then(|t| t.txn.cache_overrides().variant.as_deref())
    {
        key = key.with_module_variant(variant);
    }
    // Before the lookup: a stale copy read now must not outlive an invalidation either.
    let ticket = engine.cache.ticket();
    let now = SystemTime::now();
    let mut found = engine.cache.lookup(&key, &parts, now);
    if matches!(found, Lookup::Miss) && engine.cache.has_disk() {
        found = engine.cache.lookup_disk(&key, &parts, now).await;
    }
    if txn.as_ref().is_some_and(|t| t.wants(Event::CacheLookup)) {
        let seen = match &found {
            Lookup::Fresh(_) => CacheLookup::Fresh,
            Lookup::Stale(_) => CacheLookup::Stale,
            Lookup::Miss => CacheLookup::Miss,
        };
        if let Some(reply) = hooks::cache_lookup!(engine, txn.as_mut(), seen)? {
            return Ok(Served::module_reply(reply));
        }
    }
    let stale = match found {
        Lookup::Fresh(object) => {
            return Ok(serve_object(&object, &parts, now, CacheOutcome::Hit, HIT))
        }
        Lookup::Stale(object) => {
            let window = engine.cache.settings().stale_while_revalidate;
            if object.may_serve_stale(&parts.headers, now, StaleUse::WhileRevalidate, window) {
                let stale = object.clone();
                revalidate_in_background(engine, &key, &parts, &target, txn, stale, ticket);
                return Ok(serve_object(
                    &object,
                    &parts,
                    now,
                    CacheOutcome::StaleRevalidating,
                    STALE_WHILE_REVALIDATE,
                ));
            }
            Some(object)
        }
        Lookup::Miss => None,
    };
    // Only a request that cannot be answered from a fresh copy needs this directive.
    if request_directive(&parts.headers, "only-if-cached") {
        return Err(ProxyError {
            status: StatusCode::GATEWAY_TIMEOUT,
            kind: None,
            reason: "not in the cache, and the request says only-if-cached".into(),
            close: false,
            detail: None,
        }
        .with_detail(ONLY_IF_CACHED));
    }
    if parts.method == Method::HEAD {
        // HEAD responses are not stored; forward it as it is.
        let req = upstream_request(&parts, &target, RequestBody::Empty, false);
        return forward_hooked(
            engine,
            txn,
            &target,
            req,
            CacheOutcome::Miss,
            HeaderValue::from_static("weir; fwd=miss"),
        )
        .await;
    }
    let recheck = || match engine.cache.lookup(&key, &parts, SystemTime::now()) {
        Lookup::Fresh(o) => Some(o),
        _ => None,
    };
    match engine.flights.join(&key, recheck) {
        Err(object) => Ok(serve_object(&object, &parts, now, CacheOutcome::Hit, HIT)),
        Ok(Join::Leader(flight, reader)) => {
            let fill = Fill {
                key,
                flight,
                stale,
                ticket,
            };
            start_fetch(engine, fill, &parts, &target, txn);
            serve_flight(reader, &parts, &target.origin, false).await
        }
        Ok(Join::Follower(mut reader)) => {
            // Another client's fetch serves us only if it is stored (so shared) and
            // is the variant we would have been given.
            let unusable = match reader.head().await.as_deref() {
                Some(FlightOutcome::Response(h)) if !h.shareable => Some("weir; fwd=miss"),
                Some(FlightOutcome::Response(h))
                    if h.vary.as_ref().is_some_and(|(names, leader)| {
                        key.variant(names, &parts.headers) != *leader
                    }) =>
                {
                    Some("weir; fwd=vary-miss")
                }
                _ => None,
            };
            if unusable.is_none() {
                serve_flight(reader, &parts, &target.origin, true).await
            } else {
                drop(reader);
                let req = upstream_request(&parts, &target, RequestBody::Empty, false);
                let cache_status = HeaderValue::from_static(unusable.unwrap_or("weir; fwd=miss"));
                forward_hooked(engine, txn, &target, req, CacheOutcome::Miss, cache_status).await
            }
        }
    }
}

const HIT: HeaderValue = HeaderValue::from_static("weir; hit");
const STALE_WHILE_REVALIDATE: HeaderValue =
    HeaderValue::from_static("weir; hit; detail=stale-while-revalidate");

/// What a fetch fills: the key, its flight, the stale copy it validates (if any), and
/// the invalidation ticket taken before the lookup.
struct Fill {
    key: CacheKey,
    flight: Arc<weir_cache::Flight<FlightHead>>,
    stale: Option<Arc<CachedObject>>,
    ticket: weir_cache::Ticket,
}

/// Starts the origin fetch that feeds a flight: a validation when there is a stale
/// copy, else a plain fetch.
fn start_fetch(
    engine: &Arc<Engine>,
    fill: Fill,
    parts: &request::Parts,
    target: &Target,
    txn: &Option<ModTxn>,
) {
    let Fill {
        key,
        flight,
        stale,
        ticket,
    } = fill;
    let mut req = upstream_request(parts, target, RequestBody::Empty, true);
    if let Some(object) = &stale {
        object.add_validators(req.headers_mut());
    }
    // The fill may serve several clients: it has a transaction of its own, with the
    // leader's cache overrides (see docs/modules.md).
    let fill_txn = txn.as_ref().and_then(|t| {
        let mut fill = t.chain.new_txn(t.txn.client_addr())?;
        *fill.txn.cache() = t.txn.cache_overrides().clone();
        Some(fill)
    });
    let fetch = Fetch {
        engine: engine.clone(),
        txn: fill_txn,
        key,
        flight,
        request: strip_body(parts),
        origin: target.origin.clone(),
        stale,
        ticket,
    };
    tokio::spawn(fetch.run(req));
}

/// Validates a stale copy that was just served, unless a fetch of it is already under
/// way (so a key is refreshed once, however many clients ask meanwhile).
fn revalidate_in_background(
    engine: &Arc<Engine>,
    key: &CacheKey,
    parts: &request::Parts,
    target: &Target,
    txn: &Option<ModTxn>,
    stale: Arc<CachedObject>,
    ticket: weir_cache::Ticket,
) {
    if let Ok(Join::Leader(flight, mut reader)) =
        engine.flights.join(key, || None::<Arc<CachedObject>>)
    {
        let fill = Fill {
            key: key.clone(),
            flight,
            stale: Some(stale),
            ticket,
        };
        start_fetch(engine, fill, parts, target, txn);
        // A fetch stops when nobody reads it; this reader keeps it going to the end.
        tokio::spawn(async move {
            if reader.head().await.is_some() {
                while let Some(Ok(_)) = reader.next_chunk().await {}
            }
        });
    }
}

/// The `Cache-Status` detail of a failure caused by a module.
pub(crate) const MODULE_ERROR: &str = "module-error";
/// The `Cache-Status` detail of a miss refused by `only-if-cached`.
pub(crate) const ONLY_IF_CACHED: &str = "only-if-cached";

fn strip_body(parts: &request::Parts) -> request::Parts {
    let mut r = http::Request::new(());
    *r.method_mut() = parts.method.clone();
    *r.uri_mut() = parts.uri.clone();
    *r.version_mut() = parts.version;
    *r.headers_mut() = parts.headers.clone();
    r.into_parts().0
}

/// Answers from a stored object: 304 to a matching conditional request, else the
/// object (headers only for HEAD).
fn serve_object(
    object: &CachedObject,
    parts: &request::Parts,
    now: SystemTime,
    outcome: CacheOutcome,
    cache_status: HeaderValue,
) -> Served {
    let response = if object.satisfies_conditional(&parts.headers) {
        let mut r = Response::new(ProxyBody::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = object.not_modified_headers(now);
        r
    } else {
        let body = if parts.method == Method::HEAD {
            ProxyBody::empty()
        } else {
            stored_body(&object.body)
        };
        let mut r = Response::new(body);
        *r.status_mut() = object.status;
        *r.headers_mut() = object.response_headers(now);
        r
    };
    Served {
        response,
        outcome,
        cache_status,
        upstream: None,
        origin_body: false,
    }
}

/// Answers a client from a flight: its head, then its body as it arrives.
async fn serve_flight(
    mut reader: FlightReader<FlightHead>,
    parts: &request::Parts,
    origin: &OriginAddr,
    follower: bool,
) -> Result<Served, ProxyError> {
    let head = match reader.head().await {
        Some(h) => h,
        None => return Err(ProxyError::bad_gateway("the origin fetch failed")),
    };
    let h = match &*head {
        FlightOutcome::Failed(e) => {
            return Err(ProxyError {
                status: e.status,
                kind: None,
                reason: e.reason.clone(),
                close: false,
                detail: e.detail,
            })
        }
        FlightOutcome::Response(h) => h,
    };
    let (outcome, cache_status) = if follower {
        (
            CacheOutcome::Collapsed,
            HeaderValue::from_static("weir; fwd=miss; collapsed"),
        )
    } else {
        (h.outcome, h.cache_status.clone())
    };
    let served = |response| Served {
        response,
        outcome,
        cache_status,
        upstream: (!follower).then(|| origin.clone()),
        origin_body: false,
    };
    if h.status == StatusCode::OK
        && h.shareable
        && client_conditional_matches(&h.headers, &parts.headers)
    {
        let mut r = Response::new(ProxyBody::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = not_modified_from(&h.headers);
        return Ok(served(r));
    }
    let stream = futures_util::stream::unfold(reader, |mut r| async move {
        match r.next_chunk().await {
            None => None,
            Some(Ok(b)) => Some((Ok(b), r)),
            Some(Err(())) => Some((Err("the origin's response was cut short".into()), r)),
        }
    });
    let mut r = Response::new(ProxyBody::stream(Box::pin(stream)));
    *r.status_mut() = h.status;
    *r.headers_mut() = h.headers.clone();
    Ok(served(r))
}

/// A stored body as a response body: by reference from memory, streamed from a file.
pub(crate) fn stored_body(body: &weir_cache::Body) -> ProxyBody {
    if let Some(b) = body.in_memory() {
        return ProxyBody::full(b.clone());
    }
    let stream = futures_util::stream::unfold(body.reader(), |mut r| async move {
        r.next_chunk()
            .await
            .map(|c| (c.map_err(|e| e.to_string().into()), r))
    });
    ProxyBody::stream(Box::pin(stream))
}

fn client_conditional_matches(response: &HeaderMap, request: &HeaderMap) -> bool {
    weir_cache::conditional::not_modified(StatusCode::OK, response, request)
}

fn not_modified_from(response: &HeaderMap) -> HeaderMap {
    weir_cache::conditional::not_modified_headers(response)
}

/// One origin fetch feeding a flight.
struct Fetch {
    engine: Arc<Engine>,
    txn: Option<ModTxn>,
    key: CacheKey,
    flight: Arc<weir_cache::Flight<FlightHead>>,
    /// The leader's request, for the storage policy and the variant key.
    request: request::Parts,
    origin: OriginAddr,
    stale: Option<Arc<CachedObject>>,
    ticket: weir_cache::Ticket,
}

impl Fetch {
    async fn run(mut self, req: http::Request<RequestBody>) {
        let engine = self.engine.clone();
        let engine = &engine;
        let req = match hooks::upstream_request(engine, self.txn.as_mut(), req).await {
            Ok(Ok(req)) => req,
            Ok(Err(reply)) => return self.publish_reply(reply).await,
            Err(e) => return self.fail(e),
        };
        let sent = tokio::select! {
            r = engine.upstream.send(&self.origin, req) => r,
            _ = self.flight.abandoned() => return self.end(false),
        };
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                let e = upstream_error(&self.origin, e, engine.limits.max_request_body.0);
                if let Some(kind) = e.kind {
                    engine.metrics.error(kind);
                }
                if let Some(stale) = self.usable_on_error() {
                    return self.serve_stale(&stale, None).await;
                }
                self.flight
                    .set_head(Arc::new(FlightOutcome::Failed(ProxyErrorParts {
                        status: e.status,
                        reason: e.reason,
                        detail: None,
                    })));
                return self.end(false);
            }
        };
        let now = SystemTime::now();
        let (mut parts, mut body) = response.into_parts();
        if parts.status == StatusCode::NOT_MODIFIED {
            if let Some(stale) = &self.stale {
                let heuristic = engine.cache.settings().heuristic_fraction;
                if let Some(refreshed) = stale.refreshed(&self.request, &parts, now, heuristic) {
                    return self.refreshed(refreshed, now).await;
                }
            }
            // Weir removed the client's own conditions, so a 304 that is not about the
            // stored copy answers nothing the client asked; never pass it on.
            engine.cache.invalidate(&self.key);
            engine.metrics.error(ErrorKind::OriginProtocol);
            self.flight
                .set_head(Arc::new(FlightOutcome::Failed(ProxyErrorParts {
                    status: StatusCode::BAD_GATEWAY,
                    detail: None,
                    reason: format!(
                        "origin {} answered 304 for a different representation",
                        self.origin
                    ),
                })));
            return self.end(false);
        }
        if is_server_error(parts.status) {
            if let Some(stale) = self.usable_on_error() {
                drop(body);
                return self.serve_stale(&stale, Some(parts.status)).await;
            }
        }
        headers::remove_hop_by_hop(&mut parts.headers);
        headers::append_via(&mut parts.headers, parts.version);
        parts.version = http::Version::HTTP_11;
        // Before the policy is computed: what modules change here is what is stored.
        match hooks::response_headers(
            engine,
            self.txn.as_mut(),
            Event::ResponseHeaders,
            &mut parts,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(reply)) => return self.publish_reply(reply).await,
            Err(e) => return self.fail(e),
        }
        let max_object = engine.cache.settings().max_object_bytes;
        let mut policy = StoragePolicy::new(
            &self.request,
            &parts,
            now,
            engine.cache.settings().heuristic_fraction,
        );
        if let Some(ttl) = self.txn.as_ref().and_then(|t| t.txn.cache_overrides().ttl) {
            policy = policy.with_time_to_live(now, ttl);
        }
        let declared_too_big =
            headers::content_length(&parts.headers).is_some_and(|n| n > max_object);
        let mut storing = policy.is_worth_storing(now)
            && !declared_too_big
            && parts.status != StatusCode::PARTIAL_CONTENT
            && !parts
                .headers
                .get_all(header::VARY)
                .iter()
                .any(|v| v.as_bytes().contains(&b'*'));
        let outcome = if self.stale.is_some() {
            CacheOutcome::RefreshModified
        } else {
            CacheOutcome::Miss
        };
        let cache_status = match (self.stale.is_some(), storing) {
            (false, true) => HeaderValue::from_static("weir; fwd=miss; stored"),
            (false, false) => HeaderValue::from_static("weir; fwd=miss"),
            (true, _) => HeaderValue::from_str(&format!(
                "weir; fwd=stale; fwd-status={}{}",
                parts.status.as_u16(),
                if storing { "; stored" } else { "" }
            ))
            .unwrap_or(HeaderValue::from_static("weir; fwd=stale")),
        };
        if !storing {
            self.stop_sharing();
        }
        let vary = parts.headers.contains_key(header::VARY).then(|| {
            let names = weir_cache::vary_names(&parts.headers);
            let leader = self.key.variant(&names, &self.request.headers);
            (names, leader)
        });
        self.flight
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead {
                status: parts.status,
                headers: parts.headers.clone(),
                shareable: storing,
                outcome,
                cache_status,
                vary,
            })));
        let mut received: u64 = 0;
        let body_hooks = self
            .txn
            .as_ref()
            .is_some_and(|t| t.wants(Event::ResponseBody));
        // With a declared length, a client has the whole body as soon as the last
        // chunk is pushed, and may ask again before this fetch ends: the object is
        // stored before that chunk goes out, so the next request finds it.
        let declared = headers::content_length(&parts.headers).filter(|_| !body_hooks);
        let mut head = Some((parts.status, parts.headers, policy));
        let mut stage = hooks::BodyStage::new(engine.limits.module_body.0);
        let mut ended = false;
        while !ended {
            let chunk = tokio::select! {
                c = body.next_chunk() => c,
                _ = self.flight.abandoned() => return self.end(false),
            };
            let chunk = match chunk {
                None if body_hooks => {
                    ended = true;
                    Some(Ok(Bytes::new()))
                }
                other => other,
            };
            match chunk {
                None => break,
                Some(Ok(mut data)) => {
                    if body_hooks {
                        if let Some(txn) = self.txn.as_mut() {
                            match stage
                                .feed(engine, txn, &[Event::ResponseBody], data, ended)
                                .await
                            {
                                Ok(out) => data = out,
                                Err(()) => return self.end(false),
                            }
                        }
                        if data.is_empty() {
                            continue;
                        }
                    }
                    received += data.len() as u64;
                    if storing && received > max_object {
                        storing = false;
                        self.stop_sharing();
                    }
                    if storing && declared == Some(received) {
                        self.store(&mut head, Some(data.clone()));
                        storing = false;
                    }
                    self.flight.push(data).await;
                }
                // Counted once per client that was reading it (TxnRecord), not here.
                Some(Err(_)) => return self.end(false),
            }
        }
        if storing {
            self.store(&mut head, None);
        }
        self.end(true)
    }

    /// Stores the response: the chunks the flight retained, then `last` if it has not
    /// been pushed yet.
    fn store(
        &self,
        head: &mut Option<(StatusCode, HeaderMap, StoragePolicy)>,
        last: Option<Bytes>,
    ) {
        let (Some(mut chunks), Some((status, headers, policy))) =
            (self.flight.retained_body(), head.take())
        else {
            return;
        };
        chunks.extend(last);
        let tags = self
            .txn
            .as_ref()
            .map(|t| t.txn.cache_overrides().tags.clone())
            .unwrap_or_default();
        let object = CachedObject::new(status, headers, concat(chunks), policy).with_tags(tags);
        self.engine
            .cache
            .store(&self.key, &self.request, object, self.ticket);
    }

    /// The origin confirmed the stale copy: store the refreshed object, serve its body.
    async fn refreshed(self, object: CachedObject, now: SystemTime) {
        let object = Arc::new(object);
        self.engine.cache.store(
            &self.key,
            &self.request,
            CachedObject::clone(&object),
            self.ticket,
        );
        let cache_status = HeaderValue::from_static("weir; fwd=stale; fwd-status=304");
        self.publish_object(&object, now, CacheOutcome::RefreshUnmodified, cache_status)
            .await
    }

    /// The stale copy when the origin failed and the copy may stand in for it.
    fn usable_on_error(&self) -> Option<Arc<CachedObject>> {
        let window = self.engine.cache.settings().stale_if_error;
        let now = SystemTime::now();
        self.stale
            .clone()
            .filter(|o| o.may_serve_stale(&self.request.headers, now, StaleUse::OnError, window))
    }

    /// Serves the stale copy instead of the origin's failure (stale-if-error).
    async fn serve_stale(self, object: &CachedObject, origin_status: Option<StatusCode>) {
        let cache_status = match origin_status {
            Some(s) => HeaderValue::from_str(&format!(
                "weir; hit; fwd=stale; fwd-status={}; detail=stale-if-error",
                s.as_u16()
            ))
            .unwrap_or(HeaderValue::from_static("weir; hit; detail=stale-if-error")),
            None => HeaderValue::from_static("weir; hit; fwd=stale; detail=stale-if-error"),
        };
        let now = SystemTime::now();
        self.publish_object(object, now, CacheOutcome::StaleOnError, cache_status)
            .await
    }

    /// Answers the flight's readers from a stored object.
    async fn publish_object(
        self,
        object: &CachedObject,
        now: SystemTime,
        outcome: CacheOutcome,
        cache_status: HeaderValue,
    ) {
        // Followers are served this object only if they would have chosen its variant.
        let vary = (!object.vary.is_empty()).then(|| {
            let leader = self.key.variant(&object.vary, &self.request.headers);
            (object.vary.clone(), leader)
        });
        self.flight
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead {
                status: object.status,
                headers: object.response_headers(now),
                shareable: true,
                outcome,
                cache_status,
                vary,
            })));
        let mut reader = object.body.reader();
        while let Some(chunk) = reader.next_chunk().await {
            match chunk {
                Ok(c) => self.flight.push(c).await,
                Err(_) => return self.end(false),
            }
        }
        self.end(true)
    }

    /// A module answered instead of the origin: serve that, store nothing.
    async fn publish_reply(self, reply: Box<Reply>) {
        self.stop_sharing();
        let mut headers = reply.headers;
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(reply.body.len()));
        self.flight
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead {
                status: reply.status,
                headers,
                shareable: false,
                outcome: CacheOutcome::Bypass,
                cache_status: HeaderValue::from_static("weir; detail=module"),
                vary: None,
            })));
        if !reply.body.is_empty() {
            self.flight.push(reply.body).await;
        }
        self.end(true)
    }

    fn fail(self, e: ProxyError) {
        if let Some(kind) = e.kind {
            self.engine.metrics.error(kind);
        }
        self.flight
            .set_head(Arc::new(FlightOutcome::Failed(ProxyErrorParts {
                status: e.status,
                reason: e.reason,
                detail: e.detail,
            })));
        self.end(false)
    }

    fn stop_sharing(&self) {
        self.flight.stop_retaining();
        self.engine.flights.leave(&self.key, &self.flight);
    }

    fn end(&self, ok: bool) {
        self.engine.flights.leave(&self.key, &self.flight);
        self.flight.finish(ok);
    }
}

/// Origin answers that `stale-if-error` lets a stale copy replace (RFC 5861 §4).
fn is_server_error(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

fn concat(chunks: Vec<Bytes>) -> Bytes {
    match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.into_iter().next().unwrap_or_default(),
        _ => {
            let mut b = BytesMut::with_capacity(chunks.iter().map(Bytes::len).sum());
            for c in chunks {
                b.extend_from_slice(&c);
            }
            b.freeze()
        }
    }
}

/// After a successful unsafe request, the target URI and the same-origin URIs in
/// `Location` and `Content-Location` are invalidated (RFC 9111 §4.4).
pub(crate) fn invalidate_after_write(engine: &Engine, target: &Target, response: &HeaderMap) {
    engine.cache.invalidate(&cache_key(target));
    let host = target.host.to_str().unwrap_or("");
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(v) = response.get(&name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(path) = same_origin_path(v, host) {
            engine
                .cache
                .invalidate(&CacheKey::for_url("http", host, &path));
        }
    }
}

/// The path of `reference` when it names the same origin as `host` (relative
/// references always do).
fn same_origin_path(reference: &str, host: &str) -> Option<String> {
    if reference.starts_with('/') && !reference.starts_with("//") {
        return Some(reference.to_string());
    }
    let uri: http::Uri = reference.parse().ok()?;
    if uri.scheme_str() != Some("http") {
        return None;
    }
    let authority = uri.authority()?.as_str();
    let same = authority.eq_ignore_ascii_case(host)
        || authority
            .trim_end_matches(":80")
            .eq_ignore_ascii_case(host.trim_end_matches(":80"));
    same.then(|| uri.path_and_query().map_or("/", |p| p.as_str()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_references() {
        assert_eq!(same_origin_path("/a?b", "h:8080").as_deref(), Some("/a?b"));
        assert_eq!(
            same_origin_path("http://H:8080/x", "h:8080").as_deref(),
            Some("/x")
        );
        assert_eq!(
            same_origin_path("http://h/x", "h:80").as_deref(),
            Some("/x")
        );
        assert_eq!(same_origin_path("http://other/x", "h"), None);
        assert_eq!(same_origin_path("//other/x", "h"), None);
    }

    #[test]
    fn directives() {
        let mut h = HeaderMap::new();
        h.insert(
            "cache-control",
            "max-age=0, Only-If-Cached".parse().unwrap(),
        );
        assert!(request_directive(&h, "only-if-cached"));
        assert!(!request_directive(&h, "no-store"));
    }
}
