//! The admin listener: the live status page at `/` (its figures at `/admin/status`),
//! `/metrics` for Prometheus, `/healthz` for liveness probes, `POST /admin/reload` to
//! reload the configuration (as SIGHUP does), and the content API under `/admin/`
//! (query, read, inject, delete, purge, preload, validate, expire; see
//! docs/operations.md). The page and every `/admin/` path need the token when
//! `[admin] token` is set; `/metrics` and `/healthz` stay open.

mod actions;
mod auth;
mod cache;
mod json;
mod reload;
mod response;
mod status;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::content::EngineContent;
use crate::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};

pub use reload::ReloadRequest;
use reload::ReloadSender;
use response::{reply, text, AdminBody};
pub(crate) use status::StatusFacts;

/// What the admin listener serves.
pub(crate) struct Admin {
    pub metrics: Arc<Metrics>,
    pub reload: ReloadSender,
    /// The cache, managed as modules manage it.
    pub content: Arc<EngineContent>,
    /// This node's cluster, with `[cluster]`.
    pub cluster: Option<Arc<weir_cluster::Cluster>>,
    /// `[admin] token`.
    pub token: Option<String>,
    /// What the status page measures against.
    pub status: StatusFacts,
}

/// A scraper that has not sent its request head by then is not coming back.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed accept: errors such as EMFILE persist, and retrying at once
/// would spin a core.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Serves the admin listener until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, admin: Arc<Admin>) {
    // Connections live in the set so that aborting this task ends them too.
    let mut connections = JoinSet::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "admin listener: accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
            Some(_) = connections.join_next() => continue,
        };
        let admin = admin.clone();
        connections.spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let admin = admin.clone();
                async move { Ok::<_, Infallible>(route(&admin, req).await) }
            });
            let result = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}

async fn route(admin: &Admin, req: Request<Incoming>) -> Response<AdminBody> {
    let path = req.uri().path();
    if path == "/" && matches!(*req.method(), Method::GET | Method::HEAD) {
        if !auth::allowed(admin.token.as_deref(), req.headers()) {
            // A browser asks its user for the token (as the password) and sends it on
            // with the page's own requests.
            let mut r = text(StatusCode::UNAUTHORIZED, "this needs the admin token\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"weir admin\", charset=\"UTF-8\""),
            );
            return r.map(|b| b.boxed_unsync());
        }
        return status::page();
    }
    if path != "/admin" && !path.starts_with("/admin/") {
        return respond(&req, &admin.metrics).map(|b| b.boxed_unsync());
    }
    if !auth::allowed(admin.token.as_deref(), req.headers()) {
        let mut r = json::error(
            StatusCode::UNAUTHORIZED,
            "this needs the admin token: Authorization: Bearer <token>",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"weir\""),
        );
        return r;
    }
    let content = &admin.content;
    match path {
        "/admin/status" if *req.method() == Method::GET => {
            status::snapshot(&admin.metrics, &admin.status, admin.cluster.as_deref())
        }
        "/admin/status" => json::not_allowed("GET"),
        "/admin/reload" => reload::reload_now(&req, &admin.reload)
            .await
            .map(|b| b.boxed_unsync()),
        "/admin/cache" => cache::object(content, req).await,
        "/admin/cache/body" => cache::body(content, req).await,
        "/admin/cache/validate" => cache::validate(content, req).await,
        "/admin/cache/expiry" => cache::expiry(content, req).await,
        "/admin/purge" => {
            let answer = actions::purge(content, req).await;
            acknowledged(admin, answer).await
        }
        "/admin/cluster" if *req.method() == Method::GET => match &admin.cluster {
            Some(cluster) => json::reply(StatusCode::OK, cluster.status()),
            None => json::error(StatusCode::NOT_FOUND, "this node has no [cluster]"),
        },
        "/admin/cluster" => json::not_allowed("GET"),
        "/admin/preload" => actions::preload(content, req).await,
        _ if path.starts_with("/admin/modules/") => module_report(admin, &req, path),
        _ => json::error(
            StatusCode::NOT_FOUND,
            "no such admin endpoint; see docs/operations.md",
        ),
    }
}

