//! The proxy-wasm ABI 0.2.1 as the host sees it: status codes, map and buffer types,
//! the serialized header map, and reads and writes of a filter's linear memory.
//!
//! Bottom of the crate: names nothing else of it.

/// `WasmResult`: what every host call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Status {
    Ok = 0,
    NotFound = 1,
    BadArgument = 2,
    SerializationFailure = 3,
    InvalidMemoryAccess = 6,
    CasMismatch = 8,
    InternalFailure = 10,
    Unimplemented = 12,
}

impl Status {
    /// The value returned to the filter.
    pub(crate) fn code(self) -> i32 {
        self as i32
    }
}

/// A host call's result: `Ok(())` is `Status::Ok`.
pub(crate) type HostResult = Result<(), Status>;

/// Folds a host call's result into the value returned to the filter.
pub(crate) fn status(result: HostResult) -> i32 {
    match result {
        Ok(()) => Status::Ok.code(),
        Err(s) => s.code(),
    }
}

/// `MapType`: which header map a call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapType {
    RequestHeaders,
    RequestTrailers,
    ResponseHeaders,
    ResponseTrailers,
    HttpCallResponseHeaders,
    HttpCallResponseTrailers,
}

impl MapType {
    pub(crate) fn from_abi(v: i32) -> Result<MapType, Status> {
        Ok(match v {
            0 => MapType::RequestHeaders,
            1 => MapType::RequestTrailers,
            2 => MapType::ResponseHeaders,
            3 => MapType::ResponseTrailers,
            6 => MapType::HttpCallResponseHeaders,
            7 => MapType::HttpCallResponseTrailers,
            _ => return Err(Status::BadArgument),
        })
    }
}

/// `BufferType`: which buffer a call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufferType {
    RequestBody,
    ResponseBody,
    HttpCallResponseBody,
    VmConfiguration,
    PluginConfiguration,
    /// The arguments of a foreign function call (not in the ABI's list; Envoy's
    /// number for it).
    CallData,
}

impl BufferType {
    pub(crate) fn from_abi(v: i32) -> Result<BufferType, Status> {
        Ok(match v {
            0 => BufferType::RequestBody,
            1 => BufferType::ResponseBody,
            4 => BufferType::HttpCallResponseBody,
            6 => BufferType::VmConfiguration,
            7 => BufferType::PluginConfiguration,
            8 => BufferType::CallData,
            _ => return Err(Status::BadArgument),
        })
    }
}

/// Serializes pairs as the ABI lays out a header map: the number of pairs, each key's
/// and value's length (u32 little-endian), then each key and value followed by NUL.
pub(crate) fn serialize_pairs<'a>(
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
) -> Vec<u8> {
    let n = pairs.clone().count();
    let size: usize = pairs.clone().map(|(k, v)| k.len() + v.len() + 10).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    for (k, v) in pairs.clone() {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// Header names and values as a filter gives them.
pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads a serialized header map (see [`serialize_pairs`]).
pub(crate) fn deserialize_pairs(data: &[u8]) -> Result<Pairs, Status> {
    let u32_at = |at: usize| -> Result<usize, Status> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or(Status::SerializationFailure)
    };
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let n = u32_at(0)?;
    let mut sizes = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        sizes.push((u32_at(4 + i * 8)?, u32_at(8 + i * 8)?));
    }
    let mut at = 4 + n * 8;
    let mut take = |len: usize| -> Result<Vec<u8>, Status> {
        let bytes = data
            .get(at..at + len)
            .ok_or(Status::SerializationFailure)?
            .to_vec();
        at += len + 1;
        Ok(bytes)
    };
    sizes
        .into_iter()
        .map(|(k, v)| Ok((take(k)?, take(v)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip() {
        let pairs: Vec<(&[u8], &[u8])> = vec![(b":path", b"/a"), (b"x", b"")];
        let data = serialize_pairs(pairs.iter().copied());
        assert_eq!(&data[..4], &2u32.to_le_bytes());
        let back = deserialize_pairs(&data).unwrap();
        assert_eq!(back[0], (b":path".to_vec(), b"/a".to_vec()));
        assert_eq!(back[1], (b"x".to_vec(), Vec::new()));
        assert_eq!(
            deserialize_pairs(&data[..10]),
            Err(Status::SerializationFailure)
        );
    }
}
