//! One transaction: from a client's request to the response it gets, through the cache
//! or an origin. The cache path (lookup, coalesced fetch, store) is in `cached.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{request, Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::access_log::AccessLog;
use crate::body::{ClientIncoming, ProxyBody, ReadAheadError, RequestBody};
use crate::config::{LimitsConfig, ListenMode};
use crate::error::ProxyError;
use crate::headers::{self, MaxForwards};
use crate::hooks::{Whole, WholeRequest};
use crate::metrics::{CacheOutcome, ErrorKind, Metrics};
use crate::modules::ModTxn;
use crate::route::Router;
use crate::upstream::{OriginAddr, Upstream, UpstreamError};
use weir_api::{CacheLookup, Event, Reply};

mod record;
pub(crate) use record::{LogInfo, TxnRecord};

/// What every transaction shares.
pub(crate) struct Engine {
    pub cache: Arc<weir_cache::Cache>,
    pub flights: Arc<weir_cache::Coalescer<crate::cached::FlightHead>>,
    pub upstream: Arc<Upstream>,
    pub metrics: Arc<Metrics>,
    pub log: Option<Arc<AccessLog>>,
    pub limits: LimitsConfig,
    pub connect_timeout: std::time::Duration,
    /// `[timeouts] client_body_idle`.
    pub client_body_idle: std::time::Duration,
    /// `[limits] module_body_total`, shared by every listener.
    pub held: Arc<crate::hooks::HeldBudget>,
    /// The modules of this listener and its routes; a reload swaps them, transactions
    /// keep theirs.
    pub modules: arc_swap::ArcSwap<crate::modules::ListenerChains>,
}

impl Engine {
    pub(crate) fn upstream_connect_timeout(&self) -> std::time::Duration {
        self.connect_timeout
    }
}

/// What a listener does.
pub(crate) struct ListenerInfo {
    pub mode: ListenMode,
    pub allow: Vec<ipnet::IpNet>,
    pub connect_ports: Vec<u16>,
    pub router: Option<Router>,
    /// Clients that may PURGE (`[cache] purge_from`).
    pub purge_from: Vec<ipnet::IpNet>,
    /// What happens before HTTP: PROXY header, TLS, original destination.
    pub setup: crate::listener::Setup,
}

/// One client connection.
pub(crate) struct ConnInfo {
    /// The client: the peer, or the address a PROXY header gave.
    pub client: SocketAddr,
    /// Transparent listeners: where the client meant to connect before the kernel
    /// redirected it.
    pub original_dst: Option<SocketAddr>,
    pub allowed: bool,
    pub listener: Arc<ListenerInfo>,
    /// What the framing guard saw on this connection (HTTP/1 only).
    pub framing: Arc<crate::framing::FramingReport>,
    /// Requests received so far on this connection (HTTP/1 requests arrive in order).
    pub requests: std::sync::atomic::AtomicU64,
}

/// The result of a transaction before it is sent.
pub(crate) struct Served {
    pub response: Response<ProxyBody>,
    pub outcome: CacheOutcome,
    pub cache_status: HeaderValue,
    pub upstream: Option<OriginAddr>,
    /// The body comes straight from the origin, so the response-body event applies to
    /// it on its way (on a cache fill it ran on the fetch).
    pub origin_body: bool,
}

impl Served {
    /// A response a module made.
    // Boxed as the hooks return it, so that every event's result stays small.
    #[allow(clippy::boxed_local)]
    pub(crate) fn module_reply(reply: Box<Reply>) -> Served {
        Served {
            response: crate::hooks::reply_response(*reply),
            outcome: CacheOutcome::Bypass,
            cache_status: HeaderValue::from_static("weir; detail=module"),
            upstream: None,
            origin_body: false,
        }
    }
}

/// Where a request goes and how it is named in the cache.
pub(crate) struct Target {
    pub origin: OriginAddr,
    /// The Host header to send, and the authority part of the cache key.
    pub host: HeaderValue,
    pub path_and_query: String,
}

