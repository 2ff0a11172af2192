//! The listener side: TLS termination (SNI, ALPN, certificate errors, reload) with
//! real clients (curl, h2load), and the PROXY protocol (v1, v2, garbage, timeouts).
//!
//! Certificates are made at test time with rcgen. Everything runs on 127.0.0.1.

#[path = "../common/mod.rs"]
mod common;

mod helpers;
mod proxy_protocol;
mod tls;
