//! The headers the transcoder reads and writes: `Accept` (does the client take
//! WebP?), `Content-Type`, `Cache-Control: no-transform`, and `Vary`.

use weir_api::http::{header, HeaderMap, HeaderValue};

/// Whether `Accept` names `image/webp` with a non-zero q. Wildcards do not count:
/// old browsers send `*/*` and cannot show WebP.
pub fn accepts_webp(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            media.eq_ignore_ascii_case("image/webp") && parts.all(|p| !is_zero_q(p))
        })
}

fn is_zero_q(param: &str) -> bool {
    let Some((name, value)) = param.split_once('=') else {
        return false;
    };
    name.trim().eq_ignore_ascii_case("q") && value.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
}

/// The media type of `Content-Type`, lower case, without parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(ct.split(';').next()?.trim().to_ascii_lowercase())
}

pub use crate::fields::no_transform;

/// Adds `Accept` to `Vary` unless it is there already (or `Vary: *`).
pub fn merge_vary(headers: &mut HeaderMap) {
    crate::fields::merge_vary(headers, "Accept");
}

/// The weak entity tag of a transcoded body: `"v1"` becomes `W/"v1-tc"` (JPEG) or
/// `W/"v1-tcwebp"`, so no cache or client takes it for the origin's bytes.
pub fn transcoded_etag(etag: &HeaderValue, suffix: &str) -> Option<HeaderValue> {
    let text = etag.to_str().ok()?;
    let opaque = text.strip_prefix("W/").unwrap_or(text);
    let inner = opaque.strip_prefix('"')?.strip_suffix('"')?;
    HeaderValue::from_str(&format!("W/\"{inner}-{suffix}\"")).ok()
}

/// `If-None-Match` as the origin knows it: each of our transcoded tags turned back
/// into the origin's (`W/"v1-tc"` → `"v1"`); `None` when no tag is ours.
pub fn origin_if_none_match(value: &HeaderValue, suffixes: &[&str]) -> Option<HeaderValue> {
    let text = value.to_str().ok()?;
    let mut changed = false;
    let tags: Vec<String> = text
        .split(',')
        .map(|t| {
            let t = t.trim();
            let inner = t.strip_prefix("W/\"").and_then(|r| r.strip_suffix('"'));
            for s in suffixes {
                if let Some(origin) = inner.and_then(|i| i.strip_suffix(&format!("-{s}"))) {
                    changed = true;
                    return format!("\"{origin}\"");
                }
            }
            t.to_string()
        })
        .collect();
    changed
        .then(|| HeaderValue::from_str(&tags.join(", ")).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn webp_only_when_named_with_a_positive_q() {
        let chrome = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8";
        assert!(accepts_webp(&headers(&[("accept", chrome)])));
        assert!(accepts_webp(&headers(&[("accept", "IMAGE/WEBP;q=0.5")])));
        assert!(!accepts_webp(&headers(&[("accept", "image/webp;q=0")])));
        assert!(!accepts_webp(&headers(&[("accept", "image/*,*/*")])));
        assert!(!accepts_webp(&headers(&[])));
    }

    #[test]
    fn vary_is_merged_once() {
        let mut h = headers(&[("vary", "Accept-Encoding")]);
        merge_vary(&mut h);
        merge_vary(&mut h);
        let all: Vec<_> = h.get_all("vary").iter().collect();
        assert_eq!(all, ["Accept-Encoding", "Accept"]);
        let mut star = headers(&[("vary", "*")]);
        merge_vary(&mut star);
        assert_eq!(star.get_all("vary").iter().count(), 1);
    }

    #[test]
    fn types_directives_and_tags() {
        let h = headers(&[
            ("content-type", "Image/JPEG; charset=x"),
            ("cache-control", "max-age=60, No-Transform"),
        ]);
        assert_eq!(media_type(&h).as_deref(), Some("image/jpeg"));
        assert!(no_transform(&h));
        let tag = transcoded_etag(&HeaderValue::from_static("\"v1\""), "tcwebp").unwrap();
        assert_eq!(tag, "W/\"v1-tcwebp\"");
        let back = origin_if_none_match(
            &HeaderValue::from_static("W/\"v1-tcwebp\", \"x\""),
            &["tc", "tcwebp"],
        );
        assert_eq!(back.unwrap(), "\"v1\", \"x\"");
        assert!(origin_if_none_match(&HeaderValue::from_static("\"v1\""), &["tc"]).is_none());
    }
}
