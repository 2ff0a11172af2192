//! Reads and writes of a filter's linear memory, and handing it data through its own
//! allocator.

use wasmtime::{Caller, Extern, Memory};

use crate::abi::{HostResult, Status};
use crate::host::Host;

/// The filter's exported memory, found once after instantiation.
fn memory(caller: &mut Caller<'_, Host>) -> Result<Memory, Status> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => {
            caller.data_mut().memory = Some(m);
            Ok(m)
        }
        _ => Err(Status::InternalFailure),
    }
}

fn range(ptr: i32, len: i32) -> Result<std::ops::Range<usize>, Status> {
    let start = ptr as u32 as usize;
    let end = start
        .checked_add(len as u32 as usize)
        .ok_or(Status::InvalidMemoryAccess)?;
    Ok(start..end)
}

/// Copies `len` bytes at `ptr` out of the filter's memory.
pub(crate) fn read(caller: &mut Caller<'_, Host>, ptr: i32, len: i32) -> Result<Vec<u8>, Status> {
    let m = memory(caller)?;
    m.data(&*caller)
        .get(range(ptr, len)?)
        .map(<[u8]>::to_vec)
        .ok_or(Status::InvalidMemoryAccess)
}

/// Runs `f` on the host state and two byte ranges of the filter's memory, borrowed in
/// place: a header write needs no copy of its name and value before they are parsed.
pub(crate) fn with_two<R>(
    caller: &mut Caller<'_, Host>,
    (p1, l1): (i32, i32),
    (p2, l2): (i32, i32),
    f: impl FnOnce(&mut Host, &[u8], &[u8]) -> R,
) -> Result<R, Status> {
    let m = memory(caller)?;
    let (data, host) = m.data_and_store_mut(&mut *caller);
    let one = data
        .get(range(p1, l1)?)
        .ok_or(Status::InvalidMemoryAccess)?;
    let two = data
        .get(range(p2, l2)?)
        .ok_or(Status::InvalidMemoryAccess)?;
    Ok(f(host, one, two))
}

/// Reads text at `ptr` (lossy: header names and values are checked later anyway).
pub(crate) fn read_str(
    caller: &mut Caller<'_, Host>,
    ptr: i32,
    len: i32,
) -> Result<String, Status> {
    read(caller, ptr, len).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Writes `bytes` at `ptr` in the filter's memory.
pub(crate) fn write(caller: &mut Caller<'_, Host>, ptr: i32, bytes: &[u8]) -> HostResult {
    let m = memory(caller)?;
    let dst = m
        .data_mut(&mut *caller)
        .get_mut(range(ptr, bytes.len() as i32)?)
        .ok_or(Status::InvalidMemoryAccess)?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Writes a little-endian u32 at `ptr`.
pub(crate) fn write_u32(caller: &mut Caller<'_, Host>, ptr: i32, v: u32) -> HostResult {
    write(caller, ptr, &v.to_le_bytes())
}

/// Writes a little-endian u64 at `ptr`.
pub(crate) fn write_u64(caller: &mut Caller<'_, Host>, ptr: i32, v: u64) -> HostResult {
    write(caller, ptr, &v.to_le_bytes())
}

/// Hands `bytes` to the filter: memory from its allocator
/// (`proxy_on_memory_allocate`, or `malloc` in older SDKs), the data copied in, and the
/// address and length written at `ptr_ptr` and `len_ptr`. A trap in the allocator
/// comes back as `Err(Err(trap))` and is passed on, failing the callback.
pub(crate) fn give(
    caller: &mut Caller<'_, Host>,
    bytes: &[u8],
    ptr_ptr: i32,
    len_ptr: i32,
) -> Result<HostResult, wasmtime::Error> {
    let alloc = match caller.data().alloc.clone() {
        Some(f) => f,
        None => {
            let found = ["proxy_on_memory_allocate", "malloc"]
                .iter()
                .find_map(|n| caller.get_export(n)?.into_func());
            let Some(f) = found.and_then(|f| f.typed::<i32, i32>(&*caller).ok()) else {
                return Ok(Err(Status::InternalFailure));
            };
            let f = std::sync::Arc::new(f);
            caller.data_mut().alloc = Some(f.clone());
            f
        }
    };
    let ptr = if bytes.is_empty() {
        0
    } else {
        let p = alloc.call(&mut *caller, bytes.len() as i32)?;
        if p == 0 {
            return Ok(Err(Status::InternalFailure));
        }
        p
    };
    Ok((|| {
        if !bytes.is_empty() {
            write(caller, ptr, bytes)?;
        }
        write_u32(caller, ptr_ptr, ptr as u32)?;
        write_u32(caller, len_ptr, bytes.len() as u32)
    })())
}
