//! The admin API's bearer token.

use http::{header, HeaderMap};

/// Whether `headers` carry `Authorization: Bearer <token>` for `token` (always, when no
/// token is configured). The comparison takes the same time wherever the first
/// difference is, so response times do not reveal a prefix of the token.
pub(super) fn allowed(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(token) = token else { return true };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some((scheme, given)) = value.split_at_checked(6) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer")
        && given.first() == Some(&b' ')
        && constant_time_eq(given[1..].trim_ascii(), token.as_bytes())
}

/// Compares every byte whatever the differences (only the lengths may tell early).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn bearer_tokens() {
        assert!(allowed(None, &HeaderMap::new()));
        assert!(!allowed(Some("s3cret"), &HeaderMap::new()));
        assert!(allowed(Some("s3cret"), &with("Bearer s3cret")));
        assert!(allowed(Some("s3cret"), &with("bearer  s3cret ")));
        assert!(!allowed(Some("s3cret"), &with("Bearer s3cre")));
        assert!(!allowed(Some("s3cret"), &with("Bearer s3cres")));
        assert!(!allowed(Some("s3cret"), &with("Basic s3cret")));
        assert!(!allowed(Some("s3cret"), &with("Bearers3cret")));
        assert!(!allowed(Some("s3cret"), &with("Bear")));
    }
}
