//! `icap`: content adaptation by ICAP services (RFC 3507), such as c-icap or a virus
//! scanner, at the REQMOD point (the whole client request, before the cache lookup)
//! and the RESPMOD point (the whole origin response, before it is stored, so the
//! adapted response is what the cache keeps).
//!
//! ```toml
//! [[module]]
//! name = "icap"
//!
//! [[module.service]]
//! reqmod = "icap://127.0.0.1:1344/echo"
//! on_failure = "bypass"        # or "fail-closed": the client gets 503
//!
//! [[module.service]]
//! respmod = "icap://127.0.0.1:1344/echo"
//! on_failure = "fail-closed"
//! on_oversize = "bypass"       # a body over [limits] module_body the service wants whole
//! connect_timeout = "2s"
//! timeout = "10s"              # one whole exchange
//! retry_after = "5s"           # after a connect failure or timeout, rest this long
//! max_connections = 16         # also bounded by the service's Max-Connections
//! # preview = 4096             # overrides the service's Preview
//! # max_answer = 16777216      # the largest answer body accepted, in bytes
//! ```
//!
//! Each service is asked for its OPTIONS when the module is loaded, and again when
//! their `Options-TTL` runs out or an answer carries another ISTag. A service whose
//! `Methods` do not list its method, or whose `Transfer-Ignore` names the URL's
//! extension, is skipped. Bodies go with a preview of the size the service asks
//! (`Transfer-Preview`), or whole (`Transfer-Complete`), always with `Allow: 204`.
//! Services of one method run in the order written, each seeing what the previous
//! one changed. Answers are read whole and checked before anything is changed, so a
//! failure leaves the message as it was: a malformed answer, an error status, a
//! timeout or a service that is down is counted and handled by the service's
//! `on_failure` policy. A response stored after RESPMOD carries the service's ISTag
//! as a cache tag, and a new ISTag removes what the old one adapted.

mod failure;
mod metrics;
mod options;
mod pool;
mod reader;
mod service;
pub(crate) mod settings;
mod transport;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use weir_api::http::header::{CACHE_CONTROL, CONTENT_LENGTH};
use weir_api::http::{HeaderMap, HeaderValue, StatusCode};
use weir_api::{
    Bytes, Decision, Event, Events, Flow, Module, ModuleContext, ModuleFactory, Reply, RequestHead,
    ResponseHead, Settings, SettingsError, Timer, Txn, WholeBody,
};

use failure::Failure;
use metrics::Metrics;
use options::IcapMethod;
use service::{Message, Outcome, Service};
use settings::Policy;
use wire::{encode_request_head, encode_response_head, strip_framing, HttpHead, WireError};

/// Builds [`Icap`] from its settings (see the [module documentation](self)).
pub struct IcapFactory;

impl ModuleFactory for IcapFactory {
    fn name(&self) -> &'static str {
        "icap"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        Ok(Arc::new(Icap::from_settings(settings, context)?))
    }
}

/// The ICAP client module; its services keep their connections and OPTIONS.
pub struct Icap {
    reqmod: Vec<Arc<Service>>,
    respmod: Vec<Arc<Service>>,
    metrics: Metrics,
    context: ModuleContext,
}

/// The request sent to the origin, for RESPMOD's `req-hdr` and its `Transfer-*`
/// choice (kept in the fill's own transaction, where RESPMOD runs).
#[derive(Default)]
struct Upstream {
    head: Option<Vec<u8>>,
    path: String,
    is_head: bool,
}