/// A purge done here, answered once the cluster has applied it (504 when it has not
/// within `[cluster] purge_ack_wait`).
async fn acknowledged(admin: &Admin, answer: Response<AdminBody>) -> Response<AdminBody> {
    let Some(cluster) = &admin.cluster else {
        return answer;
    };
    if answer.status() != StatusCode::OK {
        return answer;
    }
    match cluster.barrier().await {
        Ok(a) => {
            let mut answer = answer;
            if let Ok(v) = header::HeaderValue::from_str(&format!(
                "revision={}; members={}; ms={:.1}",
                a.revision,
                a.members,
                a.latency.as_secs_f64() * 1000.0
            )) {
                answer.headers_mut().insert("weir-cluster-ack", v);
            }
            answer
        }
        Err(e) => json::error(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "purged here, but the cluster did not acknowledge it: {}",
                e.reason
            ),
        ),
    }
}

/// `GET /admin/modules/<name>`: what an administration module published.
fn module_report(admin: &Admin, req: &Request<Incoming>, path: &str) -> Response<AdminBody> {
    if req.method() != Method::GET {
        return json::not_allowed("GET");
    }
    let name = &path["/admin/modules/".len()..];
    match admin.metrics.module_report(name) {
        Some(body) => {
            reply(StatusCode::OK, "application/json", Bytes::from(body)).map(|b| b.boxed_unsync())
        }
        None => json::error(
            StatusCode::NOT_FOUND,
            "no module publishes a report under that name",
        ),
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    // HEAD is accepted as well so that `curl -I` works; hyper leaves the body out.
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            OPENMETRICS_CONTENT_TYPE,
            Bytes::from(metrics.encode()),
        ),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /metrics or /healthz\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn routes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new());
        metrics.error(crate::metrics::ErrorKind::BadRequest);
        let (reload, mut requests) = tokio::sync::mpsc::channel(1);
        let cache = weir_cache::Cache::new(weir_cache::CacheSettings::default());
        let admin = Admin {
            metrics,
            reload,
            content: EngineContent::new(Arc::new(cache)),
            cluster: None,
            token: None,
            status: StatusFacts {
                started: std::time::Instant::now(),
                memory: 1 << 20,
                disk: 0,
            },
        };
        let task = tokio::spawn(serve(listener, Arc::new(admin)));
        // Stands in for the main loop: refuses the first reload, accepts the second.
        tokio::spawn(async move {
            let mut n = 0;
            while let Some(ReloadRequest { answer }) = requests.recv().await {
                n += 1;
                let _ = answer.send(if n == 1 {
                    Err("bad file".into())
                } else {
                    Ok("reloaded".into())
                });
            }
        });
        let post_reload = "POST /admin/reload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        let r = get(addr, post_reload).await;
        assert!(
            r.starts_with("HTTP/1.1 422 ") && r.contains("bad file"),
            "{r}"
        );
        let r = get(addr, post_reload).await;
        assert!(
            r.starts_with("HTTP/1.1 200 ") && r.ends_with("reloaded\n"),
            "{r}"
        );
        let r = get(
            addr,
            "GET /admin/reload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 405 "), "{r}");

        let r = get(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("application/openmetrics-text"), "{r}");
        assert!(
            r.contains("weir_errors_total{kind=\"bad_request\"} 1"),
            "{r}"
        );

        let r = get(
            addr,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\nok\n"),
            "{r}"
        );

        let r = get(
            addr,
            "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 404 "), "{r}");

        let r = get(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        assert!(
            r.starts_with("HTTP/1.1 405 ") && r.contains("allow: GET, HEAD"),
            "{r}"
        );

        task.abort();
    }
}
