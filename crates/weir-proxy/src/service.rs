//! One transaction: from a client's request to the response it gets, its phases in
//! order (docs/architecture.md, "The life of one transaction"): access, framing
//! checks, header size, RequestHeaders, CONNECT, the body limit, WholeRequest, the
//! target, PURGE, Max-Forwards, then the cache path (`cached.rs`), a range from the
//! cache (`cached/range.rs`) or pass-through (`forward.rs`); deliver (`deliver.rs`)
//! and the record the response body completes (`record.rs`). The top of the engine:
//! only the accept layer (`server`) calls it.

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{request, Method, Request, Response, StatusCode};

use crate::body::{ClientIncoming, ClientStream, ProxyBody, ReadAheadError, RequestBody};
use crate::cached::range_all;
use crate::config::ListenMode;
use crate::error::{body_too_large, client_body_error, ProxyError};
use crate::forward::{forward_hooked, upstream_request};
use crate::headers::{self, MaxForwards};
use crate::hooks::WholeRequest;
use crate::interim::Interim;
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::modules::txn::ModTxn;
use crate::record::{LogInfo, TxnRecord};
use crate::served::{error_served, set_cache_status, Served};
use crate::target::resolve_target;
use weir_api::{CacheLookup, Event};
use weir_cache::RequestFields;

// The accept layer and the content manager name the transaction's state and facts
// through here.
pub(crate) use crate::conn::{ConnInfo, ListenerInfo};
pub(crate) use crate::engine::Engine;
pub(crate) use crate::target::Target;

