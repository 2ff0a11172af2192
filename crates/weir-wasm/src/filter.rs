//! A loaded filter as a Weir module: its HTTP-context callbacks called at Weir's
//! events, one instance per transaction from a pool, and a failure (trap, deadline,
//! memory limit) turned into the module failure the engine already handles.

use std::cell::Cell;
use std::sync::Mutex;

use weir_api::http::HeaderMap;
use weir_api::{
    BodyChunk, Bytes, CacheLookup, Counter, Decision, Events, Flow, Module, Reply, RequestHead,
    ResponseHead, Timer, Txn,
};

use crate::abi::{BufferType, MapType};
use crate::head::{request_ends, response_ends, Head};
use crate::host::PendingCall;
use crate::options::Options;
use crate::pool::Pool;
use crate::vm::{Template, Vm, ROOT};

/// A loaded proxy-wasm filter.
pub(crate) struct Filter {
    template: Template,
    options: Options,
    events: Events,
    /// Idle instances, for the next transactions.
    idle: Pool<Vm>,
    /// The instance whose root context gets `proxy_on_tick`.
    root: Mutex<Option<Box<Vm>>>,
    failures: Counter,
    timeouts: Counter,
}

/// The filter's part of a transaction: its instance and HTTP context.
#[derive(Default)]
struct Stream {
    /// In a cell only because the log event sees the transaction read-only, and
    /// takes the instance out through it. A cell rather than a lock: a module's state
    /// need only be `Send` (one transaction runs on one thread at a time), and a lock
    /// and its poisoning checks cost the log event about 40 instructions.
    vm: Cell<Option<Box<Vm>>>,
    context: i32,
}

/// What a callback that succeeded left for the engine: taken out of the instance
/// in the same visit to the transaction's state as the call.
#[derive(Default)]
struct Left {
    /// Set with `proxy_send_local_response`. Boxed: a `Reply` inline made what
    /// `with_stream` returns large enough that every callback copied it twice through
    /// `memcpy` (about 60 instructions a callback), for an answer that is rare.
    local: Option<Box<Reply>>,
    /// Asked for with `proxy_http_call`.
    calls: Vec<PendingCall>,
}

impl Stream {
    fn vm(&mut self) -> &mut Option<Box<Vm>> {
        self.vm.get_mut()
    }
}

impl Filter {
    /// A filter from its template; `root` is the instance made at load.
    pub fn new(
        template: Template,
        root: Vm,
        options: Options,
        failures: Counter,
        timeouts: Counter,
    ) -> Filter {
        let exports = &root.exports;
        let trailers = [
            exports.request_trailers.is_some(),
            exports.response_trailers.is_some(),
        ];
        let events = options.events(template.reads_lookup, trailers);
        Filter {
            template,
            idle: Pool::new(options.pool),
            options,
            events,
            root: Mutex::new(Some(Box::new(root))),
            failures,
            timeouts,
        }
    }

    fn checkout(&self) -> Box<Vm> {
        match self.idle.take() {
            Some(vm) => vm,
            None => Box::new(self.template.instantiate().unwrap_or_else(|e| {
                self.failures.inc();
                panic!("wasm filter `{}`: {e}", self.template.shared.name)
            })),
        }
    }

    fn checkin(&self, mut vm: Box<Vm>) {
        vm.store.data_mut().reset_transaction();
        self.idle.give_back(vm);
    }

    /// Counts and reports a failed callback; the instance is already dropped, and the
    /// next transaction gets a fresh one. Panics: the engine fails the transaction
    /// (500, or passes it by when the module is optional).
    fn fail(&self, callback: &str, e: wasmtime::Error) -> ! {
        self.failures.inc();
        if crate::vm::is_timeout(&e) {
            self.timeouts.inc();
        }
        panic!(
            "wasm filter `{}` failed in {callback}: {}",
            self.template.shared.name,
            crate::vm::describe(&e)
        )
    }

    /// Runs `f` on the transaction's instance (taken from the pool at the first
    /// callback). `f` gives back what it moved into the instance, and the call's
    /// result: on a failure the instance is dropped (the caller restores what it
    /// moved, then calls [`Filter::fail`]). `open`: `f` makes the request headers
    /// call, which creates the context too when the filter has a combined entry.
    fn with_stream<R>(
        &self,
        txn: &mut Txn,
        open: bool,
        f: impl FnOnce(&mut Vm, i32) -> (R, wasmtime::Result<()>),
    ) -> Option<(R, wasmtime::Result<()>, Left)> {
        // The state is looked up once: each lookup costs a hit about a hundred
        // instructions, and this runs at every callback.
        let client = txn.client_addr();
        let stream = txn.state::<Stream>();
        let mut vm = match stream.vm().take() {
            Some(vm) => vm,
            None if stream.context == 0 => {
                let mut vm = self.checkout();
                vm.store.data_mut().client = Some(client);
                let id = match open {
                    true => vm.open_context(),
                    false => vm.new_context(),
                };
                match id {
                    Ok(id) => stream.context = id,
                    Err(e) => self.fail("proxy_on_context_create", e),
                }
                vm
            }
            // The instance failed earlier in this transaction.
            None => return None,
        };
        let (back, result) = f(&mut vm, stream.context);
        let mut left = Left::default();
        if result.is_ok() {
            let host = vm.store.data_mut();
            let steer = host.steer.take();
            // Most callbacks leave neither: no move of an empty slot.
            if host.local_response.is_some() {
                left.local = host.local_response.take().map(Box::new);
            }
            if !host.calls.is_empty() {
                left.calls = std::mem::take(&mut host.calls);
            }
            *stream.vm() = Some(vm);
            if let Some(steer) = steer {
                steer.apply(txn);
            }
        }
        Some((back, result, left))
    }

