//! Equality of the short byte strings the hit path compares (a host, a user's name, a
//! scheme, a URL's literal), without a call to `memcmp`: `==` on slices calls it
//! whatever their length, and for a few bytes the call costs more than the comparison.

/// Whether `a` and `b` hold the same bytes.
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // Two words that cover the strings between them, overlapping when shorter than two.
    if n >= 8 {
        if n > 16 {
            return a == b;
        }
        return word8(&a[..8]) == word8(&b[..8]) && word8(&a[n - 8..]) == word8(&b[n - 8..]);
    }
    if n >= 4 {
        return word4(&a[..4]) == word4(&b[..4]) && word4(&a[n - 4..]) == word4(&b[n - 4..]);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// Whether `haystack` starts with `prefix`.
#[inline]
pub(crate) fn starts_with(haystack: &[u8], prefix: &[u8]) -> bool {
    haystack.len() >= prefix.len() && same(&haystack[..prefix.len()], prefix)
}

/// Whether `haystack` ends with `suffix`.
#[inline]
pub(crate) fn ends_with(haystack: &[u8], suffix: &[u8]) -> bool {
    haystack.len() >= suffix.len() && same(&haystack[haystack.len() - suffix.len()..], suffix)
}

#[inline]
fn word8(bytes: &[u8]) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(bytes);
    u64::from_ne_bytes(w)
}

#[inline]
fn word4(bytes: &[u8]) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(bytes);
    u32::from_ne_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_as_slice_equality_for_every_length_and_position() {
        let base: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for n in 0..=base.len() {
            let a = &base[..n];
            assert!(same(a, a));
            assert!(!same(a, &base[..n.saturating_sub(1)]) || n == 0);
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 0x20;
                assert!(!same(a, &b), "length {n}, differing at {at}");
            }
        }
        assert!(starts_with(b"http://x/", b"http://"));
        assert!(!starts_with(b"http", b"http://"));
        assert!(ends_with(b"/setup.exe", b".exe"));
        assert!(!ends_with(b"/setup.exe?", b".exe"));
        assert!(!ends_with(b"exe", b".exe"));
    }
}
