//! An HTTP/1.1 origin's response body, read from its connection by whoever polls it
//! (the fill's or the client's task), and the connection back to the pool the moment
//! the body has ended, when it may carry another request. Above the connection and
//! the pool (`h1_conn.rs`, `h1.rs`); the response body of `body.rs` wraps it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::h1::PooledConn;
use super::h1_conn::READ_MOST;
use super::h1_wire::{Chunked, Decoded, Framing};
use crate::body::request::BoxError;

/// A response body on an HTTP/1.1 connection.
pub(crate) struct H1Body {
    /// Until the body ends (then back to the pool, or closed).
    conn: Option<PooledConn>,
    state: State,
    /// Whether the connection can carry another request after this body.
    reusable: bool,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Length(u64),
    Chunked(Chunked),
    Close,
    Done,
    /// Given up part-way (an error, or the idle limit).
    Failed,
}

impl H1Body {
    /// The body of a response framed by `framing`, read from `conn`. An empty body
    /// gives its connection back at once.
    pub(super) fn new(conn: PooledConn, framing: Framing, reusable: bool) -> H1Body {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Chunked(Chunked::Size),
            Framing::Close => State::Close,
        };
        let mut body = H1Body {
            conn: Some(conn),
            state,
            reusable,
        };
        if let State::Done = body.state {
            body.finish();
        }
        body
    }

    /// The body ended: its connection goes back to the pool when it can be reused.
    fn finish(&mut self) {
        self.state = State::Done;
        if let Some(conn) = self.conn.take() {
            if self.reusable {
                conn.release();
            }
        }
    }

    /// The body is given up part-way: its connection is closed.
    pub(super) fn abandon(&mut self) {
        self.conn = None;
        self.state = State::Failed;
    }

    fn fail(&mut self, why: impl Into<BoxError>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.abandon();
        Poll::Ready(Some(Err(why.into())))
    }
}

impl Body for H1Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = this.conn.as_mut().map(|c| &mut c.conn) else {
                return Poll::Ready(None);
            };
            let want = match this.state {
                State::Done | State::Failed => return Poll::Ready(None),
                State::Length(left) if !conn.buf.is_empty() => {
                    let n = left.min(conn.buf.len() as u64);
                    let data = conn.buf.split_to(n as usize).freeze();
                    this.state = State::Length(left - n);
                    if left == n {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::Length(left) => left.min(READ_MOST as u64) as usize,
                State::Chunked(mut chunked) if !conn.buf.is_empty() => {
                    let decoded = chunked.decode(&mut conn.buf);
                    this.state = State::Chunked(chunked);
                    match decoded {
                        Ok(Decoded::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                        Ok(Decoded::End(trailers)) => {
                            this.finish();
                            return match trailers.is_empty() {
                                true => Poll::Ready(None),
                                false => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
                            };
                        }
                        Ok(Decoded::More) => READ_MOST,
                        Err(e) => return this.fail(e.0),
                    }
                }
                State::Chunked(_) => READ_MOST,
                State::Close if !conn.buf.is_empty() => {
                    let data = conn.buf.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::Close => READ_MOST,
            };
            match conn.poll_fill(cx, want) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    if let State::Close = this.state {
                        this.reusable = false;
                        this.finish();
                        return Poll::Ready(None);
                    }
                    return this.fail("the origin closed the connection before the body's end");
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return this.fail(format!("reading the body failed: {e}")),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Length(n) => SizeHint::with_exact(n),
            State::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