    fn body<'a>(&'a self, txn: &'a mut Txn, chunk: &mut BodyChunk, request: bool) -> Flow<'a> {
        let (kind, func, name) = match request {
            true => (BufferType::RequestBody, "proxy_on_request_body", 0),
            false => (BufferType::ResponseBody, "proxy_on_response_body", 1),
        };
        let data = std::mem::take(&mut chunk.data);
        let last = chunk.last;
        let out = self.with_stream(txn, false, |vm, ctx| {
            vm.store.data_mut().body = Some((kind, data.to_vec()));
            let args = (ctx, data.len() as i32, last as i32);
            let r = match name {
                0 => vm.call(|e| e.request_body.as_ref(), args).map(drop),
                _ => vm.call(|e| e.response_body.as_ref(), args).map(drop),
            };
            (vm.store.data_mut().body.take().map(|(_, b)| b), r)
        });
        let left = match out {
            Some((Some(b), Ok(()), left)) => {
                chunk.data = Bytes::from(b);
                left
            }
            Some((_, Err(e), _)) => {
                chunk.data = data;
                self.fail(func, e)
            }
            Some((None, Ok(()), left)) => {
                chunk.data = data;
                left
            }
            None => {
                chunk.data = data;
                Left::default()
            }
        };
        self.after_callback(txn, Head::None, left)
    }

    /// The trailers callbacks: the map enters the instance as map type 1 or 3, and
    /// comes back as the filter left it.
    fn trailers<'a>(&'a self, txn: &'a mut Txn, map: &mut HeaderMap, which: MapType) -> Flow<'a> {
        let count = map.len() as i32;
        let taken = std::mem::take(map);
        let out = self.with_stream(txn, false, |vm, ctx| {
            vm.store.data_mut().trailers = Some((which, taken));
            let r = match which {
                MapType::RequestTrailers => vm.call(|e| e.request_trailers.as_ref(), (ctx, count)),
                _ => vm.call(|e| e.response_trailers.as_ref(), (ctx, count)),
            };
            (
                vm.store.data_mut().trailers.take().map(|t| t.1),
                r.map(drop),
            )
        });
        let left = match out {
            Some((back, Ok(()), left)) => {
                *map = back.unwrap_or_default();
                left
            }
            Some((_, Err(e), _)) => self.fail(
                match which {
                    MapType::RequestTrailers => "proxy_on_request_trailers",
                    _ => "proxy_on_response_trailers",
                },
                e,
            ),
            None => Left::default(),
        };
        self.after_callback(txn, Head::None, left)
    }

    fn response_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        if self.options.response_body {
            txn.whole_body();
            txn.body_length_may_change();
        }
        let end = response_ends(response);
        let count = response.headers.len();
        let mut head = Head::Response(response);
        let heads = self.template.heads;
        let back = self.with_stream(txn, false, |vm, ctx| {
            head.enter(vm.store.data_mut(), heads);
            let args = (ctx, count as i32, end as i32);
            let r = vm.call(|e| e.response_headers.as_ref(), args).map(drop);
            head.leave(vm.store.data_mut(), heads);
            ((), r)
        });
        let left = match back {
            Some(((), Err(e), _)) => self.fail("proxy_on_response_headers", e),
            Some(((), Ok(()), left)) => left,
            None => Left::default(),
        };
        self.after_callback(txn, head, left)
    }

    /// What the engine does after a callback: wait for the callouts it asked for (see
    /// `callout.rs`), answer with the filter's local response, or go on.
    fn after_callback<'a>(&'a self, txn: &'a mut Txn, head: Head<'a>, left: Left) -> Flow<'a> {
        let Left { local, calls } = left;
        if let Some(reply) = local {
            return Flow::Respond(*reply);
        }
        if calls.is_empty() {
            // Never allocated (taken from the instance only when not empty), so there
            // is nothing to free: forgetting it saves the call to its destructor that
            // every callback otherwise made.
            std::mem::forget(calls);
            return Flow::Continue;
        }
        Flow::wait(self.callouts(txn, head, calls))
    }

    /// Sends `calls` together and hands each answer to `proxy_on_http_call_response`,
    /// with the paused callback's head; again for the calls those callbacks make. The
    /// stream goes on once none is left (a filter need not call
    /// `proxy_continue_stream`), or answers with the filter's local response.
    async fn callouts(
        &self,
        txn: &mut Txn,
        mut head: Head<'_>,
        mut calls: Vec<PendingCall>,
    ) -> Decision {
        let content = self.template.shared.context.content().clone();
        let mut next = Vec::new();
        while !calls.is_empty() {
            let sent = calls.into_iter().map(|call| {
                let content = content.clone();
                async move {
                    let answer = content.call(call.request, call.timeout).await;
                    (call.token, answer.map_err(|e| e.to_string()))
                }
            });
            for (token, answer) in futures_util::future::join_all(sent).await {
                let answer = crate::callout::answer(answer);
                let heads = self.template.heads;
                let back = self.with_stream(txn, false, |vm, ctx| {
                    let (fields, body) = (answer.field_count(), answer.body.len());
                    let trailers = answer.trailers.len() as i32;
                    let host = vm.store.data_mut();
                    host.callout = Some(answer);
                    head.enter(host, heads);
                    let args = (ctx, token as i32, fields as i32, body as i32, trailers);
                    let r = vm.call(|e| e.http_call_response.as_ref(), args).map(drop);
                    let host = vm.store.data_mut();
                    head.leave(host, heads);
                    host.callout = None;
                    ((), r)
                });
                let left = match back {
                    Some(((), Err(e), _)) => self.fail("proxy_on_http_call_response", e),
                    // The instance failed earlier: nothing left to ask.
                    None => return Decision::Continue,
                    Some(((), Ok(()), left)) => left,
                };
                if let Some(reply) = left.local {
                    return Decision::Respond(*reply);
                }
                next.extend(left.calls);
            }
            calls = std::mem::take(&mut next);
        }
        Decision::Continue
    }
}

