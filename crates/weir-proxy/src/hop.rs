//! The cluster's internal hop: a cache fill at a node that does not own the key is
//! sent to the owner's peer listener (a forward proxy request, marked with
//! `Weir-Hop`), so that concurrent misses at different nodes join one fetch there. A
//! request that arrives marked is never sent on to another node. When the owner does
//! not answer (dead, stopped, unreachable) within the lease, the fill goes to the
//! origin itself; when it fails in the middle of a body, the rest is asked of the origin
//! (a range from where it stopped): the client never fails for the owner's sake.

use http::header::{self, HeaderValue};
use http::{Request, Response};

use crate::body::request::RequestBody;
use crate::cluster::ClusterLink;
use crate::engine::Engine;
use crate::interim::Interim;
use crate::upstream::{OriginAddr, OriginRequest, Resume, ResumeFrom, UpstreamBody, UpstreamError};

/// Set on an owner's answer that this node does not keep (`[cluster] local_copies`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NotKept;

use crate::headers::{HOP, HOP_ORIGIN};

/// Sends a cache fill's request for `url` to its owner, or to `origin` when this node
/// owns it, the request came from a peer, or the owner failed.
// An `async` block, not an `async fn` (which keeps its arguments twice): see "The
// size of a transaction's futures" in docs/architecture.md.
#[allow(clippy::manual_async_fn)]
pub(crate) fn send<'a>(
    engine: &'a Engine,
    origin: &'a OriginAddr,
    url: &'a str,
    mut req: OriginRequest,
    interim: Option<&'a Interim>,
) -> impl std::future::Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + Send + 'a {
    async move {
        // A request written from the client's head carries no mark (it would have been
        // given a head of its own). Looked for in one pass first: a request is seldom
        // marked, and each removal of a name that is not a standard one hashes it byte
        // by byte (about 300 instructions a fill for the two).
        let mut from_peer = false;
        if let Some(headers) = req.own_headers() {
            if headers.keys().any(|n| *n == HOP || *n == HOP_ORIGIN) {
                from_peer = headers.remove(HOP).is_some();
                headers.remove(HOP_ORIGIN);
            }
        }
        let owner = match &engine.cluster {
            Some(cluster) if !from_peer => cluster
                .cluster
                .owner(url)
                .filter(|(name, _)| name != cluster.cluster.node())
                .map(|(name, m)| (name, m.peer_addr, cluster)),
            _ => None,
        };
        let Some((owner, peer, cluster)) = owner else {
            return engine.upstream.send(origin, req, interim).await;
        };
        let Some(peer_addr) = parse_peer(&peer) else {
            return engine.upstream.send(origin, req, interim).await;
        };
        // Boxed: only a cluster's fills go through the owner, and what that holds across
        // its awaits would otherwise be part of every fill's future. Made in its box
        // (`boxed.rs`).
        crate::boxed::in_place(|| {
            let owner = Owner {
                name: &owner,
                peer_addr,
                cluster,
            };
            via_owner(engine, origin, url, req, interim, owner)
        })
        .await
    }
}

/// The peer that owns a URL: its name, where it listens, and the link to the cluster.
struct Owner<'a> {
    name: &'a str,
    peer_addr: OriginAddr,
    cluster: &'a ClusterLink,
}

/// Sends `req` to its owner, or to the origin when the owner fails.
async fn via_owner(
    engine: &Engine,
    origin: &OriginAddr,
    url: &str,
    req: OriginRequest,
    interim: Option<&Interim>,
    owner: Owner<'_>,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    let mut req = req.into_request();
    let Owner {
        name: owner,
        peer_addr,
        cluster,
    } = owner;
    // The same request again, for the origin if the owner fails (fills carry no body).
    let mut direct = Request::new(RequestBody::Empty);
    *direct.method_mut() = req.method().clone();
    *direct.uri_mut() = req.uri().clone();
    *direct.headers_mut() = req.headers().clone();
    // The owner is asked for the URL the key is named by (so that its own clients'
    // requests find what it stores for its peers) and told where to fetch it from:
    // `OriginAddr` writes `https://` for a TLS origin, which the owner fetches over TLS
    // (the hop itself is plain HTTP, between peers on a private network).
    let fetch_from = match origin.tls {
        true => origin.to_string(),
        false => format!("http://{origin}"),
    };
    if let Ok(uri) = url.parse() {
        *req.uri_mut() = uri;
    }
    if let Ok(v) = HeaderValue::from_str(cluster.cluster.node()) {
        req.headers_mut().insert(HOP, v);
    }
    if let Ok(v) = HeaderValue::from_str(&fetch_from) {
        req.headers_mut().insert(HOP_ORIGIN, v);
    }
    match tokio::time::timeout(
        cluster.lease,
        engine.upstream.send(&peer_addr, req.into(), interim),
    )
    .await
    {
        Ok(Ok(mut response)) => {
            if !cluster.keeps_copy(url) {
                response.extensions_mut().insert(NotKept);
            }
            let (head, mut body) = response.into_parts();
            body.resume_with(&head.headers, rest_from_origin(engine, origin, direct));
            Ok(Response::from_parts(head, body))
        }
        Ok(Err(e)) => {
            tracing::debug!(%owner, error = ?e, "cluster: the owner failed; fetching from the origin");
            engine.upstream.send(origin, direct.into(), interim).await
        }
        Err(_) => {
            tracing::debug!(%owner, "cluster: the owner did not answer in time; fetching from the origin");
            engine.upstream.send(origin, direct.into(), interim).await
        }
    }
}

/// If the owner fails in the middle of a body, the rest comes from the origin: the
/// same request, for the bytes not yet received, so that the client never sees the
/// owner's failure (RFC 9110 §14.2, `If-Range` keeping it to the same response).
fn rest_from_origin(
    engine: &Engine,
    origin: &OriginAddr,
    mut again: Request<RequestBody>,
) -> Resume {
    let upstream = engine.upstream.clone();
    let origin = origin.clone();
    // A validation's conditions could be answered with a 304, which has no rest.
    again.headers_mut().remove(header::IF_NONE_MATCH);
    again.headers_mut().remove(header::IF_MODIFIED_SINCE);
    Box::new(move |from: ResumeFrom| {
        Box::pin(async move {
            if from.offset > 0 {
                let range = format!("bytes={}-", from.offset);
                if let Ok(v) = HeaderValue::from_str(&range) {
                    again.headers_mut().insert(header::RANGE, v);
                }
                if let Some(validator) = from.if_range {
                    again.headers_mut().insert(header::IF_RANGE, validator);
                }
            }
            // The response began long ago: no 1xx is relayed any more.
            upstream.send(&origin, again.into(), None).await
        })
    })
}

fn parse_peer(peer: &str) -> Option<OriginAddr> {
    let addr: std::net::SocketAddr = peer.parse().ok()?;
    Some(OriginAddr::http(addr.ip().to_string(), addr.port()))
}
