//! The transaction as modules see it: who asked, per-module state, cache steering,
//! custom log fields.

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[cfg(test)]
mod credentials_tests;
#[cfg(test)]
mod state_tests;

/// What the cache lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheLookup {
    /// A fresh stored response will be served.
    Fresh,
    /// A stored response must be validated with the origin first.
    Stale,
    /// Nothing stored: the origin will be asked.
    Miss,
    /// The request does not use the cache (method, Range, no-store, or a module).
    Bypass,
}

/// How modules steer the cache for this transaction (set in the request or response
/// header events).
#[derive(Debug, Clone, Default)]
pub struct CacheOverrides {
    /// Neither look up nor store.
    pub skip: bool,
    /// Store the response for this long, whatever its headers say (shared-cache rules
    /// on what may be stored still apply).
    pub ttl: Option<Duration>,
    /// An extra part of the cache key: responses with different variants are
    /// different objects (e.g. the encoding a compressor produced). A `Cow`, so that a
    /// module whose variants are fixed strings sets one without allocating
    /// (`Some("webp".into())`).
    pub variant: Option<Cow<'static, str>>,
    /// Invalidation tags attached to the stored response.
    pub tags: Vec<String>,
}

/// How the listener that received a transaction serves its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerMode {
    /// Clients know they talk to a proxy: absolute URLs, CONNECT, `Proxy-Authorization`.
    Forward,
    /// Clients take the proxy for the origin (origin-form URLs, `Authorization`).
    Reverse,
    /// Connections the kernel redirected to the proxy: clients do not know of it.
    Transparent,
}

impl ListenerMode {
    /// The field in which a client of this listener sends credentials for the proxy:
    /// `Proxy-Authorization` to a forward proxy, `Authorization` to a reverse one (its
    /// clients take it for the origin). None for transparent listeners, whose clients
    /// do not know of the proxy: what they send is for the origin.
    pub fn credentials_field(self) -> Option<http::HeaderName> {
        match self {
            ListenerMode::Forward => Some(http::header::PROXY_AUTHORIZATION),
            ListenerMode::Reverse => Some(http::header::AUTHORIZATION),
            ListenerMode::Transparent => None,
        }
    }
}

/// What a transaction knows of the listener that received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// Forward, reverse or transparent.
    pub mode: ListenerMode,
    /// The client's connection is TLS (the listener terminates it): origin-form URLs
    /// are `https`.
    pub tls: bool,
}

/// How a transaction was served, as the [`Log`](crate::Event::Log) event reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// From the cache without asking the origin for a body: a fresh hit (memory or
    /// disk), a stale copy served while revalidating or on error, a `304` from the
    /// origin, or another client's fetch joined.
    Hit,
    /// Fetched from the origin for this request (stored or not).
    Miss,
    /// Passed to the origin without the cache (method, `Range`, `no-store`, a module).
    Bypass,
    /// A `CONNECT` tunnel.
    Tunnel,
    /// Refused: access rules, limits, a module's answer with a 4xx, a malformed request.
    Denied,
    /// Failed: origin unreachable, timeout, a cut body.
    Error,
}

/// What the engine knows of a finished transaction, for modules that keep statistics
/// ([`Txn::completion`] in `on_log`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The status sent to the client.
    pub status: u16,
    /// Request body bytes received from the client.
    pub bytes_in: u64,
    /// Response body bytes sent to the client.
    pub bytes_out: u64,
    /// How it was served.
    pub outcome: Outcome,
}

