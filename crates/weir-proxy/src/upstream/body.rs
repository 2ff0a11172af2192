//! An origin's response body: its chunks as they arrive, within the idle limit, and
//! the connection (HTTP/1.1) or stream (HTTP/2) it holds until it ends. Above the
//! senders whose handles it holds; the response body sent to clients wraps it.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body::{Body, SizeHint};
use hyper::body::Incoming;

use super::h1_body::H1Body;
use super::timer::IdleLimit;
use super::UpstreamError;
use super::{h2_pool, owned};
use crate::body::request::BoxError;
use crate::body::source::BodySource;

/// What an origin's response body holds on to until it ends.
pub(super) enum Hold {
    None,
    /// The HTTP/2 stream's place on its connection, given back when dropped.
    Http2 {
        _slot: h2_pool::StreamSlot,
    },
}

/// An origin's response body. Its connection (HTTP/1.1) goes back to the pool, or its
/// stream (HTTP/2) is counted as done, when it ends.
pub(crate) struct UpstreamBody {
    pub(super) inner: Inner,
    pub(super) hold: Hold,
    pub(super) idle: IdleLimit,
    /// Where the rest comes from if this body fails part-way (set by the cluster's hop).
    pub(super) resume: Option<Box<Resuming>>,
    /// The trailer fields that ended the body, once read (see [`Self::take_trailers`]).
    pub(super) trailers: Option<Box<HeaderMap>>,
}

/// The body as its protocol delivers it.
pub(super) enum Inner {
    /// Read from the connection, which it holds (`h1_body.rs`).
    Http1(H1Body),
    /// hyper's HTTP/2 stream.
    Http2(Incoming),
}

impl Inner {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        match self {
            Inner::Http1(b) => Pin::new(b).poll_frame(cx),
            Inner::Http2(b) => Pin::new(b).poll_frame(cx).map_err(|e| e.into()),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Inner::Http1(b) => b.is_end_stream(),
            Inner::Http2(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Inner::Http1(b) => b.size_hint(),
            Inner::Http2(b) => b.size_hint(),
        }
    }
}

/// Asks again for the response whose body failed, for the bytes from the given offset
/// on: a `Range` request (with `If-Range`) when the first response had a validator,
/// else the whole response, whose first bytes are then skipped.
pub(crate) type Resume = Box<dyn FnOnce(ResumeFrom) -> ResumeFuture + Send>;
pub(crate) type ResumeFuture =
    Pin<Box<dyn Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + Send>>;

/// What a resumed request asks for: the offset and, for `If-Range`, the validator.
pub(crate) struct ResumeFrom {
    pub offset: u64,
    pub if_range: Option<HeaderValue>,
}

/// A body that may be resumed from another source.
pub(super) struct Resuming {
    again: Option<Resume>,
    /// Bytes handed on so far.
    delivered: u64,
    /// The first response's validators and length, which the second must match.
    etag: Option<HeaderValue>,
    last_modified: Option<HeaderValue>,
    length: Option<u64>,
    state: ResumeState,
}

enum ResumeState {
    /// The first body is still read.
    First,
    /// Asking again; the first body's error is reported if that fails.
    Asking(ResumeFuture, Option<BoxError>),
    /// The rest comes from here, after skipping what was already delivered.
    Rest(Box<UpstreamBody>, u64),
    /// Asking again failed too: the body ended in the first error.
    Failed,
}

impl UpstreamBody {
    /// If this body fails part-way, `again` is asked for the rest (the response
    /// `headers` are the first one's, to check that the rest belongs to it).
    pub(crate) fn resume_with(&mut self, headers: &HeaderMap, again: Resume) {
        let etag = headers
            .get(header::ETAG)
            .filter(|v| !v.as_bytes().starts_with(b"W/"))
            .cloned();
        self.resume = Some(Box::new(Resuming {
            again: Some(again),
            delivered: 0,
            etag,
            last_modified: headers.get(header::LAST_MODIFIED).cloned(),
            length: crate::headers::content_length(headers),
            state: ResumeState::First,
        }));
    }

