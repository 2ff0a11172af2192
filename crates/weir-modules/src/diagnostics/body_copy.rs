//! `body-copy`: copies every body chunk into a new buffer, and adds the four headers.

use std::sync::Arc;

use weir_api::{
    BodyChunk, Bytes, Event, Events, Flow, Module, ModuleContext, ModuleFactory, RequestHead,
    ResponseHead, Settings, SettingsError, Txn,
};

use super::add_headers::HEADER_EVENTS;
use super::stamp::Stamp;

/// The events `body-copy` is called for: the four header events and both body events.
const EVENTS: Events = HEADER_EVENTS.with(Events::of(&[Event::ResponseBody, Event::DeliverBody]));

/// Builds [`BodyCopy`] under the name `body-copy`.
///
/// Settings: `value = "…"`, the value of the four headers, as for `add-headers`
/// (default `"1"`). Any other key is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyCopyFactory;

impl ModuleFactory for BodyCopyFactory {
    fn name(&self) -> &'static str {
        "body-copy"
    }

    fn build(
        &self,
        settings: &Settings,
        _context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        Ok(Arc::new(BodyCopy {
            stamp: Stamp::from_settings(settings)?,
        }))
    }
}

/// Copies each chunk of the origin's body (before it is stored) and of every
/// delivered body (hits too) into a freshly allocated buffer and puts the copy in
/// place of the original, so every byte of every body is read and written once per
/// event. It also adds the same four headers as
/// [`AddHeaders`](super::AddHeaders).
///
/// The copy has the original's length, so the module never declares
/// [`Txn::body_length_may_change`]: `Content-Length` and strong ETags survive.
#[derive(Debug, Clone)]
pub struct BodyCopy {
    stamp: Stamp,
}

/// Replaces the chunk's bytes with a copy of themselves.
fn copy(chunk: &mut BodyChunk) {
    chunk.data = Bytes::copy_from_slice(&chunk.data);
}

impl Module for BodyCopy {
    fn name(&self) -> &str {
        "body-copy"
    }

    fn events(&self) -> Events {
        EVENTS
    }

    fn on_request_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        self.stamp.request(request);
        Flow::Continue
    }

    fn on_upstream_request<'a>(
        &'a self,
        _txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        self.stamp.upstream(request);
        Flow::Continue
    }

    fn on_response_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        self.stamp.response(response);
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        copy(chunk);
        Flow::Continue
    }

    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        self.stamp.deliver(response);
        Flow::Continue
    }

    fn on_deliver_body<'a>(&'a self, _txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        copy(chunk);
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{request, response, txn};
    use super::*;

    fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
        BodyCopyFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
    }

    #[test]
    fn events_are_headers_and_bodies() {
        let m = build("").unwrap();
        assert_eq!(m.name(), "body-copy");
        for ev in Event::ALL {
            let expected = matches!(
                ev,
                Event::RequestHeaders
                    | Event::UpstreamRequest
                    | Event::ResponseHeaders
                    | Event::ResponseBody
                    | Event::DeliverHeaders
                    | Event::DeliverBody
            );
            assert_eq!(m.events().contains(ev), expected, "{}", ev.name());
        }
    }

    #[test]
    fn chunks_are_copied_and_equal() {
        let m = build("").unwrap();
        let mut t = txn();
        let original = Bytes::from(vec![7u8; 8192]);
        for (last, on_deliver) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut chunk = BodyChunk {
                data: original.clone(),
                last,
            };
            let continued = if on_deliver {
                matches!(m.on_deliver_body(&mut t, &mut chunk), Flow::Continue)
            } else {
                matches!(m.on_response_body(&mut t, &mut chunk), Flow::Continue)
            };
            assert!(continued);
            assert_eq!(chunk.data, original);
            assert_ne!(
                chunk.data.as_ptr(),
                original.as_ptr(),
                "the chunk is a new buffer"
            );
            assert_eq!(chunk.last, last);
        }
        assert!(
            !t.body_length_changes(),
            "same length: framing is left alone"
        );
    }

    #[test]
    fn empty_chunks_stay_empty() {
        let m = build("").unwrap();
        let mut t = txn();
        let mut chunk = BodyChunk {
            data: Bytes::new(),
            last: true,
        };
        let _ = m.on_deliver_body(&mut t, &mut chunk);
        assert!(chunk.data.is_empty() && chunk.last);
    }

    #[test]
    fn adds_the_four_headers() {
        let m = build("value = \"copy\"").unwrap();
        let mut t = txn();
        let (mut req, mut up, mut resp, mut del) = (request(), request(), response(), response());
        let _ = m.on_request_headers(&mut t, &mut req);
        let _ = m.on_upstream_request(&mut t, &mut up);
        let _ = m.on_response_headers(&mut t, &mut resp);
        let _ = m.on_deliver_headers(&mut t, &mut del);
        assert_eq!(req.headers["x-weir-in-1"], "copy");
        assert_eq!(up.headers["x-weir-in-2"], "copy");
        assert_eq!(resp.headers["x-weir-out-1"], "copy");
        assert_eq!(del.headers["x-weir-out-2"], "copy");
        assert!(!t.body_length_changes());
    }

    #[test]
    fn unknown_settings_are_rejected_by_name() {
        let err = build("copies = 2").err().unwrap();
        assert!(err.to_string().contains("copies"), "{err}");
    }
}
