//! Targeted cache-control fields (RFC 9213): `CDN-Cache-Control`, or a field an
//! operator names for Weir alone, which a cache that is their target obeys instead of
//! `Cache-Control`. They are Structured Field Dictionaries (RFC 9651), read with `sfv`;
//! a field that is empty or does not parse is ignored as if absent (RFC 9213 §2.1).

use std::borrow::Cow;

use http::{HeaderMap, HeaderName};
use sfv::{BareItem, Dictionary, ListEntry, Parser};

use crate::cache_control::Directive;

/// The standard targeted field for CDNs and reverse proxies.
pub const CDN_CACHE_CONTROL: &str = "cdn-cache-control";

/// The directives of the first of `fields` (most specific first) that `headers` holds
/// and that parses, with each field's lines joined as RFC 9651 §4.2 says; `None` when
/// none does, and `Cache-Control` applies.
pub fn targeted_directives(
    headers: &HeaderMap,
    fields: &[HeaderName],
) -> Option<Vec<Directive<'static>>> {
    fields.iter().find_map(|name| parse(headers, name))
}

fn parse(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<Directive<'static>>> {
    let mut joined = Vec::new();
    for value in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if joined.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    let dictionary: Dictionary = Parser::new(&joined).parse().ok()?;
    let directives = dictionary
        .iter()
        .filter_map(|(key, entry)| {
            // Parameters are ignored; inner lists mean nothing here.
            let ListEntry::Item(item) = entry else {
                return None;
            };
            let argument = match &item.bare_item {
                BareItem::Boolean(true) => None,
                BareItem::Boolean(false) => return None,
                BareItem::Integer(i) => Some(Cow::Owned(i.to_string())),
                BareItem::String(s) => Some(Cow::Owned(s.as_str().to_owned())),
                BareItem::Token(t) => Some(Cow::Owned(t.as_str().to_owned())),
                _ => return None,
            };
            Some(Directive::new(key.as_str().to_owned(), argument))
        })
        .collect();
    Some(directives)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cdn(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(CDN_CACHE_CONTROL, HeaderValue::from_str(l).unwrap());
        }
        h
    }

    fn read(h: &HeaderMap) -> Option<Vec<(String, Option<String>)>> {
        let fields = [
            HeaderName::from_static("weir-cache-control"),
            HeaderName::from_static(CDN_CACHE_CONTROL),
        ];
        targeted_directives(h, &fields).map(|ds| {
            ds.iter()
                .map(|d| (d.name().to_string(), d.argument().map(str::to_string)))
                .collect()
        })
    }

    fn pair(n: &str, a: Option<&str>) -> (String, Option<String>) {
        (n.to_string(), a.map(str::to_string))
    }

    #[test]
    fn a_dictionary_gives_its_directives() {
        let h = cdn(&[
            "max-age=3600, no-store;x=1, private=?0",
            "stale-if-error=60",
        ]);
        assert_eq!(
            read(&h),
            Some(vec![
                pair("max-age", Some("3600")),
                pair("no-store", None),
                pair("stale-if-error", Some("60"))
            ])
        );
    }

    #[test]
    fn an_invalid_or_empty_field_is_ignored() {
        // Keys are lower case in a structured field; a trailing comma is an error.
        assert_eq!(read(&cdn(&["Max-Age=60"])), None);
        assert_eq!(read(&cdn(&["max-age=60,"])), None);
        assert_eq!(read(&cdn(&[""])), None);
        assert_eq!(read(&HeaderMap::new()), None);
    }

    #[test]
    fn the_most_specific_valid_field_wins() {
        let mut h = cdn(&["max-age=60"]);
        h.insert("weir-cache-control", HeaderValue::from_static("max-age=5"));
        assert_eq!(read(&h), Some(vec![pair("max-age", Some("5"))]));
        h.insert("weir-cache-control", HeaderValue::from_static("max-age=5,"));
        assert_eq!(read(&h), Some(vec![pair("max-age", Some("60"))]));
    }

    #[test]
    fn strings_and_tokens_are_arguments() {
        let h = cdn(&[r#"no-cache="set-cookie", ext=abc, list=(1 2)"#]);
        assert_eq!(
            read(&h),
            Some(vec![
                pair("no-cache", Some("set-cookie")),
                pair("ext", Some("abc"))
            ])
        );
    }
}
