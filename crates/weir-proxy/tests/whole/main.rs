//! The whole-message events (`WholeRequest`, `WholeResponse`) and the request-body
//! event end to end: modules built here, the real engine, a real origin and client.
#![cfg(feature = "modules")]

#[path = "../support/mod.rs"]
mod support;

mod helpers;
mod requests;
mod responses;
mod wanted;