/// One transaction, as every module's callbacks see it.
pub struct Txn {
    client: SocketAddr,
    listener: Listener,
    /// Shared, not copied: a module that authenticates keeps the name it verified once
    /// and hands it to every transaction of that user without an allocation.
    user: Option<Arc<str>>,
    current: usize,
    body_length_may_change: bool,
    whole_body: bool,
    /// Whether the engine took the credentials field out of the request as it parsed
    /// it; then `credentials` holds its value, if the request had one (see
    /// [`Txn::take_credentials`]). Boxed: a pointer keeps every transaction's `Txn`
    /// as small as it was, and only requests with credentials pay for the box.
    credentials_set_aside: bool,
    credentials: Option<Box<http::HeaderValue>>,
    /// Made on first use: most transactions of most modules keep no state, set no
    /// override and add no log field, and then a transaction allocates nothing and
    /// stays small enough to move cheaply. Taken from and given back to this
    /// thread's spares (see [`Extra::take`]).
    extra: Option<Box<Extra>>,
}

// What a transaction allocates only when a module uses it (module states, cache
// overrides, log fields, the completion), and the spares of it that each thread keeps
// for its next transactions.
//
// A transaction whose module keeps state (a proxy-wasm filter, `compress`, `clients`)
// or that has a module listening to the log event needs these extras on every
// transaction: made anew, they cost a box and the vector of states, each allocated
// and freed again, about a sixth of what an empty proxy-wasm filter adds to a cached
// hit. A finished transaction's extras are cleared and kept instead, with the
// vector's room, for the next transaction on the same thread. Not kept in the `Txn`
// itself: that makes every transaction's `Txn` larger, with or without modules, and
// a hit without modules measurably dearer (the place for its `Txn` moves with it).

/// One module's state, with what puts it back to its default. A finished
/// transaction's states are reset in place (the old value dropped then, as before)
/// and their boxes kept with the spare extras: the next transaction of the same
/// module on this thread reuses the box instead of allocating one (about 70
/// instructions a transaction).
struct State {
    value: Box<dyn Any + Send>,
    reset: fn(&mut (dyn Any + Send)),
    /// Made or reused by the current transaction; else a reset box, kept for reuse.
    live: bool,
}

impl State {
    fn new<T: Default + Send + 'static>() -> State {
        State {
            value: Box::new(T::default()),
            reset: |value| {
                if let Some(value) = value.downcast_mut::<T>() {
                    *value = T::default();
                }
            },
            live: true,
        }
    }
}

