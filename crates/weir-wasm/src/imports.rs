//! The host calls of proxy-wasm ABI 0.2.1 a filter imports from `env`, and stubs
//! answering `Unimplemented` for every other import, so that filters built with an SDK
//! that imports more than they use still link.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, Linker, Module, Store, Val, ValType};
use weir_api::http::{HeaderMap, StatusCode};
use weir_api::Bytes;
use weir_api::Reply;

use crate::abi::{self, status, BufferType, HostResult, MapType, Status};
use crate::host::Host;
use crate::memory;

type C<'a> = Caller<'a, Host>;
type R = wasmtime::Result<i32>;

/// Runs a host call that may fail with a status.
fn st(f: impl FnOnce() -> HostResult) -> i32 {
    status(f())
}

/// Hands `bytes` to the filter, or passes on the status of `value`.
fn give(c: &mut C<'_>, value: Result<Vec<u8>, Status>, ptr_ptr: i32, len_ptr: i32) -> R {
    match value {
        Ok(bytes) => Ok(status(memory::give(c, &bytes, ptr_ptr, len_ptr)?)),
        Err(s) => Ok(s.code()),
    }
}

/// The buffer of type `which`, as the filter may read it now.
fn buffer(host: &Host, which: BufferType) -> Result<&[u8], Status> {
    match which {
        BufferType::VmConfiguration => Ok(&host.shared.vm_configuration),
        BufferType::PluginConfiguration => Ok(&host.shared.configuration),
        BufferType::CallData => Ok(&host.call_data),
        BufferType::RequestBody | BufferType::ResponseBody => match &host.body {
            Some((kind, data)) if *kind == which => Ok(data),
            _ => Err(Status::NotFound),
        },
        BufferType::HttpCallResponseBody => match &host.callout {
            Some(callout) => Ok(&callout.body),
            None => Err(Status::NotFound),
        },
    }
}

