//! The facts of a request that the rules look at ([`RequestView`]), read from the
//! request in place: the destination from the absolute URL (forward), the CONNECT
//! authority, or the `Host` field (origin form).

use std::cell::RefCell;

use weir_api::http::{header, Method};
use weir_api::{RequestHead, Txn};

use super::rules::{LocalTime, RequestView};
use super::text;

thread_local! {
    /// The last `Host` field this thread split: its bytes, and the host and port read
    /// from them. The requests of a connection repeat it, and comparing a few bytes
    /// costs less than checking and splitting them again.
    static HOST_SPLIT: RefCell<HostSplit> = const {
        RefCell::new(HostSplit {
            field: Vec::new(),
            host: String::new(),
            port: None,
        })
    };
}

/// A `Host` field, and what [`host_field`] makes of it.
struct HostSplit {
    field: Vec<u8>,
    host: String,
    port: Option<u16>,
}

/// Calls `f` with the view of `request`. A closure rather than a returned view: the
/// host of an origin-form request is lent from this thread's last split `Host`
/// field when the request repeats it.
pub(crate) fn with_view<R>(
    txn: &Txn,
    request: &RequestHead,
    clock: &dyn Fn() -> LocalTime,
    f: impl FnOnce(&RequestView<'_>) -> R,
) -> R {
    let tls = txn.listener().tls;
    if request.method == Method::CONNECT {
        let authority = request.uri.authority();
        f(&view(
            txn,
            request,
            clock,
            "",
            authority.map_or("", |a| a.host()),
            authority.and_then(|a| a.port_u16()).unwrap_or(443),
        ))
    } else if let Some(authority) = request.uri.authority() {
        let scheme = request.uri.scheme_str().unwrap_or("http");
        let default = if scheme.eq_ignore_ascii_case("https") {
            443
        } else {
            80
        };
        f(&view(
            txn,
            request,
            clock,
            scheme,
            authority.host(),
            authority.port_u16().unwrap_or(default),
        ))
    } else {
        let scheme = if tls { "https" } else { "http" };
        let field = request.headers.get(header::HOST);
        let value = field.map_or(&b""[..], |f| f.as_bytes());
        HOST_SPLIT.with_borrow_mut(|split| {
            if !text::same(&split.field, value) {
                // Missing, or not visible ASCII (what `to_str` refuses): no host.
                let (host, port) =
                    split_host_port(field.and_then(|f| f.to_str().ok()).unwrap_or(""));
                split.field.clear();
                split.field.extend_from_slice(value);
                split.host.clear();
                split.host.push_str(host);
                split.port = port;
            }
        });
        HOST_SPLIT.with_borrow(|split| {
            let port = split.port.unwrap_or(if tls { 443 } else { 80 });
            f(&view(txn, request, clock, scheme, &split.host, port))
        })
    }
}

fn view<'a>(
    txn: &Txn,
    request: &'a RequestHead,
    clock: &'a dyn Fn() -> LocalTime,
    scheme: &'a str,
    host: &'a str,
    port: u16,
) -> RequestView<'a> {
    RequestView {
        client: txn.client_addr().ip().to_canonical(),
        method: &request.method,
        scheme,
        host,
        port,
        uri: &request.uri,
        clock,
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`. The port is after the last `:`, when no
/// `]` follows it and the host before it is bracketed or has no `:` of its own.
pub(crate) fn split_host_port(value: &str) -> (&str, Option<u16>) {
    // A header value read with `to_str` is visible ASCII, spaces and tabs: ASCII
    // trimming is enough, without `trim`'s Unicode table.
    let value = value.trim_ascii();
    let bytes = value.as_bytes();
    // One pass from the end: the last `:`, unless a `]` comes after it.
    let mut port_at = None;
    for (i, &b) in bytes.iter().enumerate().rev() {
        match b {
            b':' => {
                port_at = Some(i);
                break;
            }
            b']' => break,
            _ => {}
        }
    }
    let Some(port_at) = port_at else {
        return (value, None);
    };
    if bytes[0] == b'[' || bytes[..port_at].iter().all(|&b| b != b':') {
        if let Ok(port) = value[port_at + 1..].parse() {
            return (&value[..port_at], Some(port));
        }
    }
    (value, None)
}
