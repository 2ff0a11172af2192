//! What the module tests share: a module shared with the engine while a test reads it.

use std::sync::Arc;

use weir_api::{BodyChunk, Events, Flow, Module, RequestHead, ResponseHead, TunnelChunk, Txn};

/// Shares a module with the engine while the test reads its counters.
pub struct Shared<M>(pub Arc<M>);

impl<M: Module> Module for Shared<M> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn events(&self) -> Events {
        self.0.events()
    }
    fn on_request_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
        self.0.on_request_headers(txn, r)
    }
    fn on_response_headers<'a>(&'a self, txn: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
        self.0.on_response_headers(txn, r)
    }
    fn on_response_body<'a>(&'a self, txn: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
        self.0.on_response_body(txn, c)
    }
    fn on_tunnel_data<'a>(&'a self, txn: &'a mut Txn, c: &'a mut TunnelChunk) -> Flow<'a> {
        self.0.on_tunnel_data(txn, c)
    }
    fn on_log(&self, txn: &Txn) {
        self.0.on_log(txn)
    }
}
