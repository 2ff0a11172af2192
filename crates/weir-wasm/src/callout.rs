//! HTTP callouts (`proxy_http_call`): a filter asks for a request to another service
//! during a callback; when the callback returns, the filter's module waits for the
//! answers (through the engine's upstream pools, [`weir_api::ContentManager::call`])
//! and hands each to `proxy_on_http_call_response`, where the filter reads it as
//! map type 6 (`HttpCallResponseHeaders`), buffer type 4 (`HttpCallResponseBody`) and
//! map type 7 (`HttpCallResponseTrailers`). A call's own trailers (the `trailers`
//! pairs of `proxy_http_call`) are sent after its body.
//!
//! The `upstream` argument names where the request goes: `host:port`, or a base URL
//! (`http://host:port`, `https://host`). Envoy names a configured cluster there; Weir
//! has no clusters of upstreams for filters, so the address is given directly.

use std::time::Duration;

use wasmtime::{Caller, Linker};
use weir_api::http::header::{HeaderName, HeaderValue};
use weir_api::http::{HeaderMap, Request};
use weir_api::{Bytes, Trailers};

use crate::abi::{self, status, HostResult, Status};
use crate::host::{Callout, Host, PendingCall};
use crate::memory;

/// The timeout of a call that names none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Links `proxy_http_call`.
pub(crate) fn link(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_http_call",
        |mut c: Caller<'_, Host>,
         up: i32,
         ul: i32,
         hp: i32,
         hl: i32,
         bp: i32,
         bl: i32,
         tp: i32,
         tl: i32,
         timeout_ms: i32,
         token_ptr: i32| {
            status(http_call(
                &mut c,
                (up, ul),
                (hp, hl),
                (bp, bl),
                (tp, tl),
                timeout_ms,
                token_ptr,
            ))
        },
    )?;
    Ok(())
}

fn http_call(
    c: &mut Caller<'_, Host>,
    upstream: (i32, i32),
    headers: (i32, i32),
    body: (i32, i32),
    trailers: (i32, i32),
    timeout_ms: i32,
    token_ptr: i32,
) -> HostResult {
    let upstream = memory::read_str(c, upstream.0, upstream.1)?;
    let pairs = abi::deserialize_pairs(&memory::read(c, headers.0, headers.1)?)?;
    let body = memory::read(c, body.0, body.1)?;
    let mut request = build_request(&upstream, pairs, body)?;
    if trailers.1 > 0 {
        let pairs = abi::deserialize_pairs(&memory::read(c, trailers.0, trailers.1)?)?;
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let (name, value) = field(&name, &value)?;
            map.append(name, value);
        }
        if !map.is_empty() {
            request.extensions_mut().insert(Trailers(map));
        }
    }
    let timeout = match timeout_ms as u32 {
        0 => DEFAULT_TIMEOUT,
        ms => Duration::from_millis(ms.into()),
    };
    let host = c.data_mut();
    host.next_token = host.next_token.wrapping_add(1).max(1);
    let token = host.next_token;
    host.calls.push(PendingCall {
        token,
        request,
        timeout,
    });
    memory::write_u32(c, token_ptr, token)
}

/// The request a call describes: the pseudo-headers `:method`, `:path` and
/// `:authority` (required, as Envoy requires them) and the other fields, sent to
/// `upstream`.
fn build_request(
    upstream: &str,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
) -> Result<Request<Bytes>, Status> {
    let mut method = None;
    let mut path = None;
    let mut authority = None;
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let text = || String::from_utf8(value.clone()).map_err(|_| Status::BadArgument);
        match name.as_slice() {
            b":method" => method = Some(text()?),
            b":path" => path = Some(text()?),
            b":authority" => authority = Some(text()?),
            n if n.starts_with(b":") => {}
            n => {
                let (name, value) = field(n, &value)?;
                headers.append(name, value);
            }
        }
    }
    let (Some(method), Some(path), Some(authority)) = (method, path, authority) else {
        return Err(Status::BadArgument);
    };
    if !path.starts_with('/') {
        return Err(Status::BadArgument);
    }
    let base = match upstream.contains("://") {
        true => upstream.trim_end_matches('/').to_string(),
        false => format!("http://{upstream}"),
    };
    let mut request = Request::builder()
        .method(method.as_str())
        .uri(format!("{base}{path}"))
        .body(Bytes::from(body))
        .map_err(|_| Status::BadArgument)?;
    headers.insert(
        weir_api::http::header::HOST,
        HeaderValue::from_str(&authority).map_err(|_| Status::BadArgument)?,
    );
    *request.headers_mut() = headers;
    Ok(request)
}

