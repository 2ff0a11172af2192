//! How often each module is called at each event, and roughly how long its callbacks
//! take: `weir_module_events_total{module,event}` and
//! `weir_module_event_seconds_total{module,event}` in `/metrics`, and the `modules`
//! table of `/admin/status`.
//!
//! The engine counts every call and times one call in [`SAMPLE_EVERY`] (two clock
//! reads), adding that call's time multiplied by [`SAMPLE_EVERY`]: an estimate of the
//! total that is exact on average and costs the other calls no clock read. An event no
//! module asked for is never dispatched, so it costs nothing. Each thread counts in a
//! block of its own ([`ThreadCounts`], on cache lines of its own), which a
//! transaction's chain handle holds (`modules/txn.rs`), so a call finds it without a
//! lookup: one count shared by the worker threads made every call wait for the line to
//! come from the other core (a locked addition on a line the other core had just
//! written), which cost more than the rest of a cheap module's call. A read sums the
//! threads' blocks. The time is the callback's own (what it does before returning);
//! the wait of a module that returns `Flow::Wait` is not in it. Counts are kept by
//! module name across reloads, so the counters only grow.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thread_local::ThreadLocal;
use weir_api::Event;

use super::encode::lock;

/// A module's name and, for each event it was called at: (event, calls, seconds).
pub(crate) type ModuleFigures = (String, Vec<(Event, u64, f64)>);

/// One call in this many is timed (a power of two: the test is a mask).
pub(crate) const SAMPLE_EVERY: u64 = 64;

/// One module's counts, per thread.
#[derive(Default)]
pub(crate) struct ModuleEvents(ThreadLocal<Arc<ThreadCounts>>);

/// One thread's counts of one module, per event. Atomics, so that a transaction that
/// moved to another thread still counts exactly and a read sees whole values; on cache
/// lines of their own, so that no other thread writes them in the usual case.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct ThreadCounts {
    calls: [AtomicU64; Event::ALL.len()],
    /// Nanoseconds: the timed calls' time × [`SAMPLE_EVERY`].
    nanos: [AtomicU64; Event::ALL.len()],
}

/// A timed call in progress (see [`ThreadCounts::start`]).
pub(crate) struct Timing(Option<Instant>);

impl ModuleEvents {
    /// The current thread's counts of this module.
    pub fn this_thread(&self) -> Arc<ThreadCounts> {
        self.0.get_or_default().clone()
    }

    /// (event, calls, estimated seconds) for each event called at least once.
    pub fn read(&self) -> Vec<(Event, u64, f64)> {
        Event::ALL
            .iter()
            .map(|&e| {
                let (mut calls, mut nanos) = (0u64, 0u64);
                for counts in self.0.iter() {
                    calls += counts.calls[e as usize].load(Ordering::Relaxed);
                    nanos = nanos.saturating_add(counts.nanos[e as usize].load(Ordering::Relaxed));
                }
                (e, calls, nanos as f64 / 1e9)
            })
            .filter(|(_, calls, _)| *calls > 0)
            .collect()
    }
}

impl ThreadCounts {
    /// Counts a call at `event`; every [`SAMPLE_EVERY`]th call (of these counts) is
    /// timed until [`ThreadCounts::end`].
    #[inline(always)]
    pub fn start(&self, event: Event) -> Timing {
        let n = self.calls[event as usize].fetch_add(1, Ordering::Relaxed);
        Timing(if n & (SAMPLE_EVERY - 1) == 0 {
            Some(Instant::now())
        } else {
            None
        })
    }

    /// Ends a call begun with [`ThreadCounts::start`].
    #[inline(always)]
    pub fn end(&self, event: Event, timing: Timing) {
        if let Some(started) = timing.0 {
            self.timed(event, started.elapsed());
        }
    }

    #[cold]
    fn timed(&self, event: Event, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[event as usize].fetch_add(nanos.saturating_mul(SAMPLE_EVERY), Ordering::Relaxed);
    }
}

/// Every module's counts, by name, in the order modules were first loaded. At most as
/// many entries as differently named modules were ever configured.
#[derive(Default)]
pub(crate) struct ModuleEventTable(Mutex<Vec<(String, Arc<ModuleEvents>)>>);