    /// The trailer fields the origin sent after the body, once the body has ended
    /// (the chunks never carry them). A resumed body's rest has its own.
    pub(crate) fn take_trailers(&mut self) -> Option<HeaderMap> {
        if let Some(ResumeState::Rest(rest, _)) = self.resume.as_deref_mut().map(|r| &mut r.state) {
            return rest.take_trailers();
        }
        self.trailers.take().map(|t| *t)
    }

    /// The body ended: an HTTP/2 stream's place is given back (an HTTP/1.1
    /// connection went back to its pool as its last bytes were read).
    fn release(&mut self) {
        self.hold = Hold::None;
    }

    pub(crate) fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, BoxError>>> {
        let Some(resuming) = self.resume.as_deref_mut() else {
            return self.poll_own(cx);
        };
        if !matches!(resuming.state, ResumeState::First) {
            return resuming.poll_rest(cx);
        }
        match self.poll_own(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(r) = self.resume.as_deref_mut() {
                    r.delivered += chunk.len() as u64;
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                let Some(r) = self.resume.as_deref_mut() else {
                    return Poll::Ready(Some(Err(e)));
                };
                let Some(again) = r.again.take() else {
                    return Poll::Ready(Some(Err(e)));
                };
                tracing::debug!(error = %e, at = r.delivered, "the body failed part-way; asking again for the rest");
                let if_range = r.etag.clone().or_else(|| r.last_modified.clone());
                let asked = again(ResumeFrom {
                    offset: r.delivered,
                    if_range,
                });
                r.state = ResumeState::Asking(asked, Some(e));
                r.poll_rest(cx)
            }
            other => other,
        }
    }

    fn poll_own(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            match self.inner.poll_frame(cx) {
                Poll::Pending => {
                    if !self.idle.expired(cx) {
                        return Poll::Pending;
                    }
                    // A connection in the middle of a body is not reused.
                    self.hold = Hold::None;
                    if let Inner::Http1(b) = &mut self.inner {
                        b.abandon();
                    }
                    return Poll::Ready(Some(Err(format!(
                        "the origin sent no body data for {:?} ([timeouts] origin_body_idle)",
                        self.idle.limit
                    )
                    .into())));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        self.idle.data();
                        // The consumer may stop polling once it has the declared length.
                        if self.inner.is_end_stream() {
                            self.release();
                        }
                        return Poll::Ready(Some(Ok(owned::chunk(data))));
                    }
                    Err(frame) => {
                        // Kept for whoever sends the body on; data never follows them.
                        if let Ok(trailers) = frame.into_trailers() {
                            self.trailers = Some(Box::new(trailers));
                        }
                        continue;
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    self.hold = Hold::None;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    self.release();
                    return Poll::Ready(None);
                }
            }
        }
    }

    /// The next chunk; `None` at the end.
    pub(crate) async fn next_chunk(&mut self) -> Option<Result<Bytes, BoxError>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        match self.resume.as_deref().map(|r| &r.state) {
            Some(ResumeState::Rest(rest, 0)) => rest.is_end_stream(),
            Some(ResumeState::Rest(..) | ResumeState::Asking(..)) => false,
            Some(ResumeState::Failed) => true,
            _ => self.inner.is_end_stream(),
        }
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        match self.resume.as_deref() {
            Some(r) if !matches!(r.state, ResumeState::First) => SizeHint::default(),
            _ => self.inner.size_hint(),
        }
    }
}

impl Resuming {
    /// The rest of the body, once the first failed.
    fn poll_rest(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            match &mut self.state {
                ResumeState::First => unreachable!("polled only once resumed"),
                ResumeState::Asking(asked, first_error) => {
                    let answer = ready!(asked.as_mut().poll(cx));
                    let first_error = first_error.take();
                    match answer {
                        Ok(response) => match self.continues(response.status(), response.headers())
                        {
                            Some(skip) => {
                                let rest = Box::new(response.into_body());
                                self.state = ResumeState::Rest(rest, skip);
                                continue;
                            }
                            None => tracing::debug!(
                                status = %response.status(),
                                "asked again, got another response: the body stays cut"
                            ),
                        },
                        Err(e) => tracing::debug!(error = ?e, "asking again for the rest failed"),
                    }
                    self.state = ResumeState::Failed;
                    return Poll::Ready(Some(Err(
                        first_error.unwrap_or_else(|| "the body failed part-way".into())
                    )));
                }
                ResumeState::Failed => return Poll::Ready(None),
                ResumeState::Rest(rest, skip) => {
                    let mut chunk = match ready!(rest.poll_data(cx)) {
                        Some(Ok(chunk)) => chunk,
                        other => return Poll::Ready(other),
                    };
                    if *skip > 0 {
                        let n = (*skip).min(chunk.len() as u64) as usize;
                        chunk.advance(n);
                        *skip -= n as u64;
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                    self.delivered += chunk.len() as u64;
                    return Poll::Ready(Some(Ok(chunk)));
                }
            }
        }
    }

