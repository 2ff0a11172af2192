//! The head of a transaction moved into a filter instance for a callback and back out
//! after it, as the filter left it: the request's during request callbacks, the
//! response's during response callbacks, and the paused one's while callouts are
//! answered. After the request headers callback, a filter that can read headers keeps
//! a copy of the request line and headers, as Envoy keeps the request's header map
//! for the stream's life: its response, body, callout and log callbacks read them.

use weir_api::http::{header, HeaderMap, StatusCode};
use weir_api::{RequestHead, ResponseHead};

use crate::host::Host;

/// What a filter's imports let it do with heads, found at load: the host does no
/// more per transaction than that needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadUse {
    /// It imports no header map function and not `proxy_get_property`: heads never
    /// enter the instance.
    None,
    /// It can change heads but not read them: heads move in and out of the instance;
    /// nothing is kept after the request phase.
    Write,
    /// It can read heads (`proxy_get_header_map_value`, `_pairs`, `_size` or
    /// `proxy_get_property`): the request line and headers are also copied when they
    /// leave the instance, for the callbacks after the request phase.
    Read,
}

impl HeadUse {
    /// What `module` imports.
    pub(crate) fn of(module: &wasmtime::Module) -> HeadUse {
        let mut heads = HeadUse::None;
        for import in module.imports() {
            match import.name() {
                "proxy_get_header_map_value"
                | "proxy_get_header_map_pairs"
                | "proxy_get_header_map_size"
                | "proxy_get_property" => return HeadUse::Read,
                "proxy_add_header_map_value"
                | "proxy_replace_header_map_value"
                | "proxy_remove_header_map_value"
                | "proxy_set_header_map_pairs" => heads = HeadUse::Write,
                _ => {}
            }
        }
        heads
    }
}

/// The head a paused callback had, which the callbacks answering its callouts see and
/// may change.
pub(crate) enum Head<'a> {
    Request(&'a mut RequestHead),
    Response(&'a mut ResponseHead),
    /// A body callback's: its chunk is already handed back.
    None,
}

impl Head<'_> {
    /// Moves the head into the instance for a call. Swapped with the instance's empty
    /// line and maps rather than taken: nothing is made or dropped (taking and
    /// putting back cost a filter that adds a header about 300 instructions a hit).
    #[inline]
    pub(crate) fn enter(&mut self, host: &mut Host, heads: HeadUse) {
        if heads == HeadUse::None {
            return;
        }
        match self {
            Head::Request(request) => {
                std::mem::swap(&mut host.method, &mut request.method);
                std::mem::swap(&mut host.uri, &mut request.uri);
                std::mem::swap(&mut host.request_headers, &mut request.headers);
                host.request_in = true;
            }
            Head::Response(response) => {
                host.status = Some(response.status);
                std::mem::swap(&mut host.response_headers, &mut response.headers);
                host.response_in = true;
            }
            Head::None => {}
        }
    }

    /// Moves it back out after the call, as the filter left it. A filter that reads
    /// heads keeps a copy of the request's; later writes to it answer `Ok` and change
    /// only that copy (the request has gone on), as in Envoy. A filter that cannot
    /// read keeps an empty map for such writes, which it could not tell from a copy.
    #[inline]
    pub(crate) fn leave(&mut self, host: &mut Host, heads: HeadUse) {
        match self {
            _ if heads == HeadUse::None => {}
            Head::Request(request) if heads == HeadUse::Read => {
                request.method = host.method.clone();
                request.uri = host.uri.clone();
                request.headers = host.request_headers.clone();
            }
            // The instance gets its empty line and map back, which its writes after
            // the request phase go to.
            Head::Request(request) => {
                std::mem::swap(&mut host.method, &mut request.method);
                std::mem::swap(&mut host.uri, &mut request.uri);
                std::mem::swap(&mut host.request_headers, &mut request.headers);
            }
            Head::Response(response) => {
                std::mem::swap(&mut host.response_headers, &mut response.headers);
                host.response_in = false;
                response.status = host.status.unwrap_or(response.status);
            }
            Head::None => {}
        }
    }
}

