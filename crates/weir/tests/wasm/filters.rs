//! Test filters in WebAssembly text, compiled with the `wat` crate: the ABI's plumbing
//! (memory, a bump allocator reset for each HTTP context, the configuration read at
//! `proxy_on_configure`) and one body of callbacks per test.

use std::path::{Path, PathBuf};

/// The imports and plumbing every test filter shares. Memory: the return slots of
/// host calls at 0/4 and 8/12, constant strings from 64, the heap from 4096.
const PRELUDE: &str = r#"
  (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_buffer_bytes" (func $set_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response" (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_call_foreign_function" (func $foreign (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_not_in_any_abi" (func $unknown (param i32) (result i32)))
  (import "env" "proxy_set_tick_period_milliseconds" (func $set_tick (param i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $get_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_define_metric" (func $define_metric (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $increment_metric (param i32 i64) (result i32)))
  (import "env" "proxy_get_property" (func $get_property (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_http_call" (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $base (mut i32) (i32.const 4096))
  (global $conf_p (mut i32) (i32.const 0))
  (global $conf_l (mut i32) (i32.const 0))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32)
    (global.set $heap (global.get $base)))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (call $started) (i32.const 1))
  (func (export "proxy_on_configure") (param i32) (param $size i32) (result i32)
    (drop (call $get_buffer (i32.const 7) (i32.const 0) (local.get $size) (i32.const 0) (i32.const 4)))
    (global.set $conf_p (i32.load (i32.const 0)))
    (global.set $conf_l (i32.load (i32.const 4)))
    (global.set $base (global.get $heap))
    (i32.const 1))
  ;; Whether request header ($p, $l) is there; its value at 0/4.
  (func $req_has (param $p i32) (param $l i32) (result i32)
    (i32.eqz (call $get_header (i32.const 0) (local.get $p) (local.get $l) (i32.const 0) (i32.const 4))))
  ;; Calls foreign function ($np, $nl) with ($ap, $al); its result at 8/12.
  (func $call (param $np i32) (param $nl i32) (param $ap i32) (param $al i32)
    (drop (call $foreign (local.get $np) (local.get $nl) (local.get $ap) (local.get $al) (i32.const 8) (i32.const 12))))
"#;

/// A filter module: the prelude and `body`. `body` may define `$started`, called by
/// `proxy_on_vm_start`; one that does not gets an empty one.
pub fn wat(body: &str) -> String {
    let started = if body.contains("(func $started") {
        ""
    } else {
        "(func $started)"
    };
    format!("(module {PRELUDE}\n{started}\n{body}\n)")
}

/// Compiles `body` into `dir/name.wasm`.
pub fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let wasm = wat::parse_str(wat(body)).expect("the test filter is valid WebAssembly text");
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, wasm).expect("write the filter");
    path
}

/// Adds `x-wasm-in: yes` to requests; `x-wasm-out: yes`, `x-path` (the request's
/// `:path`), `x-config` (its configuration) and `x-stub` (what an unknown import
/// answered: 12 is `Unimplemented`) to responses.
pub const HEADERS: &str = r#"
  (data (i32.const 64) "x-wasm-in")
  (data (i32.const 80) "yes")
  (data (i32.const 96) "x-wasm-out")
  (data (i32.const 112) ":path")
  (data (i32.const 128) "x-path")
  (data (i32.const 144) "x-config")
  (data (i32.const 160) "x-stub")
  (data (i32.const 176) "12")
  (global $path_p (mut i32) (i32.const 0))
  (global $path_l (mut i32) (i32.const 0))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 0) (i32.const 64) (i32.const 9) (i32.const 80) (i32.const 3)))
    (if (call $req_has (i32.const 112) (i32.const 5))
      (then
        (global.set $path_p (i32.load (i32.const 0)))
        (global.set $path_l (i32.load (i32.const 4)))))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 96) (i32.const 10) (i32.const 80) (i32.const 3)))
    (drop (call $add_header (i32.const 2) (i32.const 128) (i32.const 6) (global.get $path_p) (global.get $path_l)))
    (drop (call $add_header (i32.const 2) (i32.const 144) (i32.const 8) (global.get $conf_p) (global.get $conf_l)))
    (if (i32.eq (call $unknown (i32.const 0)) (i32.const 12))
      (then (drop (call $add_header (i32.const 2) (i32.const 160) (i32.const 6) (i32.const 176) (i32.const 2)))))
    (i32.const 0))