/// A transaction's extras.
#[derive(Default)]
struct Extra {
    /// By module index.
    states: Vec<Option<State>>,
    cache: CacheOverrides,
    log_fields: Vec<(&'static str, String)>,
    completion: Option<Completion>,
}

/// Spares kept per thread: enough for the transactions a worker finishes between two
/// it starts; beyond them, extras are freed.
const SPARES: usize = 8;

thread_local! {
    // Boxed: a spare moves into a `Txn` as the pointer it holds.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<Extra>>> = const { RefCell::new(Vec::new()) };
}

impl Extra {
    /// Empty extras: a spare of this thread's, or new ones.
    fn take() -> Box<Extra> {
        SPARE
            .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Empties these extras (the module states reset, which drops their values, with
    /// their boxes and the vector's room kept) and keeps them for this thread's next
    /// transaction.
    fn give_back(mut self: Box<Extra>) {
        // Emptied before the spares are borrowed: a state's destructor may itself
        // finish a transaction. The states' boxes stay, reset (see `State`).
        for state in self.states.iter_mut().flatten() {
            if std::mem::take(&mut state.live) {
                (state.reset)(&mut *state.value);
            }
        }
        if self.cache.ttl.is_some()
            || self.cache.skip
            || self.cache.variant.is_some()
            || !self.cache.tags.is_empty()
        {
            self.cache = CacheOverrides::default();
        }
        self.log_fields.clear();
        self.completion = None;
        let _ = SPARE.try_with(|spare| {
            if let Ok(mut spare) = spare.try_borrow_mut() {
                if spare.len() < SPARES {
                    spare.push(self);
                }
            }
        });
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if let Some(extra) = self.extra.take() {
            extra.give_back();
        }
    }
}

/// What `Txn::cache_overrides` reads before any module set one.
static NO_OVERRIDES: CacheOverrides = CacheOverrides {
    skip: false,
    ttl: None,
    variant: None,
    tags: Vec::new(),
};

impl Txn {
    /// The client's address.
    pub fn client_addr(&self) -> SocketAddr {
        self.client
    }

    /// The listener that received the transaction.
    pub fn listener(&self) -> Listener {
        self.listener
    }

    /// Names the client's authenticated user: the access log writes it (Squid's user
    /// field, the combined format's `%u`), and later modules read it with
    /// [`Txn::user`]. Set it at `RequestHeaders`, where the request is authenticated.
    pub fn set_user(&mut self, user: Arc<str>) {
        self.user = Some(user);
    }

    /// The authenticated user, when a module set one.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// This module's own state for this transaction, created with `T::default()` on
    /// first use. Each module has its own: two modules never see each other's.
    ///
    /// # Panics
    /// If the same module asks for two different types in one transaction.
    pub fn state<T: Default + Send + 'static>(&mut self) -> &mut T {
        let current = self.current;
        let states = &mut self.extra().states;
        if states.len() <= current {
            states.resize_with(current + 1, || None);
        }
        let slot = &mut states[current];
        match slot {
            // A box an earlier transaction left, reset, of this type: reused.
            Some(state) if !state.live && state.value.is::<T>() => state.live = true,
            Some(state) if state.live => {}
            _ => *slot = Some(State::new::<T>()),
        }
        let state = slot.as_mut().expect("made above");
        state
            .value
            .downcast_mut::<T>()
            .expect("a module keeps one state type per transaction")
    }

    /// This module's state for this transaction if it made one, read-only: for the
    /// log event, which sees the transaction as `&Txn`.
    pub fn state_ref<T: Send + 'static>(&self) -> Option<&T> {
        let extra = self.extra.as_ref()?;
        let state = extra.states.get(self.current)?.as_ref()?;
        match state.live {
            true => state.value.downcast_ref::<T>(),
            false => None,
        }
    }

    /// How the cache treats this transaction.
    pub fn cache(&mut self) -> &mut CacheOverrides {
        &mut self.extra().cache
    }

    /// The cache overrides set so far.
    pub fn cache_overrides(&self) -> &CacheOverrides {
        self.extra.as_ref().map_or(&NO_OVERRIDES, |e| &e.cache)
    }

    /// Adds a field to this transaction's access-log line (`name=value`).
    pub fn log_field(&mut self, name: &'static str, value: impl Into<String>) {
        self.extra().log_fields.push((name, value.into()));
    }

    /// The custom log fields added so far.
    pub fn log_fields(&self) -> &[(&'static str, String)] {
        self.extra.as_ref().map_or(&[], |e| &e.log_fields)
    }

    /// How the transaction ended: status, bytes each way, cache outcome. Set by the
    /// engine before the [`Log`](crate::Event::Log) event (and only when a module
    /// listens to it); `None` in every earlier event.
    pub fn completion(&self) -> Option<Completion> {
        self.extra.as_ref().and_then(|e| e.completion)
    }

    /// Declares, in a header event, that this module may change the length of the
    /// body that follows; the engine then drops `Content-Length`, sends the body
    /// chunked and marks the ETag weak.
    pub fn body_length_may_change(&mut self) {
        self.body_length_may_change = true;
    }

    /// Whether any module declared that the body length may change.
    pub fn body_length_changes(&self) -> bool {
        self.body_length_may_change
    }

    /// Asks, in a header event, for the body that follows in one piece: the engine
    /// collects it (up to the configured `[limits] module_body`) and calls the body
    /// event once, with the whole body and `last` set. A body over the limit passes
    /// through unchanged, without body events.
    pub fn whole_body(&mut self) {
        self.whole_body = true;
    }

    /// Whether a module asked for the whole body.
    pub fn wants_whole_body(&self) -> bool {
        self.whole_body
    }

    /// Takes the request's credentials for the proxy out of it: the value of
    /// [`ListenerMode::credentials_field`] (`Proxy-Authorization` on forward listeners,
    /// `Authorization` on reverse ones; every line of it), so that they are neither
    /// forwarded nor seen by later modules. `None` when the request has none, on
    /// transparent listeners, and for a module that asks after another took them.
    ///
    /// For a chain with a module whose [`Module::takes_credentials`] says so, the
    /// engine sets the field aside as it parses the request (no module sees it in
    /// `request`), and this hands it over without a lookup; what no module took at
    /// `RequestHeaders` goes back into the request.
    ///
    /// [`Module::takes_credentials`]: crate::Module::takes_credentials
    pub fn take_credentials(
        &mut self,
        request: &mut crate::RequestHead,
    ) -> Option<http::HeaderValue> {
        if self.credentials_set_aside {
            return self.credentials.take().map(|value| *value);
        }
        request
            .headers
            .remove(self.listener.mode.credentials_field()?)
    }

    fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Extra::take)
    }
}

