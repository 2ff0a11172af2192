//! The whole-response module the tests share, `Rewriter`, and a proxy with it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use weir_api::http::header::{self, HeaderValue};
use weir_api::http::StatusCode;
use weir_api::{Bytes, Decision, Event, Events, Flow, Module, ResponseHead, Txn, WholeBody};

/// What a whole-response module does with what it sees.
#[derive(Clone, Copy)]
pub enum OnResponse {
    /// Replaces a text body with its upper case, longer by `!!`, and changes the type.
    Shout,
    /// The same, after waiting 50 ms (a helper process or an ICAP service).
    ShoutLater,
    /// The same, after waiting this long.
    ShoutAfter(Duration),
    /// Answers 503 when the body is over the limit (fail closed), else goes on.
    RefuseTruncated,
    /// Answers with its own response.
    Answer,
}

/// A whole-response module that notes (body length, truncated) of each call.
pub struct Rewriter {
    pub on: OnResponse,
    pub seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

pub fn shout(head: &mut ResponseHead, body: &mut WholeBody) {
    let mut upper = body.data.to_ascii_uppercase();
    upper.extend_from_slice(b"!!");
    body.data = Bytes::from(upper);
    head.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/x-shout"),
    );
}

impl Module for Rewriter {
    fn name(&self) -> &str {
        "rewriter"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn on_whole_response<'a>(
        &'a self,
        _txn: &'a mut Txn,
        head: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.seen
            .lock()
            .unwrap()
            .push((body.data.len(), body.truncated));
        match self.on {
            OnResponse::Shout => {
                shout(head, body);
                Flow::Continue
            }
            OnResponse::ShoutLater => Flow::wait(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                shout(head, body);
                Decision::Continue
            }),
            OnResponse::ShoutAfter(wait) => Flow::wait(async move {
                tokio::time::sleep(wait).await;
                shout(head, body);
                Decision::Continue
            }),
            OnResponse::RefuseTruncated if body.truncated => Flow::Respond(weir_api::Reply::text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too large to check",
            )),
            OnResponse::RefuseTruncated => Flow::Continue,
            OnResponse::Answer => Flow::Respond(weir_api::Reply::text(
                StatusCode::FORBIDDEN,
                "rewriter says no",
            )),
        }
    }
}

pub async fn with_rewriter(
    origin: &TestOrigin,
    on: OnResponse,
    extra: &'static str,
) -> (Weir, Arc<Mutex<Vec<(usize, bool)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Rewriter {
        on,
        seen: seen.clone(),
    };
    let weir = Setup::new(origin)
        .extra(extra)
        .module("rewriter", module)
        .start()
        .await;
    (weir, seen)
}