/// A header field of a call, as the filter wrote it.
fn field(name: &[u8], value: &[u8]) -> Result<(HeaderName, HeaderValue), Status> {
    let name = HeaderName::from_bytes(name).map_err(|_| Status::BadArgument)?;
    let value = HeaderValue::from_bytes(value).map_err(|_| Status::BadArgument)?;
    Ok((name, value))
}

/// What a filter reads of a call's answer; a failed call (unreachable, timed out) has
/// no headers and no body, as in Envoy.
pub(crate) fn answer(result: Result<weir_api::http::Response<Bytes>, String>) -> Callout {
    match result {
        Ok(response) => {
            let (mut head, body) = response.into_parts();
            let trailers = head.extensions.remove::<Trailers>().unwrap_or_default();
            Callout {
                status: Some(head.status),
                headers: head.headers,
                body: body.to_vec(),
                trailers: trailers.0,
            }
        }
        Err(e) => {
            tracing::debug!(target: "weir_wasm", "HTTP callout failed: {e}");
            Callout {
                status: None,
                headers: HeaderMap::new(),
                body: Vec::new(),
                trailers: HeaderMap::new(),
            }
        }
    }
}

impl Callout {
    /// The number of header fields the filter is told of (`:status` included).
    pub(crate) fn field_count(&self) -> usize {
        self.headers.len() + usize::from(self.status.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::http::StatusCode;

    fn pairs(list: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        list.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_call_goes_to_the_upstream_with_the_authority_as_host() {
        let r = build_request(
            "127.0.0.1:9000",
            pairs(&[
                (":method", "POST"),
                (":path", "/check?u=1"),
                (":authority", "auth.internal"),
                ("x-user", "ann"),
            ]),
            b"hi".to_vec(),
        )
        .unwrap();
        assert_eq!(r.method(), "POST");
        assert_eq!(r.uri(), "http://127.0.0.1:9000/check?u=1");
        assert_eq!(r.headers()["host"], "auth.internal");
        assert_eq!(r.headers()["x-user"], "ann");
        assert_eq!(r.body().as_ref(), b"hi");
        let r = build_request(
            "https://auth.example/",
            pairs(&[(":method", "GET"), (":path", "/"), (":authority", "a")]),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(r.uri(), "https://auth.example/");
    }

    #[test]
    fn a_call_without_its_pseudo_headers_is_a_bad_argument() {
        for missing in [":method", ":path", ":authority"] {
            let all = [(":method", "GET"), (":path", "/"), (":authority", "a")];
            let list: Vec<_> = all.into_iter().filter(|(k, _)| *k != missing).collect();
            let r = build_request("127.0.0.1:1", pairs(&list), Vec::new());
            assert_eq!(r.err(), Some(Status::BadArgument), "without {missing}");
        }
    }

    #[test]
    fn a_failed_call_has_no_status_headers_body_or_trailers() {
        let failed = answer(Err("refused".into()));
        assert_eq!(failed.field_count(), 0);
        let mut response = weir_api::http::Response::new(Bytes::from_static(b"ok"));
        *response.status_mut() = StatusCode::FORBIDDEN;
        response
            .headers_mut()
            .insert("x-a", HeaderValue::from_static("1"));
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", HeaderValue::from_static("2"));
        response.extensions_mut().insert(Trailers(trailers.clone()));
        let got = answer(Ok(response));
        assert_eq!(
            (got.status, got.field_count()),
            (Some(StatusCode::FORBIDDEN), 2)
        );
        assert_eq!(got.body, b"ok");
        assert_eq!(
            got.trailers, trailers,
            "the answer's trailers, for map type 7"
        );
        assert!(failed.trailers.is_empty());
    }
}
