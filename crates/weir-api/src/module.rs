//! The trait a module implements, and the factory that builds it from configuration.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;

use crate::{
    BodyChunk, CacheLookup, Events, Flow, ModuleContext, RequestHead, ResponseHead, Settings,
    SettingsError, TunnelChunk, Txn, WholeBody,
};

/// A timer a module asks for: the engine calls [`Module::on_timer`] with its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    /// The module's own name for it, passed back to `on_timer`.
    pub id: u32,
    /// How long after the module is loaded it first fires.
    pub after: Duration,
    /// `Some(period)`: then again every period; `None`: once.
    pub every: Option<Duration>,
}

/// A module: a service added to the proxy. Every callback has a default that does
/// nothing, so a module implements only the events it declared in [`Module::events`];
/// the engine never calls it for the others.
///
/// Callbacks run on the proxy's threads and must not block: return [`Flow::Wait`]
/// with a future for anything that waits. A panic in a callback fails only its own
/// transaction (or passes it through unchanged when the module is configured as
/// optional) and is counted; it never takes the process down.
pub trait Module: Send + Sync + 'static {
    /// The module's name, as in `[[module]] name = "…"`.
    fn name(&self) -> &str;

    /// The events this module is called for.
    fn events(&self) -> Events;

    /// Whether this module takes the request's credentials for the proxy with
    /// [`Txn::take_credentials`] (an authentication module). Weir's HTTP/1.1 parser
    /// then keeps the field out of the requests it reads, which costs less than a
    /// lookup and a removal: no module of the chain sees it in the request, and what
    /// no module took at `RequestHeaders` goes back in. (Requests hyper parses keep it
    /// in their fields, where `take_credentials` finds it.) Asked once, when the module
    /// is loaded. The default, `false`, leaves the field in the request.
    fn takes_credentials(&self) -> bool {
        false
    }

    /// The client's request head is complete. Change it, answer with
    /// [`Flow::Respond`], or steer the cache through [`Txn::cache`].
    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        let _ = (txn, request);
        Flow::Continue
    }

    /// A chunk of the client's request body on its way to the origin (requests that
    /// bypass the cache; a GET or HEAD has no body). The last chunk has `last` set. A
    /// module that may change the length says so with
    /// [`Txn::body_length_may_change`] in `on_request_headers`; the engine then sends
    /// the body chunked. Chunks that arrive after the origin has answered pass on
    /// unchanged.
    fn on_request_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        let _ = (txn, chunk);
        Flow::Continue
    }

    /// Whether this module wants the whole request for this transaction; asked, after
    /// every module's `on_request_headers`, of the modules that declared
    /// [`Event::WholeRequest`](crate::Event::WholeRequest). When none does, the engine
    /// does not read the body ahead and calls no `on_whole_request`. The default is
    /// yes. Keep it cheap: it runs on every request.
    fn wants_whole_request(&self, txn: &mut Txn, request: &RequestHead) -> bool {
        let _ = (txn, request);
        true
    }

    /// The whole request, before the cache lookup (after every module's
    /// `on_request_headers`): change the head, replace the body (the engine fixes
    /// `Content-Length`), or answer with [`Flow::Respond`]. A request without a body
    /// comes with an empty one. Routing and the cache key use the request as changed.
    fn on_whole_request<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        let _ = (txn, request, body);
        Flow::Continue
    }

    /// The cache lookup's result.
    fn on_cache_lookup<'a>(&'a self, txn: &'a mut Txn, lookup: CacheLookup) -> Flow<'a> {
        let _ = (txn, lookup);
        Flow::Continue
    }

    /// A request is about to go to the origin (origin-form URI, Host set).
    fn on_upstream_request<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        let _ = (txn, request);
        Flow::Continue
    }

    /// The origin's response head, before the cache stores it: changes are stored.
    fn on_response_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        let _ = (txn, response);
        Flow::Continue
    }

    /// A chunk of the origin's response body, before the cache stores it.
    fn on_response_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        let _ = (txn, chunk);
        Flow::Continue
    }

    /// Whether this module wants the whole response for this transaction; asked, after
    /// every module's `on_response_headers`, of the modules that declared
    /// [`Event::WholeResponse`](crate::Event::WholeResponse). When none does, the
    /// engine streams the body as it comes and calls no `on_whole_response`: a
    /// transcoder of images declines everything else, so text is not held back. The
    /// default is yes.
    fn wants_whole_response(&self, txn: &mut Txn, response: &ResponseHead) -> bool {
        let _ = (txn, response);
        true
    }

    /// The whole origin response, before its head is published and before it is
    /// stored: change the head (status, headers, content type), replace the body (the
    /// engine sets `Content-Length`), or answer with [`Flow::Respond`] (not stored).
    /// Runs after every module's `on_response_headers` and before the body events,
    /// which see the body it leaves.
    fn on_whole_response<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        let _ = (txn, response, body);
        Flow::Continue
    }

    /// The response head about to be sent to the client (hits included; not stored).
    fn on_deliver_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        let _ = (txn, response);
        Flow::Continue
    }

    /// A chunk of body about to be sent to the client (hits included; not stored).
    fn on_deliver_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        let _ = (txn, chunk);
        Flow::Continue
    }

    /// The client's request trailers, after the last request-body chunk, on their way
    /// to the origin: change, add or remove fields. Called only when the client sent
    /// trailers and its body is forwarded. A reply is no longer possible (the origin
    /// has the request head): [`Flow::Respond`] fails the transaction.
    fn on_request_trailers<'a>(
        &'a self,
        txn: &'a mut Txn,
        trailers: &'a mut HeaderMap,
    ) -> Flow<'a> {
        let _ = (txn, trailers);
        Flow::Continue
    }

    /// The origin's response trailers, after the last deliver-body chunk, about to be
    /// sent to the client: change, add or remove fields. Called only for responses
    /// streamed from the origin that end with trailers (never on a hit: trailers are
    /// not stored). An HTTP/1.1 client gets only the fields the response's `Trailer`
    /// field names, and only if it asked with `TE: trailers`. [`Flow::Respond`] fails
    /// the transaction, as in the body events.
    fn on_response_trailers<'a>(
        &'a self,
        txn: &'a mut Txn,
        trailers: &'a mut HeaderMap,
    ) -> Flow<'a> {
        let _ = (txn, trailers);
        Flow::Continue
    }

    /// Bytes through the tunnel the transaction opened (a CONNECT, or a protocol
    /// switch such as a WebSocket), each read from either side before it is written
    /// to the other. [`Flow::Wait`] holds them back (and that direction of the
    /// tunnel with them): bandwidth shaping, as the `clients` module does.
    /// [`Flow::Respond`] closes the tunnel: no response can be sent any more.
    ///
    /// ```
    /// use weir_api::{Flow, Module, TunnelChunk, TunnelDirection, Txn};
    ///
    /// /// Notes in the access log whether a tunnel's first bytes were a TLS handshake.
    /// struct SeesTls;
    ///
    /// impl Module for SeesTls {
    ///     fn name(&self) -> &str {
    ///         "sees-tls"
    ///     }
    ///     fn events(&self) -> weir_api::Events {
    ///         weir_api::Events::of(&[weir_api::Event::TunnelData])
    ///     }
    ///     fn on_tunnel_data<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut TunnelChunk) -> Flow<'a> {
    ///         if chunk.direction == TunnelDirection::ToServer && txn.state_ref::<bool>().is_none() {
    ///             *txn.state::<bool>() = true;
    ///             let tls = chunk.data.first() == Some(&0x16);
    ///             txn.log_field("tls", if tls { "yes" } else { "no" });
    ///         }
    ///         Flow::Continue
    ///     }
    /// }
    /// ```
    fn on_tunnel_data<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut TunnelChunk) -> Flow<'a> {
        let _ = (txn, chunk);
        Flow::Continue
    }

    /// The transaction is over. Add fields with [`Txn::log_field`] earlier; this is
    /// for modules that keep statistics.
    fn on_log(&self, txn: &Txn) {
        let _ = txn;
    }

    /// Timers this module wants, started when the module is loaded and stopped when
    /// a reload unloads it.
    fn timers(&self) -> Vec<Timer> {
        Vec::new()
    }

    /// A timer fired. Runs on the proxy's main thread: do little, or spawn.
    fn on_timer(&self, id: u32) {
        let _ = id;
    }
}

/// Builds a module from its `[[module]]` section. The engine keeps one factory per
/// built-in module name.
pub trait ModuleFactory: Send + Sync + 'static {
    /// The name operators write in `[[module]] name = "…"`.
    fn name(&self) -> &'static str;

    /// A module configured by `settings` (the section without `name`). Errors name the
    /// offending key; the engine adds the file and line.
    /// `context` gives it the cache's content management and metrics.
    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError>;
}
