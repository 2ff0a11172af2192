//! `Server::reload` in one process, with modules defined here: reordering, enabling
//! and disabling, refused configurations, transactions in flight keeping the chain
//! they started with, timers started and stopped by reloads, and module counters
//! that survive a reload. Real engine on free ports, real origin, real client; each
//! test asserts what the client saw and how often the origin was asked.
#![cfg(feature = "modules")]

#[path = "../support/mod.rs"]
mod support;

mod chains;
mod fixtures;
mod helpers;
mod lifetimes;
