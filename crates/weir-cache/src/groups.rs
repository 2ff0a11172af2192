//! HTTP Cache Groups (RFC 9875): `Cache-Groups` puts a stored response in named groups
//! of its origin, `Cache-Group-Invalidation` on a response to an unsafe request
//! invalidates every stored response of those groups.
//!
//! A stored object keeps its groups among its invalidation tags, marked so that no tag
//! header can produce one: the memory tier, the disk tier (its files and its index
//! rebuild) and the "no resurrection" list then handle groups as they handle tags.
//! The origin is not kept with them: an object's origin is that of its URL.

use http::{HeaderMap, HeaderName};
use sfv::{BareItem, List, ListEntry, Parser};

/// The response field that puts a stored response in groups.
pub const CACHE_GROUPS: HeaderName = HeaderName::from_static("cache-groups");
/// The response field that invalidates groups.
pub const CACHE_GROUP_INVALIDATION: HeaderName =
    HeaderName::from_static("cache-group-invalidation");

/// Groups honoured per field: later members are ignored. RFC 9875 §2 asks caches to
/// support at least 32; a bound keeps one response from making the cache walk its
/// objects for thousands of names.
pub const MAX_GROUPS: usize = 32;

/// What starts a group kept among an object's tags. Tag headers are read as visible
/// ASCII, and group names are Structured Field Strings (printable ASCII), so neither
/// can start with a control character.
const GROUP_MARK: char = '\u{1}';

/// The group names of the field `name` in `headers`: the String members of a
/// Structured Field List (RFC 9651), its lines joined; each once, at most
/// [`MAX_GROUPS`]. Members that are not Strings are ignored, as are parameters; a field
/// that does not parse as a List is ignored as a whole (empty result). Names are
/// case-sensitive.
pub fn group_names(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    let mut joined = Vec::new();
    for value in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if joined.is_empty() {
        return Vec::new();
    }
    let Ok(list) = Parser::new(&joined).parse::<List>() else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for entry in &list {
        let ListEntry::Item(item) = entry else {
            continue;
        };
        let BareItem::String(s) = &item.bare_item else {
            continue;
        };
        if names.len() == MAX_GROUPS {
            break;
        }
        if !names.iter().any(|n| n == s.as_str()) {
            names.push(s.as_str().to_owned());
        }
    }
    names
}

/// The tag under which an object keeps its membership of group `name`.
pub(crate) fn group_tag(name: &str) -> String {
    let mut tag = String::with_capacity(1 + name.len());
    tag.push(GROUP_MARK);
    tag.push_str(name);
    tag
}

/// The group a tag stands for, if it is a group's.
pub fn group_of_tag(tag: &str) -> Option<&str> {
    tag.strip_prefix(GROUP_MARK)
}

/// Whether the key URL `url` (`http://authority/path…`) belongs to `origin`
/// (`http://authority`). Port 80 is the same origin written or not, as the cache key
/// keeps the authority the way the request wrote it.
pub(crate) fn in_origin(url: &str, origin: &str) -> bool {
    match (split_origin(url), split_origin(origin)) {
        (Some((a, _)), Some((b, ""))) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

/// The authority of an `http://` URL (without `:80`) and the rest.
fn split_origin(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let end = rest.find('/').unwrap_or(rest.len());
    Some((rest[..end].trim_end_matches(":80"), &rest[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(lines: &[&str]) -> Vec<String> {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(CACHE_GROUPS, l.parse().unwrap());
        }
        group_names(&h, &CACHE_GROUPS)
    }

    #[test]
    fn strings_of_a_list_each_once_in_order() {
        assert_eq!(
            groups(&[r#""a", "B";p=1"#, r#""a", "c d""#]),
            ["a", "B", "c d"]
        );
        assert!(groups(&[]).is_empty());
    }

    #[test]
    fn members_that_are_not_strings_are_ignored() {
        assert_eq!(groups(&[r#"tok, "s", 1, ("x" "y"), ?1"#]), ["s"]);
    }

    #[test]
    fn a_field_that_is_not_a_list_is_ignored_whole() {
        assert!(groups(&[r#""a", "unterminated"#]).is_empty());
        assert!(groups(&[r#""a""#, "=bad"]).is_empty());
    }

    #[test]
    fn at_most_the_limit() {
        let line = (0..40)
            .map(|i| format!("\"g{i}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let names = groups(&[&line]);
        assert_eq!(names.len(), MAX_GROUPS);
        assert_eq!(names.last().map(String::as_str), Some("g31"));
    }

    #[test]
    fn tags_and_origins() {
        assert_eq!(group_of_tag(&group_tag("x")), Some("x"));
        assert_eq!(group_of_tag("x"), None);
        assert!(in_origin("http://h:8080/a", "http://h:8080"));
        assert!(in_origin("http://h:80/a", "http://H"));
        assert!(!in_origin("http://h:8080/a", "http://h"));
        assert!(!in_origin("http://h.other/a", "http://h"));
        assert!(!in_origin("http://h/a", "http://h/a"));
    }
}
