//! The built-in modules of Weir, an extensible caching HTTP proxy.
//!
//! Every module here is written against [`weir_api`] alone, exactly as an
//! out-of-tree module would be: nothing in this crate reaches into the engine.
//! The engine asks [`builtin`] for the factories and builds a module for each
//! `[[module]]` section whose `name` matches a factory's
//! [`name`](weir_api::ModuleFactory::name).
//!
//! # Diagnostic modules
//! Three modules reproduce the API-cost ladder of the paper Weir follows: run the
//! same load with each in turn and compare hit and miss times with no module at all.
//!
//! | name | events | what it does per transaction | settings |
//! |---|---|---|---|
//! | `empty` | all eight | nothing: every callback returns [`Flow::Continue`](weir_api::Flow::Continue) | none |
//! | `add-headers` | the four header events | adds `x-weir-in-1` (request headers), `x-weir-in-2` (upstream request), `x-weir-out-1` (response headers) and `x-weir-out-2` (deliver headers) | `value` (default `"1"`) |
//! | `body-copy` | the four header events and both body events | what `add-headers` does, and copies every response and delivered body chunk into a fresh buffer that replaces the original | `value` (default `"1"`) |
//!
//! `empty` measures the bare cost of calling a module at every event; `add-headers`
//! the cost of changing heads on every path, with no allocation of its own;
//! `body-copy` the cost of touching every byte of every body (the length never
//! changes, so framing and ETags stay as the origin sent them).
//!
//! ```toml
//! [[module]]
//! name = "add-headers"
//! value = "bench"
//! ```
//!
//! # Content management
//! [`preload`] keeps a list of URLs in the cache: it uses a timer, background work on
//! the proxy's runtime and the content-management calls of [`weir_api`].
//!
//! # Content adaptation
//! [`adblock`] blocks ads and trackers by EasyList-style filter lists, answering
//! blocked images with a blank image that the cache then serves as a hit.
//! [`compress`] compresses text-like responses with gzip, brotli or zstd as the
//! client accepts, and stores each encoding as a variant of its own.
//! [`icap`] hands whole requests and responses to ICAP services (RFC 3507), such as
//! c-icap or a virus scanner, and applies what they answer.
//! [`transcode`] makes images smaller (lower JPEG quality, optional scaling, WebP
//! for clients that accept it) in helper processes at idle priority, and stores each
//! result as a variant of its own.
//!
//! # Administration
//! [`access`] decides who may use the proxy for what: ordered allow and deny rules
//! (client network, user and group, destination, patterns, method, port, scheme, time)
//! and Basic proxy authentication against an htpasswd file.
//!
//! # Helper processes
//! Work a module runs in a helper process is named by a kind; [`helper_handler`]
//! gives the job handler of each kind, for the `weir helper KIND` entry point.
#![deny(missing_docs)]

pub mod access;
pub mod adblock;
pub mod clients;
pub mod compress;
pub mod diagnostics;
mod fields;
pub mod icap;
pub mod preload;
pub mod transcode;
mod variant;

#[cfg(test)]
use weir_api::ModuleContext;
use weir_api::ModuleFactory;

/// The factories of every built-in module, one per name: `empty`, `add-headers`,
/// `body-copy`, `preload`, `adblock`, `compress`, `icap`, `transcode` and `access` (see the
/// [crate documentation](crate)).
pub fn builtin() -> Vec<Box<dyn ModuleFactory>> {
    vec![
        Box::new(diagnostics::EmptyFactory),
        Box::new(diagnostics::AddHeadersFactory),
        Box::new(diagnostics::BodyCopyFactory),
        Box::new(preload::PreloadFactory),
        Box::new(adblock::AdblockFactory),
        Box::new(compress::CompressFactory),
        Box::new(icap::IcapFactory),
        Box::new(transcode::TranscodeFactory),
        Box::new(access::AccessFactory),
        Box::new(clients::ClientsFactory),
    ]
}

/// The job handler a helper process of this kind runs (`weir helper KIND`).
pub fn helper_handler(kind: &str) -> Option<weir_helper::Handler> {
    match kind {
        transcode::HELPER_KIND => Some(transcode::helper_handler),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::{Event, Settings};

    #[test]
    fn names_are_the_documented_ones_and_unique() {
        let names: Vec<_> = builtin().iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "empty",
                "add-headers",
                "body-copy",
                "preload",
                "adblock",
                "compress",
                "icap",
                "transcode",
                "access",
                "clients"
            ]
        );
    }

    #[test]
    fn every_diagnostic_builds_with_no_settings() {
        let diagnostics = ["empty", "add-headers", "body-copy"];
        for factory in builtin()
            .into_iter()
            .filter(|f| diagnostics.contains(&f.name()))
        {
            let module = factory
                .build(&Settings::default(), &ModuleContext::detached())
                .unwrap();
            assert_eq!(module.name(), factory.name());
        }
    }

    #[test]
    fn events_form_the_ladder() {
        let events = |name: &str| {
            let factory = builtin().into_iter().find(|f| f.name() == name).unwrap();
            factory
                .build(&Settings::default(), &ModuleContext::detached())
                .unwrap()
                .events()
        };
        let headers = [
            Event::RequestHeaders,
            Event::UpstreamRequest,
            Event::ResponseHeaders,
            Event::DeliverHeaders,
        ];
        let bodies = [Event::ResponseBody, Event::DeliverBody];
        for ev in Event::ALL {
            let whole = matches!(ev, Event::WholeRequest | Event::WholeResponse);
            assert_eq!(events("empty").contains(ev), !whole, "{}", ev.name());
            assert_eq!(
                events("add-headers").contains(ev),
                headers.contains(&ev),
                "{}",
                ev.name()
            );
            assert_eq!(
                events("body-copy").contains(ev),
                headers.contains(&ev) || bodies.contains(&ev),
                "{}",
                ev.name()
            );
        }
    }

    #[test]
    fn unknown_keys_are_rejected_everywhere() {
        for factory in builtin() {
            let settings = Settings::parse("colour = \"blue\"").unwrap();
            let err = factory
                .build(&settings, &ModuleContext::detached())
                .err()
                .unwrap_or_else(|| panic!("{} accepted it", factory.name()));
            assert!(
                err.to_string().contains("colour"),
                "{}: {err}",
                factory.name()
            );
        }
    }
}
