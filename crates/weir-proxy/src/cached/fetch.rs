//! One origin fetch feeding a flight, a miss or a validation (started by `fill.rs`): its
//! modules, the origin's response stored as it arrives; above `fetch_outcomes.rs`,
//! which holds the fetch and its other answers (a refreshed or stale copy, a module's
//! reply, a failure).

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::StatusCode;
use weir_cache::{Adapted, OriginFields, StoragePolicy, StoredHead};

use super::fetch_outcomes::Fetch;
use super::keep::Keeper;
use crate::error::ProxyError;
use crate::flight::{FetchedHead, FlightOutcome, ProxyErrorParts, Shared};
use crate::forward::{upstream_error, without_validators};
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::upstream::OriginRequest;
use crate::{headers, hooks};
use weir_api::Event;

impl Fetch {
    // An `async` block (an `async fn` keeps its arguments twice), out of line so that it
    // is made in its box: "The size of a transaction's futures", docs/architecture.md.
    #[allow(clippy::manual_async_fn)]
    #[inline(never)]
    pub(super) fn run(
        mut self,
        mut req: OriginRequest,
        interim: Option<crate::interim::Interim>,
    ) -> impl std::future::Future<Output = ()> + Send {
        async move {
            let engine = self.engine.clone();
            let engine = &engine;
            match hooks::upstream_request(engine, self.txn.as_mut(), &mut req).await {
                Ok(None) => {}
                Ok(Some(reply)) => return self.publish_reply(reply).await,
                Err(e) => return self.fail(e),
            }
            // A validation may have to be repeated without its conditions (below).
            let mut unconditional = self.stale.as_ref().map(|_| without_validators(&mut req));
            let validated = self.stale.is_some();
            let mut next = Some(req);
            let (now, mut parts, mut body) = loop {
                let Some(req) = next.take() else {
                    return self.end(false);
                };
                let sent = tokio::select! {
                    r = crate::hop::send(engine, &self.origin, self.key.url(), req, interim.as_ref()) => r,
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
                let (mut parts, body) = response.into_parts();
                if parts.status != StatusCode::NOT_MODIFIED {
                    break (now, parts, body);
                }
                headers::remove_hop_by_hop(&mut parts.headers);
                headers::append_via(&mut parts.headers, parts.version);
                parts.version = http::Version::HTTP_11;
                if let Some(stale) = &self.stale {
                    let options = engine.policy_options(self.targeted, self.key.url());
                    if let Some(refreshed) = stale.refreshed(&self.request, &parts, now, &options) {
                        return self.refreshed(refreshed, now).await;
                    }
                }
                // A 304 about no response Weir holds (RFC 9111 §4.3.4) updates nothing. It
                // answers a client whose own conditions it meets; else the request is sent
                // again without Weir's conditions. Never a 502 for the origin's 304.
                let conditions = weir_cache::conditional::not_modified_answers;
                if conditions(&parts.headers, &self.request.headers) {
                    engine.cache.invalidate(&self.key);
                    return self.pass_on(parts, validated).await;
                }
                // The copy is outdated: not served on error, and replaced by what comes.
                self.stale = None;
                next = unconditional.take();
                if next.is_none() {
                    engine.cache.invalidate(&self.key);
                    engine.metrics.error(ErrorKind::OriginProtocol);
                    self.flight
                        .set_head(Arc::new(FlightOutcome::Failed(ProxyErrorParts {
                            status: StatusCode::BAD_GATEWAY,
                            detail: None,
                            reason: format!(
                                "origin {} answered 304 to a request without conditions",
                                self.origin
                            ),
                        })));
                    return self.end(false);
                }
            };
            // Origin answers that `stale-if-error` lets a stale copy replace (RFC 5861 §4).
            if matches!(parts.status.as_u16(), 500 | 502 | 503 | 504) {
                if let Some(stale) = self.usable_on_error() {
                    drop(body);
                    return self.serve_stale(&stale, Some(parts.status)).await;
                }
            }
            headers::remove_hop_by_hop(&mut parts.headers);
            headers::append_via(&mut parts.headers, parts.version);
            parts.version = http::Version::HTTP_11;
            // What modules change in the head is stored; the origin's own fields are kept
            // beside it, so that a 304 validates and refreshes the result (weir_cache::Adapted).
            let origin_fields = self
                .txn
                .as_ref()
                .filter(|t| t.wants(Event::ResponseHeaders) || t.wants(Event::WholeResponse))
                .map(|_| OriginFields::of(&parts.headers));
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
            // The body a whole-response module read before anyone sees the head.
            let mut collected = None;
            if let Some(m) = self.txn.as_mut().filter(|m| m.wants(Event::WholeResponse)) {
                let whole = tokio::select! {
                    w = hooks::whole_response(engine, m, &mut parts, &mut body) => w,
                    _ = self.flight.abandoned() => return self.end(false),
                };
                match whole {
                    Ok(hooks::Whole::Body(read)) => collected = Some(read),
                    Ok(hooks::Whole::Reply(reply)) => return self.publish_reply(reply).await,
                    Ok(hooks::Whole::NotWanted) => {}
                    Ok(hooks::Whole::Unreadable(_)) => {
                        let reason =
                            format!("origin {} failed while sending the body", self.origin);
                        return self.fail(ProxyError::bad_gateway(reason));
                    }
                    Err(e) => return self.fail(e),
                }
            }
            let max_object = engine.cache.settings().max_object_bytes;
            let options = engine.policy_options(self.targeted, self.key.url());
            let mut policy = StoragePolicy::with_options(&self.request, &parts, now, &options);
            if let Some(ttl) = self.txn.as_ref().and_then(|t| t.txn.cache_overrides().ttl) {
                policy = policy.with_time_to_live(now, ttl);
            }
            // Read once: the head does not change from here on.
            let declared = headers::content_length(&parts.headers);
            let declared_too_big = declared.is_some_and(|n| n > max_object);
            let varies = parts.headers.get_all(header::VARY);
            // `skip` set by a module in this fill: serve the response, do not store it.
            let skipped = self
                .txn
                .as_ref()
                .is_some_and(|t| t.txn.cache_overrides().skip);
            let mut storing = policy.is_worth_storing(now)
                && !skipped
                && parts.extensions.get::<crate::hop::NotKept>().is_none()
                && !declared_too_big
                && parts.status != StatusCode::PARTIAL_CONTENT
                && !varies.iter().any(|v| v.as_bytes().contains(&b'*'));
            let outcome = if validated {
                CacheOutcome::RefreshModified
            } else {
                CacheOutcome::Miss
            };
            let cache_status = match (validated, storing) {
                // Made when compiled: a call checks every byte (about 250 instructions).
                (false, true) => const { HeaderValue::from_static("weir; fwd=miss; stored") },
                (false, false) => const { HeaderValue::from_static("weir; fwd=miss") },
                (true, _) => HeaderValue::from_str(&format!(
                    "weir; fwd={}; fwd-status={}{}",
                    self.forwarded(),
                    parts.status.as_u16(),
                    if storing { "; stored" } else { "" }
                ))
                .unwrap_or(HeaderValue::from_static("weir; fwd=stale")),
            };
            if !storing {
                self.stop_sharing();
            }
            let vary = varies.iter().next().is_some().then(|| {
                let names = weir_cache::vary_names(&parts.headers);
                let leader = self.key.variant(&names, &self.request.headers);
                (names, leader)
            });
            let adapted = origin_fields.and_then(|o| o.adapted(&parts.headers));
            // The leader takes this map; the others get the head the store will keep.
            let shared = match storing {
                true => Shared::As(StoredHead::new(&parts.headers, &policy)),
                false => Shared::No,
            };
            let head = weir_cache::with_served_room(std::mem::take(&mut parts.headers));
            let fetched = FetchedHead::new(parts.status, head, shared, outcome, cache_status, vary)
                .announcing_trailers(declared.is_none());
            let fetched = Arc::new(FlightOutcome::Response(fetched));
            self.flight.set_head(fetched.clone());
            let body_hooks = self
                .txn
                .as_ref()
                .is_some_and(|t| t.wants(Event::ResponseBody));
            // With a declared length, a client has the whole body once the last chunk is
            // pushed, and may ask again before this fetch ends: the object is stored
            // before that chunk goes out. A module that may change the length made the
            // engine drop Content-Length (hooks::fix_framing): one left is what is pushed.
            // Chunks straight from the origin, each its own allocation when small.
            let from_origin = collected.is_none() && !body_hooks;
            let mut keeper = Keeper::new(&engine.cache, declared, from_origin);
            let mut head = Some((parts.status, policy, adapted));
            let mut stage = hooks::BodyStage::new(engine.limits.module_body.0);
            let mut ended = false;
            let mut body_read = false;
            while !ended {
                let chunk = match collected.take() {
                    Some(read) => {
                        body_read = read.complete;
                        if read.data.is_empty() {
                            continue;
                        }
                        Some(Ok(read.data))
                    }
                    // Ended once its declared length is in: not polled again to learn so.
                    None if body_read || body.is_end_stream() => None,
                    None => tokio::select! {
                        c = body.next_chunk() => c,
                        _ = self.flight.abandoned() => return self.end(false),
                    },
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
                        if storing
                            && !keeper
                                .before_push(&engine.cache, &self.flight, data.len())
                                .await
                        {
                            storing = false;
                            self.stop_sharing();
                        }
                        if storing && keeper.in_memory() && keeper.is_complete() {
                            let body = keeper.finish(&self.flight, Some(data.clone())).await;
                            self.store(&mut head, &fetched, body);
                            storing = false;
                        }
                        if !(storing && keeper.to_disk()) {
                            self.flight.push(data).await;
                        } else {
                            self.flight.push(data.clone()).await;
                            if !keeper.after_push(&self.flight, data).await {
                                storing = false;
                                self.stop_sharing();
                            } else if keeper.is_complete() {
                                // Stored now, not at the stream's end: a client that has
                                // read the last byte may leave, and then the flight stops.
                                let body = keeper.finish(&self.flight, None).await;
                                self.store(&mut head, &fetched, body);
                                storing = false;
                            }
                        }
                    }
                    // Counted once per client that was reading it (TxnRecord), not here.
                    Some(Err(_)) => return self.end(false),
                }
            }
            if let (Some(trailers), FlightOutcome::Response(h)) = (body.take_trailers(), &*fetched)
            {
                let _ = h.trailers.set(Box::new(trailers));
            }
            if storing {
                let body = keeper.finish(&self.flight, None).await;
                self.store(&mut head, &fetched, body);
            }
            self.end(true)
        }
    }

    /// Stores the response: the fields of `fetched`, the body its keeper gathered.
    fn store(
        &self,
        head: &mut Option<(StatusCode, StoragePolicy, Option<Adapted>)>,
        fetched: &FlightOutcome,
        body: Option<weir_cache::Body>,
    ) {
        let (Some(body), Some((status, policy, adapted)), FlightOutcome::Response(fetched)) =
            (body, head.take(), fetched)
        else {
            return;
        };
        let Some(object) = fetched.object(status, body, policy) else {
            return;
        };
        let tags = self.txn.as_ref().map(|t| &t.txn.cache_overrides().tags);
        let object = object
            .with_tags(tags.cloned().unwrap_or_default())
            .with_adapted(adapted);
        self.engine
            .cache
            .store(&self.key, &self.request, object, self.ticket);
    }
}