    /// How many bytes of `response`'s body to skip for it to continue the first body,
    /// or `None` when it is not the same response: a 206 must start where the first
    /// body stopped; a 200 must carry the same validators and length.
    fn continues(&self, status: StatusCode, headers: &HeaderMap) -> Option<u64> {
        match status {
            StatusCode::PARTIAL_CONTENT => {
                let range = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
                let start: u64 = range
                    .strip_prefix("bytes ")?
                    .split('-')
                    .next()?
                    .trim()
                    .parse()
                    .ok()?;
                (start == self.delivered).then_some(0)
            }
            StatusCode::OK => {
                let same = |mine: &Option<HeaderValue>, name| match mine {
                    Some(v) => headers.get(name) == Some(v),
                    None => true,
                };
                let length = crate::headers::content_length(headers);
                let same_length = self.length.is_none() || length == self.length;
                (same(&self.etag, header::ETAG)
                    && same(&self.last_modified, header::LAST_MODIFIED)
                    && same_length)
                    .then_some(self.delivered)
            }
            _ => None,
        }
    }
}

impl BodySource for UpstreamBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        self.poll_data(cx)
    }

    fn has_trailers(&self) -> bool {
        match self.resume.as_deref().map(|r| &r.state) {
            Some(ResumeState::Rest(rest, _)) => rest.has_trailers(),
            _ => self.trailers.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resuming(etag: Option<&'static str>, length: Option<u64>, delivered: u64) -> Resuming {
        Resuming {
            again: None,
            delivered,
            etag: etag.map(HeaderValue::from_static),
            last_modified: None,
            length,
            state: ResumeState::First,
        }
    }

    fn headers(list: &[(&'static str, &'static str)]) -> HeaderMap {
        list.iter()
            .map(|(k, v)| {
                (
                    http::HeaderName::from_static(k),
                    HeaderValue::from_static(v),
                )
            })
            .collect()
    }

    #[test]
    fn a_range_continues_only_from_where_the_body_stopped() {
        let r = resuming(Some("\"v1\""), Some(1000), 400);
        let from_400 = headers(&[("content-range", "bytes 400-999/1000")]);
        assert_eq!(r.continues(StatusCode::PARTIAL_CONTENT, &from_400), Some(0));
        let from_0 = headers(&[("content-range", "bytes 0-999/1000")]);
        assert_eq!(r.continues(StatusCode::PARTIAL_CONTENT, &from_0), None);
        assert_eq!(
            r.continues(StatusCode::PARTIAL_CONTENT, &HeaderMap::new()),
            None
        );
    }

    #[test]
    fn a_whole_response_continues_when_it_is_the_same_one() {
        let r = resuming(Some("\"v1\""), Some(1000), 400);
        let same = headers(&[("etag", "\"v1\""), ("content-length", "1000")]);
        assert_eq!(
            r.continues(StatusCode::OK, &same),
            Some(400),
            "skips what was sent"
        );
        let changed = headers(&[("etag", "\"v2\""), ("content-length", "1000")]);
        assert_eq!(r.continues(StatusCode::OK, &changed), None);
        let longer = headers(&[("etag", "\"v1\""), ("content-length", "1001")]);
        assert_eq!(r.continues(StatusCode::OK, &longer), None);
        assert_eq!(r.continues(StatusCode::NOT_MODIFIED, &same), None);
        assert_eq!(r.continues(StatusCode::BAD_GATEWAY, &same), None);
    }
}
