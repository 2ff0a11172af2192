//! HTTP/1.1 text as Weir writes it on both sides (RFC 9112): field lines, a chunk's
//! size line, the last chunk with its trailer fields, and numbers. Bytes appended to
//! a vector, no I/O: the origin client (`upstream/h1_wire.rs`) and Weir's own server
//! (`server/h1_response.rs`) both write with these. And what both read the same way:
//! where a head's fields are, and a field value httparse accepted.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};

/// Where a field's name and value are in its head: offsets from the head's start and
/// lengths (name, name length, value, value length). A head is frozen into shared
/// bytes once parsed, and its fields are taken as slices of it by these places.
pub(crate) type Span = (u32, u32, u32, u32);

/// The places of `fields`, which httparse read from a head starting at address
/// `base`: in `inline` for up to `N` fields, else in `spilled`. Only the fields there
/// are get places: an array for every field a head may have, written before the
/// parse, was kilobytes of stack touched on every request (docs/benchmarks.md,
/// session 24).
pub(crate) fn spans<'a, const N: usize>(
    base: usize,
    fields: &[httparse::Header<'_>],
    inline: &'a mut [Span; N],
    spilled: &'a mut Vec<Span>,
) -> &'a [Span] {
    let spans = if fields.len() <= N {
        &mut inline[..fields.len()]
    } else {
        spilled.resize(fields.len(), (0, 0, 0, 0));
        &mut spilled[..]
    };
    for (span, f) in spans.iter_mut().zip(fields) {
        *span = (
            (f.name.as_ptr() as usize - base) as u32,
            f.name.len() as u32,
            (f.value.as_ptr() as usize - base) as u32,
            f.value.len() as u32,
        );
    }
    spans
}

/// A field value httparse has read, as a `HeaderValue`, without checking its bytes a
/// second time. httparse accepts in a value only bytes that `HeaderValue` allows
/// (HTAB, space, visible ASCII and 0x80–0xFF: no other control byte, no DEL), which
/// the tests below check for every byte, in requests and in responses; hyper's
/// server and client build their values the same way. The second check cost about
/// 70 instructions per field of a typical length: a browser's request has a dozen.
pub(crate) fn checked_value(bytes: Bytes) -> HeaderValue {
    // SAFETY: this constructor is `unsafe` only because a value holding another byte
    // would break `HeaderValue`'s own invariant (there is no memory unsafety either
    // way), and `bytes` is a value httparse accepted, so it holds none. Debug builds
    // (the tests) check the bytes anyway and panic on one that is not allowed.
    #[allow(unsafe_code)]
    unsafe {
        HeaderValue::from_maybe_shared_unchecked(bytes)
    }
}

/// Appends `name: value` and its line end.
pub(crate) fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends a chunk's size line; the chunk's data and its `\r\n` follow.
pub(crate) fn chunk_size_line(len: usize, out: &mut Vec<u8>) {
    digits(len as u64, 16, out);
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk and the trailer section made of `trailers`.
pub(crate) fn last_chunk<'a>(
    trailers: impl IntoIterator<Item = (&'a HeaderName, &'a HeaderValue)>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal.
pub(crate) fn decimal(n: u64, out: &mut Vec<u8>) {
    digits(n, 10, out);
}

/// Appends `n` in `base` (10 or 16, lowercase), without the formatting machinery.
fn digits(mut n: u64, base: u64, out: &mut Vec<u8>) {
    let mut text = [0u8; 20];
    let mut at = text.len();
    loop {
        at -= 1;
        text[at] = b"0123456789abcdef"[(n % base) as usize];
        n /= base;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&text[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte, at the start, in the middle and at the end of a value, in a
    /// request and in a response head: whatever httparse accepts is a valid
    /// `HeaderValue`, and the bytes `HeaderValue` refuses make httparse refuse the
    /// head (so that this test notices if either side changes).
    #[test]
    fn httparse_accepts_only_bytes_header_values_allow() {
        let mut accepted = 0;
        for b in 0..=255u8 {
            for (before, after) in [(&b""[..], &b"x"[..]), (b"x", b"x"), (b"x", b"")] {
                let mut value = before.to_vec();
                value.push(b);
                value.extend_from_slice(after);
                for start in [&b"GET / HTTP/1.1\r\n"[..], b"HTTP/1.1 200 OK\r\n"] {
                    let mut head = start.to_vec();
                    head.extend_from_slice(b"X-Field: ");
                    head.extend_from_slice(&value);
                    head.extend_from_slice(b"\r\nX-Next: y\r\n\r\n");
                    let mut fields = [httparse::EMPTY_HEADER; 4];
                    let values: Option<Vec<Vec<u8>>> = if start.starts_with(b"GET") {
                        let mut r = httparse::Request::new(&mut fields);
                        matches!(r.parse(&head), Ok(httparse::Status::Complete(_)))
                            .then(|| r.headers.iter().map(|f| f.value.to_vec()).collect())
                    } else {
                        let mut r = httparse::Response::new(&mut fields);
                        matches!(r.parse(&head), Ok(httparse::Status::Complete(_)))
                            .then(|| r.headers.iter().map(|f| f.value.to_vec()).collect())
                    };
                    let allowed = HeaderValue::from_bytes(&value).is_ok();
                    match values {
                        Some(values) => {
                            accepted += 1;
                            for v in values {
                                assert!(HeaderValue::from_bytes(&v).is_ok(), "{b:#04x}: {v:?}");
                                checked_value(Bytes::from(v));
                            }
                        }
                        // Refused only for a byte `HeaderValue` refuses too: the two
                        // agree on every byte.
                        None => assert!(!allowed, "{b:#04x} refused"),
                    }
                }
            }
        }
        // Not vacuous: most heads were accepted.
        assert!(accepted > 1200, "{accepted}");
    }

    #[test]
    fn numbers_and_chunk_lines() {
        let mut out = Vec::new();
        decimal(0, &mut out);
        out.push(b' ');
        decimal(u64::MAX, &mut out);
        out.push(b' ');
        chunk_size_line(300, &mut out);
        assert_eq!(out, b"0 18446744073709551615 12c\r\n");
    }
}
