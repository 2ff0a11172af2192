//! The response metadata a compressor must keep right: which content types it
//! compresses, `Cache-Control: no-transform`, `Vary`, and per-encoding `ETag`s.

use weir_api::http::header;
use weir_api::http::{HeaderMap, HeaderValue};

/// Content types to compress: `type/subtype`, `type/*`, or `*/*+suffix` (any type
/// whose subtype ends in `+suffix`, such as `application/ld+json`).
#[derive(Debug, Clone)]
pub struct Types {
    exact: Vec<String>,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

/// The default list of compressible types.
pub const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "image/svg+xml",
    "*/*+xml",
    "*/*+json",
];

impl Types {
    /// Parses the patterns; the error names the first bad one.
    pub fn new(patterns: &[String]) -> Result<Types, (usize, String)> {
        let mut t = Types {
            exact: Vec::new(),
            prefixes: Vec::new(),
            suffixes: Vec::new(),
        };
        for (i, p) in patterns.iter().enumerate() {
            let p = p.trim().to_ascii_lowercase();
            let bad = || {
                (
                    i,
                    format!("`{p}` is not `type/subtype`, `type/*` or `*/*+suffix`"),
                )
            };
            let (ty, sub) = p.split_once('/').ok_or_else(bad)?;
            if ty.is_empty() || sub.is_empty() || sub.contains('/') {
                return Err(bad());
            }
            if ty == "*" {
                let suffix = sub.strip_prefix("*+").ok_or_else(bad)?;
                t.suffixes.push(format!("+{suffix}"));
            } else if sub == "*" {
                t.prefixes.push(format!("{ty}/"));
            } else if !ty.contains('*') && !sub.contains('*') {
                t.exact.push(p.clone());
            } else {
                return Err(bad());
            }
        }
        Ok(t)
    }

    /// Whether a response with these headers has a type to compress.
    pub fn matches(&self, headers: &HeaderMap) -> bool {
        let Some(ct) = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let mime = ct.split(';').next().unwrap_or("").trim();
        let eq = |s: &String| mime.eq_ignore_ascii_case(s);
        let starts = |s: &String| {
            mime.len() > s.len() && mime.as_bytes()[..s.len()].eq_ignore_ascii_case(s.as_bytes())
        };
        let ends = |s: &String| {
            mime.len() > s.len()
                && mime.as_bytes()[mime.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes())
        };
        self.exact.iter().any(eq)
            || self.prefixes.iter().any(starts)
            || self.suffixes.iter().any(ends)
    }
}

pub use crate::fields::no_transform;

/// Whether the response is already encoded (a `Content-Encoding` other than identity).
pub fn is_encoded(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
}

/// Adds `Accept-Encoding` to `Vary`, unless it is there already or `Vary: *`.
pub fn merge_vary(headers: &mut HeaderMap) {
    crate::fields::merge_vary(headers, "Accept-Encoding");
}

/// The ETag of the encoded representation: weak (its bytes differ from the
/// origin's) and suffixed with the encoding, so that two encodings never share one:
/// `"abc"` becomes `W/"abc-gzip"`.
pub fn encoded_etag(etag: &HeaderValue, token: &str) -> Option<HeaderValue> {
    let s = etag.to_str().ok()?.trim();
    let opaque = s.strip_prefix("W/").unwrap_or(s);
    let inner = opaque.strip_prefix('"')?.strip_suffix('"')?;
    HeaderValue::from_str(&format!("W/\"{inner}-{token}\"")).ok()
}

/// `If-None-Match` as the origin knows its tags: `W/"abc-gzip"` becomes `W/"abc"`
/// (weak comparison, which `If-None-Match` uses, still matches the origin's `"abc"`).
/// Tags without the suffix are left alone.
pub fn origin_if_none_match(value: &HeaderValue, token: &str) -> Option<HeaderValue> {
    let s = value.to_str().ok()?;
    let suffix = format!("-{token}\"");
    if !s.contains(&suffix) {
        return None;
    }
    let tags: Vec<String> = s
        .split(',')
        .map(|t| {
            let t = t.trim();
            match t.strip_suffix(&suffix) {
                Some(base) => format!("{base}\""),
                None => t.to_string(),
            }
        })
        .collect();
    HeaderValue::from_str(&tags.join(", ")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        h
    }

    #[test]
    fn types() {
        let defaults: Vec<String> = DEFAULT_TYPES.iter().map(|s| s.to_string()).collect();
        let t = Types::new(&defaults).unwrap();
        let ct = |v: &str| t.matches(&with(header::CONTENT_TYPE, v));
        for yes in [
            "text/html",
            "text/plain; charset=utf-8",
            "TEXT/CSS",
            "application/json",
            "application/javascript",
            "image/svg+xml",
            "application/atom+xml",
            "application/ld+json",
        ] {
            assert!(ct(yes), "{yes}");
        }
        for no in [
            "image/png",
            "application/octet-stream",
            "text",
            "application/zip",
            "+xml",
        ] {
            assert!(!ct(no), "{no}");
        }
        assert!(!t.matches(&HeaderMap::new()));
        for bad in ["text", "*/*", "*/json", "a/b/c", "te*t/html", "/x"] {
            assert!(Types::new(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn directives_and_encodings() {
        assert!(no_transform(&with(
            header::CACHE_CONTROL,
            "max-age=60, No-Transform"
        )));
        assert!(!no_transform(&with(header::CACHE_CONTROL, "max-age=60")));
        assert!(is_encoded(&with(header::CONTENT_ENCODING, "gzip")));
        assert!(!is_encoded(&with(header::CONTENT_ENCODING, "identity")));
        assert!(!is_encoded(&HeaderMap::new()));
    }

    #[test]
    fn vary_is_merged_once() {
        let mut h = HeaderMap::new();
        merge_vary(&mut h);
        merge_vary(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
        let mut h = with(header::VARY, "Cookie");
        merge_vary(&mut h);
        let all: Vec<_> = h.get_all(header::VARY).iter().collect();
        assert_eq!(all, ["Cookie", "Accept-Encoding"]);
        let mut h = with(header::VARY, "cookie, accept-encoding");
        merge_vary(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
        let mut h = with(header::VARY, "*");
        merge_vary(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
    }

    #[test]
    fn etags_per_encoding() {
        let e = |v: &str, t| {
            encoded_etag(&v.parse().unwrap(), t).map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(e("\"abc\"", "gzip").as_deref(), Some("W/\"abc-gzip\""));
        assert_eq!(e("W/\"abc\"", "br").as_deref(), Some("W/\"abc-br\""));
        assert_eq!(e("abc", "br"), None);
        let inm = |v: &str| {
            origin_if_none_match(&v.parse().unwrap(), "gzip")
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(inm("W/\"abc-gzip\"").as_deref(), Some("W/\"abc\""));
        assert_eq!(
            inm("W/\"a-gzip\", \"b\"").as_deref(),
            Some("W/\"a\", \"b\"")
        );
        assert_eq!(inm("\"abc\""), None);
    }
}
