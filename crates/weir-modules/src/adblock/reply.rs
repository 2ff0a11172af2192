//! What a blocked request gets: a blank image, `204 No Content` or `403 Forbidden`.

use std::time::Duration;

use weir_api::http::{header, HeaderMap, HeaderValue, StatusCode};
use weir_api::serde::Deserialize;
use weir_api::{Bytes, Reply};

/// A 1x1 transparent GIF (43 bytes), the smallest image every browser shows as
/// nothing.
pub const BLANK_GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, // GIF89a
    0x01, 0x00, 0x01, 0x00, // 1x1
    0x80, 0x00, 0x00, // global colour table of 2 entries
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, // graphic control: index 0 transparent
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
    0x02, 0x02, 0x44, 0x01, 0x00, // LZW data
    0x3b, // trailer
];

/// What a blocked request is answered with (`action`, and `fallback` for requests
/// that are not images when `action = "image"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(crate = "weir_api::serde")]
pub enum Action {
    /// A cacheable blank image for image requests.
    #[serde(rename = "image")]
    Image,
    /// `204 No Content`.
    #[serde(rename = "204")]
    NoContent,
    /// `403 Forbidden` with a short reason.
    #[serde(rename = "403")]
    Forbidden,
}

/// The replies, made once at build.
#[derive(Debug, Clone)]
pub struct Replies {
    image_headers: HeaderMap,
    no_content: Reply,
    forbidden: Reply,
}

impl Replies {
    /// Replies whose image is fresh for `image_ttl`.
    pub fn new(image_ttl: Duration) -> Replies {
        let mut image_headers = HeaderMap::new();
        image_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/gif"));
        // Public and fresh, so the cache stores it and serves it as a hit.
        let cc = format!("public, max-age={}", image_ttl.as_secs());
        image_headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_str(&cc).expect("digits"),
        );
        let mut no_content = Reply::text(StatusCode::NO_CONTENT, "");
        no_content.headers.clear();
        no_content
            .headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let mut forbidden = Reply::text(StatusCode::FORBIDDEN, "blocked by a filter list\n");
        forbidden
            .headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Replies {
            image_headers,
            no_content,
            forbidden,
        }
    }

    /// The image reply: its headers make it storable.
    pub fn image(&self) -> Reply {
        Reply {
            status: StatusCode::OK,
            headers: self.image_headers.clone(),
            body: Bytes::from_static(BLANK_GIF),
        }
    }

    /// The headers the image is stored with.
    pub fn image_headers(&self) -> HeaderMap {
        self.image_headers.clone()
    }

    /// The reply for `action` (an `Image` here means the image).
    pub fn for_action(&self, action: Action) -> Reply {
        match action {
            Action::Image => self.image(),
            Action::NoContent => self.no_content.clone(),
            Action::Forbidden => self.forbidden.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gif_is_a_1x1_gif() {
        assert_eq!(BLANK_GIF.len(), 43);
        assert_eq!(&BLANK_GIF[..6], b"GIF89a");
        assert_eq!(BLANK_GIF[6..10], [1, 0, 1, 0]);
        assert_eq!(*BLANK_GIF.last().unwrap(), 0x3b);
    }

    #[test]
    fn replies() {
        let r = Replies::new(Duration::from_secs(3600));
        let image = r.for_action(Action::Image);
        assert_eq!(image.status, 200);
        assert_eq!(image.headers["cache-control"], "public, max-age=3600");
        assert_eq!(image.headers["content-type"], "image/gif");
        let nc = r.for_action(Action::NoContent);
        assert_eq!((nc.status, nc.body.len()), (StatusCode::NO_CONTENT, 0));
        assert!(nc.headers.get("content-type").is_none());
        let f = r.for_action(Action::Forbidden);
        assert_eq!(f.status, 403);
        assert!(!f.body.is_empty());
    }
}
