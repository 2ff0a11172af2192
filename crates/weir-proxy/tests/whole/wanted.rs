//! Only the responses a module wants are held whole; skip in a fill; a panic when asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::client::is_hit;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;
use crate::support::reply::Reply;
use weir_api::http::header;
use weir_api::http::StatusCode;
use weir_api::{Event, Events, Flow, Module, ResponseHead, Txn, WholeBody};

/// Wants only responses of this type whole; leaves the rest alone.
struct Picky {
    content_type: &'static str,
    /// Keeps what it sees out of the cache (as a transcoder does when its helpers are
    /// busy).
    skip: bool,
    seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

impl Module for Picky {
    fn name(&self) -> &str {
        "picky"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn wants_whole_response(&self, _txn: &mut Txn, response: &ResponseHead) -> bool {
        response
            .headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|t| t == self.content_type)
    }

    fn on_whole_response<'a>(
        &'a self,
        txn: &'a mut Txn,
        _head: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        self.seen
            .lock()
            .unwrap()
            .push((body.data.len(), body.truncated));
        txn.cache().skip = self.skip;
        Flow::Continue
    }
}

/// GETs `path` and returns (time to the head, time to the end of the body).
async fn timed_get(weir: &Weir, path: &str) -> (Duration, Duration) {
    let start = std::time::Instant::now();
    let response = weir.client.get(weir.url_on(0, path)).send().await.unwrap();
    let head = start.elapsed();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.bytes().await.unwrap();
    assert_eq!(body.len(), 4 * 64 * 1024);
    (head, start.elapsed())
}

#[tokio::test]
async fn only_the_responses_a_module_wants_are_held_back_whole() {
    let origin = TestOrigin::start();
    // Four chunks, 250 ms apart: a held head comes after the last.
    for (path, kind) in [("/slow.txt", "text/plain"), ("/slow.img", "image/x-test")] {
        origin.route(
            path,
            Reply::stream(4 * 64 * 1024)
                .chunk_delay(Duration::from_millis(250))
                .header("content-type", kind),
        );
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Picky {
        content_type: "image/x-test",
        skip: false,
        seen: seen.clone(),
    };
    let weir = Setup::new(&origin).module("picky", module).start().await;
    let (head, end) = timed_get(&weir, "/slow.txt").await;
    assert!(
        head + Duration::from_millis(400) < end,
        "text streams: head after {head:?}, body ends after {end:?}"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "not called for what it declined"
    );
    let (head, end) = timed_get(&weir, "/slow.img").await;
    assert!(
        head >= Duration::from_millis(750),
        "the image's head waits for its body: {head:?} (end {end:?})"
    );
    assert_eq!(*seen.lock().unwrap(), [(4 * 64 * 1024, false)]);
    weir.stop().await;
}

#[tokio::test]
async fn skip_set_in_a_fill_keeps_the_response_out_of_the_cache() {
    let origin = TestOrigin::start();
    origin.route(
        "/busy.img",
        Reply::ok("image bytes")
            .cc("max-age=60")
            .header("content-type", "image/x-test"),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let module = Picky {
        content_type: "image/x-test",
        skip: true,
        seen: seen.clone(),
    };
    let weir = Setup::new(&origin).module("picky", module).start().await;
    for _ in 0..2 {
        let got = weir.get("/busy.img").await;
        assert_eq!(got.text(), "image bytes");
        assert!(!is_hit(&got.cache_status()), "{}", got.cache_status());
        assert!(
            !got.cache_status().contains("stored"),
            "{}",
            got.cache_status()
        );
    }
    assert_eq!(origin.count("/busy.img"), 2, "not stored, so asked again");
    weir.stop().await;
}

/// Panics when asked whether it wants a response whole.
struct PanicsWhenAsked;

impl Module for PanicsWhenAsked {
    fn name(&self) -> &str {
        "panics-when-asked"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::WholeResponse])
    }

    fn wants_whole_response(&self, _txn: &mut Txn, _response: &ResponseHead) -> bool {
        panic!("asked and panicked")
    }
}

#[tokio::test]
async fn a_module_that_panics_when_asked_fails_only_its_transaction_or_is_passed_by() {
    let origin = TestOrigin::start();
    origin.route("/page", Reply::ok("page"));
    let weir = Setup::new(&origin)
        .module("panics-when-asked", PanicsWhenAsked)
        .start()
        .await;
    let got = weir.get("/page").await;
    assert_eq!(got.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(got.text().contains("panics-when-asked"), "{}", got.text());
    weir.stop().await;

    let weir = Setup::new(&origin)
        .module_with("panics-when-asked", PanicsWhenAsked, "optional = true")
        .start()
        .await;
    let got = weir.get("/page").await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "page"));
    weir.stop().await;
}