/// Serves one request. Never fails: errors become responses. `stream_interim` is an
/// HTTP/2 stream's queue for the origin's 1xx responses (an HTTP/1.1 request uses its
/// connection's): an argument rather than a request extension, which would allocate
/// the extensions' map on every request. `credentials`: the credentials field, when the
/// HTTP/1.1 parser set it aside.
// An `async` block, not an `async fn` (which keeps its arguments twice): see "The
// size of a transaction's futures" in docs/architecture.md.
#[allow(clippy::manual_async_fn)]
pub(crate) fn handle(
    conn: Arc<ConnInfo>,
    mut req: Request<ClientStream>,
    credentials: headers::Credentials,
    stream_interim: Option<Interim>,
) -> impl std::future::Future<Output = Result<Response<ProxyBody>, std::convert::Infallible>> + Send
{
    async move {
        let start = Instant::now();
        let engine = &conn.engine;
        let https = conn.listener.setup.tls.is_some();
        let log = engine.log.as_ref().map(|_| LogInfo::new(&req, https));
        let mut fields = headers::FieldScan::of(req.headers());
        let bytes_in = match fields.content_length {
            true => headers::content_length(req.headers()).unwrap_or(0),
            false => 0,
        };
        // Without a cluster no request is from a peer: no field lookup for it.
        let from_peer = engine.cluster.is_some() && req.headers().contains_key(crate::headers::HOP);
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
            let mut txn = chains.for_route(route).new_txn(conn.client);
            if let Some(t) = txn.as_mut() {
                weir_api::engine::set_listener(&mut t.txn, conn.listener.api_view(https));
            }
            txn
        };
        if let headers::Credentials::SetAside(value) = credentials {
            let listener = conn.listener.api_view(https);
            let name = listener.mode.credentials_field();
            fields.count_set_aside(value.as_deref(), name.as_ref());
            if let Some(value) = crate::hooks::hand_over_credentials(txn.as_mut(), value) {
                put_back_credentials(req.headers_mut(), listener, value);
            }
        }
        let served = match transact(
            engine,
            &conn,
            req,
            fields,
            bytes_in,
            &mut txn,
            stream_interim,
        )
        .await
        {
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
        let cache_status = crate::served::cluster_entry(engine, cache_status, from_peer);
        set_cache_status(response.headers_mut(), cache_status);
        let shared = crate::deliver::deliver!(engine, &mut txn, &mut response, origin_body);
        let record = TxnRecord {
            conn,
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
        // The declared length tells a streamed body when it is complete (hyper stops
        // polling at it); a body held whole knows that itself, and a cached hit's
        // is, so it looks up no field for it.
        let declared = match response.status() {
            StatusCode::NOT_MODIFIED | StatusCode::NO_CONTENT => Some(0),
            _ if response.body().is_whole() => None,
            _ => headers::content_length(response.headers()),
        };
        response.body_mut().attach(Box::new(record), declared);
        Ok(response)
    }
}

/// Puts credentials that the parser set aside and no module took back into the
/// request, to be forwarded as if no module had been asked.
fn put_back_credentials(
    headers: &mut http::HeaderMap,
    listener: weir_api::Listener,
    value: HeaderValue,
) {
    if let Some(name) = listener.mode.credentials_field() {
        headers.append(name, value);
    }
}

// An `async` block, not an `async fn` (which keeps its arguments twice): see "The
// size of a transaction's futures" in docs/architecture.md.
#[allow(clippy::manual_async_fn)]
fn transact<'a>(
    engine: &'a Arc<Engine>,
    conn: &'a ConnInfo,
    req: Request<ClientStream>,
    fields: headers::FieldScan,
    declared_body: u64,
    txn: &'a mut Option<ModTxn>,
    stream_interim: Option<Interim>,
) -> impl std::future::Future<Output = Result<Served, ProxyError>> + Send + 'a {
    async move {
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
        if fields.hosts == 0 && req.version() == http::Version::HTTP_11 {
            return Err(ProxyError::bad_request(
                "an HTTP/1.1 request needs a Host header",
            ));
        }
        // RFC 9112 §3.2: Host is a single field; two of them leave the target ambiguous.
        if fields.hosts > 1 {
            return Err(ProxyError::bad_request("more than one Host header"));
        }
        // Without Content-Length there is nothing for the framing to disagree with.
        if (fields.content_length && headers::ambiguous_framing(req.headers()))
            || (req.version() <= http::Version::HTTP_11 && conn.framing.is_ambiguous(sequence))
        {
            return Err(ProxyError::bad_request(
            "ambiguous message framing (Content-Length with Transfer-Encoding, or conflicting Content-Length)",
        )
        .closing());
        }
        let limit = engine.limits.max_request_header.0 as usize;
        let target_len = uri_len(req.uri());
        let count = req.headers().len() + fields.set_aside;
        let section = fields.section_len + target_len;
        let refusal = headers::head_refusal(count, target_len, section, limit);
        if let Some((status, reason)) = refusal {
            let kind = match status {
                StatusCode::URI_TOO_LONG => ErrorKind::BadRequest,
                _ => ErrorKind::HeaderTooLarge,
            };
            return Err(ProxyError::new(status, kind, reason));
        }
        let passes = match fields.via {
            true => crate::via::earlier_passes(req.headers()),
            false => 0,
        };
        if passes >= crate::via::LOOPING {
            return Err(ProxyError::new(
                StatusCode::LOOP_DETECTED,
                ErrorKind::ForwardingLoop,
                crate::via::LOOP_REASON,
            ));
        }
        let nested = passes > 0;
        let (mut parts, body) = req.into_parts();
        if let Some(reply) = crate::hooks::request_headers(engine, txn.as_mut(), &mut parts).await?
        {
            return Ok(Served::module_reply(reply));
        }
        if let Some(value) = txn
            .as_mut()
            .and_then(|t| weir_api::engine::untaken_credentials(&mut t.txn))
        {
            let https = conn.listener.setup.tls.is_some();
            put_back_credentials(&mut parts.headers, conn.listener.api_view(https), value);
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
        // The length the client declared, read before any module saw the request: a
        // module that changes the field does not change what the client sends, and the
        // body is held to the limit as it is read whatever the field says.
        let max_body = engine.limits.max_request_body.0;
        if declared_body > max_body {
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
        let target = resolve_target(conn, &parts, stream_interim)?;
        if crate::purge::is_purge(&parts.method) {
            return crate::purge::purge(engine, conn, &target, &parts.headers).await;
        }
        if let Some(protocols) = fields
            .upgrade
            .then(|| crate::upgrade::asked(&parts))
            .flatten()
        {
            if matches!(body, ClientBody::Unread(ref b) if !body_is_empty(&parts, b)) {
                return Err(ProxyError::bad_request(
                    "a request that asks to switch protocols may not have a body",
                ));
            }
            drop(body);
            // Boxed: rare, and its future would enlarge every request's.
            let upgrade = crate::upgrade::serve(engine, txn, parts, target, protocols);
            return Box::pin(upgrade).await;
        }
        match headers::max_forwards(&parts.method, &mut parts.headers) {
            MaxForwards::AnswerHere => return Ok(answer_here(&parts)),
            MaxForwards::Absent | MaxForwards::Decremented => {}
        }
        let skip_cache = txn.as_ref().is_some_and(|t| t.txn.cache_overrides().skip);
        // What the request says to the cache, read once for every step that asks.
        let mut asked = weir_cache::RequestFields::of(&parts.headers);
        // `Range: bytes=0-` is served as a plain GET by the cache path (`range_all.rs`).
        let all_bytes = asked.range
            && parts.method == Method::GET
            && !skip_cache
            && range_all::asks_for_everything(&parts.headers)
            && crate::cached::is_cache_candidate(
                &parts,
                RequestFields {
                    range: false,
                    ..asked
                },
            );
        if all_bytes {
            parts.headers.remove(header::RANGE);
            asked.range = false;
        }
        if !skip_cache && crate::cached::is_cache_candidate(&parts, asked) {
            drop(body);
            let served = crate::cached::serve(engine, parts, target, txn, asked, nested).await;
            return if all_bytes {
                served.map(range_all::as_all_bytes)
            } else {
                served
            };
        }
        // A range miss is forwarded with its Range; its key is kept to fill the cache after,
        // with a ticket taken before the origin is asked (no resurrection by its part).
        let mut range_miss = None;
        if !skip_cache && crate::cached::range::is_range_candidate(&parts) {
            let key = crate::cached::key_for(&target, txn);
            let ticket = engine.cache.ticket();
            if let Some(served) =
                crate::cached::range::from_cache(engine, &parts, key.clone()).await
            {
                return Ok(served);
            }
            crate::cached::refuse_if_only_cached(&parts.headers, asked)?;
            range_miss = Some((key, ticket));
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
        // RFC 9111 §4.4: any method not known to be safe (RFC 9110 §9.2.1), unknown
        // ones included, invalidates what it targets.
        let unsafe_method = !matches!(
            parts.method,
            Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
        );
        let cache_status =
            HeaderValue::from_static(if unsafe_method || parts.method != Method::GET {
                "weir; fwd=method"
            } else {
                "weir; fwd=bypass"
            });
        if let Some(reply) = crate::hooks::cache_lookup!(engine, txn.as_mut(), CacheLookup::Bypass)?
        {
            return Ok(Served::module_reply(reply));
        }
        let upstream_req = upstream_request(&parts, &target, body, false);
        // Boxed, as in `cached::serve`: kept out of every request's future.
        let mut served = crate::boxed::in_place(|| {
            forward_hooked(
                engine,
                txn,
                &target,
                upstream_req,
                CacheOutcome::Bypass,
                cache_status,
            )
        })
        .await?;
        if unsafe_method
            && (served.response.status().is_success() || served.response.status().is_redirection())
        {
            crate::cached::invalidate_after_write(engine, &target, served.response.headers());
        }
        if !skip_cache && parts.method == Method::POST {
            let key = crate::cached::key_for(&target, txn);
            let rewrite = txn.as_ref().is_some_and(|t| t.wants(Event::ResponseBody));
            served = crate::cached::store_post_response(
                engine,
                &parts,
                &target,
                key,
                crate::cached::overrides::of(txn.as_ref()),
                rewrite,
                served,
            )
            .await;
        }
        if let Some((key, ticket)) = range_miss {
            served = range_all::after_range_miss(engine, key, ticket, &parts, &target, txn, served)
                .await;
        }
        Ok(served)
    }
}

/// Length of the request target as sent, without formatting it.
fn uri_len(uri: &http::Uri) -> usize {
    uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len())
}

/// The client's request body: as received, or already read for the whole-request
/// event.
enum ClientBody {
    Unread(ClientIncoming),
    Read(RequestBody),
}

fn body_is_empty(parts: &request::Parts, body: &ClientIncoming) -> bool {
    use http_body::Body as _;
    body.is_end_stream()
        || (!parts.headers.contains_key(header::TRANSFER_ENCODING)
            && headers::content_length(&parts.headers).unwrap_or(0) == 0)
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
