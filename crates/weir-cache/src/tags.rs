//! Invalidation tags from response headers (`Surrogate-Key`, `Cache-Tag`).

use http::{HeaderMap, HeaderName};

/// The response headers that carry tags when no configuration says otherwise.
pub const DEFAULT_TAG_HEADERS: [&str; 2] = ["surrogate-key", "cache-tag"];

/// The tags `headers` carry in the fields `names`. `Surrogate-Key` (Fastly's) separates
/// its keys with spaces; every other field, `Cache-Tag` (Cloudflare's) included, with
/// commas. Each tag appears once, in the order first seen.
pub(crate) fn from_headers(headers: &HeaderMap, names: &[HeaderName]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for name in names {
        let spaces = name.as_str() == "surrogate-key";
        for value in headers.get_all(name) {
            let Ok(text) = value.to_str() else { continue };
            let parts: Box<dyn Iterator<Item = &str>> = if spaces {
                Box::new(text.split_ascii_whitespace())
            } else {
                Box::new(text.split(','))
            };
            for tag in parts.map(str::trim).filter(|t| !t.is_empty()) {
                if !tags.iter().any(|t| t == tag) {
                    tags.push(tag.to_string());
                }
            }
        }
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_headers_and_their_separators() {
        let mut h = HeaderMap::new();
        h.append("surrogate-key", "a  b".parse().unwrap());
        h.append("surrogate-key", "c a".parse().unwrap());
        h.append("cache-tag", "d, e f ,,b".parse().unwrap());
        h.append("x-other", "z".parse().unwrap());
        let names: Vec<HeaderName> = DEFAULT_TAG_HEADERS
            .iter()
            .map(|n| HeaderName::from_static(n))
            .collect();
        assert_eq!(from_headers(&h, &names), ["a", "b", "c", "d", "e f"]);
        assert_eq!(
            from_headers(&h, &[HeaderName::from_static("cache-tag")]),
            ["d", "e f", "b"]
        );
        assert!(from_headers(&h, &[]).is_empty());
    }
}
