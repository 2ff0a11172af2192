//! The points of a transaction where modules are called.

/// One point in a transaction where modules may be called, in transaction order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Event {
    /// The client's request line and headers are complete. A module may change them,
    /// answer the request itself, or steer the cache (skip it, add a variant).
    RequestHeaders = 0,
    /// The whole request, head and body together (the body up to `[limits]
    /// module_body`), before the cache lookup. A module that wants it makes the engine
    /// read the request body before going on: the ICAP REQMOD point.
    WholeRequest = 1,
    /// The cache lookup is done: fresh hit, stale copy, or miss.
    CacheLookup = 2,
    /// A request is about to be sent to the origin.
    UpstreamRequest = 3,
    /// A chunk of the client's request body on its way to the origin.
    RequestBody = 4,
    /// The origin's response headers arrived, before the cache stores them.
    ResponseHeaders = 5,
    /// The whole origin response, head and body together (the body up to `[limits]
    /// module_body`), before anyone sees the head and before the cache stores it. A
    /// module that wants it makes the engine hold the head until the body is complete:
    /// the ICAP RESPMOD point, and where a transcoder may change the content type.
    WholeResponse = 6,
    /// A chunk of the origin's response body, before the cache stores it.
    ResponseBody = 7,
    /// Response headers are about to be sent to the client (every delivery, hits too).
    DeliverHeaders = 8,
    /// A chunk of response body is about to be sent to the client.
    DeliverBody = 9,
    /// The transaction is over and is being logged.
    Log = 10,
    /// The trailer fields the client sent after its request body, on their way to
    /// the origin (only for requests whose body is forwarded and that have trailers).
    RequestTrailers = 11,
    /// The trailer fields the origin sent after its response body, about to be sent
    /// to the client after the last body chunk. They are not stored: a hit has none
    /// (RFC 9111 §3 lets a cache discard them), so this event runs only on responses
    /// streamed from the origin.
    ResponseTrailers = 12,
    /// Bytes through a tunnel the request opened (a CONNECT, or a protocol switch
    /// such as a WebSocket), each read from either side before it is written to the
    /// other. Without a module that asks for it, the engine relays a tunnel's bytes
    /// without looking at them.
    TunnelData = 13,
}

impl Event {
    /// Every event, in transaction order (the trailer events after their bodies, the
    /// tunnel's bytes after the response that opened it; the later events' numbers
    /// come last, so that those of the older events never changed).
    pub const ALL: [Event; 14] = [
        Event::RequestHeaders,
        Event::WholeRequest,
        Event::CacheLookup,
        Event::UpstreamRequest,
        Event::RequestBody,
        Event::RequestTrailers,
        Event::ResponseHeaders,
        Event::WholeResponse,
        Event::ResponseBody,
        Event::DeliverHeaders,
        Event::DeliverBody,
        Event::ResponseTrailers,
        Event::TunnelData,
        Event::Log,
    ];

    /// The event's name in configuration and logs, e.g. `request_headers`.
    pub fn name(self) -> &'static str {
        match self {
            Event::RequestHeaders => "request_headers",
            Event::RequestBody => "request_body",
            Event::WholeRequest => "whole_request",
            Event::CacheLookup => "cache_lookup",
            Event::UpstreamRequest => "upstream_request",
            Event::ResponseHeaders => "response_headers",
            Event::ResponseBody => "response_body",
            Event::WholeResponse => "whole_response",
            Event::DeliverHeaders => "deliver_headers",
            Event::DeliverBody => "deliver_body",
            Event::Log => "log",
            Event::RequestTrailers => "request_trailers",
            Event::ResponseTrailers => "response_trailers",
            Event::TunnelData => "tunnel_data",
        }
    }
}

/// A set of events: what a module asks to be called for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events(u16);

impl Events {
    /// No event.
    pub const NONE: Events = Events(0);
    /// Every event.
    pub const ALL: Events = Events((1 << Event::ALL.len()) - 1);
    /// The two trailer events.
    pub const TRAILERS: Events = Events::of(&[Event::RequestTrailers, Event::ResponseTrailers]);
    /// The two whole-message events. Asking for one changes how the engine moves a
    /// body (it collects it before going on), not only which calls it makes.
    pub const WHOLE: Events = Events::of(&[Event::WholeRequest, Event::WholeResponse]);

    /// The set of the given events.
    pub const fn of(events: &[Event]) -> Events {
        let mut bits = 0u16;
        let mut i = 0;
        while i < events.len() {
            bits |= 1 << events[i] as u8;
            i += 1;
        }
        Events(bits)
    }

    /// Whether `event` is in the set.
    pub const fn contains(self, event: Event) -> bool {
        self.0 & (1 << event as u8) != 0
    }

    /// The events of `self` that are not in `other`.
    pub const fn without(self, other: Events) -> Events {
        Events(self.0 & !other.0)
    }

    /// The union of two sets.
    pub const fn with(self, other: Events) -> Events {
        Events(self.0 | other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets() {
        let e = Events::of(&[Event::RequestHeaders, Event::Log]);
        assert!(e.contains(Event::RequestHeaders) && e.contains(Event::Log));
        assert!(!e.contains(Event::DeliverBody));
        assert!(Event::ALL.iter().all(|&ev| Events::ALL.contains(ev)));
        assert!(Event::ALL.iter().all(|&ev| !Events::NONE.contains(ev)));
    }

    #[test]
    fn every_event_has_its_own_number_and_name() {
        let mut numbers: Vec<u8> = Event::ALL.iter().map(|&e| e as u8).collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (0..Event::ALL.len() as u8).collect::<Vec<_>>());
        let mut names: Vec<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Event::ALL.len());
    }
}