"#;

/// Answers a request that has `x-deny` with a 403 of its own (body `denied by wasm`,
/// header `x-why: wasm`).
pub const DENY: &str = r#"
  (data (i32.const 64) "x-deny")
  (data (i32.const 80) "denied by wasm")
  (data (i32.const 112) "\01\00\00\00\05\00\00\00\04\00\00\00x-why\00wasm\00")
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $req_has (i32.const 64) (i32.const 6))
      (then
        (drop (call $local (i32.const 403) (i32.const 0) (i32.const 0)
          (i32.const 80) (i32.const 14) (i32.const 112) (i32.const 23) (i32.const -1)))
        (return (i32.const 1))))
    (i32.const 0))
"#;

/// Upper-cases the whole request body and appends `!`: [`SHOUT`] on buffer type 0.
pub fn shout_request() -> String {
    SHOUT
        .replace("proxy_on_response_body", "proxy_on_request_body")
        .replace(
            "(call $get_buffer (i32.const 1)",
            "(call $get_buffer (i32.const 0)",
        )
        .replace(
            "(call $set_buffer (i32.const 1)",
            "(call $set_buffer (i32.const 0)",
        )
}

/// Upper-cases the whole response body and appends `!`.
pub const SHOUT: &str = r#"
  (data (i32.const 64) "!")
  (func (export "proxy_on_response_body") (param $ctx i32) (param $size i32) (param $eos i32) (result i32)
    (local $p i32) (local $len i32) (local $i i32) (local $c i32)
    (if (i32.eqz (local.get $eos)) (then (return (i32.const 0))))
    (drop (call $get_buffer (i32.const 1) (i32.const 0) (local.get $size) (i32.const 0) (i32.const 4)))
    (local.set $p (i32.load (i32.const 0)))
    (local.set $len (i32.load (i32.const 4)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $c (i32.load8_u (i32.add (local.get $p) (local.get $i))))
        (if (i32.and (i32.ge_u (local.get $c) (i32.const 97)) (i32.le_u (local.get $c) (i32.const 122)))
          (then (i32.store8 (i32.add (local.get $p) (local.get $i)) (i32.sub (local.get $c) (i32.const 32)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (drop (call $set_buffer (i32.const 1) (i32.const 0) (local.get $len) (local.get $p) (local.get $len)))
    (drop (call $set_buffer (i32.const 1) (local.get $len) (i32.const 0) (i32.const 64) (i32.const 1)))
    (i32.const 0))
"#;

/// Misbehaves on request: `x-trap` traps, `x-spin` loops forever, `x-grow` grows its
/// memory by 100 pages (6.4 MiB). Otherwise adds `x-wasm-out: ok` to responses.
pub const MISBEHAVE: &str = r#"
  (data (i32.const 64) "x-trap")
  (data (i32.const 80) "x-spin")
  (data (i32.const 96) "x-grow")
  (data (i32.const 112) "x-wasm-out")
  (data (i32.const 128) "ok")
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $req_has (i32.const 64) (i32.const 6)) (then unreachable))
    (if (call $req_has (i32.const 80) (i32.const 6)) (then (loop $forever (br $forever))))
    (if (call $req_has (i32.const 96) (i32.const 6)) (then (drop (memory.grow (i32.const 100)))))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 112) (i32.const 10) (i32.const 128) (i32.const 2)))
    (i32.const 0))
"#;

