//! The `clients` module: statistics per client address and per user (requests, bytes
//! each way, hits, misses, denials, refusals by limit), and the limits built on them:
//! a request rate (token bucket, `429` with `Retry-After`), bandwidth shaping (Squid's
//! delay pools), a daily byte quota, and a cap on requests in flight.
//!
//! One module rather than a `stats` and a `limits`: the limits key on the same
//! bounded tables the statistics keep, and each refusal is itself a statistic, so one
//! lock per request serves both. Memory is bounded by `top` entries per table
//! (Space-Saving, see `table`), whatever the number of clients. Without limits the
//! module only counts (the log event); without `bandwidth` it never sees a body nor a
//! tunnel's bytes.
//!
//! Its report is published at `/admin/modules/clients` (JSON) and in `/metrics`.
//! Configure it after `access`, which names the user.

mod limits;
mod report;
mod settings;
mod table;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use weir_api::http::{HeaderValue, StatusCode};
use weir_api::{
    AdminReport, BodyChunk, Counter, Decision, Event, Events, Flow, Module, ModuleContext,
    ModuleFactory, Outcome, Reply, RequestHead, Settings, SettingsError, TunnelChunk,
    TunnelDirection, Txn,
};

use limits::LimitState;
use settings::{ClientsConfig, LimitBy};
use table::{Figures, Table};

/// Builds the `clients` module.
pub struct ClientsFactory;

/// The name operators write in `[[module]] name = "…"`.
const NAME: &str = "clients";

impl ModuleFactory for ClientsFactory {
    fn name(&self) -> &'static str {
        NAME
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let config = settings::read(settings)?;
        let mut events = vec![Event::Log];
        if config.limits_requests() {
            events.push(Event::RequestHeaders);
        }
        if config.bandwidth.is_some() {
            // Tunnels too: on a forward proxy, HTTPS is most of what clients receive
            // (Squid's delay pools slow CONNECT tunnels as well).
            events.extend([Event::DeliverBody, Event::TunnelData]);
        }
        let counter = |name: &str, help: &str| context.counter(&format!("{NAME}_{name}"), help);
        let totals = Totals {
            requests: counter("requests", "Requests finished, all clients"),
            rate_limited: counter("rate_limited", "Requests refused by the rate limit"),
            over_quota: counter("over_quota", "Requests refused by the daily byte quota"),
            over_concurrency: counter(
                "over_concurrency",
                "Requests refused by the cap on requests in flight",
            ),
            shaped_ms: counter(
                "shaped_milliseconds",
                "Milliseconds bandwidth shaping held back response bodies and tunnels",
            ),
        };
        let shared = Arc::new(Shared {
            clients: Mutex::new(Table::new(config.top)),
            users: Mutex::new(Table::new(config.top)),
            config,
            totals,
        });
        let weak: std::sync::Weak<dyn AdminReport> = Arc::downgrade(&shared) as _;
        context.publish(NAME, weak);
        Ok(Arc::new(Clients {
            shared,
            events: Events::of(&events),
        }))
    }
}

/// The module; it owns the tables its published report reads.
struct Clients {
    shared: Arc<Shared>,
    events: Events,
}

/// Counters over all clients, exported as `weir_module_clients_*_total`.
struct Totals {
    requests: Counter,
    rate_limited: Counter,
    over_quota: Counter,
    over_concurrency: Counter,
    shaped_ms: Counter,
}

struct Shared {
    config: ClientsConfig,
    clients: Mutex<Table<IpAddr>>,
    users: Mutex<Table<Arc<str>>>,
    totals: Totals,
}

/// The longest one body chunk is held back. A hit in memory comes as one chunk (up to
/// `max_memory_object`), which at a low rate could cost minutes, past the engine's
/// bound on a module's wait (`[limits] module_wait`, 30 s by default); what is not
/// waited for stays owed in the bucket, and the client's next chunks pay it.
const MAX_HOLD: Duration = Duration::from_secs(10);

/// Made when the limits admit a transaction (its bytes then count against the
/// quota); `true` when it holds one of its key's in-flight places.
#[derive(Default)]
struct Admitted(bool);

