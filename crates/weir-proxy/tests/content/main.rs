//! The services a module gets from its `ModuleContext`, in one process: content
//! management over the real cache (query, fetch, validate, set_expiry, delete,
//! inject, read), background work (`spawn`), counters in `/metrics`; and the log
//! fields a module adds, in the access log file.
//!
//! A test module, `control`, keeps the context it was built with and answers
//! requests for `http://control/<op>?<url>` itself, at request headers: it makes the
//! content-management call in a `Flow::wait` future and replies with the result. The
//! tests drive it with a real client through a forward listener (so the cache names
//! objects by the origin URLs the content manager is given), next to ordinary
//! requests to a real origin, and assert what the clients saw and how often the
//! origin was asked.
#![cfg(feature = "modules")]

#[path = "../support/mod.rs"]
mod support;

mod changes;
mod control;
mod errors;
mod fetch;
mod helpers;
mod observability;
