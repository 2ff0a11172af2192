//! hyper's bare answer to a request it cannot parse, and what the guard sends instead
//! (see the guard's documentation in `framing.rs`).

use crate::headers::{head_too_large, target_too_long, too_many_fields};
use crate::metrics::ErrorKind;

/// The longest request target hyper's HTTP/1 parser takes.
const HYPER_MAX_TARGET: usize = u16::MAX as usize - 1;

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// What made the guard give up on a request head that hyper then refused as too
/// large, so that the answer names it as the service would.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Oversize {
    /// The head as a whole (hyper's buffer filled).
    #[default]
    Section,
    /// More fields than a request may carry.
    Fields,
    /// The request target alone is longer than the limit.
    Target,
}

/// If `head` is hyper's own answer to an unparseable request, the answer to send
/// instead: a reason, and Weir's usual headers. A head too large gets the service's
/// answer to one over `header_limit` as `oversize` says it was (too many fields, a
/// target longer than the limit: 414, else 431); hyper's 414 for a target over 65,534
/// bytes, the service's answer to a target over the limit.
pub(super) fn replacement_for(
    head: &[u8],
    header_limit: usize,
    oversize: Oversize,
) -> Option<(Vec<u8>, ErrorKind)> {
    const TOO_LARGE: &str = "431 Request Header Fields Too Large";
    let long_target = |limit: usize| {
        (
            "414 URI Too Long",
            ErrorKind::BadRequest,
            target_too_long(limit),
        )
    };
    let too_large = || match oversize {
        Oversize::Fields => (TOO_LARGE, ErrorKind::HeaderTooLarge, too_many_fields()),
        Oversize::Target => long_target(header_limit),
        Oversize::Section => (
            TOO_LARGE,
            ErrorKind::HeaderTooLarge,
            head_too_large(header_limit),
        ),
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
        long_target(header_limit.min(HYPER_MAX_TARGET))
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

/// Whether the request target at the start of `head` (a request line, perhaps cut
/// short) is longer than `limit` bytes.
pub(super) fn target_longer_than(head: &[u8], limit: usize) -> bool {
    let Some(space) = memchr::memchr(b' ', head) else {
        return false;
    };
    let target = &head[space + 1..];
    let end = memchr::memchr3(b' ', b'\r', b'\n', target).unwrap_or(target.len());
    end > limit
}