impl ModuleEventTable {
    /// The counts of the module named `name`, created at its first load.
    pub fn of(&self, name: &str) -> Arc<ModuleEvents> {
        let mut table = lock(&self.0);
        if let Some((_, events)) = table.iter().find(|(n, _)| n == name) {
            return events.clone();
        }
        let events = Arc::new(ModuleEvents::default());
        table.push((name.to_string(), events.clone()));
        events
    }

    /// (module, its events) for every module loaded so far.
    pub fn read(&self) -> Vec<ModuleFigures> {
        let table: Vec<_> = lock(&self.0).clone();
        table
            .into_iter()
            .map(|(name, events)| (name, events.read()))
            .collect()
    }

    /// The two counters in the text exposition format (nothing before a module is
    /// loaded). Labels: the module's name, which the configuration gave, and the event.
    pub fn encode(&self, out: &mut String) {
        let modules = self.read();
        if modules.is_empty() {
            return;
        }
        out.push_str(
            "# HELP weir_module_events Module callbacks called, by module and event\n\
             # TYPE weir_module_events counter\n",
        );
        for (name, events) in &modules {
            for (event, calls, _) in events {
                let _ = writeln!(
                    out,
                    "weir_module_events_total{{module=\"{}\",event=\"{}\"}} {calls}",
                    label(name),
                    event.name()
                );
            }
        }
        let _ = write!(
            out,
            "# HELP weir_module_event_seconds Time in module callbacks, by module and event \
             (estimated from one call in {SAMPLE_EVERY})\n\
             # TYPE weir_module_event_seconds counter\n\
             # UNIT weir_module_event_seconds seconds\n"
        );
        for (name, events) in &modules {
            for (event, _, seconds) in events {
                let _ = writeln!(
                    out,
                    "weir_module_event_seconds_total{{module=\"{}\",event=\"{}\"}} {seconds}",
                    label(name),
                    event.name()
                );
            }
        }
    }
}

/// A label value with `\`, `"` and line breaks escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_and_one_in_sample_every_timed() {
        let table = ModuleEventTable::default();
        let module = table.of("m");
        assert!(Arc::ptr_eq(&module, &table.of("m")), "one entry per name");
        let events = module.this_thread();
        for _ in 0..SAMPLE_EVERY + 1 {
            let t = events.start(Event::RequestHeaders);
            std::thread::sleep(Duration::from_micros(50));
            events.end(Event::RequestHeaders, t);
        }
        let t = events.start(Event::Log);
        events.end(Event::Log, t);
        let read = table.read();
        assert_eq!(read.len(), 1);
        let (name, events) = &read[0];
        assert_eq!(name, "m");
        assert_eq!(events.len(), 2, "events never called are left out");
        let (event, calls, seconds) = events[0];
        assert_eq!((event, calls), (Event::RequestHeaders, SAMPLE_EVERY + 1));
        // Two calls were timed (the first and the 65th), each of at least 50 µs, and
        // each counts for SAMPLE_EVERY calls.
        assert!(seconds >= 2.0 * 50e-6 * SAMPLE_EVERY as f64, "{seconds}");
        let mut out = String::new();
        table.encode(&mut out);
        assert!(out.contains(&format!(
            "weir_module_events_total{{module=\"m\",event=\"request_headers\"}} {}\n",
            SAMPLE_EVERY + 1
        )));
        assert!(out.contains("weir_module_events_total{module=\"m\",event=\"log\"} 1\n"));
        assert!(out.contains("weir_module_event_seconds_total{module=\"m\",event=\"log\"} "));
    }

    #[test]
    fn calls_on_many_threads_are_all_counted() {
        let module = Arc::new(ModuleEvents::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let module = module.clone();
                std::thread::spawn(move || {
                    let events = module.this_thread();
                    for _ in 0..1000 {
                        let t = events.start(Event::ResponseHeaders);
                        events.end(Event::ResponseHeaders, t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let events = module.this_thread();
        let t = events.start(Event::ResponseHeaders);
        events.end(Event::ResponseHeaders, t);
        let read = module.read();
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].0, read[0].1), (Event::ResponseHeaders, 4001));
    }

    #[test]
    fn nothing_is_encoded_before_a_module_loads() {
        let mut out = String::new();
        ModuleEventTable::default().encode(&mut out);
        assert!(out.is_empty());
    }
}
