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

/// The body of `/admin/purge`: exactly one of the three.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Purge {
    url: Option<String>,
    prefix: Option<String>,
    tag: Option<String>,
}

/// `POST /admin/purge` with `{"url": …}`, `{"prefix": …}` or `{"tag": …}`: how many
/// objects were removed (fetches under way for them do not store theirs).
pub(super) async fn purge(content: &EngineContent, req: Request<Incoming>) -> Response<AdminBody> {
    if req.method() != Method::POST {
        return not_allowed("POST");
    }
    let purge: Purge = match json::body(req.into_body()).await {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let (by, result) = match (purge.url, purge.prefix, purge.tag) {
        (Some(url), None, None) => ("url", content.purge_url(&url)),
        (None, Some(prefix), None) => ("prefix", content.purge_prefix(&prefix)),
        (None, None, Some(tag)) if !tag.trim().is_empty() => ("tag", content.ban_tag(&tag)),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "give exactly one of `url`, `prefix` or `tag` (not empty)",
            )
        }
    };
    match result {
        Ok(n) => reply(StatusCode::OK, json!({ "by": by, "purged": n })),
        Err(e) => content_error(&e),
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
