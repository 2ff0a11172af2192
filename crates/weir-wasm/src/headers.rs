//! Header maps as a filter sees them: the request or response headers of the current
//! callback, with the pseudo-headers Envoy adds (`:method`, `:path`, `:authority`,
//! `:scheme` on requests, `:status` on responses).

use weir_api::http::header::{HeaderName, HeaderValue};
use weir_api::http::{HeaderMap, Method, StatusCode, Uri};

use crate::abi::{MapType, Status};
use crate::host::Host;
use crate::recent::Recent;

/// The pseudo-headers of the map, as (name, value).
fn pseudo(host: &Host, map: MapType) -> Vec<(&'static str, String)> {
    match map {
        MapType::RequestHeaders => {
            let mut v = vec![
                (":method", host.method.as_str().to_string()),
                (
                    ":path",
                    host.uri
                        .path_and_query()
                        .map_or("/", |p| p.as_str())
                        .to_string(),
                ),
            ];
            if let Some(a) = authority(host) {
                v.push((":authority", a));
            }
            v.push((
                ":scheme",
                host.uri.scheme_str().unwrap_or("http").to_string(),
            ));
            v
        }
        MapType::ResponseHeaders => host
            .status
            .map(|s| vec![(":status", s.as_u16().to_string())])
            .unwrap_or_default(),
        MapType::HttpCallResponseHeaders => host
            .callout
            .as_ref()
            .and_then(|c| c.status)
            .map(|s| vec![(":status", s.as_u16().to_string())])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The request's authority: the URI's, else the `Host` header.
pub(crate) fn authority(host: &Host) -> Option<String> {
    if let Some(a) = host.uri.authority() {
        return Some(a.as_str().to_string());
    }
    let h = map(host, MapType::RequestHeaders)?.get(weir_api::http::header::HOST)?;
    h.to_str().ok().map(str::to_string)
}

fn map(host: &Host, map: MapType) -> Option<&HeaderMap> {
    match map {
        MapType::RequestHeaders => host.request_in.then_some(&host.request_headers),
        MapType::ResponseHeaders => host.response_in.then_some(&host.response_headers),
        MapType::HttpCallResponseHeaders => host.callout.as_ref().map(|c| &c.headers),
        MapType::RequestTrailers | MapType::ResponseTrailers => match &host.trailers {
            Some((which, trailers)) if *which == map => Some(trailers),
            _ => None,
        },
        MapType::HttpCallResponseTrailers => host.callout.as_ref().map(|c| &c.trailers),
    }
}

fn map_mut(host: &mut Host, map: MapType) -> Result<&mut HeaderMap, Status> {
    match map {
        // After the request phase a filter that cannot read heads kept no copy: its
        // writes go to the instance's empty map (see `head.rs`).
        MapType::RequestHeaders if host.request_in => Some(&mut host.request_headers),
        MapType::ResponseHeaders if host.response_in => Some(&mut host.response_headers),
        MapType::RequestTrailers | MapType::ResponseTrailers => match &mut host.trailers {
            Some((which, trailers)) if *which == map => Some(trailers),
            _ => None,
        },
        _ => None,
    }
    .ok_or(Status::NotFound)
}

/// Every pair of the map, pseudo-headers first, serialized for the filter.
pub(crate) fn pairs(host: &Host, which: MapType) -> Vec<u8> {
    let pseudo = pseudo(host, which);
    let mut all: Vec<(&[u8], &[u8])> = pseudo
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    if let Some(m) = map(host, which) {
        all.extend(m.iter().map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes())));
    }
    crate::abi::serialize_pairs(all.into_iter())
}

/// The value of `key` (values of a repeated header joined with `,`).
pub(crate) fn get(host: &Host, which: MapType, key: &str) -> Result<Vec<u8>, Status> {
    let key = key.to_ascii_lowercase();
    if key.starts_with(':') {
        return pseudo(host, which)
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.into_bytes())
            .ok_or(Status::NotFound);
    }
    let m = map(host, which).ok_or(Status::NotFound)?;
    let mut values = m.get_all(key.as_str()).iter();
    let first = values.next().ok_or(Status::NotFound)?;
    let mut out = first.as_bytes().to_vec();
    for v in values {
        out.push(b',');
        out.extend_from_slice(v.as_bytes());
    }
    Ok(out)
}

