//! Caching (memory tier, RFC 9111), request coalescing and `Cache-Status` (RFC 9211).
//! Each test asserts what the client saw and how many requests reached the origin.

#[path = "../common/mod.rs"]
mod common;

mod cache_status;
mod coalescing;
mod freshness;
mod groups;
mod helpers;
mod interim;
mod invalidation;
mod limits;
mod not_modified;
mod post;
mod refresh;
mod rfc_rules;
mod storing;
mod validation;
mod vary;
