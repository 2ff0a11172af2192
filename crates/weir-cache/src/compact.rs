//! Header maps that own exactly their bytes, for what the cache keeps.
//!
//! A header value parsed by hyper is a slice of the connection's read buffer, so a
//! stored copy of it would keep that whole buffer (kilobytes) alive for as long as the
//! object stays cached. What the cache keeps is copied here into one allocation per
//! map, with every value a slice of it.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// The fields of `from` for which `keep` says yes, copied so that they share one
/// allocation of exactly their values' size.
pub(crate) fn copy_headers(from: &HeaderMap, keep: impl Fn(&HeaderName) -> bool) -> HeaderMap {
    let total: usize = from
        .iter()
        .filter(|(n, _)| keep(n))
        .map(|(_, v)| v.len())
        .sum();
    let mut buf = Vec::with_capacity(total);
    let mut fields = 0;
    for (name, value) in from {
        if keep(name) {
            buf.extend_from_slice(value.as_bytes());
            fields += 1;
        }
    }
    let buf = Bytes::from(buf);
    let mut out = HeaderMap::with_capacity(fields);
    let mut at = 0;
    for (name, value) in from {
        if !keep(name) {
            continue;
        }
        let end = at + value.len();
        // The bytes were a valid value a moment ago: this cannot fail.
        let Ok(mut copy) = HeaderValue::from_maybe_shared(buf.slice(at..end)) else {
            continue;
        };
        copy.set_sensitive(value.is_sensitive());
        out.append(name.clone(), copy);
        at = end;
    }
    out
}

/// Bytes a header map keeps on the heap, roughly: its table and its values.
pub(crate) fn heap_size(headers: &HeaderMap) -> usize {
    // A slot holds a name, a value and links (about 88 bytes on 64-bit targets); the
    // index table holds 4 bytes per slot and is kept at most 3/4 full.
    const SLOT: usize = 88 + 6;
    let custom_names: usize = headers
        .keys()
        .map(|n| n.as_str().len())
        .filter(|&len| len > 0)
        .sum();
    let values: usize = headers.values().map(HeaderValue::len).sum();
    headers.capacity() * SLOT + custom_names + values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_one_buffer_and_keep_order() {
        let mut h = HeaderMap::new();
        h.append("set-cookie", HeaderValue::from_static("a=1"));
        h.append("set-cookie", HeaderValue::from_static("b=2"));
        h.insert("etag", HeaderValue::from_static("\"x\""));
        let mut secret = HeaderValue::from_static("token");
        secret.set_sensitive(true);
        h.insert("authorization", secret);
        let c = copy_headers(&h, |_| true);
        let cookies: Vec<_> = c.get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(c["etag"], "\"x\"");
        assert!(c["authorization"].is_sensitive());
        let only = copy_headers(&h, |n| n == "etag");
        assert_eq!(only.len(), 1);
    }

    #[test]
    fn a_copy_does_not_keep_the_source_buffer() {
        // A value sliced out of a large buffer, as hyper parses them.
        let big = Bytes::from(vec![b'a'; 64 << 10]);
        let mut h = HeaderMap::new();
        h.insert(
            "x-v",
            HeaderValue::from_maybe_shared(big.slice(10..20)).unwrap(),
        );
        let c = copy_headers(&h, |_| true);
        drop(h);
        assert!(
            big.is_unique(),
            "the copy still refers to the source buffer"
        );
        assert_eq!(c["x-v"].len(), 10);
    }
}
