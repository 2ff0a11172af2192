//! `hello`: a small Weir module, written step by step.
//!
//! It does two things:
//! - answers requests for the path `/hello` itself, with `200` and a plain-text
//!   greeting, so they never reach the cache or the origin;
//! - adds `x-hello: <greeting>` to every response delivered to a client (cache hits
//!   included).
//!
//! Its one setting is the greeting:
//!
//! ```toml
//! [[module]]
//! name = "hello"
//! greeting = "bonjour"   # optional; default "hello"
//! ```
//!
//! A module is two types: a *factory*, which the proxy keeps by name and asks to
//! build a module from each matching `[[module]]` section, and the *module*, whose
//! callbacks the proxy calls during transactions. This crate depends on `weir-api`
//! alone, as any out-of-tree module does.
#![deny(missing_docs)]

use std::sync::Arc;

use weir_api::http::{HeaderName, HeaderValue, StatusCode};
use weir_api::{
    Event, Events, Flow, Module, ModuleContext, ModuleFactory, Reply, RequestHead, ResponseHead,
    Settings, SettingsError, Txn,
};

// Step 1: the constants. A header name built with `from_static` costs nothing at run
// time, so adding the header never allocates a name.

/// The header added to delivered responses.
const X_HELLO: HeaderName = HeaderName::from_static("x-hello");
/// The path this module answers itself.
const HELLO_PATH: &str = "/hello";
/// The greeting when the section sets none.
const DEFAULT_GREETING: &str = "hello";

// Step 2: the factory. It reads and checks the settings once, when the configuration
// is loaded, so that mistakes are reported then (with the file and line, which the
// proxy adds) and the callbacks have nothing left to parse or check.

/// Builds [`Hello`] from a `[[module]] name = "hello"` section.
///
/// Settings: `greeting` (a string usable as a header value; default `"hello"`).
/// Any other key is an error naming it.
#[derive(Debug, Clone, Copy, Default)]
pub struct HelloFactory;

/// The `[[module]]` settings of `hello`.
#[derive(weir_api::serde::Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct HelloSettings {
    /// What to greet with; `hello` when absent.
    #[serde(default = "default_greeting")]
    greeting: String,
}

fn default_greeting() -> String {
    DEFAULT_GREETING.to_owned()
}

impl ModuleFactory for HelloFactory {
    fn name(&self) -> &'static str {
        "hello"
    }

    fn build(
        &self,
        settings: &Settings,
        _context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        // `Settings::get` reads the section into the module's own type. serde comes
        // re-exported by `weir-api`, so the module needs no dependency of its own;
        // `deny_unknown_fields` turns a typo into an error naming the key.
        let HelloSettings { greeting } = settings.get()?;

        // The greeting goes into a header, so it must be a valid header value: parse
        // it now, once, rather than on every response.
        let header = HeaderValue::from_str(&greeting).map_err(|_| {
            SettingsError::at("greeting", format!("{greeting:?} cannot be a header value"))
        })?;

        Ok(Arc::new(Hello { greeting, header }))
    }
}

// Step 3: the module. It holds what the factory prepared; it is shared by all the
// proxy's threads, so it is immutable (per-transaction data would go in
// `Txn::state`).

/// Answers `/hello` with a greeting and adds `x-hello` to delivered responses.
#[derive(Debug, Clone)]
pub struct Hello {
    /// The greeting, as the body of `/hello` answers.
    greeting: String,
    /// The greeting, parsed once as the value of `x-hello`.
    header: HeaderValue,
}

impl Module for Hello {
    fn name(&self) -> &str {
        "hello"
    }

    // Step 4: declare the events. The proxy calls a module only for the events it
    // declares, so every callback not listed here (and left to the trait's no-op
    // default) costs nothing.
    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::DeliverHeaders])
    }

    // Step 5: answer `/hello`. The request-headers event runs before the cache
    // lookup; `Flow::Respond` answers the client directly (the answer is not cached)
    // and everything else goes on unchanged with `Flow::Continue`. In a forward
    // proxy the URI is absolute (`http://host/hello`): `path()` is `/hello` either
    // way, so this answers for any host.
    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        if request.uri.path() != HELLO_PATH {
            return Flow::Continue;
        }
        // Custom access-log fields say what a module did (`hello=answered`).
        txn.log_field("hello", "answered");
        Flow::Respond(Reply::text(StatusCode::OK, self.greeting.as_str()))
    }

    // Step 6: tag what is delivered. The deliver-headers event runs for every
    // response sent to a client, cache hits included, and what it changes is not
    // stored; a header meant to be stored with the response would be added in
    // `on_response_headers` instead. Cloning a `HeaderValue` shares its bytes.
    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        response.headers.insert(X_HELLO, self.header.clone());
        Flow::Continue
    }
}

