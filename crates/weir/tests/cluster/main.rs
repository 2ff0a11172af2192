//! A cluster of three Weir nodes over a real etcd (the `etcd` binary, Debian's
//! `etcd-server`, started by each test on loopback ports of its own): acknowledged
//! purges, a node stopped during a purge, etcd stopped and restarted, and the
//! `[cluster]` checks of `weir check`. Without `etcd` installed the tests say SKIPPED.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod check;
mod harness;
mod owners;
mod purges;
mod status;
mod tls_origins;
