//! `empty`: called for every event, does nothing.

use std::sync::Arc;

use serde::Deserialize;
use weir_api::{
    BodyChunk, CacheLookup, Events, Flow, Module, ModuleContext, ModuleFactory, RequestHead,
    ResponseHead, Settings, SettingsError, Txn,
};

/// Builds [`Empty`] under the name `empty`. It takes no settings: any key is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyFactory;

/// No settings at all; `deny_unknown_fields` turns any key into an error naming it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoSettings {}

impl ModuleFactory for EmptyFactory {
    fn name(&self) -> &'static str {
        "empty"
    }

    fn build(
        &self,
        settings: &Settings,
        _context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let NoSettings {} = settings.get()?;
        Ok(Arc::new(Empty))
    }
}

/// Registers for every event except the two whole-message ones and returns
/// [`Flow::Continue`] from each callback, touching nothing: what it adds to a
/// transaction is the bare cost of the engine calling a module at each event. (A
/// whole-message event makes the engine collect a body before going on, which is a
/// different cost from a call: the ladder measures calls.)
///
/// The callbacks are written out rather than left to the trait's defaults so the
/// measurement does not change if the defaults ever do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Empty;

impl Module for Empty {
    fn name(&self) -> &str {
        "empty"
    }

    fn events(&self) -> Events {
        Events::ALL.without(Events::WHOLE)
    }

    fn on_request_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _request: &'a mut RequestHead,
    ) -> Flow<'a> {
        Flow::Continue
    }

    fn on_cache_lookup<'a>(&'a self, _txn: &'a mut Txn, _lookup: CacheLookup) -> Flow<'a> {
        Flow::Continue
    }

    fn on_upstream_request<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _request: &'a mut RequestHead,
    ) -> Flow<'a> {
        Flow::Continue
    }

    fn on_response_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        Flow::Continue
    }

    fn on_request_body<'a>(&'a self, _txn: &'a mut Txn, _chunk: &'a mut BodyChunk) -> Flow<'a> {
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, _txn: &'a mut Txn, _chunk: &'a mut BodyChunk) -> Flow<'a> {
        Flow::Continue
    }

    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        _response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        Flow::Continue
    }

    fn on_deliver_body<'a>(&'a self, _txn: &'a mut Txn, _chunk: &'a mut BodyChunk) -> Flow<'a> {
        Flow::Continue
    }

    fn on_log(&self, _txn: &Txn) {}
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{request, response, txn};
    use super::*;
    use weir_api::{Bytes, Event};

    fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
        EmptyFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
    }

    #[test]
    fn registers_for_every_event() {
        let m = build("").unwrap();
        assert_eq!(m.name(), "empty");
        for ev in Event::ALL {
            let whole = matches!(ev, Event::WholeRequest | Event::WholeResponse);
            assert_eq!(m.events().contains(ev), !whole, "{}", ev.name());
        }
    }

    #[test]
    fn every_callback_continues_and_changes_nothing() {
        let m = build("").unwrap();
        let mut t = txn();
        let mut req = request();
        let mut resp = response();
        let data = Bytes::from_static(b"body");
        let mut chunk = BodyChunk {
            data: data.clone(),
            last: true,
        };

        assert!(matches!(
            m.on_request_headers(&mut t, &mut req),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_cache_lookup(&mut t, CacheLookup::Miss),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_upstream_request(&mut t, &mut req),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_response_headers(&mut t, &mut resp),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_response_body(&mut t, &mut chunk),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_deliver_headers(&mut t, &mut resp),
            Flow::Continue
        ));
        assert!(matches!(
            m.on_deliver_body(&mut t, &mut chunk),
            Flow::Continue
        ));
        m.on_log(&t);

        assert!(req.headers.is_empty());
        assert!(resp.headers.is_empty());
        assert_eq!(chunk.data, data);
        assert_eq!(
            chunk.data.as_ptr(),
            data.as_ptr(),
            "the chunk is not even copied"
        );
        assert!(chunk.last);
        assert!(!t.body_length_changes());
        assert!(t.log_fields().is_empty());
        assert!(!t.cache_overrides().skip);
    }

    #[test]
    fn any_setting_is_rejected_by_name() {
        let err = build("value = \"x\"").err().unwrap();
        assert!(err.to_string().contains("value"), "{err}");
        let err = build("[nested]\nlevel = 1").err().unwrap();
        assert!(err.to_string().contains("nested"), "{err}");
    }
}