/// Weir's cache functions: every request gets tag `wasm-tag` and a TTL of 60 s; the
/// value of `x-variant` becomes a variant of the key; `x-skip` skips the cache;
/// `x-purge: TAG` invalidates the tag and answers 200 with the count. Responses get
/// `x-lookup` with the lookup's result.
pub const CACHE: &str = r#"
  (data (i32.const 64) "x-variant")
  (data (i32.const 80) "weir_add_cache_key_variant")
  (data (i32.const 112) "weir_add_cache_tag")
  (data (i32.const 144) "wasm-tag")
  (data (i32.const 160) "weir_set_cache_ttl")
  (data (i32.const 192) "60")
  (data (i32.const 208) "weir_get_cache_status")
  (data (i32.const 240) "x-lookup")
  (data (i32.const 256) "x-purge")
  (data (i32.const 272) "weir_invalidate_tag")
  (data (i32.const 304) "weir_skip_cache")
  (data (i32.const 320) "x-skip")
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $req_has (i32.const 256) (i32.const 7))
      (then
        (call $call (i32.const 272) (i32.const 19) (i32.load (i32.const 0)) (i32.load (i32.const 4)))
        (drop (call $local (i32.const 200) (i32.const 0) (i32.const 0)
          (i32.load (i32.const 8)) (i32.load (i32.const 12)) (i32.const 0) (i32.const 0) (i32.const -1)))
        (return (i32.const 1))))
    (if (call $req_has (i32.const 64) (i32.const 9))
      (then (call $call (i32.const 80) (i32.const 26) (i32.load (i32.const 0)) (i32.load (i32.const 4)))))
    (if (call $req_has (i32.const 320) (i32.const 6))
      (then (call $call (i32.const 304) (i32.const 15) (i32.const 0) (i32.const 0))))
    (call $call (i32.const 112) (i32.const 18) (i32.const 144) (i32.const 8))
    (call $call (i32.const 160) (i32.const 18) (i32.const 192) (i32.const 2))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (call $call (i32.const 208) (i32.const 21) (i32.const 0) (i32.const 0))
    (drop (call $add_header (i32.const 2) (i32.const 240) (i32.const 8) (i32.load (i32.const 8)) (i32.load (i32.const 12))))
    (i32.const 0))
"#;