impl Module for Filter {
    fn name(&self) -> &str {
        "wasm"
    }

    fn events(&self) -> Events {
        self.events
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        if self.options.request_body {
            txn.whole_body();
            txn.body_length_may_change();
        }
        let end = request_ends(request);
        // The head moves into the instance for the call and back out after it, even
        // when the call fails (an optional filter's request goes on unchanged).
        let count = request.headers.len();
        let mut head = Head::Request(request);
        let heads = self.template.heads;
        let back = self.with_stream(txn, true, |vm, ctx| {
            head.enter(vm.store.data_mut(), heads);
            let r = vm.request_headers(ctx, count, end);
            head.leave(vm.store.data_mut(), heads);
            match r {
                Ok(()) => ("", Ok(())),
                Err((callback, e)) => (callback, Err(e)),
            }
        });
        let left = match back {
            Some((callback, Err(e), _)) => self.fail(callback, e),
            Some((_, Ok(()), left)) => left,
            None => Left::default(),
        };
        self.after_callback(txn, head, left)
    }

    fn on_cache_lookup<'a>(&'a self, txn: &'a mut Txn, lookup: CacheLookup) -> Flow<'a> {
        if let Some(vm) = txn.state::<Stream>().vm().as_mut() {
            vm.store.data_mut().lookup = Some(lookup);
        }
        Flow::Continue
    }

    fn on_request_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.body(txn, chunk, true)
    }

    fn on_response_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        self.response_headers(txn, response)
    }

    fn on_response_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.body(txn, chunk, false)
    }

    fn on_deliver_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        self.response_headers(txn, response)
    }

    fn on_deliver_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        self.body(txn, chunk, false)
    }

    fn on_request_trailers<'a>(&'a self, txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        self.trailers(txn, t, MapType::RequestTrailers)
    }

    fn on_response_trailers<'a>(&'a self, txn: &'a mut Txn, t: &'a mut HeaderMap) -> Flow<'a> {
        self.trailers(txn, t, MapType::ResponseTrailers)
    }

    fn on_log(&self, txn: &Txn) {
        // The log event sees the transaction read-only: the instance is taken out of
        // the state through its cell.
        let Some(stream) = txn.state_ref::<Stream>() else {
            return;
        };
        let Some(mut vm) = stream.vm.take() else {
            return;
        };
        let ctx = stream.context;
        match vm.end_stream(ctx) {
            Ok(()) => self.checkin(vm),
            Err((callback, e)) => self.fail(callback, e),
        }
    }

    fn timers(&self) -> Vec<Timer> {
        match self.template.tick_period() {
            Some(period) => vec![Timer {
                id: 0,
                after: period,
                every: Some(period),
            }],
            None => Vec::new(),
        }
    }

    fn on_timer(&self, _id: u32) {
        let mut root = self.root.lock().unwrap_or_else(|e| e.into_inner());
        let vm = match root.as_mut() {
            Some(vm) => vm,
            None => match self.template.instantiate() {
                Ok(vm) => root.insert(Box::new(vm)),
                Err(e) => {
                    self.failures.inc();
                    tracing::error!(filter = %self.template.shared.name, "{e}");
                    return;
                }
            },
        };
        if let Err(e) = vm.call(|e| e.tick.as_ref(), ROOT) {
            *root = None;
            self.fail("proxy_on_tick", e);
        }
    }
}
