//! The admin API's token: `Authorization: Bearer <token>` for scripts, or Basic with
//! the token as the password (any user name) for a browser on the status page.

use base64::Engine as _;
use http::{header, HeaderMap};

/// Whether `headers` carry the token (always, when no token is configured). The
/// comparison takes the same time wherever the first difference is, so response times
/// do not reveal a prefix of the token.
pub(super) fn allowed(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(token) = token else { return true };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some(space) = value.iter().position(|&b| b == b' ') else {
        return false;
    };
    let (scheme, given) = (&value[..space], value[space..].trim_ascii());
    if scheme.eq_ignore_ascii_case(b"bearer") {
        constant_time_eq(given, token.as_bytes())
    } else if scheme.eq_ignore_ascii_case(b"basic") {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(given) else {
            return false;
        };
        let password = match decoded.iter().position(|&b| b == b':') {
            Some(colon) => &decoded[colon + 1..],
            None => return false,
        };
        constant_time_eq(password, token.as_bytes())
    } else {
        false
    }
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
        // Basic: any user, the token as the password ("admin:s3cret", ":s3cret").
        assert!(allowed(Some("s3cret"), &with("Basic YWRtaW46czNjcmV0")));
        assert!(allowed(Some("s3cret"), &with("basic OnMzY3JldA==")));
        assert!(!allowed(Some("s3cret"), &with("Basic YWRtaW46czNjcmU=")));
        assert!(!allowed(Some("s3cret"), &with("Basic czNjcmV0")));
        assert!(!allowed(Some("s3cret"), &with("Basic !!!")));
    }
}
