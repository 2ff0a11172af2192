//! The `control` test module: content-management calls made on request, and its answers.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{start, Factory, Weir};
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::{HeaderMap, HeaderValue, StatusCode};
use weir_api::{
    BytesBody, ContentError, Decision, Event, Events, Flow, Module, ModuleContext, ObjectInfo,
    RequestHead, Txn,
};

/// Answers `http://control/<op>?<url>` with the result of the content-management
/// call `op` on `url`; arguments come in request headers (`x-ttl` in seconds for
/// `expire`; `x-status`, `x-cache-control` and `x-body` for `inject`). Counts each call
/// in `weir_module_control_calls_total`. Other requests pass.
pub struct Control {
    context: ModuleContext,
    calls: weir_api::Counter,
}

pub fn control(context: &ModuleContext) -> Arc<dyn Module> {
    Arc::new(Control {
        context: context.clone(),
        calls: context.counter("control_calls", "content-management calls made on request"),
    })
}

/// `status=200 size=5 ttl=59 variants=1` (ttl in whole seconds, rounded down).
pub fn describe(info: &ObjectInfo) -> String {
    format!(
        "status={} size={} ttl={} variants={}",
        info.status.as_u16(),
        info.size,
        info.time_to_live.as_secs(),
        info.variants
    )
}

pub fn answer<T>(result: Result<T, ContentError>, ok: impl FnOnce(T) -> String) -> String {
    match result {
        Ok(v) => ok(v),
        Err(e) => format!("error={e:?}"),
    }
}

impl Module for Control {
    fn name(&self) -> &str {
        "control"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if r.uri.host() != Some("control") {
            return Flow::Continue;
        }
        self.calls.inc();
        let op = r.uri.path().trim_start_matches('/').to_string();
        let url = r.uri.query().unwrap_or("").to_string();
        let arg = |name: &str| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let (ttl, status, cc, body) = (
            arg("x-ttl"),
            arg("x-status"),
            arg("x-cache-control"),
            arg("x-body"),
        );
        let content = self.context.content().clone();
        let context = self.context.clone();
        Flow::wait(async move {
            let text = match op.as_str() {
                "query" => answer(content.query(&url), |i| describe(&i)),
                "fetch" => answer(content.fetch(&url).await, |i| describe(&i)),
                "validate" => answer(content.validate(&url).await, |i| describe(&i)),
                "expire" => {
                    let ttl = Duration::from_secs(ttl.parse().expect("x-ttl"));
                    answer(content.set_expiry(&url, ttl), |()| "ok".into())
                }
                "delete" => answer(content.delete(&url), |()| "ok".into()),
                "inject" => {
                    let mut headers = HeaderMap::new();
                    headers.insert(
                        "cache-control",
                        HeaderValue::from_str(&cc).expect("x-cache-control"),
                    );
                    let status = StatusCode::from_u16(status.parse().expect("x-status")).unwrap();
                    let stored = content
                        .inject(&url, status, headers, BytesBody::boxed(body))
                        .await;
                    answer(stored, |i| describe(&i))
                }
                "read" => match content.read(&url) {
                    // The stored body itself, with what is known of it in a header.
                    Ok(mut stored) => {
                        let mut all = Vec::new();
                        while let Some(chunk) = stored.body.next_chunk().await {
                            all.extend_from_slice(&chunk);
                        }
                        let mut reply = weir_api::Reply::text(StatusCode::OK, "");
                        reply.body = all.into();
                        reply.headers.insert(
                            "x-info",
                            HeaderValue::from_str(&describe(&stored.info)).unwrap(),
                        );
                        return Decision::Respond(reply);
                    }
                    Err(e) => format!("error={e:?}"),
                },
                // Starts a fetch in the background and answers at once.
                "spawn-fetch" => {
                    let content = content.clone();
                    let spawned = context.spawn(async move {
                        let _ = content.fetch(&url).await;
                    });
                    format!("spawned={spawned}")
                }
                other => format!("no such op {other}"),
            };
            Decision::Respond(weir_api::Reply::text(StatusCode::OK, text))
        })
    }
}

/// The number after `name=` in a `control` answer.
pub fn field(answer: &str, name: &str) -> u64 {
    answer
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number `{name}` in {answer:?}"))
}

pub async fn with_control() -> Weir {
    start(
        vec![Factory {
            name: "control",
            build: control,
        }],
        None,
    )
    .await
}

/// An origin whose `path` answers 200 `body` with ETag "v1" and `max-age`, and
/// 304 to a request that has it (counting nothing else: the origin counts requests).
pub fn validating_route(origin: &TestOrigin, path: &str, body: &'static str, max_age: u32) {
    origin.route_fn(path, move |req| {
        let cc = format!("max-age={max_age}");
        if req.header("if-none-match").as_deref() == Some("\"v1\"") {
            Reply::status(304).cc(&cc).header("etag", "\"v1\"")
        } else {
            Reply::ok(body).cc(&cc).header("etag", "\"v1\"")
        }
    });
}