/// Why a request is refused.
enum Refusal {
    Rate { retry_after: u64 },
    Quota { quota: u64, retry_after: u64 },
    Concurrency { cap: u32 },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Shared {
    /// Runs `f` on the entry the limits apply to for this transaction: the user's
    /// when limiting by user and the request has one, else the client address's.
    fn with_limited<R>(&self, txn: &Txn, f: impl FnOnce(&mut Figures, &mut LimitState) -> R) -> R {
        match (self.config.by, txn.user()) {
            (LimitBy::User, Some(user)) => {
                let mut users = lock(&self.users);
                let e = users.entry(user, || Arc::from(user));
                f(&mut e.figures, &mut e.limits)
            }
            _ => {
                let ip = txn.client_addr().ip();
                let mut clients = lock(&self.clients);
                let e = clients.entry(&ip, || ip);
                f(&mut e.figures, &mut e.limits)
            }
        }
    }

    /// The request-time limits, in an order that takes nothing from a request that
    /// is refused: quota and in-flight cap first, then a token.
    fn admit(&self, txn: &Txn, now: Instant) -> Result<bool, Refusal> {
        let config = &self.config;
        let period = config
            .quota
            .map(|(_, reset)| (limits::quota_period(unix_now(), reset), reset));
        self.with_limited(txn, |figures, state| {
            if let (Some((quota, _)), Some((period, reset))) = (config.quota, period) {
                if state.quota_used_in(period) >= quota {
                    figures.over_quota += 1;
                    return Err(Refusal::Quota {
                        quota,
                        retry_after: limits::until_reset(unix_now(), reset),
                    });
                }
            }
            if let Some(cap) = config.concurrent {
                if state.in_flight >= cap {
                    figures.over_concurrency += 1;
                    return Err(Refusal::Concurrency { cap });
                }
            }
            if let Some((rate, burst)) = config.rate {
                if let Err(retry_after) = state.take_request(rate, burst, now) {
                    figures.rate_limited += 1;
                    return Err(Refusal::Rate { retry_after });
                }
            }
            if config.concurrent.is_some() {
                state.in_flight += 1;
                return Ok(true);
            }
            Ok(false)
        })
    }
}

impl Shared {
    /// Holds back `len` bytes on their way to the client, as long as the bandwidth
    /// asks (at most `MAX_HOLD`).
    fn shape(&self, txn: &Txn, len: usize) -> Flow<'static> {
        let Some((rate, burst)) = self.config.bandwidth else {
            return Flow::Continue;
        };
        if len == 0 {
            return Flow::Continue;
        }
        let delay = self.with_limited(txn, |figures, state| {
            let delay = state.shape(len, rate, burst, Instant::now()).min(MAX_HOLD);
            figures.shaped_ms += delay.as_millis() as u64;
            delay
        });
        if delay < Duration::from_millis(1) {
            return Flow::Continue;
        }
        self.totals.shaped_ms.add(delay.as_millis() as u64);
        Flow::wait(async move {
            tokio::time::sleep(delay).await;
            Decision::Continue
        })
    }
}

fn refuse(refusal: Refusal) -> Reply {
    let (text, retry_after) = match refusal {
        Refusal::Rate { retry_after } => (
            "Too many requests: this client's request rate limit is reached; retry later.\n"
                .to_string(),
            retry_after,
        ),
        Refusal::Quota { quota, retry_after } => (
            format!(
                "Daily quota exhausted: this client has received its {quota} bytes for \
                 today; the quota resets in {retry_after} seconds.\n"
            ),
            retry_after,
        ),
        Refusal::Concurrency { cap } => (
            format!("Too many requests in flight: this client may have {cap} at a time.\n"),
            1,
        ),
    };
    let mut reply = Reply::text(StatusCode::TOO_MANY_REQUESTS, text);
    reply.headers.insert(
        weir_api::http::header::RETRY_AFTER,
        HeaderValue::from(retry_after),
    );
    reply
}

impl Module for Clients {
    fn name(&self) -> &str {
        NAME
    }

    fn events(&self) -> Events {
        self.events
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        _request: &'a mut RequestHead,
    ) -> Flow<'a> {
        let shared = &*self.shared;
        match shared.admit(txn, Instant::now()) {
            Ok(holds_place) => {
                txn.state::<Admitted>().0 = holds_place;
                Flow::Continue
            }
            Err(refusal) => {
                let (counter, field) = match refusal {
                    Refusal::Rate { .. } => (&shared.totals.rate_limited, "rate"),
                    Refusal::Quota { .. } => (&shared.totals.over_quota, "quota"),
                    Refusal::Concurrency { .. } => (&shared.totals.over_concurrency, "concurrent"),
                };
                counter.inc();
                txn.log_field("limit", field);
                Flow::Respond(refuse(refusal))
            }
        }
    }

    fn on_deliver_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.shared.shape(txn, chunk.data.len())
    }

    fn on_tunnel_data<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut TunnelChunk) -> Flow<'a> {
        match chunk.direction {
            TunnelDirection::ToClient => self.shared.shape(txn, chunk.data.len()),
            TunnelDirection::ToServer => Flow::Continue,
        }
    }

    fn on_log(&self, txn: &Txn) {
        let shared = &*self.shared;
        let Some(done) = txn.completion() else {
            return;
        };
        shared.totals.requests.inc();
        let count = |e: &mut Figures| {
            e.requests += 1;
            e.bytes_in += done.bytes_in;
            e.bytes_out += done.bytes_out;
            match done.outcome {
                Outcome::Hit => e.hits += 1,
                Outcome::Miss => e.misses += 1,
                Outcome::Denied => e.denied += 1,
                _ => {}
            }
        };
        let ip = txn.client_addr().ip();
        count(&mut lock(&shared.clients).entry(&ip, || ip).figures);
        if let Some(user) = txn.user() {
            count(&mut lock(&shared.users).entry(user, || Arc::from(user)).figures);
        }
        // Refused transactions took nothing: no place, and their refusal page is not
        // charged to the quota.
        let Some(&Admitted(holds_place)) = txn.state_ref::<Admitted>() else {
            return;
        };
        let quota = shared.config.quota;
        if holds_place || quota.is_some() {
            let period = quota.map(|(_, reset)| limits::quota_period(unix_now(), reset));
            shared.with_limited(txn, |_, state| {
                if holds_place {
                    state.in_flight = state.in_flight.saturating_sub(1);
                }
                if let Some(period) = period {
                    state.use_quota(done.bytes_out, period);
                }
            });
        }
    }
}
