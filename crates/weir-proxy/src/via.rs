//! The `Via` entry Weir adds to the requests it sends toward origins, and what tells
//! a request that comes back to this very process: a forwarding loop.
//!
//! A reverse listener whose origin is Weir itself (a name that resolves to the proxy,
//! a port typed twice) sends each request back in: a GET then waited on its own
//! collapsed fetch until the origin timeout, and any other request went round until
//! its head outgrew the limits. As Squid does with its `Via` (which names its host),
//! the entry carries a comment that names this process, a random mark drawn at start.
//! A request may pass through a process twice on purpose (a forward listener's client
//! asks for a site that a reverse listener of the same process serves): it is then
//! served without joining a fetch in flight, which may be its own first pass's. A
//! request that bears the mark twice is going round: it is answered 508 at once. Two
//! instances in a chain (a child cache in front of a parent) draw different marks and
//! pass each other's requests as before.

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

use http::{header, HeaderMap, HeaderValue, Version};

/// This process's entries, one per version they record, and the comment they share.
struct Outbound {
    http11: HeaderValue,
    http2: HeaderValue,
    http10: HeaderValue,
    /// `(` the mark `)`, as it appears in every entry.
    comment: &'static str,
}

static OUTBOUND: LazyLock<Outbound> = LazyLock::new(|| {
    // The standard library's per-process random keys: no generator of our own for
    // 32 bits that only need to differ between instances.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let comment: &'static str = format!("({:08x})", hasher.finish() as u32).leak();
    // Leaked once, so that each entry is a static value: cloning one into a request
    // copies a pointer, without a reference count.
    let entry =
        |version: &str| HeaderValue::from_static(format!("{version} weir {comment}").leak());
    Outbound {
        http11: entry("1.1"),
        http2: entry("2"),
        http10: entry("1.0"),
        comment,
    }
});

/// The entry for a request toward an origin that Weir received with `version`: the
/// protocol and pseudonym of [`crate::headers::via`], and this process's mark.
pub(crate) fn outbound(version: Version) -> HeaderValue {
    let o = &*OUTBOUND;
    match version {
        Version::HTTP_2 => o.http2.clone(),
        Version::HTTP_10 | Version::HTTP_09 => o.http10.clone(),
        _ => o.http11.clone(),
    }
}

/// How many times the request has passed through this process before: the number of
/// its `Via` entries that are this process's own.
pub(crate) fn earlier_passes(headers: &HeaderMap) -> usize {
    let comment = OUTBOUND.comment.as_bytes();
    headers
        .get_all(header::VIA)
        .iter()
        .map(|v| memchr::memmem::find_iter(v.as_bytes(), comment).count())
        .sum()
}

/// Earlier passes through this process from which on a request is going round.
pub(crate) const LOOPING: usize = 2;

/// The reason a request that is going round is refused with.
pub(crate) const LOOP_REASON: &str =
    "forwarding loop: this request has already passed through this proxy twice (its Via names it)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_passes_that_bear_our_entry_and_no_others() {
        let ours = outbound(Version::HTTP_11);
        let text = ours.to_str().unwrap();
        assert!(text.starts_with("1.1 weir ("), "{text}");
        assert!(text.ends_with(')') && text.len() == "1.1 weir (12345678)".len());
        assert!(outbound(Version::HTTP_2)
            .to_str()
            .unwrap()
            .starts_with("2 weir ("));
        assert!(outbound(Version::HTTP_10)
            .to_str()
            .unwrap()
            .starts_with("1.0 weir ("));

        let mut headers = HeaderMap::new();
        assert_eq!(earlier_passes(&headers), 0);
        headers.append(header::VIA, HeaderValue::from_static("1.1 weir"));
        // Another instance's mark ('g' is no hex digit, so it cannot be ours).
        headers.append(header::VIA, HeaderValue::from_static("1.1 weir (0000000g)"));
        headers.append(
            header::VIA,
            HeaderValue::from_static("1.0 squid (squid/6.1)"),
        );
        assert_eq!(earlier_passes(&headers), 0, "others' entries");
        // Ours, among others in one field line.
        let line = format!("1.1 client-side, {text}, 1.1 cdn");
        headers.append(header::VIA, HeaderValue::from_str(&line).unwrap());
        assert_eq!(earlier_passes(&headers), 1);
        let twice = format!("{text}, {}", outbound(Version::HTTP_2).to_str().unwrap());
        headers.append(header::VIA, HeaderValue::from_str(&twice).unwrap());
        assert_eq!(earlier_passes(&headers), 3);
    }
}