fn log(c: &mut C<'_>, level: i32, ptr: i32, len: i32) -> HostResult {
    let msg = memory::read_str(c, ptr, len)?;
    let filter = c.data().shared.name.as_str();
    match level {
        0 => tracing::trace!(target: "weir_wasm", filter, "{msg}"),
        1 => tracing::debug!(target: "weir_wasm", filter, "{msg}"),
        2 => tracing::info!(target: "weir_wasm", filter, "{msg}"),
        3 => tracing::warn!(target: "weir_wasm", filter, "{msg}"),
        _ => tracing::error!(target: "weir_wasm", filter, "{msg}"),
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn local_response(
    c: &mut C<'_>,
    code: i32,
    body_ptr: i32,
    body_len: i32,
    headers_ptr: i32,
    headers_len: i32,
) -> HostResult {
    let status = u16::try_from(code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or(Status::BadArgument)?;
    let body = memory::read(c, body_ptr, body_len)?;
    let pairs = abi::deserialize_pairs(&memory::read(c, headers_ptr, headers_len)?)?;
    let mut headers = HeaderMap::new();
    for (k, v) in pairs {
        let name =
            weir_api::http::header::HeaderName::from_bytes(&k).map_err(|_| Status::BadArgument)?;
        let value = weir_api::http::HeaderValue::from_bytes(&v).map_err(|_| Status::BadArgument)?;
        headers.append(name, value);
    }
    c.data_mut().local_response = Some(Reply {
        status,
        headers,
        body: Bytes::from(body),
    });
    Ok(())
}

fn set_buffer(c: &mut C<'_>, which: i32, start: i32, size: i32, ptr: i32, len: i32) -> HostResult {
    let which = BufferType::from_abi(which)?;
    let data = memory::read(c, ptr, len)?;
    let Some((kind, body)) = c.data_mut().body.as_mut() else {
        return Err(Status::NotFound);
    };
    if *kind != which {
        return Err(Status::NotFound);
    }
    let start = (start as u32 as usize).min(body.len());
    let end = start.saturating_add(size as u32 as usize).min(body.len());
    body.splice(start..end, data);
    Ok(())
}

fn set_shared(c: &mut C<'_>, kp: i32, kl: i32, vp: i32, vl: i32, cas: i32) -> HostResult {
    let key = memory::read_str(c, kp, kl)?;
    let value = memory::read(c, vp, vl)?;
    let mut data = c
        .data()
        .shared
        .data
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let entry = data.entry(key).or_insert((Vec::new(), 0));
    if cas != 0 && cas as u32 != entry.1 {
        return Err(Status::CasMismatch);
    }
    *entry = (value, entry.1.wrapping_add(1).max(1));
    Ok(())
}

fn get_shared(c: &mut C<'_>, kp: i32, kl: i32, pp: i32, lp: i32, cas_ptr: i32) -> R {
    let key = match memory::read_str(c, kp, kl) {
        Ok(k) => k,
        Err(s) => return Ok(s.code()),
    };
    let found = {
        let data = c
            .data()
            .shared
            .data
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        data.get(&key).cloned()
    };
    let Some((value, cas)) = found else {
        return Ok(Status::NotFound.code());
    };
    let r = give(c, Ok(value), pp, lp)?;
    if r != 0 {
        return Ok(r);
    }
    Ok(st(|| memory::write_u32(c, cas_ptr, cas)))
}

fn foreign(c: &mut C<'_>, np: i32, nl: i32, ap: i32, al: i32, pp: i32, lp: i32) -> R {
    let (name, args) = match (memory::read_str(c, np, nl), memory::read(c, ap, al)) {
        (Ok(n), Ok(a)) => (n, a),
        (Err(s), _) | (_, Err(s)) => return Ok(s.code()),
    };
    let result = crate::foreign::call(c.data_mut(), &name, &args);
    give(c, result, pp, lp)
}

/// Defines every host call in `linker`.
pub(crate) fn define(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_log",
        |mut c: C<'_>, level: i32, p: i32, l: i32| st(|| log(&mut c, level, p, l)),
    )?;
    linker.func_wrap("env", "proxy_get_log_level", |mut c: C<'_>, ret: i32| {
        let level = if tracing::enabled!(target: "weir_wasm", tracing::Level::TRACE) {
            0
        } else if tracing::enabled!(target: "weir_wasm", tracing::Level::DEBUG) {
            1
        } else {
            2
        };
        st(|| memory::write_u32(&mut c, ret, level))
    })?;
    linker.func_wrap(
        "env",
        "proxy_get_current_time_nanoseconds",
        |mut c: C<'_>, ret: i32| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            st(|| memory::write_u64(&mut c, ret, now))
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_tick_period_milliseconds",
        |c: C<'_>, ms: i32| {
            c.data().shared.tick_ms.store(ms as u32, Ordering::Relaxed);
            0
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_pairs",
        |mut c: C<'_>, map: i32, pp: i32, lp: i32| -> R {
            let value = MapType::from_abi(map).map(|m| crate::headers::pairs(c.data(), m));
            give(&mut c, value, pp, lp)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_header_map_pairs",
        |mut c: C<'_>, map: i32, p: i32, l: i32| {
            st(|| {
                let map = MapType::from_abi(map)?;
                let pairs = abi::deserialize_pairs(&memory::read(&mut c, p, l)?)?;
                crate::headers::set_pairs(c.data_mut(), map, pairs)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_value",
        |mut c: C<'_>, map: i32, kp: i32, kl: i32, pp: i32, lp: i32| -> R {
            let value = MapType::from_abi(map).and_then(|m| {
                let key = memory::read_str(&mut c, kp, kl)?;
                crate::headers::get(c.data(), m, &key)
            });
            give(&mut c, value, pp, lp)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_replace_header_map_value",
        |mut c: C<'_>, map: i32, kp: i32, kl: i32, vp: i32, vl: i32| {
            st(|| {
                let map = MapType::from_abi(map)?;
                memory::with_two(&mut c, (kp, kl), (vp, vl), |host, k, v| {
                    crate::headers::replace(host, map, k, v)
                })?
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_add_header_map_value",
        |mut c: C<'_>, map: i32, kp: i32, kl: i32, vp: i32, vl: i32| {
            st(|| {
                let map = MapType::from_abi(map)?;
                memory::with_two(&mut c, (kp, kl), (vp, vl), |host, k, v| {
                    crate::headers::add(host, map, k, v)
                })?
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_remove_header_map_value",
        |mut c: C<'_>, map: i32, kp: i32, kl: i32| {
            st(|| {
                let map = MapType::from_abi(map)?;
                let k = memory::read(&mut c, kp, kl)?;
                crate::headers::remove(c.data_mut(), map, &k)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_size",
        |mut c: C<'_>, map: i32, ret: i32| {
            st(|| {
                let n = crate::headers::size(c.data(), MapType::from_abi(map)?);
                memory::write_u32(&mut c, ret, n as u32)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_buffer_bytes",
        |mut c: C<'_>, which: i32, start: i32, max: i32, pp: i32, lp: i32| -> R {
            let value = BufferType::from_abi(which).and_then(|b| {
                let data = buffer(c.data(), b)?;
                let start = (start as u32 as usize).min(data.len());
                let end = start.saturating_add(max as u32 as usize).min(data.len());
                Ok(data[start..end].to_vec())
            });
            give(&mut c, value, pp, lp)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_buffer_status",
        |mut c: C<'_>, which: i32, lp: i32, fp: i32| {
            st(|| {
                let len = buffer(c.data(), BufferType::from_abi(which)?)?.len();
                memory::write_u32(&mut c, lp, len as u32)?;
                memory::write_u32(&mut c, fp, 0)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_buffer_bytes",
        |mut c: C<'_>, which: i32, start: i32, size: i32, p: i32, l: i32| {
            st(|| set_buffer(&mut c, which, start, size, p, l))
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_property",
        |mut c: C<'_>, p: i32, l: i32, pp: i32, lp: i32| -> R {
            let value =
                memory::read(&mut c, p, l).and_then(|path| crate::properties::get(c.data(), &path));
            give(&mut c, value, pp, lp)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_send_local_response",
        |mut c: C<'_>,
         code: i32,
         _dp: i32,
         _dl: i32,
         bp: i32,
         bl: i32,
         hp: i32,
         hl: i32,
         _grpc: i32| { st(|| local_response(&mut c, code, bp, bl, hp, hl)) },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_shared_data",
        |mut c: C<'_>, kp: i32, kl: i32, pp: i32, lp: i32, cp: i32| -> R {
            get_shared(&mut c, kp, kl, pp, lp, cp)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_shared_data",
        |mut c: C<'_>, kp: i32, kl: i32, vp: i32, vl: i32, cas: i32| {
            st(|| set_shared(&mut c, kp, kl, vp, vl, cas))
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_define_metric",
        |mut c: C<'_>, kind: i32, np: i32, nl: i32, ret: i32| {
            st(|| {
                if !(0..=2).contains(&kind) {
                    return Err(Status::BadArgument);
                }
                let name = memory::read_str(&mut c, np, nl)?;
                let id = c.data().shared.define_metric(kind, &name);
                memory::write_u32(&mut c, ret, id)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_increment_metric",
        |c: C<'_>, id: i32, offset: i64| {
            st(|| {
                c.data()
                    .shared
                    .with_metric(id, |m| m.add(offset))
                    .ok_or(Status::NotFound)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_record_metric",
        |c: C<'_>, id: i32, value: i64| {
            st(|| {
                c.data()
                    .shared
                    .with_metric(id, |m| m.value.store(value, Ordering::Relaxed))
                    .ok_or(Status::NotFound)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_metric",
        |mut c: C<'_>, id: i32, ret: i32| {
            st(|| {
                let v = c
                    .data()
                    .shared
                    .with_metric(id, |m| m.value.load(Ordering::Relaxed))
                    .ok_or(Status::NotFound)?;
                memory::write_u64(&mut c, ret, v as u64)
            })
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_call_foreign_function",
        |mut c: C<'_>, np: i32, nl: i32, ap: i32, al: i32, pp: i32, lp: i32| -> R {
            foreign(&mut c, np, nl, ap, al, pp, lp)
        },
    )?;
    // A stream is held only while the callouts of its callbacks are answered, and goes
    // on once none is left (`callout.rs`): continuing one is always done.
    linker.func_wrap("env", "proxy_continue_stream", |_: C<'_>, _stream: i32| 0)?;
    linker.func_wrap("env", "proxy_continue_request", |_: C<'_>| 0)?;
    linker.func_wrap("env", "proxy_continue_response", |_: C<'_>| 0)?;
    linker.func_wrap(
        "env",
        "proxy_set_effective_context",
        |_: C<'_>, _ctx: i32| 0,
    )?;
    linker.func_wrap("env", "proxy_done", |_: C<'_>| 0)?;
    Ok(())
}

/// Satisfies every import of `module` that `linker` does not define: functions answer
/// `Unimplemented` (or zeros when they return no status); `abort` and `proc_exit` trap.
/// Other kinds of import (memories, tables, globals) are left: instantiation names them.
pub(crate) fn stub_unknown(
    linker: &mut Linker<Host>,
    module: &Module,
    store: &mut Store<Host>,
) -> wasmtime::Result<()> {
    let defined: HashSet<(String, String)> = linker
        .iter(&mut *store)
        .map(|(m, n, _)| (m.to_string(), n.to_string()))
        .collect();
    for import in module.imports() {
        let key = (import.module().to_string(), import.name().to_string());
        let Some(ty) = import.ty().func().cloned() else {
            continue;
        };
        if defined.contains(&key) {
            continue;
        }
        let (m, name) = key;
        let traps = matches!(name.as_str(), "abort" | "proc_exit");
        let what = format!("{m}.{name}");
        linker.func_new(&m, &name, ty.clone(), move |_c, _params, results| {
            if traps {
                return Err(wasmtime::Error::msg(format!("the filter called {what}")));
            }
            for (slot, t) in results.iter_mut().zip(ty.results()) {
                *slot = match t {
                    ValType::I32 => Val::I32(Status::Unimplemented.code()),
                    ValType::I64 => Val::I64(Status::Unimplemented.code().into()),
                    ValType::F32 => Val::F32(0),
                    ValType::F64 => Val::F64(0),
                    _ => Val::null_extern_ref(),
                };
            }
            Ok(())
        })?;
    }
    Ok(())
}
