//! Interim (1xx) responses relayed from an origin to an HTTP/1.1 or HTTP/2 client
//! before the final response (RFC 9110 §15.2): `103 Early Hints`, `102 Processing` and
//! any other 1xx Weir did not cause itself.
//!
//! An HTTP/2 stream has a queue of its own ([`Interim::for_h2_stream`]), handed to its
//! transaction with the request (`service::handle`): its task (`server/h2.rs`) sends
//! each response as a HEADERS frame before the final one.
//!
//! hyper's HTTP/1 server never writes a 1xx of its own accord (apart from
//! `100 Continue`), and it writes nothing at all while the service prepares the final
//! response. So the client connection keeps one [`Interim`] queue: the origin
//! connection (read by the task of the request it carries) appends a serialized 1xx to
//! it and wakes the client connection's task; the client stream (`server/connection.rs`) writes the queue out ahead of
//! anything hyper writes, which keeps every interim response before the final head.
//! hyper polls the stream's flush on every turn of its loop, even with nothing of its
//! own to write, which is where a queued 1xx leaves.
//!
//! The queue accepts responses only while a request of the connection is waiting for
//! its final response: once the service has answered, a 1xx that arrives late (from a
//! fetch the answer did not wait for) is dropped rather than written into the middle of
//! a body.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use http::{StatusCode, Version};

use crate::headers::remove_hop_by_hop;

/// The interim responses of one client connection's current request.
#[derive(Clone, Default)]
pub(crate) struct Interim(Arc<Shared>);

#[derive(Default)]
struct Shared {
    /// Something is queued: lets every write and flush of the connection skip the lock.
    queued: AtomicBool,
    /// An HTTP/2 stream's: responses are kept whole, not serialized.
    whole: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A request waits for its final response, and the connection's task can be woken.
    waiting: Option<Waker>,
    /// Serialized interim responses not yet written, from `written` on.
    bytes: Vec<u8>,
    written: usize,
    /// An HTTP/2 stream's interim responses not yet sent.
    responses: Vec<http::Response<()>>,
}

impl Interim {
    /// The queue of one HTTP/2 stream.
    pub fn for_h2_stream() -> Interim {
        Interim(Arc::new(Shared {
            whole: true,
            ..Shared::default()
        }))
    }

    /// An HTTP/2 stream's queued interim responses, oldest first.
    pub fn take_responses(&self) -> Vec<http::Response<()>> {
        if !self.0.queued.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut state = self.state();
        self.0.queued.store(false, Ordering::Release);
        std::mem::take(&mut state.responses)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request waits for its final response until the returned guard is dropped;
    /// `waker` wakes the task that writes to the client. Interim responses that arrive
    /// later are dropped; those already queued still go out, ahead of the final one.
    pub fn wait_for_final(&self, waker: Waker) -> Waiting {
        self.state().waiting = Some(waker);
        Waiting(self.clone())
    }

    /// Queues an interim response from the origin.
    pub(crate) fn push(&self, status: StatusCode, headers: &http::HeaderMap) {
        // 100 Continue answers an expectation Weir removed and hyper's server answers
        // on its own; 101 is final on HTTP/1.1 and never reaches here.
        if status == StatusCode::CONTINUE || status == StatusCode::SWITCHING_PROTOCOLS {
            return;
        }
        let mut headers = headers.clone();
        remove_hop_by_hop(&mut headers);
        let mut state = self.state();
        let Some(waker) = state.waiting.clone() else {
            return;
        };
        if self.0.whole {
            let mut response = http::Response::new(());
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            state.responses.push(response);
        } else {
            Self::serialize(&mut state.bytes, status, &headers);
        }
        self.0.queued.store(true, Ordering::Release);
        drop(state);
        waker.wake();
    }

    fn serialize(bytes: &mut Vec<u8>, status: StatusCode, headers: &http::HeaderMap) {
        bytes.extend_from_slice(b"HTTP/1.1 ");
        bytes.extend_from_slice(status.as_str().as_bytes());
        bytes.push(b' ');
        bytes.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        bytes.extend_from_slice(b"\r\n");
        for (name, value) in headers {
            crate::wire::field(bytes, name.as_str().as_bytes(), value.as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
    }

    /// Writes the queued interim responses with `write`; ready once none is left.
    pub fn poll_write_queued(
        &self,
        cx: &mut Context<'_>,
        mut write: impl FnMut(&mut Context<'_>, &[u8]) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<()>> {
        if !self.0.queued.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let mut state = self.state();
        while state.written < state.bytes.len() {
            let State { bytes, written, .. } = &mut *state;
            match write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        state.bytes = Vec::new();
        state.written = 0;
        self.0.queued.store(false, Ordering::Release);
        Poll::Ready(Ok(()))
    }
}

/// A request of the connection waits for its final response (see
/// [`Interim::wait_for_final`]).
pub(crate) struct Waiting(Interim);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.state().waiting = None;
    }
}

/// Whether an HTTP/1 client speaking `version` may be sent interim responses through
/// its connection's queue: HTTP/1.0 clients do not know them (RFC 9110 §15.2). (An
/// HTTP/2 stream's queue comes with its request.)
pub(crate) fn client_accepts(version: Version) -> bool {
    version == Version::HTTP_11
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    fn queued(interim: &Interim) -> String {
        let mut out = Vec::new();
        let mut cx = Context::from_waker(Waker::noop());
        let done = interim.poll_write_queued(&mut cx, |_, bytes| {
            out.extend_from_slice(bytes);
            Poll::Ready(Ok(bytes.len()))
        });
        assert!(matches!(done, Poll::Ready(Ok(()))));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn only_what_arrives_while_the_request_waits_is_written() {
        let interim = Interim::default();
        let mut hints = HeaderMap::new();
        hints.insert("link", HeaderValue::from_static("</a.css>; rel=preload"));
        hints.insert("connection", HeaderValue::from_static("x-hop"));
        hints.insert("x-hop", HeaderValue::from_static("1"));
        interim.push(StatusCode::from_u16(103).unwrap(), &hints);
        assert_eq!(queued(&interim), "", "no request waits yet");

        let waiting = interim.wait_for_final(Waker::noop().clone());
        interim.push(StatusCode::CONTINUE, &HeaderMap::new());
        interim.push(StatusCode::from_u16(103).unwrap(), &hints);
        interim.push(StatusCode::PROCESSING, &HeaderMap::new());
        drop(waiting);
        interim.push(StatusCode::from_u16(103).unwrap(), &hints);
        assert_eq!(
            queued(&interim),
            "HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n\
             HTTP/1.1 102 Processing\r\n\r\n"
        );
        assert_eq!(queued(&interim), "", "written once");
    }
}
