//! What a filter list needs to know about a request that a proxy only sees from the
//! outside: its URL, the page that asked for it, the kind of resource it is (`$image`,
//! `$script`, ...) and whether it is third-party.
//!
//! A browser knows all of this; a proxy infers it from the request's headers:
//! `Sec-Fetch-Dest` and `Sec-Fetch-Site` when the browser sends them (only to secure
//! contexts, so rarely through a plain-HTTP proxy), otherwise `Accept`, the URL's
//! extension and `Referer`.

use weir_api::http::{header, HeaderMap};
use weir_api::RequestHead;

/// The request as a filter list sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The absolute URL (`http://host/path?query`).
    pub url: String,
    /// The page that asked for it (`Referer`), or empty.
    pub source: String,
    /// The request type in the crate's vocabulary (`image`, `script`, ...).
    pub kind: &'static str,
    /// Whether it is third-party; `None` to let the engine compare the domains of
    /// `url` and `source`.
    pub third_party: Option<bool>,
}

/// Describes `request`, or `None` when no absolute URL can be made for it.
pub fn describe(request: &RequestHead) -> Option<Described> {
    let url = absolute_url(request)?;
    let headers = &request.headers;
    let source = text(headers, &header::REFERER).unwrap_or("").to_string();
    let kind = fetch_dest(headers)
        .or_else(|| from_accept(headers))
        .or_else(|| from_extension(request.uri.path()))
        .unwrap_or("other");
    let third_party = match text(headers, "sec-fetch-site") {
        Some(site) => Some(site.eq_ignore_ascii_case("cross-site")),
        // No page to compare with: a direct request (typed, a bookmark, a script of
        // the user's own) is first-party, so `$third-party` rules do not block it.
        None if source.is_empty() => Some(false),
        None => None,
    };
    Some(Described {
        url,
        source,
        kind,
        third_party,
    })
}

/// Whether a blocked request of this kind may be answered with an image.
pub fn is_image(kind: &str) -> bool {
    kind == "image"
}

/// The URL the cache names the request by: absolute in forward mode, from `Host` and
/// the path in reverse mode.
pub fn absolute_url(request: &RequestHead) -> Option<String> {
    let path = request.uri.path_and_query().map_or("/", |p| p.as_str());
    if let Some(authority) = request.uri.authority() {
        return Some(format!("http://{authority}{path}"));
    }
    let host = text(&request.headers, &header::HOST)?;
    Some(format!("http://{host}{path}"))
}

fn text<K: header::AsHeaderName>(headers: &HeaderMap, name: K) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `Sec-Fetch-Dest`, the browser's own word for the request type.
fn fetch_dest(headers: &HeaderMap) -> Option<&'static str> {
    let dest = text(headers, "sec-fetch-dest")?.trim().to_ascii_lowercase();
    Some(match dest.as_str() {
        "image" => "image",
        "script" | "worker" | "sharedworker" | "serviceworker" | "audioworklet"
        | "paintworklet" => "script",
        "style" => "stylesheet",
        "font" => "font",
        "audio" | "video" | "track" => "media",
        "object" | "embed" => "object",
        "iframe" | "frame" | "fencedframe" => "sub_frame",
        "document" => "document",
        "empty" => "xmlhttprequest",
        _ => "other",
    })
}

/// The first media range of `Accept`, when it names a kind: browsers ask for images
/// with `image/avif,image/webp,...`, style sheets with `text/css`, pages with
/// `text/html`. Scripts and XHR send `*/*`, which says nothing.
fn from_accept(headers: &HeaderMap) -> Option<&'static str> {
    let accept = text(headers, &header::ACCEPT)?;
    let first = accept.split([',', ';']).next()?.trim().to_ascii_lowercase();
    if first.starts_with("image/") {
        Some("image")
    } else if first == "text/css" {
        Some("stylesheet")
    } else if first == "text/html" || first == "application/xhtml+xml" {
        Some("document")
    } else {
        None
    }
}

/// The kind the path's extension suggests.
fn from_extension(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next()?;
    let (_, ext) = name.rsplit_once('.')?;
    Some(match ext.to_ascii_lowercase().as_str() {
        "gif" | "png" | "jpg" | "jpeg" | "webp" | "avif" | "svg" | "ico" | "bmp" | "apng" => {
            "image"
        }
        "js" | "mjs" => "script",
        "css" => "stylesheet",
        "woff" | "woff2" | "ttf" | "otf" | "eot" => "font",
        "mp4" | "webm" | "mp3" | "ogg" | "m4a" | "m3u8" | "mpd" => "media",
        "swf" => "object",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(uri: &str, headers: &[(&str, &str)]) -> RequestHead {
        let mut b = weir_api::http::Request::builder().uri(uri);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn urls_in_both_modes() {
        let forward = head("http://ads.example/a.gif?x=1", &[]);
        assert_eq!(
            absolute_url(&forward).unwrap(),
            "http://ads.example/a.gif?x=1"
        );
        let reverse = head("/b.js", &[("host", "site.example:8080")]);
        assert_eq!(
            absolute_url(&reverse).unwrap(),
            "http://site.example:8080/b.js"
        );
        assert!(absolute_url(&head("/c", &[])).is_none());
    }

    #[test]
    fn kinds_from_fetch_dest_then_accept_then_extension() {
        let kind = |uri, h: &[(&str, &str)]| describe(&head(uri, h)).unwrap().kind;
        assert_eq!(
            kind("http://a.example/x", &[("sec-fetch-dest", "image")]),
            "image"
        );
        assert_eq!(
            kind("http://a.example/x.gif", &[("sec-fetch-dest", "script")]),
            "script"
        );
        assert_eq!(
            kind(
                "http://a.example/x",
                &[("accept", "image/avif,image/webp,*/*")]
            ),
            "image"
        );
        assert_eq!(
            kind("http://a.example/x", &[("accept", "text/css,*/*;q=0.1")]),
            "stylesheet"
        );
        assert_eq!(
            kind("http://a.example/x.PNG", &[("accept", "*/*")]),
            "image"
        );
        assert_eq!(kind("http://a.example/app.js?v=2", &[]), "script");
        assert_eq!(kind("http://a.example/dir.v2/", &[]), "other");
        assert_eq!(kind("http://a.example/x", &[]), "other");
    }

    #[test]
    fn third_party_from_sec_fetch_site_or_referer() {
        let tp = |h: &[(&str, &str)]| {
            describe(&head("http://ads.example/x", h))
                .unwrap()
                .third_party
        };
        assert_eq!(tp(&[("sec-fetch-site", "cross-site")]), Some(true));
        assert_eq!(tp(&[("sec-fetch-site", "same-site")]), Some(false));
        assert_eq!(tp(&[]), Some(false), "no context: first-party");
        assert_eq!(tp(&[("referer", "http://news.example/")]), None);
        let d = describe(&head(
            "http://ads.example/x",
            &[("referer", "http://news.example/a")],
        ));
        assert_eq!(d.unwrap().source, "http://news.example/a");
    }
}
