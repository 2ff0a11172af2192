//! A request on its way to an origin: a head of its own, or a cache fill's head, which
//! the HTTP/1.1 writer reads from the client's as it writes it.
//!
//! A fill's request is the client's with a proxy's changes (RFC 9110 §7.6): its own
//! `Host`, no hop-by-hop fields, no `Expect`, none of the client's conditions (the
//! cache sends its own), `Via` added. Made as a header map, that was a copy of the
//! client's map (and a reference count taken on every value), `Host` hashed and
//! replaced, and the copy's field list grown again for `Via`: about 1,600
//! instructions of a miss's 45,000, for a map written out once and dropped. The fill
//! keeps the client's head anyway (for the storage policy and the variant key), so the
//! writer reads the fields from there and leaves out those the changes remove. A map
//! is made only when something needs one: a module that asks for `UpstreamRequest`,
//! an HTTP/2 origin, a validation's conditions, the cluster's hop.

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{request, Method, Request, Version};

use super::h1_wire::{self, BodyKnown, Outgoing};
use crate::body::request::RequestBody;
use crate::headers;
use crate::via;
use crate::wire::field;

/// A request for an origin.
pub(crate) struct OriginRequest {
    head: Head,
    body: RequestBody,
}

enum Head {
    /// A head of its own (a map, as modules see it). Boxed: a request is moved a dozen
    /// times on its way to the origin, and with the map inline each move of a fill's
    /// (the small variant) copied some 250 bytes.
    Own(Box<request::Parts>),
    /// A fill's head, written from the client's (see the module's comment).
    Fill(FillHead),
}

/// What a fill's request is made of: the client's head, and what the proxy changes.
struct FillHead {
    client: Arc<request::Parts>,
    host: HeaderValue,
    path: PathAndQuery,
}

/// The client's fields the origin is not sent: `Expect` (hyper answered it; the origin
/// gets no body) and the conditions (the cache's to send). Hop-by-hop fields too.
const STRIPPED: [HeaderName; 3] = [
    header::EXPECT,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
];

impl OriginRequest {
    /// A cache fill's request for the client's head `client`: the origin-form `path`,
    /// `host` as its `Host`, without the client's conditions.
    pub(crate) fn fill(
        client: &Arc<request::Parts>,
        host: HeaderValue,
        path: PathAndQuery,
    ) -> OriginRequest {
        let fill = FillHead {
            client: client.clone(),
            host,
            path,
        };
        let head = match written_as_is(&client.headers) {
            true => Head::Fill(fill),
            false => Head::Own(Box::new(fill.made())),
        };
        OriginRequest {
            head,
            body: RequestBody::Empty,
        }
    }

    /// The head as a map (made now for a fill's), for changes.
    pub(crate) fn head_mut(&mut self) -> &mut request::Parts {
        if let Head::Fill(fill) = &self.head {
            self.head = Head::Own(Box::new(fill.made()));
        }
        let Head::Own(parts) = &mut self.head else {
            unreachable!("made above")
        };
        parts
    }

    /// The head's map when it has one (a fill's is made only when it is changed).
    pub(crate) fn own_headers(&mut self) -> Option<&mut HeaderMap> {
        match &mut self.head {
            Head::Own(parts) => Some(&mut parts.headers),
            Head::Fill(_) => None,
        }
    }

    /// The request as an `http::Request`, its head made if it was a fill's.
    pub(crate) fn into_request(self) -> Request<RequestBody> {
        let parts = match self.head {
            Head::Own(parts) => *parts,
            Head::Fill(fill) => fill.made(),
        };
        Request::from_parts(parts, self.body)
    }

    /// The head (with its method) and the body, for the HTTP/1.1 writer.
    pub(super) fn into_parts(self) -> (Written, RequestBody) {
        (Written(self.head), self.body)
    }
}

impl From<Request<RequestBody>> for OriginRequest {
    fn from(request: Request<RequestBody>) -> OriginRequest {
        let (head, body) = request.into_parts();
        OriginRequest {
            head: Head::Own(Box::new(head)),
            body,
        }
    }
}