impl Icap {
    /// Checks the settings and builds the module (what the factory does). Starts
    /// no I/O: the first OPTIONS go out when the engine fires the module's timer.
    pub fn from_settings(
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Icap, SettingsError> {
        let metrics = Metrics::new(context);
        let mut reqmod = Vec::new();
        let mut respmod = Vec::new();
        for config in settings::parse(settings)? {
            let list = match config.method {
                IcapMethod::Reqmod => &mut reqmod,
                IcapMethod::Respmod => &mut respmod,
            };
            list.push(Arc::new(Service::new(
                config,
                metrics.clone(),
                context.clone(),
            )));
        }
        Ok(Icap {
            reqmod,
            respmod,
            metrics,
            context: context.clone(),
        })
    }

    /// What a policy makes of a message the service could not adapt.
    fn apply_policy(&self, policy: Policy, txn: &mut Txn, why: String) -> Option<Decision> {
        self.metrics.policy(policy);
        txn.log_field("icap", why);
        match policy {
            Policy::Bypass => None,
            Policy::FailClosed => {
                let mut reply = Reply::text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The content adaptation service is unavailable.\n",
                );
                reply
                    .headers
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                Some(Decision::Respond(reply))
            }
        }
    }

    fn failed(&self, service: &Service, txn: &mut Txn, failure: Failure) -> Option<Decision> {
        self.metrics.failure(&failure);
        let policy = service.config.on_failure;
        self.apply_policy(policy, txn, format!("failed:{failure}"))
    }

    fn oversize(&self, service: &Service, txn: &mut Txn) -> Option<Decision> {
        self.metrics.oversize.inc();
        self.apply_policy(service.config.on_oversize, txn, "oversize".into())
    }

    /// Applies a REQMOD outcome; `Some` ends the request's adaptation.
    fn apply_reqmod(
        &self,
        service: &Service,
        outcome: Result<Outcome, Failure>,
        txn: &mut Txn,
        request: &mut RequestHead,
        body: &mut WholeBody,
    ) -> Option<Decision> {
        let (heads, new_body) = match outcome {
            Err(failure) => return self.failed(service, txn, failure),
            Ok(Outcome::Skipped) => {
                self.metrics.skipped.inc();
                return None;
            }
            Ok(Outcome::Unmodified { .. }) => {
                self.metrics.unmodified.inc();
                return None;
            }
            Ok(Outcome::WantsMore) => return self.oversize(service, txn),
            Ok(Outcome::Modified { heads, body, .. }) => (heads, body),
        };
        match <[HttpHead; 1]>::try_from(heads) {
            Ok(
                [HttpHead::Request {
                    method,
                    uri,
                    mut headers,
                }],
            ) => {
                if body.truncated {
                    // Only the preview went out: the rest of the body cannot follow
                    // an adapted head.
                    return self.oversize(service, txn);
                }
                strip_framing(&mut headers);
                request.method = method;
                request.uri = uri;
                request.headers = headers;
                body.data = Bytes::from(new_body.unwrap_or_default());
                self.metrics.modified.inc();
                txn.log_field("icap", "modified");
                None
            }
            Ok([HttpHead::Response { status, headers }]) => {
                self.metrics.responded.inc();
                txn.log_field("icap", "responded");
                Some(Decision::Respond(reply(status, headers, new_body)))
            }
            Err(_) => self.failed(service, txn, Failure::Protocol(WireError::Encapsulated)),
        }
    }

    /// Applies a RESPMOD outcome; `Some` ends the response's adaptation.
    fn apply_respmod(
        &self,
        service: &Service,
        outcome: Result<Outcome, Failure>,
        txn: &mut Txn,
        response: &mut ResponseHead,
        body: &mut WholeBody,
    ) -> Option<Decision> {
        let (heads, new_body) = match outcome {
            Err(failure) => return self.failed(service, txn, failure),
            Ok(Outcome::Skipped) => {
                self.metrics.skipped.inc();
                return None;
            }
            Ok(Outcome::Unmodified { istag }) => {
                self.metrics.unmodified.inc();
                tag_stored(service, txn, istag);
                return None;
            }
            Ok(Outcome::WantsMore) => return self.oversize(service, txn),
            Ok(Outcome::Modified { heads, body, istag }) => {
                tag_stored(service, txn, istag);
                (heads, body)
            }
        };
        // A RESPMOD answer may carry the request head too; the response is last.
        let Some(HttpHead::Response { status, headers }) = heads.into_iter().last() else {
            return self.failed(service, txn, Failure::Protocol(WireError::Encapsulated));
        };
        self.metrics.modified.inc();
        txn.log_field("icap", "modified");
        if body.truncated {
            // The body cannot be replaced, so the adapted response is sent instead of
            // the origin's, whole (and not stored).
            return Some(Decision::Respond(reply(status, headers, new_body)));
        }
        let new_body = new_body.unwrap_or_default();
        let mut headers = headers;
        strip_framing(&mut headers);
        headers.insert(CONTENT_LENGTH, HeaderValue::from(new_body.len()));
        response.status = status;
        response.headers = headers;
        body.data = Bytes::from(new_body);
        None
    }
}