/// Serves one request. Never fails: errors become responses.
pub(crate) async fn handle(
    engine: Arc<Engine>,
    conn: Arc<ConnInfo>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, std::convert::Infallible> {
    let start = Instant::now();
    let https = conn.listener.setup.tls.is_some();
    let log = engine.log.as_ref().map(|_| LogInfo::new(&req, https));
    let bytes_in = headers::content_length(req.headers()).unwrap_or(0);
    let mut txn = {
        let chains = engine.modules.load();
        // A route's modules apply from the first event, so the route is found from the
        // request as received (modules do not re-route it).
        let route = conn
            .listener
            .router
            .as_ref()
            .filter(|_| chains.by_route())
            .and_then(|r| {
                let host = req
                    .headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .or(req.uri().authority().map(|a| a.as_str()));
                r.route_index(host, req.uri().path())
            });
        chains.for_route(route).new_txn(conn.client)
    };
    let served = match transact(&engine, &conn, req, &mut txn).await {
        Ok(s) => s,
        Err(e) => error_served(&engine.metrics, e),
    };
    let Served {
        mut response,
        outcome,
        cache_status,
        upstream,
        origin_body,
    } = served;
    set_cache_status(response.headers_mut(), cache_status);
    let shared = crate::deliver::deliver!(&engine, &mut txn, &mut response, origin_body);
    let record = TxnRecord {
        engine: engine.clone(),
        mode: conn.listener.mode,
        client: conn.client,
        outcome,
        status: response.status().as_u16(),
        start,
        bytes_in,
        log: log.map(|mut l| {
            l.upstream = upstream.map(|u| u.to_string());
            l.content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            Box::new(l)
        }),
        completed: false,
        body_failed: false,
        txn,
        shared,
    };
    let declared = match response.status() {
        StatusCode::NOT_MODIFIED | StatusCode::NO_CONTENT => Some(0),
        _ => headers::content_length(response.headers()),
    };
    response.body_mut().attach(Box::new(record), declared);
    Ok(response)
}

/// Adds our `Cache-Status` entry after those of caches nearer the origin (RFC 9211 §2).
pub(crate) fn set_cache_status(headers: &mut header::HeaderMap, ours: HeaderValue) {
    let combined = match headers.get(CACHE_STATUS) {
        None => None,
        Some(theirs) => {
            let mut v = theirs.as_bytes().to_vec();
            v.extend_from_slice(b", ");
            v.extend_from_slice(ours.as_bytes());
            HeaderValue::from_bytes(&v).ok()
        }
    };
    headers.insert(CACHE_STATUS, combined.unwrap_or(ours));
}

pub(crate) const CACHE_STATUS: header::HeaderName = header::HeaderName::from_static("cache-status");

/// An error met at delivery: counted, answered, with its `Cache-Status`.
pub(crate) fn refusal(metrics: &Metrics, e: ProxyError) -> Response<ProxyBody> {
    let Served {
        mut response,
        cache_status,
        ..
    } = error_served(metrics, e);
    set_cache_status(response.headers_mut(), cache_status);
    response
}

fn error_served(metrics: &Metrics, e: ProxyError) -> Served {
    if let Some(kind) = e.kind {
        metrics.error(kind);
    }
    let denied = e.status.is_client_error();
    let cache_status = HeaderValue::from_static(match e.detail {
        _ if denied => "weir; detail=refused",
        Some(crate::cached::ONLY_IF_CACHED) => "weir; detail=only-if-cached",
        Some(crate::cached::MODULE_ERROR) => "weir; detail=module-error",
        _ => "weir; fwd=miss; detail=origin-error",
    });
    Served {
        response: e.into_response(),
        outcome: if denied {
            CacheOutcome::Denied
        } else {
            CacheOutcome::Error
        },
        cache_status,
        upstream: None,
        origin_body: false,
    }
}

async fn transact(
    engine: &Arc<Engine>,
    conn: &ConnInfo,
    req: Request<Incoming>,
    txn: &mut Option<ModTxn>,
) -> Result<Served, ProxyError> {
    if !conn.allowed {
        return Err(ProxyError::forbidden(format!(
            "client {} is not allowed to use this proxy",
            conn.client.ip()
        )));
    }
    let sequence = conn
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
        + 1;
    if req.version() == http::Version::HTTP_11 && !req.headers().contains_key(header::HOST) {
        return Err(ProxyError::bad_request(
            "an HTTP/1.1 request needs a Host header",
        ));
    }
    if headers::ambiguous_framing(req.headers())
        || (req.version() <= http::Version::HTTP_11 && conn.framing.is_ambiguous(sequence))
    {
        return Err(ProxyError::bad_request(
            "ambiguous message framing (Content-Length with Transfer-Encoding, or conflicting Content-Length)",
        )
        .closing());
    }
    let limit = engine.limits.max_request_header.0 as usize;
    if headers::header_section_len(req.headers()) + uri_len(req.uri()) > limit {
        return Err(ProxyError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorKind::HeaderTooLarge,
            format!("request header section is larger than {limit} bytes"),
        ));
    }
    let (mut parts, body) = req.into_parts();
    if let Some(reply) = crate::hooks::request_headers(engine, txn.as_mut(), &mut parts).await? {
        return Ok(Served::module_reply(reply));
    }
    if parts.method == Method::CONNECT {
        let req = Request::from_parts(parts, body);
        return match conn.listener.mode {
            ListenMode::Forward => crate::tunnel::connect(engine, conn, req).await,
            ListenMode::Reverse | ListenMode::Transparent => Err(ProxyError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorKind::BadRequest,
                "CONNECT is allowed on forward-proxy listeners only",
            )),
        };
    }
    let max_body = engine.limits.max_request_body.0;
    if headers::content_length(&parts.headers).is_some_and(|n| n > max_body) {
        return Err(body_too_large(max_body));
    }
    let body = ClientIncoming::new(body, engine.client_body_idle);
    // A module that wants the whole request has the body read now, before routing
    // and the cache key, which see the request as it changed it.
    let body = match txn.as_mut() {
        Some(m) if m.wants(Event::WholeRequest) => {
            let has_body = !body_is_empty(&parts, &body);
            match crate::hooks::whole_request(engine, m, &mut parts, body, has_body).await? {
                WholeRequest::Body(read) => ClientBody::Read(read),
                WholeRequest::Reply(reply) => return Ok(Served::module_reply(reply)),
                WholeRequest::NotWanted(body) => ClientBody::Unread(body),
            }
        }
        _ => ClientBody::Unread(body),
    };
    let target = resolve_target(conn, &parts)?;
    if crate::purge::is_purge(&parts.method) {
        return crate::purge::purge(engine, conn, &target);
    }
    match headers::max_forwards(&parts.method, &mut parts.headers) {
        MaxForwards::AnswerHere => return Ok(answer_here(&parts)),
        MaxForwards::Absent | MaxForwards::Decremented => {}
    }
    let skip_cache = txn.as_ref().is_some_and(|t| t.txn.cache_overrides().skip);
    if !skip_cache && crate::cached::is_cache_candidate(&parts) {
        drop(body);
        return crate::cached::serve(engine, parts, target, txn).await;
    }
    // A range miss is forwarded with its Range; its key is kept to fill the cache after.
    let mut range_miss = None;
    if !skip_cache && crate::cached::range::is_range_candidate(&parts) {
        let key = crate::cached::key_for(&target, txn);
        if let Some(served) = crate::cached::range::from_cache(engine, &parts, key.clone()).await {
            return Ok(served);
        }
        range_miss = Some(key);
    }
    let body = match body {
        ClientBody::Read(read) => read,
        ClientBody::Unread(body) if body_is_empty(&parts, &body) => RequestBody::Empty,
        ClientBody::Unread(body) if headers::content_length(&parts.headers).is_some() => {
            RequestBody::Client {
                read_ahead: Default::default(),
                inner: body,
                remaining: max_body,
            }
        }
        ClientBody::Unread(body) => match RequestBody::read_ahead(body, max_body).await {
            Ok(b) => b,
            Err(ReadAheadError::TooLarge) => return Err(body_too_large(max_body)),
            Err(ReadAheadError::Client(e)) => return Err(client_body_error(&*e)),
        },
    };
    let unsafe_method = matches!(
        parts.method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    );
    let cache_status = HeaderValue::from_static(if unsafe_method || parts.method != Method::GET {
        "weir; fwd=method"
    } else {
        "weir; fwd=bypass"
    });
    if let Some(reply) = crate::hooks::cache_lookup!(engine, txn.as_mut(), CacheLookup::Bypass)? {
        return Ok(Served::module_reply(reply));
    }
    let upstream_req = upstream_request(&parts, &target, body, false);
    let served = forward_hooked(
        engine,
        txn,
        &target,
        upstream_req,
        CacheOutcome::Bypass,
        cache_status,
    )
    .await?;
    if unsafe_method
        && (served.response.status().is_success() || served.response.status().is_redirection())
    {
        crate::cached::invalidate_after_write(engine, &target, served.response.headers());
    }
    if let Some(key) = range_miss {
        if served.response.status() == StatusCode::PARTIAL_CONTENT {
            let partial = served.response.headers();
            crate::cached::range::fill_after_partial(engine, &key, &parts, &target, txn, partial)
                .await;
        }
    }
    Ok(served)
}