/// Whether the request ends with its head: no `Transfer-Encoding`, and no
/// `Content-Length` or one of 0 (the request headers callback's `end_of_stream`).
pub(crate) fn request_ends(request: &RequestHead) -> bool {
    let h: &HeaderMap = &request.headers;
    if h.len() <= SHORT_HEAD {
        // A short head's names are compared in turn (a standard name compares as a
        // number), which costs less than hashing the two names to look them up.
        let mut length_seen = false;
        for (name, value) in h {
            if name == header::TRANSFER_ENCODING {
                return false;
            }
            // Only the first `Content-Length` counts, as `get` below reads it.
            if name == header::CONTENT_LENGTH
                && !std::mem::replace(&mut length_seen, true)
                && value != "0"
            {
                return false;
            }
        }
        return true;
    }
    // Named by constant: a name given as text is parsed and matched first.
    !h.contains_key(header::TRANSFER_ENCODING)
        && h.get(header::CONTENT_LENGTH).is_none_or(|v| v == "0")
}

/// Whether the response ends with its head (the response headers callback's
/// `end_of_stream`): 204, 304, or a `Content-Length` of 0.
pub(crate) fn response_ends(response: &ResponseHead) -> bool {
    if response.status == StatusCode::NO_CONTENT || response.status == StatusCode::NOT_MODIFIED {
        return true;
    }
    let h: &HeaderMap = &response.headers;
    if h.len() <= SHORT_HEAD {
        // As in `request_ends`: the first `Content-Length` is the one `get` reads.
        return h
            .iter()
            .find(|(name, _)| *name == header::CONTENT_LENGTH)
            .is_some_and(|(_, v)| v == "0");
    }
    h.get(header::CONTENT_LENGTH).is_some_and(|v| v == "0")
}

/// Up to this many header fields, [`request_ends`] and [`response_ends`] look at
/// each in turn.
const SHORT_HEAD: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::http::{HeaderValue, Request, Response};

    fn request(fields: &[(&'static str, &'static str)], padding: usize) -> RequestHead {
        let mut head = Request::new(()).into_parts().0;
        for i in 0..padding {
            let name = header::HeaderName::from_bytes(format!("x-pad-{i}").as_bytes()).unwrap();
            head.headers.insert(name, HeaderValue::from_static("1"));
        }
        for (name, value) in fields {
            head.headers.append(*name, HeaderValue::from_static(value));
        }
        head
    }

    #[test]
    fn a_request_ends_with_its_head_short_or_long() {
        // The same answers whether the names are compared in turn or looked up.
        for padding in [0, SHORT_HEAD + 1] {
            assert!(request_ends(&request(&[], padding)));
            assert!(request_ends(&request(&[("content-length", "0")], padding)));
            assert!(!request_ends(&request(&[("content-length", "5")], padding)));
            assert!(!request_ends(&request(
                &[("transfer-encoding", "chunked")],
                padding
            )));
            let both = [("content-length", "0"), ("transfer-encoding", "chunked")];
            assert!(!request_ends(&request(&both, padding)));
            // The first Content-Length is the one read.
            let two = [("content-length", "0"), ("content-length", "5")];
            assert!(request_ends(&request(&two, padding)));
            let two = [("content-length", "5"), ("content-length", "0")];
            assert!(!request_ends(&request(&two, padding)));
        }
    }

    #[test]
    fn a_response_ends_with_its_head_short_or_long() {
        for padding in [0, SHORT_HEAD + 1] {
            let response = |status: u16, fields: &[(&'static str, &'static str)]| {
                let mut head = Response::new(()).into_parts().0;
                head.status = StatusCode::from_u16(status).unwrap();
                head.headers = request(fields, padding).headers;
                head
            };
            assert!(!response_ends(&response(200, &[])));
            assert!(response_ends(&response(200, &[("content-length", "0")])));
            assert!(!response_ends(&response(200, &[("content-length", "9")])));
            assert!(response_ends(&response(204, &[])));
            assert!(response_ends(&response(304, &[("content-length", "9")])));
            let two = [("content-length", "0"), ("content-length", "5")];
            assert!(response_ends(&response(200, &two)));
            let two = [("content-length", "5"), ("content-length", "0")];
            assert!(!response_ends(&response(200, &two)));
        }
    }
}