/// A name and a value as a filter wrote them, parsed (or recently parsed, see
/// `recent.rs`).
fn name_value(
    recent: &mut Recent,
    key: &[u8],
    value: &[u8],
) -> Result<(HeaderName, HeaderValue), Status> {
    let name = recent.name(key).ok_or(Status::BadArgument)?;
    let value = recent.value(value).ok_or(Status::BadArgument)?;
    Ok((name, value))
}

/// Sets a pseudo-header: the request line or the status.
fn set_pseudo(host: &mut Host, key: &str, value: &[u8]) -> Result<(), Status> {
    let text = std::str::from_utf8(value).map_err(|_| Status::BadArgument)?;
    match key {
        ":method" => host.method = Method::from_bytes(value).map_err(|_| Status::BadArgument)?,
        ":path" => {
            let mut parts = std::mem::take(&mut host.uri).into_parts();
            parts.path_and_query = Some(text.parse().map_err(|_| Status::BadArgument)?);
            host.uri = Uri::from_parts(parts).map_err(|_| Status::BadArgument)?;
        }
        ":authority" => {
            let mut parts = std::mem::take(&mut host.uri).into_parts();
            if parts.scheme.is_some() {
                parts.authority = Some(text.parse().map_err(|_| Status::BadArgument)?);
                host.uri = Uri::from_parts(parts).map_err(|_| Status::BadArgument)?;
            } else {
                host.uri = Uri::from_parts(parts).map_err(|_| Status::BadArgument)?;
                let v = HeaderValue::from_bytes(value).map_err(|_| Status::BadArgument)?;
                map_mut(host, MapType::RequestHeaders)?.insert("host", v);
            }
        }
        ":status" if host.response_in => {
            host.status = Some(StatusCode::from_bytes(value).map_err(|_| Status::BadArgument)?);
        }
        _ => return Err(Status::BadArgument),
    }
    Ok(())
}

/// `proxy_replace_header_map_value`.
pub(crate) fn replace(
    host: &mut Host,
    which: MapType,
    key: &[u8],
    value: &[u8],
) -> Result<(), Status> {
    set(host, which, key, value, false)
}

/// `proxy_add_header_map_value`.
pub(crate) fn add(host: &mut Host, which: MapType, key: &[u8], value: &[u8]) -> Result<(), Status> {
    set(host, which, key, value, true)
}

/// Sets a field, replacing its values or adding one more; a pseudo-header (`:path`,
/// `:status`...) has one value either way.
fn set(
    host: &mut Host,
    which: MapType,
    key: &[u8],
    value: &[u8],
    append: bool,
) -> Result<(), Status> {
    if key.first() == Some(&b':') {
        return set_pseudo(
            host,
            &String::from_utf8_lossy(key).to_ascii_lowercase(),
            value,
        );
    }
    let (name, value) = name_value(&mut host.recent, key, value)?;
    let map = map_mut(host, which)?;
    if append {
        map.append(name, value);
    } else {
        map.insert(name, value);
    }
    Ok(())
}

/// `proxy_remove_header_map_value`.
pub(crate) fn remove(host: &mut Host, which: MapType, key: &[u8]) -> Result<(), Status> {
    if key.first() == Some(&b':') {
        return Ok(());
    }
    let name = host.recent.name(key).ok_or(Status::BadArgument)?;
    map_mut(host, which)?.remove(name);
    Ok(())
}

/// `proxy_set_header_map_pairs`: the map becomes `pairs` (pseudo-headers set too).
pub(crate) fn set_pairs(
    host: &mut Host,
    which: MapType,
    pairs: crate::abi::Pairs,
) -> Result<(), Status> {
    let mut fresh = HeaderMap::new();
    for (k, v) in &pairs {
        if k.first() == Some(&b':') {
            set_pseudo(host, &String::from_utf8_lossy(k).to_ascii_lowercase(), v)?;
        } else {
            let (name, value) = name_value(&mut host.recent, k, v)?;
            fresh.append(name, value);
        }
    }
    *map_mut(host, which)? = fresh;
    Ok(())
}

/// `proxy_get_header_map_size`: the size of the serialized map.
pub(crate) fn size(host: &Host, which: MapType) -> usize {
    pairs(host, which).len()
}
