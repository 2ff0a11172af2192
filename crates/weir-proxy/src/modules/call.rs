//! The callbacks of each event, as `modules::Callback`s. A table with no logic of its
//! own, kept apart from the chain that calls through it.

use weir_api::http::HeaderMap;
use weir_api::{
    BodyChunk, CacheLookup, Flow, Module, RequestHead, ResponseHead, TunnelChunk, Txn, WholeBody,
};

// Each is `inline(always)` so that, once `ModuleChain::call` is inlined, the module's
// callback is called directly rather than through this function's pointer.

#[inline(always)]
pub fn request_headers<'a>(m: &'a dyn Module, t: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
    m.on_request_headers(t, r)
}
#[inline(always)]
pub fn request_body<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
    m.on_request_body(t, c)
}
#[inline(always)]
pub fn whole_request<'a>(
    m: &'a dyn Module,
    t: &'a mut Txn,
    w: &'a mut (RequestHead, WholeBody),
) -> Flow<'a> {
    m.on_whole_request(t, &mut w.0, &mut w.1)
}
#[inline(always)]
pub fn whole_response<'a>(
    m: &'a dyn Module,
    t: &'a mut Txn,
    w: &'a mut (ResponseHead, WholeBody),
) -> Flow<'a> {
    m.on_whole_response(t, &mut w.0, &mut w.1)
}
#[inline(always)]
pub fn cache_lookup<'a>(m: &'a dyn Module, t: &'a mut Txn, l: &'a mut CacheLookup) -> Flow<'a> {
    m.on_cache_lookup(t, *l)
}
#[inline(always)]
pub fn upstream_request<'a>(m: &'a dyn Module, t: &'a mut Txn, r: &'a mut RequestHead) -> Flow<'a> {
    m.on_upstream_request(t, r)
}
#[inline(always)]
pub fn response_headers<'a>(
    m: &'a dyn Module,
    t: &'a mut Txn,
    r: &'a mut ResponseHead,
) -> Flow<'a> {
    m.on_response_headers(t, r)
}
#[inline(always)]
pub fn response_body<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
    m.on_response_body(t, c)
}
#[inline(always)]
pub fn deliver_headers<'a>(m: &'a dyn Module, t: &'a mut Txn, r: &'a mut ResponseHead) -> Flow<'a> {
    m.on_deliver_headers(t, r)
}
#[inline(always)]
pub fn deliver_body<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut BodyChunk) -> Flow<'a> {
    m.on_deliver_body(t, c)
}
#[inline(always)]
pub fn request_trailers<'a>(m: &'a dyn Module, t: &'a mut Txn, h: &'a mut HeaderMap) -> Flow<'a> {
    m.on_request_trailers(t, h)
}
#[inline(always)]
pub fn response_trailers<'a>(m: &'a dyn Module, t: &'a mut Txn, h: &'a mut HeaderMap) -> Flow<'a> {
    m.on_response_trailers(t, h)
}
#[inline(always)]
pub fn tunnel_data<'a>(m: &'a dyn Module, t: &'a mut Txn, c: &'a mut TunnelChunk) -> Flow<'a> {
    m.on_tunnel_data(t, c)
}
