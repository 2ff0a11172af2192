//! The heads of a request and a response, as the engine holds them.
//!
//! Their own file, below every other, because the module trait, the transaction and
//! the content manager all name them; the crate root only re-exports them.

/// A request's line and headers, as the engine holds them.
pub type RequestHead = http::request::Parts;
/// A response's status line and headers, as the engine holds them.
pub type ResponseHead = http::response::Parts;
