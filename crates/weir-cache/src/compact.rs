//! Header maps that own exactly their bytes, for what the cache keeps.
//!
//! A header value parsed by hyper is a slice of the connection's read buffer, so a
//! stored copy of it would keep that whole buffer (kilobytes) alive for as long as the
//! object stays cached. What the cache keeps is copied here into one allocation per
//! map, with every value a slice of it.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// Fields a copy served from the cache gets added (`Age`, and the proxy's
/// `Cache-Status`): a stored map keeps room for them in its index table, which every
/// copy of it keeps, so that no hit grows its copy's table again (rehashing every field).
const ROOM: usize = 2;

/// `headers` with room in its index table for the fields a response gets on its way to
/// a client (`Age`, `Cache-Status`). A copy of a header map keeps its table's size, so
/// a head that is copied for several clients (a fill's) is given the room once, before
/// it is copied: a table full to its limit, as hyper sizes it for the fields it parsed,
/// was otherwise grown again in every copy.
pub fn with_served_room(mut headers: HeaderMap) -> HeaderMap {
    headers.reserve(ROOM);
    headers
}

/// The fields of `from` for which `keep` says yes, copied so that they share one
/// allocation of exactly their values' size, with room for [`ROOM`] more fields in
/// the table.
///
/// The map is cloned and its values replaced in place: a clone copies the table as it
/// is, where appending each field to a new map hashed every name again (about 1,000
/// instructions for a response of six fields, on every miss).
pub(crate) fn copy_headers(from: &HeaderMap, keep: impl Fn(&HeaderName) -> bool) -> HeaderMap {
    let mut out = from.clone();
    if out.capacity() < out.len() + ROOM {
        // The table grown once here, and cloned again so that the fields still take
        // exactly their number of slots; each copy served keeps the larger table.
        out = with_served_room(out).clone();
    }
    // Usually empty, and then never allocated: most responses leave no field out.
    let unwanted: Vec<HeaderName> = from.keys().filter(|n| !keep(n)).cloned().collect();
    for name in &unwanted {
        out.remove(name);
    }
    let total: usize = out.values().map(HeaderValue::len).sum();
    let mut buf = Vec::with_capacity(total);
    for value in out.values() {
        buf.extend_from_slice(value.as_bytes());
    }
    let buf = Bytes::from(buf);
    let mut at = 0;
    for value in out.values_mut() {
        let end = at + value.len();
        let mut copy = unchecked(buf.slice(at..end));
        copy.set_sensitive(value.is_sensitive());
        *value = copy;
        at = end;
    }
    out
}

/// `bytes`, copied from a `HeaderValue`, as a value without checking each byte again:
/// the check cost every miss about 400 instructions (a stored head's values, byte by
/// byte), for bytes that were a valid value a moment before.
fn unchecked(bytes: Bytes) -> HeaderValue {
    // SAFETY: the constructor is `unsafe` only because a byte `HeaderValue` does not
    // allow would break its own invariant (there is no memory unsafety either way), and
    // `bytes` are those of a `HeaderValue`, so they hold none. Debug builds (the tests)
    // check them anyway and panic on one that is not allowed.
    #[allow(unsafe_code)]
    unsafe {
        HeaderValue::from_maybe_shared_unchecked(bytes)
    }
}

/// Bytes a header map kept by the cache holds on the heap, roughly: its fields, its
/// index table and its values. The map is a clone ([`copy_headers`]): its fields take
/// one slot each (and a field left out keeps its slot, uncounted: rare, and 88 bytes),
/// while its index table keeps the size of the original's, which may have room for
/// fields added later.
pub(crate) fn heap_size(headers: &HeaderMap) -> usize {
    // A slot holds a name, a value and links (about 88 bytes on 64-bit targets); the
    // index table holds 4 bytes per slot of capacity and is kept at most 3/4 full.
    const SLOT: usize = 88;
    const INDEX: usize = 6;
    // A name's own bytes, by estimate rather than read: a standard name holds none, a
    // custom one its spelling (usually shorter than this). Reading each name's length
    // looked a standard one up in `http`'s table of spellings, whose lines a miss
    // otherwise seldom touches (about 20 first-level cache misses and 90 instructions a
    // miss, simulated); the estimate charges about what counting every name's length
    // did.
    const NAME: usize = 12;
    let values: usize = headers.values().map(HeaderValue::len).sum();
    headers.len() * SLOT + headers.capacity() * INDEX + headers.keys_len() * NAME + values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_keep_room_for_the_fields_a_hit_adds() {
        // Five fields: the table hyper would make for them (room for six) is full
        // after one more.
        let mut h = HeaderMap::with_capacity(5);
        for name in ["a", "b", "c", "d", "e"] {
            h.insert(name, HeaderValue::from_static("v"));
        }
        let stored = copy_headers(&h, |_| true);
        assert!(stored.capacity() >= stored.len() + ROOM);
        let mut served = stored.clone();
        let capacity = served.capacity();
        served.insert("age", HeaderValue::from_static("1"));
        served.insert("cache-status", HeaderValue::from_static("weir; hit"));
        assert_eq!(served.capacity(), capacity, "the copy's table did not grow");
        assert_eq!(served.len(), 7);
    }

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
        // Also a field left out, with two values, one of them in the extra values.
        for range in [20..30, 30..40] {
            let v = HeaderValue::from_maybe_shared(big.slice(range)).unwrap();
            h.append("x-out", v);
        }
        let c = copy_headers(&h, |n| n != "x-out");
        drop(h);
        assert!(
            big.is_unique(),
            "the copy still refers to the source buffer"
        );
        assert_eq!(c["x-v"].len(), 10);
        assert!(!c.contains_key("x-out"));
        assert_eq!(c.len(), 1);
    }
}
