//! Weir's own host functions, called through `proxy_call_foreign_function` (so any
//! SDK reaches them): the cache lookup's result, skipping the cache, the time to
//! live, variants of the key, tags, invalidation.
//!
//! | name | argument | result |
//! |---|---|---|
//! | `weir_get_cache_status` | none | `fresh`, `stale`, `miss`, `bypass`, or empty before the lookup |
//! | `weir_skip_cache` | none | none |
//! | `weir_set_cache_ttl` | seconds, decimal text | none |
//! | `weir_add_cache_key_variant` | text | none |
//! | `weir_add_cache_tag` | text | none |
//! | `weir_invalidate` | an absolute URL | `1` if an object was removed, else `0` |
//! | `weir_invalidate_tag` | a tag | the number of objects banned, decimal |

use std::time::Duration;

use weir_api::CacheLookup;

use crate::abi::Status;
use crate::host::Host;

/// The lookup's result as `weir_get_cache_status` gives it.
pub(crate) fn cache_status(host: &Host) -> &'static str {
    match host.lookup {
        Some(CacheLookup::Fresh) => "fresh",
        Some(CacheLookup::Stale) => "stale",
        Some(CacheLookup::Miss) => "miss",
        Some(CacheLookup::Bypass) => "bypass",
        None => "",
    }
}

fn text(args: &[u8]) -> Result<String, Status> {
    let t = std::str::from_utf8(args)
        .map_err(|_| Status::BadArgument)?
        .trim();
    if t.is_empty() {
        return Err(Status::BadArgument);
    }
    Ok(t.to_string())
}

/// Calls the foreign function `name`; `Err(NotFound)` for one Weir does not have.
pub(crate) fn call(host: &mut Host, name: &str, args: &[u8]) -> Result<Vec<u8>, Status> {
    match name {
        "weir_get_cache_status" => Ok(cache_status(host).as_bytes().to_vec()),
        "weir_skip_cache" => {
            host.steer().skip = true;
            Ok(Vec::new())
        }
        "weir_set_cache_ttl" => {
            let secs: u64 = text(args)?.parse().map_err(|_| Status::BadArgument)?;
            host.steer().ttl = Some(Duration::from_secs(secs));
            Ok(Vec::new())
        }
        "weir_add_cache_key_variant" => {
            let v = text(args)?;
            host.steer().variants.push(v);
            Ok(Vec::new())
        }
        "weir_add_cache_tag" => {
            let t = text(args)?;
            host.steer().tags.push(t);
            Ok(Vec::new())
        }
        "weir_invalidate" => {
            let url = text(args)?;
            let removed = host.shared.context.content().delete(&url).is_ok();
            Ok(if removed {
                b"1".to_vec()
            } else {
                b"0".to_vec()
            })
        }
        "weir_invalidate_tag" => {
            let tag = text(args)?;
            match host.shared.context.content().ban_tag(&tag) {
                Ok(n) => Ok(n.to_string().into_bytes()),
                Err(_) => Err(Status::InternalFailure),
            }
        }
        _ => Err(Status::NotFound),
    }
}
