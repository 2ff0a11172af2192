//! A fill's fetch (`fetch.rs` runs it) and the ways it answers its flight other than
//! with the origin's own response: a module's reply, a stored copy refreshed by a 304
//! or served when the origin fails, the origin's 304 passed on, a failure; and how it
//! ends (the flight finished, the key out of the coalescing table).

use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, HeaderValue};
use http::{request, StatusCode};
use weir_cache::{CacheKey, CachedObject, StaleUse};

use crate::engine::Engine;
use crate::error::ProxyError;
use crate::flight::{FetchedHead, FlightHead, FlightOutcome, ProxyErrorParts, Shared};
use crate::metrics::CacheOutcome;
use crate::modules::txn::ModTxn;
use crate::upstream::OriginAddr;
use weir_api::Reply;

/// One origin fetch feeding a flight.
pub(super) struct Fetch {
    pub(super) engine: Arc<Engine>,
    pub(super) txn: Option<ModTxn>,
    pub(super) key: CacheKey,
    pub(super) flight: weir_cache::FlightWriter<FlightHead>,
    /// The leader's request, for the storage policy and the variant key.
    pub(super) request: Arc<request::Parts>,
    pub(super) origin: OriginAddr,
    /// The storage policy obeys targeted cache-control fields (the leader's listener).
    pub(super) targeted: bool,
    pub(super) stale: Option<Arc<CachedObject>>,
    /// The stale copy was fresh: the request asked for it to be validated
    /// (`Cache-Control: no-cache` or `max-age=0`), which `Cache-Status` says with
    /// `fwd=request` rather than `fwd=stale` (RFC 9211 §2.2).
    pub(super) asked: bool,
    pub(super) ticket: weir_cache::Ticket,
}

impl Fetch {
    /// Why a validation went to the origin, as `Cache-Status`'s `fwd` says it.
    pub(super) fn forwarded(&self) -> &'static str {
        match self.asked {
            true => "request",
            false => "stale",
        }
    }

    /// `Cache-Status` of a validation the origin answered with 304.
    fn validated_by_304(&self) -> HeaderValue {
        HeaderValue::from_static(match self.asked {
            true => "weir; fwd=request; fwd-status=304",
            false => "weir; fwd=stale; fwd-status=304",
        })
    }

    /// The origin confirmed the stale copy: store the refreshed object, serve its body.
    pub(super) async fn refreshed(self, object: CachedObject, now: SystemTime) {
        let object = Arc::new(object);
        self.engine.cache.store(
            &self.key,
            &self.request,
            CachedObject::clone(&object),
            self.ticket,
        );
        let cache_status = self.validated_by_304();
        self.publish_object(&object, now, CacheOutcome::RefreshUnmodified, cache_status)
            .await
    }

    /// Passes the origin's 304 on to the flight's client, whose own conditions it
    /// answers; stores nothing.
    pub(super) async fn pass_on(self, parts: http::response::Parts, validated: bool) {
        self.stop_sharing();
        let (outcome, cache_status) = if validated {
            (CacheOutcome::RefreshModified, self.validated_by_304())
        } else {
            (
                CacheOutcome::Miss,
                HeaderValue::from_static("weir; fwd=miss; fwd-status=304"),
            )
        };
        self.flight
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead::new(
                parts.status,
                parts.headers,
                Shared::No,
                outcome,
                cache_status,
                None,
            ))));
        self.end(true)
    }

    /// The stale copy when the origin failed and the copy may stand in for it.
    pub(super) fn usable_on_error(&self) -> Option<Arc<CachedObject>> {
        let window = self.engine.cache.settings().stale_if_error;
        let now = SystemTime::now();
        self.stale
            .clone()
            .filter(|o| o.may_serve_stale(&self.request.headers, now, StaleUse::OnError, window))
    }

    /// Serves the stale copy instead of the origin's failure (stale-if-error).
    pub(super) async fn serve_stale(
        self,
        object: &CachedObject,
        origin_status: Option<StatusCode>,
    ) {
        let cache_status = match origin_status {
            Some(s) => HeaderValue::from_str(&format!(
                "weir; hit; fwd={}; fwd-status={}; detail=stale-if-error",
                self.forwarded(),
                s.as_u16()
            ))
            .unwrap_or(HeaderValue::from_static("weir; hit; detail=stale-if-error")),
            None => HeaderValue::from_static(match self.asked {
                true => "weir; hit; fwd=request; detail=stale-if-error",
                false => "weir; hit; fwd=stale; detail=stale-if-error",
            }),
        };
        let now = SystemTime::now();
        self.publish_object(object, now, CacheOutcome::StaleOnError, cache_status)
            .await
    }

    /// Answers the flight's readers from a stored object.
    pub(super) async fn publish_object(
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
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead::new(
                object.status,
                object.response_headers(now),
                Shared::Copy,
                outcome,
                cache_status,
                vary,
            ))));
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
    pub(super) async fn publish_reply(self, reply: Box<Reply>) {
        self.stop_sharing();
        let mut headers = reply.headers;
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(reply.body.len()));
        self.flight
            .set_head(Arc::new(FlightOutcome::Response(FetchedHead::new(
                reply.status,
                headers,
                Shared::No,
                CacheOutcome::Bypass,
                HeaderValue::from_static("weir; detail=module"),
                None,
            ))));
        if !reply.body.is_empty() {
            self.flight.push(reply.body).await;
        }
        self.end(true)
    }

    pub(super) fn fail(self, e: ProxyError) {
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

    pub(super) fn stop_sharing(&self) {
        self.flight.stop_retaining();
        self.engine.flights.leave(&self.key, &self.flight);
    }

    pub(super) fn end(&self, ok: bool) {
        self.engine.flights.leave(&self.key, &self.flight);
        self.flight.finish(ok);
    }
}