/// The client's request body: as received, or already read for the whole-request
/// event.
enum ClientBody {
    Unread(ClientIncoming),
    Read(RequestBody),
}

/// Forwards a request that does not go through the cache, with the upstream-request,
/// request-body, response-headers and whole-response events (the response-body event
/// runs as the body streams).
pub(crate) async fn forward_hooked(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    target: &Target,
    request: Request<RequestBody>,
    outcome: CacheOutcome,
    cache_status: HeaderValue,
) -> Result<Served, ProxyError> {
    let request = match crate::hooks::upstream_request(engine, txn.as_mut(), request).await? {
        Ok(r) => r,
        Err(reply) => return Ok(Served::module_reply(reply)),
    };
    let (request, slot) = hook_request_body(engine, txn, request);
    let response = forward(engine, &target.origin, request).await;
    if let Some(slot) = slot {
        // Chunks the client sends after the origin answered pass unchanged.
        *txn = slot.lock().await.take();
    }
    let (mut head, mut body) = response?.into_parts();
    if let Some(reply) =
        crate::hooks::response_headers(engine, txn.as_mut(), Event::ResponseHeaders, &mut head)
            .await?
    {
        return Ok(Served::module_reply(reply));
    }
    if let Some(m) = txn.as_mut().filter(|m| m.wants(Event::WholeResponse)) {
        match crate::hooks::whole_response(engine, m, &mut head, &mut body).await? {
            Whole::Body(read) if read.complete => body = ProxyBody::full(read.data),
            Whole::Body(read) => body = ProxyBody::prefixed(read.data, body),
            Whole::Reply(reply) => return Ok(Served::module_reply(reply)),
            Whole::NotWanted => {}
            Whole::Unreadable(e) => {
                return Err(ProxyError::bad_gateway(format!(
                    "origin {} failed while sending the body: {e}",
                    target.origin
                )))
            }
        }
    }
    Ok(Served {
        response: Response::from_parts(head, body),
        outcome,
        cache_status,
        upstream: Some(target.origin.clone()),
        origin_body: true,
    })
}