/// Tags the response the cache will store with the service's ISTag, so that a new
/// ISTag removes what the old service adapted.
fn tag_stored(service: &Service, txn: &mut Txn, istag: Option<String>) {
    if let Some(istag) = istag {
        txn.cache().tags.push(service.cache_tag(&istag));
    }
}

fn reply(status: StatusCode, mut headers: HeaderMap, body: Option<Vec<u8>>) -> Reply {
    strip_framing(&mut headers);
    Reply {
        status,
        headers,
        body: Bytes::from(body.unwrap_or_default()),
    }
}

/// Responses that have no body by definition are not sent for RESPMOD.
fn has_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

impl Module for Icap {
    fn name(&self) -> &str {
        "icap"
    }

    fn events(&self) -> Events {
        let mut events = Events::NONE;
        if !self.reqmod.is_empty() {
            events = events.with(Events::of(&[Event::WholeRequest]));
        }
        if !self.respmod.is_empty() {
            events = events.with(Events::of(&[Event::UpstreamRequest, Event::WholeResponse]));
        }
        events
    }

    fn timers(&self) -> Vec<Timer> {
        vec![Timer {
            id: 0,
            after: Duration::ZERO,
            every: None,
        }]
    }

    /// Asks every service for its OPTIONS in the background when the module loads.
    fn on_timer(&self, _id: u32) {
        for service in self.reqmod.iter().chain(&self.respmod) {
            let service = service.clone();
            self.context.spawn(async move { service.warm_up().await });
        }
    }

    fn on_whole_request<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        if self.reqmod.is_empty() {
            return Flow::Continue;
        }
        Flow::wait(async move {
            for service in &self.reqmod {
                let outcome = {
                    let path = request.uri.path().to_owned();
                    let message = Message {
                        request: Some(encode_request_head(request)),
                        response: None,
                        body: &body.data,
                        truncated: body.truncated,
                        path: &path,
                    };
                    service.adapt(&message).await
                };
                if let Some(decision) = self.apply_reqmod(service, outcome, txn, request, body) {
                    return decision;
                }
            }
            Decision::Continue
        })
    }

    fn on_upstream_request<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        if !self.respmod.is_empty() {
            *txn.state::<Upstream>() = Upstream {
                head: Some(encode_request_head(request)),
                path: request.uri.path().to_owned(),
                is_head: request.method == weir_api::http::Method::HEAD,
            };
        }
        Flow::Continue
    }

    fn on_whole_response<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        if self.respmod.is_empty() || !has_body(response.status) {
            return Flow::Continue;
        }
        let upstream = std::mem::take(txn.state::<Upstream>());
        if upstream.is_head {
            // No body to adapt, and an adapted head could not be framed right.
            return Flow::Continue;
        }
        Flow::wait(async move {
            for service in &self.respmod {
                let outcome = {
                    let message = Message {
                        request: upstream.head.clone(),
                        response: Some(encode_response_head(response)),
                        body: &body.data,
                        truncated: body.truncated,
                        path: &upstream.path,
                    };
                    service.adapt(&message).await
                };
                if let Some(decision) = self.apply_respmod(service, outcome, txn, response, body) {
                    return decision;
                }
            }
            Decision::Continue
        })
    }
}

#[cfg(test)]
mod c_icap;
#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;
