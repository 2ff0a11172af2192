//! `proxy_get_property`: the attributes Envoy names, as far as Weir knows them.
//!
//! A path comes as segments separated by NUL (`request\0path`); strings come back as
//! bytes, numbers as 8-byte little-endian integers, as Envoy encodes them.

use crate::abi::Status;
use crate::host::Host;

/// The value of the property at `path`.
pub(crate) fn get(host: &Host, path: &[u8]) -> Result<Vec<u8>, Status> {
    let path: Vec<&[u8]> = path.split(|&b| b == 0).filter(|s| !s.is_empty()).collect();
    let text = |b: &str| Ok(b.as_bytes().to_vec());
    let int = |v: i64| Ok(v.to_le_bytes().to_vec());
    match path.as_slice() {
        [b"request", b"path"] => text(host.uri.path_and_query().map_or("/", |p| p.as_str())),
        [b"request", b"url_path"] => text(host.uri.path()),
        [b"request", b"query"] => text(host.uri.query().unwrap_or("")),
        [b"request", b"method"] => text(host.method.as_str()),
        [b"request", b"host"] => {
            crate::headers::authority(host).map_or(Err(Status::NotFound), |a| text(&a))
        }
        [b"request", b"scheme"] => text(host.uri.scheme_str().unwrap_or("http")),
        [b"request", b"headers"] => Ok(crate::headers::pairs(
            host,
            crate::abi::MapType::RequestHeaders,
        )),
        [b"source", b"address"] => host
            .client
            .map_or(Err(Status::NotFound), |a| text(&a.to_string())),
        [b"source", b"port"] => host
            .client
            .map_or(Err(Status::NotFound), |a| int(a.port().into())),
        [b"response", b"code"] => host
            .status
            .map_or(Err(Status::NotFound), |s| int(s.as_u16().into())),
        [b"response", b"headers"] => Ok(crate::headers::pairs(
            host,
            crate::abi::MapType::ResponseHeaders,
        )),
        [b"plugin_name"] | [b"plugin_root_id"] => text(&host.shared.name),
        [b"plugin_vm_id"] => text(""),
        [b"weir", b"cache_status"] => text(crate::foreign::cache_status(host)),
        _ => Err(Status::NotFound),
    }
}
