//! `POST /admin/reload`: the request the admin listener hands the process's main loop,
//! and the endpoint that waits for its verdict. [`ReloadRequest`] is defined here, with
//! its sender, so that the admin listener needs nothing from the server that starts it.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;

use super::response::{reply, text};

/// A request to reload the configuration, from the admin listener. The process's
/// main loop answers it with what was reloaded or why the reload was refused.
#[derive(Debug)]
pub struct ReloadRequest {
    /// Where the verdict goes.
    pub answer: tokio::sync::oneshot::Sender<Result<String, String>>,
}

/// Where reload requests go (the process's main loop, which owns the configuration
/// file and the module factories).
pub(crate) type ReloadSender = tokio::sync::mpsc::Sender<ReloadRequest>;

/// Asks the main loop to reload and answers with its verdict: 200 with what was
/// reloaded, or 422 with the configuration error (the running configuration stays).
pub(super) async fn reload_now(
    req: &Request<Incoming>,
    reload: &ReloadSender,
) -> Response<Full<Bytes>> {
    if req.method() != Method::POST {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use POST to reload\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return response;
    }
    let (answer, verdict) = tokio::sync::oneshot::channel();
    // A binary that never takes the reload requests must not leave the caller hanging.
    let asked = tokio::time::timeout(RELOAD_WAIT, async {
        reload.send(ReloadRequest { answer }).await.ok()?;
        verdict.await.ok()
    })
    .await;
    let verdict: Result<Result<String, String>, ()> = asked.ok().flatten().ok_or(());
    match verdict {
        Ok(Ok(done)) => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            Bytes::from(done + "\n"),
        ),
        Ok(Err(error)) => reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            "text/plain; charset=utf-8",
            Bytes::from(format!(
                "reload refused, the running configuration stays: {error}\n"
            )),
        ),
        Err(()) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "reloading is not available\n",
        ),
    }
}

/// How long a reload may take before the caller is told it is not available.
const RELOAD_WAIT: Duration = Duration::from_secs(30);
