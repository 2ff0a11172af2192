//! The points of a transaction where modules are called.

/// One point in a transaction where modules may be called, in transaction order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Event {
    /// The client's request line and headers are complete. A module may change them,
    /// answer the request itself, or steer the cache (skip it, add a variant).
    RequestHeaders = 0,
    /// The cache lookup is done: fresh hit, stale copy, or miss.
    CacheLookup = 1,
    /// A request is about to be sent to the origin.
    UpstreamRequest = 2,
    /// The origin's response headers arrived, before the cache stores them.
    ResponseHeaders = 3,
    /// A chunk of the origin's response body, before the cache stores it.
    ResponseBody = 4,
    /// Response headers are about to be sent to the client (every delivery, hits too).
    DeliverHeaders = 5,
    /// A chunk of response body is about to be sent to the client.
    DeliverBody = 6,
    /// The transaction is over and is being logged.
    Log = 7,
}

impl Event {
    /// Every event, in transaction order.
    pub const ALL: [Event; 8] = [
        Event::RequestHeaders,
        Event::CacheLookup,
        Event::UpstreamRequest,
        Event::ResponseHeaders,
        Event::ResponseBody,
        Event::DeliverHeaders,
        Event::DeliverBody,
        Event::Log,
    ];

    /// The event's name in configuration and logs, e.g. `request_headers`.
    pub fn name(self) -> &'static str {
        match self {
            Event::RequestHeaders => "request_headers",
            Event::CacheLookup => "cache_lookup",
            Event::UpstreamRequest => "upstream_request",
            Event::ResponseHeaders => "response_headers",
            Event::ResponseBody => "response_body",
            Event::DeliverHeaders => "deliver_headers",
            Event::DeliverBody => "deliver_body",
            Event::Log => "log",
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
}
