//! The modules these tests load: stamps showing chain order, a holder, a counter.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::Factory;
use crate::support::client::Fetched;
use weir_api::http::HeaderValue;
use weir_api::{
    Decision, Event, Events, Flow, Module, ModuleFactory, RequestHead, ResponseHead, Timer, Txn,
};

/// Appends its name to the `x-order` response header at deliver headers, so the
/// header's values show the chain's order.
pub struct Stamp(&'static str);

impl Module for Stamp {
    fn name(&self) -> &str {
        self.0
    }

    fn events(&self) -> Events {
        Events::of(&[Event::DeliverHeaders])
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        r.headers
            .append("x-order", HeaderValue::from_static(self.0));
        Flow::Continue
    }
}

pub fn stamps() -> Vec<Box<dyn ModuleFactory>> {
    vec![
        Factory::boxed("first", |_| Arc::new(Stamp("first"))),
        Factory::boxed("second", |_| Arc::new(Stamp("second"))),
        Factory::boxed("third", |_| Arc::new(Stamp("third"))),
    ]
}

pub fn order(r: &Fetched) -> Vec<String> {
    r.header_all("x-order")
}

/// What the test shares with a [`Holder`]: requests for `/held*` wait at request
/// headers until the test releases them.
pub struct Gate {
    pub entered: AtomicUsize,
    pub release: tokio::sync::Semaphore,
    /// Timer firings.
    pub ticks: AtomicUsize,
    /// Firings of the one-shot timer.
    pub once: AtomicUsize,
    /// Modules built, and dropped.
    pub built: AtomicUsize,
    pub dropped: AtomicUsize,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            entered: AtomicUsize::new(0),
            release: tokio::sync::Semaphore::new(0),
            ticks: AtomicUsize::new(0),
            once: AtomicUsize::new(0),
            built: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        }
    }
}

/// Holds `/held*` requests at request headers until released; adds `x-holder` at
/// deliver headers; asks for a 20 ms periodic timer (id 7) and a one-shot (id 1).
pub struct Holder {
    gate: Arc<Gate>,
    /// Timer ids this instance has seen, to catch one it did not ask for.
    wrong_timer: AtomicBool,
}

impl Holder {
    pub fn factory(gate: &Arc<Gate>) -> Box<dyn ModuleFactory> {
        let gate = gate.clone();
        Factory::boxed("holder", move |_| {
            gate.built.fetch_add(1, Ordering::SeqCst);
            Arc::new(Holder {
                gate: gate.clone(),
                wrong_timer: AtomicBool::new(false),
            })
        })
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        assert!(!self.wrong_timer.load(Ordering::SeqCst), "unknown timer id");
        self.gate.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Module for Holder {
    fn name(&self) -> &str {
        "holder"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders, Event::DeliverHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        if !r.uri.path().starts_with("/held") {
            return Flow::Continue;
        }
        Flow::wait(async move {
            self.gate.entered.fetch_add(1, Ordering::SeqCst);
            self.gate
                .release
                .acquire()
                .await
                .expect("the gate stays open")
                .forget();
            Decision::Continue
        })
    }

    fn on_deliver_headers<'a>(&'a self, _txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        r.headers
            .insert("x-holder", HeaderValue::from_static("yes"));
        Flow::Continue
    }

    fn timers(&self) -> Vec<Timer> {
        vec![
            Timer {
                id: 7,
                after: Duration::ZERO,
                every: Some(Duration::from_millis(20)),
            },
            Timer {
                id: 1,
                after: Duration::from_millis(30),
                every: None,
            },
        ]
    }

    fn on_timer(&self, id: u32) {
        match id {
            7 => self.gate.ticks.fetch_add(1, Ordering::SeqCst),
            1 => self.gate.once.fetch_add(1, Ordering::SeqCst),
            _ => {
                self.wrong_timer.store(true, Ordering::SeqCst);
                0
            }
        };
    }
}

/// Counts every request in `weir_module_counting_requests_total`.
pub struct Counting(pub weir_api::Counter);

impl Module for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn on_request_headers<'a>(&'a self, _txn: &'a mut Txn, _r: &'a mut RequestHead) -> Flow<'a> {
        self.0.inc();
        Flow::Continue
    }
}
