//! Error responses: each with its status, a short plain-text reason where the proxy
//! generates it, and nothing (or nothing ambiguous) forwarded to the origin. And the
//! process survives all of it.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod heads;
mod helpers;
mod origins;
mod requests;