/// Puts the request-body event on a body going to the origin, when a module wants it.
/// The transaction's module context then waits in the returned slot while the body
/// streams (another task polls it); the caller takes it back when the origin answers.
/// Either way, the request's body declarations are read here and reset for the
/// response.
fn hook_request_body(
    engine: &Arc<Engine>,
    txn: &mut Option<ModTxn>,
    mut request: Request<RequestBody>,
) -> (Request<RequestBody>, Option<crate::hooks::RequestSlot>) {
    use http_body::Body as _;
    let Some(m) = txn.as_mut() else {
        return (request, None);
    };
    let whole = m.txn.wants_whole_body();
    let length_changes = m.txn.body_length_changes();
    weir_api::engine::reset_body_length(&mut m.txn);
    if !m.wants(Event::RequestBody) || request.body().is_end_stream() {
        return (request, None);
    }
    if length_changes {
        request.headers_mut().remove(header::CONTENT_LENGTH);
    }
    let slot = Arc::new(tokio::sync::Mutex::new(txn.take()));
    let (parts, body) = request.into_parts();
    let body = crate::hooks::hook_request_body(engine.clone(), body, slot.clone(), whole);
    (Request::from_parts(parts, body), Some(slot))
}

fn body_is_empty(parts: &request::Parts, body: &ClientIncoming) -> bool {
    use http_body::Body as _;
    body.is_end_stream()
        || (!parts.headers.contains_key(header::TRANSFER_ENCODING)
            && headers::content_length(&parts.headers).unwrap_or(0) == 0)
}