// Step 7: test the callbacks directly. No proxy is needed: build the module from
// settings text, make a transaction and heads, call the callbacks, look at the
// results.
#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::engine;
    use weir_api::http::{Request, Response};

    fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
        HelloFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
    }

    fn txn() -> Txn {
        engine::new_txn("127.0.0.1:5000".parse().unwrap(), 1)
    }

    fn request(uri: &str) -> RequestHead {
        Request::builder().uri(uri).body(()).unwrap().into_parts().0
    }

    fn response() -> ResponseHead {
        Response::new(()).into_parts().0
    }

    /// The reply a callback answered with, if it did.
    fn reply(flow: Flow<'_>) -> Option<Reply> {
        match flow {
            Flow::Respond(reply) => Some(reply),
            Flow::Continue => None,
            Flow::Wait(_) => panic!("hello never waits"),
        }
    }

    #[test]
    fn declares_its_two_events() {
        let m = build("").unwrap();
        assert_eq!(m.name(), HelloFactory.name());
        for ev in Event::ALL {
            let expected = matches!(ev, Event::RequestHeaders | Event::DeliverHeaders);
            assert_eq!(m.events().contains(ev), expected, "{}", ev.name());
        }
    }

    #[test]
    fn answers_hello_with_the_default_greeting() {
        let m = build("").unwrap();
        let mut t = txn();
        let mut req = request("/hello");
        let r = reply(m.on_request_headers(&mut t, &mut req)).expect("answered");
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(&r.body[..], b"hello");
        assert!(r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"));
        assert_eq!(t.log_fields(), [("hello", "answered".to_owned())]);
    }

    #[test]
    fn answers_absolute_form_requests_too() {
        let m = build("").unwrap();
        let mut req = request("http://example.com/hello");
        assert!(reply(m.on_request_headers(&mut txn(), &mut req)).is_some());
    }

    #[test]
    fn lets_other_paths_through() {
        let m = build("").unwrap();
        let mut t = txn();
        for uri in [
            "/",
            "/hello/",
            "/hello.txt",
            "/other/hello",
            "http://example.com/",
        ] {
            let mut req = request(uri);
            assert!(
                reply(m.on_request_headers(&mut t, &mut req)).is_none(),
                "{uri}"
            );
            assert!(req.headers.is_empty());
        }
        assert!(t.log_fields().is_empty());
    }

    #[test]
    fn tags_delivered_responses() {
        let m = build("").unwrap();
        let mut resp = response();
        resp.headers
            .insert(X_HELLO, HeaderValue::from_static("from the origin"));
        assert!(reply(m.on_deliver_headers(&mut txn(), &mut resp)).is_none());
        let values: Vec<_> = resp.headers.get_all("x-hello").iter().collect();
        assert_eq!(values, ["hello"]);
    }

    #[test]
    fn greeting_comes_from_settings() {
        let m = build("greeting = \"bonjour\"").unwrap();
        let mut req = request("/hello");
        let r = reply(m.on_request_headers(&mut txn(), &mut req)).unwrap();
        assert_eq!(&r.body[..], b"bonjour");
        let mut resp = response();
        let _ = m.on_deliver_headers(&mut txn(), &mut resp);
        assert_eq!(resp.headers["x-hello"], "bonjour");
    }

    #[test]
    fn bad_settings_are_rejected_by_name() {
        let err = build("greting = \"hi\"").err().unwrap();
        assert_eq!(err.key.as_deref(), Some("greting"), "{err}");
        let err = build("greeting = \"two\\nlines\"").err().unwrap();
        assert_eq!(err.key.as_deref(), Some("greeting"), "{err}");
        let err = build("greeting = 3").err().unwrap();
        assert!(err.to_string().contains("string"), "{err}");
    }
}
