//! HTTP/1.1 text as Weir writes it on both sides (RFC 9112): field lines, a chunk's
//! size line, the last chunk with its trailer fields, and numbers. Bytes appended to
//! a vector, no I/O: the origin client (`upstream/h1_wire.rs`) and Weir's own server
//! (`server/h1_response.rs`) both write with these.

use http::header::{HeaderName, HeaderValue};

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
