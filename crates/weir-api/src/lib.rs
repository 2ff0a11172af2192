//! The module API of Weir, an extensible caching HTTP proxy.
//!
//! A module adds a service to a running proxy: it adapts content, manages the cache
//! or administers clients. It declares the [`Event`]s it wants; the engine calls it
//! only for those, in the order the operator configured, and an event no module asked
//! for costs the engine a branch and nothing more.
//!
//! ```text
//! request headers ─▶ (whole request) ─▶ cache lookup ─▶ upstream request ─▶ (body)
//!   [RequestHeaders]  [WholeRequest]      [CacheLookup]   [UpstreamRequest]  [RequestBody]*
//!   ─▶ response headers ─▶ (whole response) ─▶ response body ─▶ (store)
//!      [ResponseHeaders]   [WholeResponse]      [ResponseBody]*
//!   ─▶ deliver headers ─▶ deliver body ─▶ log
//!      [DeliverHeaders]   [DeliverBody]*  [Log]
//! ```
//! A request that opens a tunnel (a CONNECT, or a switch to another protocol such as
//! a WebSocket) has no body events after `DeliverHeaders`: its bytes go through
//! [`TunnelData`](Event::TunnelData)* each way until the tunnel closes, then `Log`.
//! `Response*` events run before the cache stores a response, so what a module
//! changes there is stored and computed once; `Deliver*` events run on every
//! delivery, hits included, and are not stored.
//!
//! Callbacks are cheap synchronous calls on the proxy's threads. One that must wait
//! (I/O, a helper process, an ICAP service) returns [`Flow::Wait`] with a future; the
//! transaction resumes when it completes and other transactions are not held up.
//!
//! # A module
//! ```
//! use weir_api::{Event, Events, Flow, Module, RequestHead, Txn};
//!
//! /// Tags every request it sees.
//! struct Tagger;
//!
//! impl Module for Tagger {
//!     fn name(&self) -> &str {
//!         "tagger"
//!     }
//!     fn events(&self) -> Events {
//!         Events::of(&[Event::RequestHeaders])
//!     }
//!     fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, request: &'a mut RequestHead) -> Flow<'a> {
//!         request.headers.insert("x-tagged", http::HeaderValue::from_static("yes"));
//!         Flow::Continue
//!     }
//! }
//! ```
#![deny(missing_docs)]

mod body;
mod content;
mod context;
mod events;
mod flow;
mod head;
mod module;
mod settings;
mod txn;

pub use body::{BodyChunk, TunnelChunk, TunnelDirection, WholeBody};
pub use content::{
    BodyReader, BytesBody, ContentError, ContentFuture, ContentManager, ObjectInfo, StoredResponse,
    Trailers, CALL_BODY_LIMIT,
};
pub use context::{AdminReport, Counter, MetricsRegistry, ModuleContext, Spawner};
pub use events::{Event, Events};
pub use flow::{Decision, Flow, Reply};
pub use head::{RequestHead, ResponseHead};
pub use module::{Module, ModuleFactory, Timer};
pub use settings::{Settings, SettingsError};
pub use txn::{
    engine, CacheLookup, CacheOverrides, Completion, Listener, ListenerMode, Outcome, Txn,
};

pub use bytes::Bytes;
pub use http;
/// Re-exported so a module can derive `Deserialize` for its settings without a
/// dependency of its own: `#[serde(crate = "weir_api::serde")]`.
pub use serde;
