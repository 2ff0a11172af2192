//! What the factory reads from a filter's section, and the events it makes the
//! filter ask for. Below the filter and the factory, which both use it.

use weir_api::{Event, Events};

/// Which of Weir's events a filter's response callbacks run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponsePhase {
    /// Every response sent to a client, hits included; changes are not stored.
    Deliver,
    /// Responses from the origin, before the cache stores them; changes are stored.
    Origin,
}

/// What the factory read from the section.
pub(crate) struct Options {
    pub phase: ResponsePhase,
    pub request_body: bool,
    pub response_body: bool,
    /// Idle instances kept for the next transactions.
    pub pool: usize,
}

impl Options {
    /// The events a filter is called at: the lookup only when it can read its result
    /// (`reads_lookup`), bodies only when asked, and each trailers event when the
    /// filter exports its callback (`trailers`: request, response). The response
    /// trailers come at delivery in either phase: they are never stored.
    pub(crate) fn events(&self, reads_lookup: bool, trailers: [bool; 2]) -> Events {
        let mut events = vec![Event::RequestHeaders, Event::Log];
        if reads_lookup {
            events.push(Event::CacheLookup);
        }
        events.push(match self.phase {
            ResponsePhase::Deliver => Event::DeliverHeaders,
            ResponsePhase::Origin => Event::ResponseHeaders,
        });
        if self.request_body {
            events.push(Event::RequestBody);
        }
        if self.response_body {
            events.push(match self.phase {
                ResponsePhase::Deliver => Event::DeliverBody,
                ResponsePhase::Origin => Event::ResponseBody,
            });
        }
        if trailers[0] {
            events.push(Event::RequestTrailers);
        }
        if trailers[1] {
            events.push(Event::ResponseTrailers);
        }
        Events::of(&events)
    }
}