/// Length of the request target as sent, without formatting it.
fn uri_len(uri: &http::Uri) -> usize {
    uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len())
}

/// The client's request body could not be read: 408 when the client paused too long
/// (`[timeouts] client_body_idle`), 400 otherwise. The connection is closed either way:
/// the rest of the body is still on it.
pub(crate) fn client_body_error(e: &(dyn std::error::Error + 'static)) -> ProxyError {
    let timed_out = std::iter::successors(Some(e), |e| e.source())
        .any(|e| e.is::<crate::body::ClientBodyTimeout>());
    if timed_out {
        ProxyError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorKind::ClientTimeout,
            format!("cannot read the request body: {e}"),
        )
        .closing()
    } else {
        ProxyError::bad_request(format!("cannot read the request body: {e}")).closing()
    }
}

pub(crate) fn body_too_large(max: u64) -> ProxyError {
    ProxyError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::BodyTooLarge,
        format!("request body is larger than {max} bytes"),
    )
    .closing()
}

/// Finds the origin and the names to use for it.
fn resolve_target(conn: &ConnInfo, req: &request::Parts) -> Result<Target, ProxyError> {
    let uri = &req.uri;
    let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    match conn.listener.mode {
        ListenMode::Transparent => {
            crate::listener::transparent::target(req, conn.original_dst, path_and_query)
        }
        ListenMode::Forward => {
            match uri.scheme_str() {
                Some("http") => {}
                Some("https") => {
                    return Err(ProxyError::bad_request(
                        "https:// URLs go through a CONNECT tunnel, not a plain request",
                    ))
                }
                Some(other) => {
                    return Err(ProxyError::bad_request(format!(
                        "unsupported URL scheme `{other}`"
                    )))
                }
                None => {
                    return Err(ProxyError::bad_request(
                        "this is a forward proxy: request an absolute http:// URL",
                    ))
                }
            }
            let authority = uri
                .authority()
                .ok_or_else(|| ProxyError::bad_request("the URL has no host"))?;
            if authority.as_str().contains('@') {
                return Err(ProxyError::bad_request(
                    "user info in the URL is not allowed",
                ));
            }
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            if host.is_empty() {
                return Err(ProxyError::bad_request("the URL has no host"));
            }
            let port = authority.port_u16().unwrap_or(80);
            // RFC 9112 §3.2.2: the target URI's authority replaces any Host received.
            let host_header = match authority.port_u16() {
                Some(80) => HeaderValue::from_str(authority.as_str().trim_end_matches(":80")),
                _ => HeaderValue::from_str(authority.as_str()),
            }
            .map_err(|_| ProxyError::bad_request("invalid host in the URL"))?;
            Ok(Target {
                origin: OriginAddr::http(host, port),
                host: host_header,
                path_and_query,
            })
        }
        ListenMode::Reverse => {
            let host = match req.headers.get(header::HOST) {
                Some(h) => h.clone(),
                None => match uri.authority() {
                    Some(a) => HeaderValue::from_str(a.as_str())
                        .map_err(|_| ProxyError::bad_request("invalid :authority"))?,
                    None => return Err(ProxyError::bad_request("missing Host header")),
                },
            };
            let router = conn
                .listener
                .router
                .as_ref()
                .expect("reverse listeners have a router");
            let origin = router
                .route(host.to_str().ok(), uri.path())
                .ok_or_else(|| {
                    ProxyError::bad_gateway("no origin is configured for this host and path")
                })?
                .clone();
            Ok(Target {
                origin,
                host,
                path_and_query,
            })
        }
    }
}

