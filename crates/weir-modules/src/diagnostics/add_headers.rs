//! `add-headers`: adds one header on each of the four header paths.

use std::sync::Arc;

use weir_api::{
    Event, Events, Flow, Module, ModuleContext, ModuleFactory, RequestHead, ResponseHead, Settings,
    SettingsError, Txn,
};

use super::stamp::Stamp;

/// The events `add-headers` (and the header half of `body-copy`) is called for.
pub(super) const HEADER_EVENTS: Events = Events::of(&[
    Event::RequestHeaders,
    Event::UpstreamRequest,
    Event::ResponseHeaders,
    Event::DeliverHeaders,
]);

/// Builds [`AddHeaders`] under the name `add-headers`.
///
/// Settings: `value = "…"`, the value of the four headers (default `"1"`); it must be
/// a valid header value and is parsed once, here. Any other key is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct AddHeadersFactory;

impl ModuleFactory for AddHeadersFactory {
    fn name(&self) -> &'static str {
        "add-headers"
    }

    fn build(
        &self,
        settings: &Settings,
        _context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        Ok(Arc::new(AddHeaders {
            stamp: Stamp::from_settings(settings)?,
        }))
    }
}

/// Adds one header on every inbound and outbound path of a transaction:
///
/// | event | header |
/// |---|---|
/// | request headers | `x-weir-in-1` |
/// | upstream request | `x-weir-in-2` |
/// | response headers (stored with the response) | `x-weir-out-1` |
/// | deliver headers (every delivery, hits too) | `x-weir-out-2` |
///
/// Names and the default value are static, so adding them allocates nothing of the
/// module's own.
#[derive(Debug, Clone)]
pub struct AddHeaders {
    stamp: Stamp,
}

impl Module for AddHeaders {
    fn name(&self) -> &str {
        "add-headers"
    }

    fn events(&self) -> Events {
        HEADER_EVENTS
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

    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        self.stamp.deliver(response);
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{request, response, txn};
    use super::*;

    fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
        AddHeadersFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
    }

    /// Runs the four header events on fresh heads: (client request, upstream
    /// request, origin response, delivered response).
    fn run(m: &dyn Module) -> (RequestHead, RequestHead, ResponseHead, ResponseHead) {
        let mut t = txn();
        let (mut req, mut up, mut resp, mut del) = (request(), request(), response(), response());
        assert!(matches!(
            m.on_request_headers(&mut t, &mut req),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_upstream_request(&mut t, &mut up),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_response_headers(&mut t, &mut resp),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_deliver_headers(&mut t, &mut del),
            Flow::Continue
        ));
        assert!(!t.body_length_changes());
        (req, up, resp, del)
    }

    #[test]
    fn adds_one_header_per_path() {
        let m = build("").unwrap();
        assert_eq!(m.name(), "add-headers");
        assert_eq!(m.events(), HEADER_EVENTS);
        let (req, up, resp, del) = run(&*m);
        for (headers, name) in [
            (&req.headers, "x-weir-in-1"),
            (&up.headers, "x-weir-in-2"),
            (&resp.headers, "x-weir-out-1"),
            (&del.headers, "x-weir-out-2"),
        ] {
            assert_eq!(headers.len(), 1, "{name}: {headers:?}");
            assert_eq!(headers[name], "1");
        }
    }

    #[test]
    fn adds_beside_what_is_there() {
        let m = build("").unwrap();
        let mut t = txn();
        let mut req = request();
        req.headers.insert("x-weir-in-1", "origin".parse().unwrap());
        let _ = m.on_request_headers(&mut t, &mut req);
        let values: Vec<_> = req.headers.get_all("x-weir-in-1").iter().collect();
        assert_eq!(values, ["origin", "1"]);
    }

    #[test]
    fn value_comes_from_settings() {
        let m = build("value = \"bench run 3\"").unwrap();
        let (req, up, resp, del) = run(&*m);
        assert_eq!(req.headers["x-weir-in-1"], "bench run 3");
        assert_eq!(up.headers["x-weir-in-2"], "bench run 3");
        assert_eq!(resp.headers["x-weir-out-1"], "bench run 3");
        assert_eq!(del.headers["x-weir-out-2"], "bench run 3");
    }

    #[test]
    fn bad_settings_are_rejected_by_name() {
        let err = build("valeu = \"x\"").err().unwrap();
        assert!(err.to_string().contains("valeu"), "{err}");
        let err = build("value = \"a\\nb\"").err().unwrap();
        assert_eq!(err.key.as_deref(), Some("value"), "{err}");
        let err = build("value = 3").err().unwrap();
        assert!(err.to_string().contains("string"), "{err}");
    }
}