/// What the engine does with a transaction; a module's own tests use [`engine::new_txn`]
/// to call its callbacks directly.
pub mod engine {
    use super::*;

    /// A transaction for `modules` modules (their states are made on first use).
    pub fn new_txn(client: SocketAddr, modules: usize) -> Txn {
        let _ = modules;
        Txn {
            client,
            listener: Listener {
                mode: ListenerMode::Forward,
                tls: false,
            },
            user: None,
            current: 0,
            body_length_may_change: false,
            whole_body: false,
            credentials_set_aside: false,
            credentials: None,
            extra: None,
        }
    }

    /// Hands over the credentials field the engine took out of the request as it
    /// parsed it (`None`: the request had none), for [`Txn::take_credentials`].
    pub fn set_aside_credentials(txn: &mut Txn, credentials: Option<Box<http::HeaderValue>>) {
        txn.credentials_set_aside = true;
        txn.credentials = credentials;
    }

    /// The credentials set aside that no module took, to go back into the request;
    /// from then on [`Txn::take_credentials`] looks for them in the request.
    pub fn untaken_credentials(txn: &mut Txn) -> Option<http::HeaderValue> {
        txn.credentials_set_aside = false;
        txn.credentials.take().map(|value| *value)
    }

    /// Says which listener received the transaction (a new one is a plain-text forward
    /// listener's).
    pub fn set_listener(txn: &mut Txn, listener: Listener) {
        txn.listener = listener;
    }

    /// Selects whose state [`Txn::state`] returns: the module at this index.
    pub fn set_current(txn: &mut Txn, module: usize) {
        txn.current = module;
    }

    /// Records how the transaction ended, for [`Txn::completion`] in the log event.
    pub fn set_completion(txn: &mut Txn, completion: Completion) {
        txn.extra().completion = Some(completion);
    }

    /// Clears the body declarations (length, whole body) between the response and
    /// delivery phases.
    pub fn reset_body_length(txn: &mut Txn) {
        txn.body_length_may_change = false;
        txn.whole_body = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_module_has_its_own_state() {
        let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 2);
        engine::set_current(&mut t, 0);
        *t.state::<u32>() += 5;
        engine::set_current(&mut t, 1);
        assert_eq!(*t.state::<u32>(), 0);
        engine::set_current(&mut t, 0);
        assert_eq!(*t.state::<u32>(), 5);
    }

    #[test]
    fn overrides_and_fields_read_empty_until_set() {
        let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
        assert!(!t.cache_overrides().skip && t.cache_overrides().tags.is_empty());
        assert!(t.log_fields().is_empty());
        t.cache().variant = Some("gzip".into());
        t.log_field("a", "b");
        assert_eq!(t.cache_overrides().variant.as_deref(), Some("gzip"));
        assert_eq!(t.log_fields(), [("a", "b".to_string())]);
    }
}
