//! The head of a transaction moved into a filter instance for a callback and back out
//! after it, as the filter left it: the request's during request callbacks, the
//! response's during response callbacks, and the paused one's while callouts are
//! answered.

use weir_api::{RequestHead, ResponseHead};

use crate::host::Host;

/// The head a paused callback had, which the callbacks answering its callouts see and
/// may change.
pub(crate) enum Head<'a> {
    Request(&'a mut RequestHead),
    Response(&'a mut ResponseHead),
    /// A body callback's: its chunk is already handed back.
    None,
}

impl Head<'_> {
    /// Moves the head into the instance for a call.
    #[inline]
    pub(crate) fn enter(&mut self, host: &mut Host) {
        match self {
            Head::Request(request) => {
                host.method = std::mem::take(&mut request.method);
                host.uri = std::mem::take(&mut request.uri);
                host.request_headers = Some(std::mem::take(&mut request.headers));
            }
            Head::Response(response) => {
                host.status = Some(response.status);
                host.response_headers = Some(std::mem::take(&mut response.headers));
            }
            Head::None => {}
        }
    }

    /// Moves it back out after the call, as the filter left it.
    #[inline]
    pub(crate) fn leave(&mut self, host: &mut Host) {
        match self {
            Head::Request(request) => {
                request.method = host.method.clone();
                request.uri = host.uri.clone();
                request.headers = host.request_headers.take().unwrap_or_default();
            }
            Head::Response(response) => {
                response.headers = host.response_headers.take().unwrap_or_default();
                response.status = host.status.unwrap_or(response.status);
            }
            Head::None => {}
        }
    }
}
