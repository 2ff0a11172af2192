//! Forward and reverse proxying, CONNECT, HTTP/1.1 and h2c from clients, the origin
//! connection pool, intermediary header handling (RFC 9110) and streaming bodies.
//! Each test asserts what the client saw and how many requests reached the origin.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod connections;
mod headers;
mod helpers;
mod loops;
mod messages;
mod modes;
mod origin_wire;
mod streaming;
mod trailers;
mod upgrades;
