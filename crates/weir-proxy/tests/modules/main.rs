//! The module API end to end, in one process: modules and factories defined here, the
//! real engine started with `Server::start_with_modules` on free ports, a real origin
//! (the test origin of the binary's harness) and a real client (reqwest). Each test
//! asserts what the client saw and how often the origin was asked.
#![cfg(feature = "modules")]

#[path = "../support/mod.rs"]
mod support;

mod chains;
mod changes;
mod events;
mod helpers;
mod panics;
mod state;
mod steering;
mod trailers;
mod tunnels;
mod waiting;
