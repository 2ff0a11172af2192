//! The leader's side of a flight: the one handle that writes it, which fails the
//! flight if it goes away before the end.

use std::ops::Deref;
use std::sync::Arc;

use super::flight::Flight;

/// The handle a flight's leader writes it through ([`Flight::set_head`],
/// [`Flight::push`], [`Flight::finish`], through `Deref`).
///
/// Dropped before [`Flight::finish`] (the fetch panicked, or its task was cancelled
/// as the runtime stopped), it ends the flight as failed: its readers get an error
/// instead of waiting for ever, and the key's next request leads a new flight rather
/// than joining this one (a flight that failed takes no more readers).
pub struct FlightWriter<H> {
    flight: Arc<Flight<H>>,
}

impl<H> FlightWriter<H> {
    pub(super) fn new(flight: Arc<Flight<H>>) -> Self {
        FlightWriter { flight }
    }
}

impl<H> Deref for FlightWriter<H> {
    type Target = Arc<Flight<H>>;

    fn deref(&self) -> &Arc<Flight<H>> {
        &self.flight
    }
}

impl<H> Drop for FlightWriter<H> {
    fn drop(&mut self) {
        self.flight.fail_unless_ended();
    }
}
