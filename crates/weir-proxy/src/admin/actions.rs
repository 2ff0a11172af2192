//! Actions on many objects: `POST /admin/purge` (by URL, prefix or tag) and
//! `POST /admin/preload` (fetch URLs into the cache).

use futures_util::StreamExt;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::json;
use weir_api::ContentManager;

use super::json::{self, content_error, error, not_allowed, reply};
use super::response::AdminBody;
use crate::content::EngineContent;

/// The body of `/admin/purge`: exactly one of the four (`group` with its `origin`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Purge {
    url: Option<String>,
    prefix: Option<String>,
    tag: Option<String>,
    group: Option<String>,
    origin: Option<String>,
}

/// `POST /admin/purge` with `{"url": …}`, `{"prefix": …}`, `{"tag": …}` or
/// `{"group": …, "origin": …}`: how many objects were removed (fetches under way for
/// them do not store theirs).
pub(super) async fn purge(content: &EngineContent, req: Request<Incoming>) -> Response<AdminBody> {
    if req.method() != Method::POST {
        return not_allowed("POST");
    }
    let purge: Purge = match json::body(req.into_body()).await {
        Ok(p) => p,
        Err(r) => return *r,
    };
    if let Some(group) = purge.group {
        return purge_group(
            content,
            purge.url.or(purge.prefix).or(purge.tag),
            group,
            purge.origin,
        );
    }
    let (by, result) = match (purge.url, purge.prefix, purge.tag, purge.origin) {
        (Some(url), None, None, None) => ("url", content.purge_url(&url)),
        (None, Some(prefix), None, None) => ("prefix", content.purge_prefix(&prefix)),
        (None, None, Some(tag), None) if !tag.trim().is_empty() => ("tag", content.ban_tag(&tag)),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "give exactly one of `url`, `prefix`, `tag` or `group` (not empty; \
                 `origin` goes with `group` only)",
            )
        }
    };
    match result {
        Ok(n) => reply(StatusCode::OK, json!({ "by": by, "purged": n })),
        Err(e) => content_error(&e),
    }
}

/// `{"group": …, "origin": …}`: a cache group (RFC 9875) of one origin, as a
/// `Cache-Group-Invalidation` from that origin would name it.
fn purge_group(
    content: &EngineContent,
    other: Option<String>,
    group: String,
    origin: Option<String>,
) -> Response<AdminBody> {
    let Some(origin) = origin.filter(|_| other.is_none()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "`group` goes with an `origin` (e.g. \"http://example.com:8080\") and nothing else",
        );
    };
    if group.is_empty() || !group.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return error(
            StatusCode::BAD_REQUEST,
            "`group` is a non-empty string of printable ASCII characters",
        );
    }
    match content.purge_groups(&origin, vec![group]) {
        Some(n) => reply(StatusCode::OK, json!({ "by": "group", "purged": n })),
        None => error(
            StatusCode::BAD_REQUEST,
            format!("`{origin}` is not an origin: http://host[:port], without a path"),
        ),
    }
}

/// The body of `/admin/preload`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Preload {
    urls: Vec<String>,
}

/// URLs one preload request may name.
const MAX_PRELOAD: usize = 1000;
/// Fetches a preload runs at once.
const PRELOAD_PARALLEL: usize = 4;

/// `POST /admin/preload` with `{"urls": […]}`: fetches each URL through the cache, as a
/// client's GET would, and says for each what was stored or why not.
pub(super) async fn preload(
    content: &EngineContent,
    req: Request<Incoming>,
) -> Response<AdminBody> {
    if req.method() != Method::POST {
        return not_allowed("POST");
    }
    let preload: Preload = match json::body(req.into_body()).await {
        Ok(p) => p,
        Err(r) => return *r,
    };
    if preload.urls.is_empty() || preload.urls.len() > MAX_PRELOAD {
        return error(
            StatusCode::BAD_REQUEST,
            format!("`urls` names 1 to {MAX_PRELOAD} URLs"),
        );
    }
    let results: Vec<serde_json::Value> = futures_util::stream::iter(preload.urls)
        .map(|url| async move {
            match content.fetch(&url).await {
                Ok(info) => json!({ "url": url, "stored": true, "object": json::info(&info) }),
                Err(e) => json!({ "url": url, "stored": false, "error": e.to_string() }),
            }
        })
        .buffered(PRELOAD_PARALLEL)
        .collect()
        .await;
    let stored = results.iter().filter(|r| r["stored"] == true).count();
    reply(
        StatusCode::OK,
        json!({ "stored": stored, "failed": results.len() - stored, "results": results }),
    )
}