/// Ticks every 10 ms (`proxy_on_tick` counts in metric `wasm_ticks` and sets shared
/// data `ticked`); responses get `x-ticked: yes` once a tick has run, and `x-method`
/// and `x-source` from the `request.method` and `source.address` properties.
pub const TICKS: &str = r#"
  (data (i32.const 64) "wasm_ticks")
  (data (i32.const 80) "ticked")
  (data (i32.const 96) "yes")
  (data (i32.const 112) "x-ticked")
  (data (i32.const 128) "request\00method")
  (data (i32.const 144) "x-method")
  (data (i32.const 160) "source\00address")
  (data (i32.const 176) "x-source")
  (func $started
    (drop (call $set_tick (i32.const 10)))
    (drop (call $define_metric (i32.const 0) (i32.const 64) (i32.const 10) (i32.const 16))))
  (func (export "proxy_on_tick") (param i32)
    (drop (call $increment_metric (i32.load (i32.const 16)) (i64.const 1)))
    (drop (call $set_shared (i32.const 80) (i32.const 6) (i32.const 96) (i32.const 3) (i32.const 0))))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (if (i32.eqz (call $get_shared (i32.const 80) (i32.const 6) (i32.const 0) (i32.const 4) (i32.const 8)))
      (then (drop (call $add_header (i32.const 2) (i32.const 112) (i32.const 8) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (if (i32.eqz (call $get_property (i32.const 128) (i32.const 14) (i32.const 0) (i32.const 4)))
      (then (drop (call $add_header (i32.const 2) (i32.const 144) (i32.const 8) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (if (i32.eqz (call $get_property (i32.const 160) (i32.const 14) (i32.const 0) (i32.const 4)))
      (then (drop (call $add_header (i32.const 2) (i32.const 176) (i32.const 8) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (i32.const 0))
"#;

/// Adds `x-version: VERSION` to responses (for reloads).
pub fn version(v: &str) -> String {
    format!(
        r#"
  (data (i32.const 64) "x-version")
  (data (i32.const 80) "{v}")
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 64) (i32.const 9) (i32.const 80) (i32.const {})))
    (i32.const 0))
"#,
        v.len()
    )
}

/// At request headers, calls `GET /auth` (`:authority auth`) on the upstream its
/// configuration names and pauses; when the answer comes, adds `x-callout` (the
/// answer's body, or `failed` when the call failed) and `x-callout-status` to the
/// request, then continues it. An answer with status 403 is turned into a local 403.
pub const CALLOUT: &str = r#"
  (data (i32.const 64) "x-callout")
  (data (i32.const 80) "failed")
  (data (i32.const 96) ":status")
  (data (i32.const 112) "x-callout-status")
  (data (i32.const 128) "403")
  (data (i32.const 144) "refused by the callout")
  (data (i32.const 256) "\03\00\00\00\07\00\00\00\03\00\00\00\05\00\00\00\05\00\00\00\0a\00\00\00\04\00\00\00:method\00GET\00:path\00/auth\00:authority\00auth\00")
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (drop (call $http_call (global.get $conf_p) (global.get $conf_l) (i32.const 256) (i32.const 68)
      (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 2000) (i32.const 16)))
    (i32.const 1))
  (func (export "proxy_on_http_call_response") (param $ctx i32) (param $token i32) (param $headers i32) (param $body i32) (param i32)
    (if (i32.eqz (local.get $headers))
      (then
        (drop (call $add_header (i32.const 0) (i32.const 64) (i32.const 9) (i32.const 80) (i32.const 6)))
        (drop (call $continue (i32.const 0)))
        (return)))
    (if (i32.eqz (call $get_header (i32.const 6) (i32.const 96) (i32.const 7) (i32.const 0) (i32.const 4)))
      (then
        (if (i32.eq (i32.load8_u (i32.add (i32.load (i32.const 0)) (i32.const 2))) (i32.const 51))
          (then
            (drop (call $local (i32.const 403) (i32.const 0) (i32.const 0)
              (i32.const 144) (i32.const 22) (i32.const 0) (i32.const 0) (i32.const -1)))
            (return)))
        (drop (call $add_header (i32.const 0) (i32.const 112) (i32.const 16) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (drop (call $get_buffer (i32.const 4) (i32.const 0) (local.get $body) (i32.const 8) (i32.const 12)))
    (drop (call $add_header (i32.const 0) (i32.const 64) (i32.const 9) (i32.load (i32.const 8)) (i32.load (i32.const 12))))
    (drop (call $continue (i32.const 0))))
"#;

/// POSTs to the service named by its configuration an empty body with a trailer
/// (`x-call-trailer: sent`), and `TE: trailers`; adds to the request `x-callout-trailer` with the
/// answer's `x-answer-trailer` trailer (map type 7), or `none` when the callback was
/// told of no trailers.
pub const CALLOUT_TRAILERS: &str = r#"
  (data (i32.const 64) "x-answer-trailer")
  (data (i32.const 96) "x-callout-trailer")
  (data (i32.const 160) "none")
  (data (i32.const 256) "\04\00\00\00\07\00\00\00\04\00\00\00\05\00\00\00\05\00\00\00\0a\00\00\00\04\00\00\00\02\00\00\00\08\00\00\00:method\00POST\00:path\00/auth\00:authority\00auth\00te\00trailers\00")
  (data (i32.const 384) "\01\00\00\00\0e\00\00\00\04\00\00\00x-call-trailer\00sent\00")
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (drop (call $http_call (global.get $conf_p) (global.get $conf_l) (i32.const 256) (i32.const 89)
      (i32.const 0) (i32.const 0) (i32.const 384) (i32.const 32) (i32.const 2000) (i32.const 16)))
    (i32.const 1))
  (func (export "proxy_on_http_call_response") (param i32 i32 i32 i32) (param $trailers i32)
    (if (i32.eqz (local.get $trailers))
      (then
        (drop (call $add_header (i32.const 0) (i32.const 96) (i32.const 17) (i32.const 160) (i32.const 4)))
        (drop (call $continue (i32.const 0)))
        (return)))
    (if (i32.eqz (call $get_header (i32.const 7) (i32.const 64) (i32.const 16) (i32.const 0) (i32.const 4)))
      (then (drop (call $add_header (i32.const 0) (i32.const 96) (i32.const 17) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (drop (call $continue (i32.const 0))))
"#;

/// Reads the request after the request phase: at response headers, copies the
/// request's `x-req` into the response as `x-req-echo`, and adds `x-late-write` to the
/// request (which must answer `Ok`), then copies what it reads back of it into the
/// response. `proxy_on_done` traps when the request had `x-trap-done`.
pub const LATE: &str = r#"
  (data (i32.const 64) "x-req")
  (data (i32.const 80) "x-req-echo")
  (data (i32.const 96) "x-late-write")
  (data (i32.const 112) "ok")
  (data (i32.const 128) "x-trap-done")
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (if (call $req_has (i32.const 64) (i32.const 5))
      (then (drop (call $add_header (i32.const 2) (i32.const 80) (i32.const 10) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (if (i32.eqz (call $add_header (i32.const 0) (i32.const 96) (i32.const 12) (i32.const 112) (i32.const 2)))
      (then
        (if (call $req_has (i32.const 96) (i32.const 12))
          (then (drop (call $add_header (i32.const 2) (i32.const 96) (i32.const 12) (i32.load (i32.const 0)) (i32.load (i32.const 4))))))))
    (i32.const 0))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_done") (param i32) (result i32)
    (if (call $req_has (i32.const 128) (i32.const 11)) (then unreachable))
    (i32.const 1))
  (func (export "proxy_on_delete") (param i32))
"#;

/// A whole filter without the prelude, which imports no function that reads heads:
/// it adds `x-wasm-in: 1` to requests and `x-wasm-out: 1` to responses. With
/// `add` false it imports nothing at all and only returns from its callbacks.
pub fn blind(add: bool) -> String {
    let (import, request, response) = match add {
        true => (
            r#"(import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))"#,
            "(drop (call $add (i32.const 0) (i32.const 16) (i32.const 9) (i32.const 48) (i32.const 1)))",
            "(drop (call $add (i32.const 2) (i32.const 32) (i32.const 10) (i32.const 48) (i32.const 1)))",
        ),
        false => ("", "", ""),
    };
    format!(
        r#"(module
  {import}
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (data (i32.const 16) "x-wasm-in")
  (data (i32.const 32) "x-wasm-out")
  (data (i32.const 48) "1")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) {request} (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) {response} (i32.const 0))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32)))"#
    )
}

/// Copies the origin's `x-checksum` trailer to `x-wasm-saw` (map type 3), and adds
/// `x-wasm-req: yes` to request trailers that carry `x-digest` (map type 1).
pub const TRAILERS: &str = r#"
  (data (i32.const 64) "x-checksum")
  (data (i32.const 80) "x-wasm-saw")
  (data (i32.const 96) "x-digest")
  (data (i32.const 112) "x-wasm-req")
  (data (i32.const 128) "yes")
  (func (export "proxy_on_response_trailers") (param i32) (param i32) (result i32)
    (if (i32.eqz (call $get_header (i32.const 3) (i32.const 64) (i32.const 10) (i32.const 0) (i32.const 4)))
      (then (drop (call $add_header (i32.const 3) (i32.const 80) (i32.const 10)
        (i32.load (i32.const 0)) (i32.load (i32.const 4))))))
    (i32.const 0))
  (func (export "proxy_on_request_trailers") (param i32) (param i32) (result i32)
    (if (i32.eqz (call $get_header (i32.const 1) (i32.const 96) (i32.const 8) (i32.const 0) (i32.const 4)))
      (then (drop (call $add_header (i32.const 1) (i32.const 112) (i32.const 10) (i32.const 128) (i32.const 3)))))
    (i32.const 0))
"#;

/// Adds, at response headers, fields that describe a connection (`connection`, the
/// field it names, `keep-alive`) and one that does not (`x-kept`).
pub const CONNECTION_FIELDS: &str = r#"
  (data (i32.const 64) "connection")
  (data (i32.const 80) "x-hop")
  (data (i32.const 96) "keep-alive")
  (data (i32.const 112) "timeout=5")
  (data (i32.const 128) "x-kept")
  (data (i32.const 144) "yes")
  (func (export "proxy_on_response_headers") (param i32) (param i32) (param i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 64) (i32.const 10) (i32.const 80) (i32.const 5)))
    (drop (call $add_header (i32.const 2) (i32.const 80) (i32.const 5) (i32.const 144) (i32.const 3)))
    (drop (call $add_header (i32.const 2) (i32.const 96) (i32.const 10) (i32.const 112) (i32.const 9)))
    (drop (call $add_header (i32.const 2) (i32.const 128) (i32.const 6) (i32.const 144) (i32.const 3)))
    (i32.const 0))
"#;