/// The request to send to the origin: origin-form target, hop-by-hop fields removed,
/// `Via` added, Host set. `strip_conditionals` removes the client's validators when
/// Weir will answer them itself from a full response.
pub(crate) fn upstream_request(
    parts: &request::Parts,
    target: &Target,
    body: RequestBody,
    strip_conditionals: bool,
) -> Request<RequestBody> {
    let mut headers = parts.headers.clone();
    headers::remove_hop_by_hop(&mut headers);
    // Weir reads the client's body only when it forwards it, which is what makes hyper
    // send `100 Continue`; the origin need not see the expectation.
    headers.remove(header::EXPECT);
    if strip_conditionals {
        headers.remove(header::IF_NONE_MATCH);
        headers.remove(header::IF_MODIFIED_SINCE);
    }
    headers.insert(header::HOST, target.host.clone());
    headers::append_via(&mut headers, parts.version);
    let mut req = Request::new(body);
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = target
        .path_and_query
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    *req.headers_mut() = headers;
    req
}

/// Sends a request to the origin and streams its response back unchanged (apart from
/// hop-by-hop fields and `Via`).
pub(crate) async fn forward(
    engine: &Engine,
    origin: &OriginAddr,
    req: Request<RequestBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let response = engine
        .upstream
        .send(origin, req)
        .await
        .map_err(|e| upstream_error(origin, e, engine.limits.max_request_body.0))?;
    let (mut parts, body) = response.into_parts();
    headers::remove_hop_by_hop(&mut parts.headers);
    headers::append_via(&mut parts.headers, parts.version);
    // Via records what the origin spoke; the client gets Weir's own version.
    parts.version = http::Version::HTTP_11;
    Ok(Response::from_parts(parts, ProxyBody::upstream(body)))
}

pub(crate) fn upstream_error(origin: &OriginAddr, e: UpstreamError, max_body: u64) -> ProxyError {
    match e {
        UpstreamError::Connect(reason) => ProxyError::bad_gateway(reason),
        UpstreamError::Tls(reason) => {
            ProxyError::new(StatusCode::BAD_GATEWAY, ErrorKind::OriginTls, reason)
        }
        UpstreamError::Timeout => {
            ProxyError::gateway_timeout(format!("origin {origin} did not answer in time"))
        }
        UpstreamError::BodyTooLarge => body_too_large(max_body),
        UpstreamError::ClientTimeout(idle) => {
            client_body_error(&crate::body::ClientBodyTimeout(idle))
        }
        UpstreamError::Protocol(reason) => ProxyError::new(
            StatusCode::BAD_GATEWAY,
            ErrorKind::OriginProtocol,
            format!("origin {origin} failed: {reason}"),
        ),
    }
}

/// `Max-Forwards: 0` on TRACE or OPTIONS: the proxy is the final recipient.
fn answer_here(parts: &request::Parts) -> Served {
    let mut response = if parts.method == Method::TRACE {
        let mut text = format!("TRACE {} {:?}\r\n", parts.uri, parts.version);
        for (k, v) in &parts.headers {
            // Credentials are not echoed (RFC 9110 §9.3.8).
            if k == header::AUTHORIZATION || k == header::COOKIE || k == header::PROXY_AUTHORIZATION
            {
                continue;
            }
            text.push_str(&format!(
                "{}: {}\r\n",
                k,
                String::from_utf8_lossy(v.as_bytes())
            ));
        }
        let mut r = Response::new(ProxyBody::full(text.into()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("message/http"),
        );
        r
    } else {
        let mut r = Response::new(ProxyBody::empty());
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static(
                "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT",
            ),
        );
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        r
    };
    headers::append_via(response.headers_mut(), http::Version::HTTP_11);
    Served {
        response,
        outcome: CacheOutcome::Bypass,
        cache_status: HeaderValue::from_static("weir; detail=max-forwards"),
        upstream: None,
        origin_body: false,
    }
}
