//! Sending a request on an HTTP/1.1 connection from the pool: its head written out,
//! the response head read back within the origin's deadline, and the response with a
//! body that reads on from the same connection. Above the pool, the connection and
//! the body reader (`h1.rs`, `h1_conn.rs`, `h1_body.rs`).

use std::future::Future;
use std::sync::Arc;

use http::{Method, Response};
use http_body::Body;

use super::body::{Inner, UpstreamBody};
use super::h1::{self, PooledConn};
use super::h1_body::H1Body;
use super::h1_conn::{Answered, ExchangeError, Outbound};
use super::h1_wire::BodyKnown;
use super::origin_request::{OriginRequest, Written};
use super::origins::{Origin, Upstream};
use super::timer::ExchangeTimer;
use super::UpstreamError;
use crate::body::request::RequestBody;
use crate::interim::Interim;

/// The head of a request is written into a buffer of about this size.
const HEAD_ROOM: usize = 512;

impl Upstream {
    /// HTTP/1.1: a connection from the pool (or `fresh`, just opened). An idempotent
    /// request that a reused connection lost (the origin had closed it, and nothing
    /// came back) is sent once more on a new connection.
    // An `async` block, not an `async fn` (which keeps its arguments twice): see "The
    // size of a transaction's futures" in docs/architecture.md.
    #[allow(clippy::manual_async_fn)]
    pub(super) fn send_h1<'a>(
        &'a self,
        origin: &'a Arc<Origin>,
        fresh: Option<PooledConn>,
        request: OriginRequest,
        interim: Option<&'a Interim>,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + Send + 'a {
        async move {
            let (parts, body) = request.into_parts();
            let known = match body.size_hint().exact() {
                _ if body.is_end_stream() => BodyKnown::Empty,
                Some(n) => BodyKnown::Exact(n),
                None => BodyKnown::Unknown,
            };
            let out = outbound(&parts, known, body);
            let (mut conn, reused) = match fresh {
                Some(conn) => (conn, false),
                None => h1::checkout(self, origin).await?,
            };
            let method = parts.method();
            // A body to send again; the head is written again only if it is needed
            // (a copy of it would share its bytes, an allocation on every request).
            let again = match reused && idempotent(method) {
                true => out.body.try_clone(),
                false => None,
            };
            // One timer for the response's deadline, then the body's idle limit.
            let mut timer = ExchangeTimer::new(self.response_timeout);
            // Pinned here and bounded by reference: the exchange's future is large, and
            // handing it to `bound` by value copied it.
            let exchanged = {
                let exchange = std::pin::pin!(conn.conn.exchange(method, out, interim, false));
                timer.bound(exchange).await
            };
            let answered = match exchanged {
                None => return Err(UpstreamError::Timeout),
                Some(Ok(answered)) => answered,
                Some(Err(ExchangeError::Failed(e))) => return Err(e),
                Some(Err(ExchangeError::NothingBack(why))) => {
                    let Some(body) = again else {
                        return Err(UpstreamError::Protocol(why));
                    };
                    let again = outbound(&parts, known, body);
                    // Boxed: rare, and its future would otherwise enlarge every fetch's.
                    let retried = Box::pin(self.send_h1_again(origin, method, again, interim));
                    let (fresh, answered) =
                        timer.bound(retried).await.ok_or(UpstreamError::Timeout)??;
                    conn = fresh;
                    answered
                }
            };
            let reusable = answered.head.keep_alive && answered.sent_whole;
            Ok(self.response(conn, answered, reusable, timer))
        }
    }

    /// The response `answered` on `conn`, its body read on from the connection within
    /// the body's idle limit; the connection goes back to the pool after it when
    /// `reusable`. Inlined: called apart, it moved the head and the connection into its
    /// frame and the response out of it (about 110 instructions a miss).
    #[inline(always)]
    pub(super) fn response(
        &self,
        conn: PooledConn,
        answered: Answered,
        reusable: bool,
        timer: ExchangeTimer,
    ) -> Response<UpstreamBody> {
        let Answered { head, framing, .. } = answered;
        let body = H1Body::new(conn, framing, reusable);
        let mut response = Response::new(UpstreamBody {
            inner: Inner::Http1(body),
            hold: super::body::Hold::None,
            idle: timer.into_idle(self.body_idle),
            resume: None,
            trailers: None,
        });
        *response.status_mut() = head.status;
        *response.version_mut() = head.version;
        *response.headers_mut() = head.headers;
        response
    }

    /// Sends `out` on a new connection, for a request a reused one lost.
    async fn send_h1_again(
        &self,
        origin: &Arc<Origin>,
        method: &Method,
        out: Outbound,
        interim: Option<&Interim>,
    ) -> Result<(PooledConn, Answered), UpstreamError> {
        let place = origin.h1.reserve();
        let mut fresh = h1::connect_reserved(self, origin, place).await?;
        let answered = fresh.conn.exchange(method, out, interim, false).await?;
        Ok((fresh, answered))
    }
}

/// A request's head, written out, with the body that follows it.
pub(super) fn outbound(written: &Written, known: BodyKnown, body: RequestBody) -> Outbound {
    let mut head = Vec::with_capacity(HEAD_ROOM);
    let outgoing = written.write(known, &mut head);
    Outbound {
        head,
        body,
        outgoing,
    }
}

/// Methods a request of which may be sent twice (RFC 9110 §9.2.2).
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}