/// A request's head, kept by the HTTP/1.1 sender for writing it out (again, when a
/// reused connection lost it).
pub(super) struct Written(Head);

impl Written {
    pub(super) fn method(&self) -> &Method {
        match &self.0 {
            Head::Own(parts) => &parts.method,
            Head::Fill(fill) => &fill.client.method,
        }
    }

    /// Writes the request line and fields to `out`, with the framing fields the body
    /// needs; says how the body must follow (a fill's has none).
    pub(super) fn write(&self, body: BodyKnown, out: &mut Vec<u8>) -> Outgoing {
        let fill = match &self.0 {
            Head::Own(p) => {
                return h1_wire::encode_request(&p.method, &p.uri, &p.headers, body, out)
            }
            Head::Fill(fill) => fill,
        };
        let client = &*fill.client;
        out.extend_from_slice(client.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(fill.path.as_str().as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        field(out, b"host", fill.host.as_bytes());
        for (name, value) in &client.headers {
            if !left_out(name) {
                field(out, name.as_str().as_bytes(), value.as_bytes());
            }
        }
        if client.version == Version::HTTP_2 {
            // An HTTP/2 client takes trailers without asking (RFC 9113 §8.1).
            field(out, b"te", b"trailers");
        }
        field(out, b"via", via::outbound(client.version).as_bytes());
        out.extend_from_slice(b"\r\n");
        Outgoing::None
    }
}

impl FillHead {
    /// The fill's head as a map: the same fields the writer sends.
    fn made(&self) -> request::Parts {
        let made = for_origin(
            &self.client,
            &self.host,
            &self.path,
            RequestBody::Empty,
            true,
        );
        made.into_parts().0
    }
}

/// The request to send to the origin for the client's head `parts`: origin-form
/// `path`, hop-by-hop fields removed, `Via` added, `host` as its `Host`.
/// `strip_conditionals` removes the client's validators when Weir will answer them
/// itself from a full response.
pub(crate) fn for_origin(
    parts: &request::Parts,
    host: &HeaderValue,
    path: &PathAndQuery,
    body: RequestBody,
    strip_conditionals: bool,
) -> Request<RequestBody> {
    let mut headers = parts.headers.clone();
    headers::remove_hop_by_hop(&mut headers);
    // Weir reads the client's body only when it forwards it, which is what makes hyper
    // send `100 Continue`; the origin need not see the expectation. The conditions are
    // the cache's to send. All are rare: one pass over the names (standard names
    // compare as integers) spares a hashed lookup for each when none is there.
    let strip = match strip_conditionals {
        true => &STRIPPED[..],
        false => &STRIPPED[..1],
    };
    if headers.keys().any(|name| strip.contains(name)) {
        for name in strip {
            headers.remove(name);
        }
    }
    headers.insert(header::HOST, host.clone());
    if parts.version == Version::HTTP_2 {
        // An HTTP/2 client takes trailers without asking (RFC 9113 §8.1).
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    headers.append(header::VIA, via::outbound(parts.version));
    let mut req = Request::new(body);
    *req.method_mut() = parts.method.clone();
    // Shared with the client's URI (a reference count), not parsed again.
    *req.uri_mut() = http::Uri::from(path.clone());
    *req.headers_mut() = headers;
    req
}

/// Whether a fill's request can be written from the client's fields by leaving some
/// out: no `TE` (rewritten when kept), no `Connection` that names a field other than
/// itself (`keep-alive`, `close`), no mark of the cluster's hop (removed by the hop).
fn written_as_is(headers: &HeaderMap) -> bool {
    let mut connection = false;
    for name in headers.keys() {
        if *name == header::TE || *name == headers::HOP || *name == headers::HOP_ORIGIN {
            return false;
        }
        connection |= *name == header::CONNECTION;
    }
    !connection || headers::connection_names_no_field(headers)
}

/// Whether the writer leaves the client's field `name` out of a fill's request.
fn left_out(name: &HeaderName) -> bool {
    *name == header::HOST || STRIPPED.contains(name) || headers::is_hop_by_hop(name)
}

#[cfg(test)]
#[path = "origin_request_tests.rs"]
mod tests;
