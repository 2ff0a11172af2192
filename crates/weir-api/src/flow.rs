//! What a callback tells the engine to do next.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

/// The result of a callback.
pub enum Flow<'a> {
    /// Go on with the transaction.
    Continue,
    /// Answer the client with this response instead; the cache does not store it.
    /// Honoured by every event up to and including `DeliverHeaders`; in a body event
    /// the response is already on its way, so there it fails the transaction.
    Respond(Reply),
    /// Wait for this future, then act on its decision. The future may borrow what the
    /// callback was given: the engine polls it in place, and other transactions go on.
    Wait(Pin<Box<dyn Future<Output = Decision> + Send + 'a>>),
}

impl std::fmt::Debug for Flow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flow::Continue => f.write_str("Continue"),
            Flow::Respond(r) => f.debug_tuple("Respond").field(r).finish(),
            Flow::Wait(_) => f.write_str("Wait(..)"),
        }
    }
}

impl<'a> Flow<'a> {
    /// Waits for `future` before the transaction goes on.
    pub fn wait(future: impl Future<Output = Decision> + Send + 'a) -> Flow<'a> {
        Flow::Wait(Box::pin(future))
    }
}

/// What a waited-for future decided.
#[derive(Debug)]
pub enum Decision {
    /// Go on with the transaction.
    Continue,
    /// Answer the client with this response instead.
    Respond(Reply),
}

/// A response a module makes itself (to block, redirect or synthesize).
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// Headers; `Content-Length` is set by the engine.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Reply {
    /// A response with a status and a plain-text body.
    pub fn text(status: StatusCode, text: impl Into<String>) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        Reply {
            status,
            headers,
            body: Bytes::from(text.into()),
        }
    }

    /// A redirect to `location` with the given 3xx status.
    pub fn redirect(
        status: StatusCode,
        location: &str,
    ) -> Result<Reply, http::header::InvalidHeaderValue> {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::LOCATION,
            http::HeaderValue::from_str(location)?,
        );
        Ok(Reply {
            status,
            headers,
            body: Bytes::new(),
        })
    }
}
