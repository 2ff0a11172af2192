//! hyper's bare answer to a request it cannot parse, and what the guard sends instead
//! (see the guard's documentation in `framing.rs`).

use crate::headers::{head_too_large, too_many_fields};
use crate::metrics::ErrorKind;

/// The longest request target hyper's HTTP/1 parser takes.
const HYPER_MAX_TARGET: usize = u16::MAX as usize - 1;

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// If `head` is hyper's own answer to an unparseable request, the answer to send
/// instead: a reason, and Weir's usual headers. A head too large gets the service's
/// answer to one over `header_limit` (or with too many fields): hyper's 414 for a
/// target over 65,534 bytes is kept only when the limit allows such a target.
pub(super) fn replacement_for(
    head: &[u8],
    header_limit: usize,
    too_many: bool,
) -> Option<(Vec<u8>, ErrorKind)> {
    const TOO_LARGE: &str = "431 Request Header Fields Too Large";
    let too_large = || {
        let reason = if too_many {
            too_many_fields()
        } else {
            head_too_large(header_limit)
        };
        (TOO_LARGE, ErrorKind::HeaderTooLarge, reason)
    };
    let (status, kind, reason) = if head.starts_with(b"HTTP/1.1 400 ") {
        (
            "400 Bad Request",
            ErrorKind::BadRequest,
            "malformed request: not a valid HTTP/1.1 request line and header section".into(),
        )
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        too_large()
    } else if head.starts_with(b"HTTP/1.1 414 ") {
        if header_limit < HYPER_MAX_TARGET {
            too_large()
        } else {
            (
                "414 URI Too Long",
                ErrorKind::BadRequest,
                "request target too long".into(),
            )
        }
    } else {
        return None;
    };
    let lower = head.to_ascii_lowercase();
    // Every response the service produces carries Cache-Status; hyper's own do not.
    if find(&lower, b"cache-status:").is_some() || find(&lower, b"content-length: 0\r\n").is_none()
    {
        return None;
    }
    let body = format!("{reason}\n");
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncache-control: no-store\r\n\
         cache-status: weir; detail=refused\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    Some((text.into_bytes(), kind))
}
