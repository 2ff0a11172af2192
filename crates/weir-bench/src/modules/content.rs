//! The side origin of `weir-bench modules`: the content its side load asks for, on one
//! loopback port. Compressible text, ordinary pages, ad images (for the ads a filter
//! list lets through) and a JPEG given on the command line.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

/// The header on every side-origin response: an answer without it was made by the
/// proxy (a blocked ad's blank image).
pub const ORIGIN_HEADER: &str = "x-side-origin";

/// The side origin: text, pages, ad images and JPEGs on one loopback port.
pub struct SideOrigin {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicU64>,
}

/// Starts the side origin; `jpeg` is the body of every `/image/` answer.
pub async fn start_origin(text_size: usize, jpeg: Option<Bytes>) -> Result<SideOrigin, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("side origin: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let requests = Arc::new(AtomicU64::new(0));
    let bodies = Arc::new(Bodies {
        text: Bytes::from(source_text(text_size)),
        jpeg: jpeg.unwrap_or_default(),
    });
    let count = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (bodies, count) = (bodies.clone(), count.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<_>| {
                    count.fetch_add(1, Ordering::Relaxed);
                    let resp = answer(&bodies, req.uri().path());
                    async move { Ok::<_, Infallible>(resp) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    Ok(SideOrigin { addr, requests })
}

struct Bodies {
    text: Bytes,
    jpeg: Bytes,
}

fn answer(bodies: &Bodies, path: &str) -> Response<Full<Bytes>> {
    let (content_type, body) = if path.starts_with("/text/") {
        ("text/plain; charset=utf-8", bodies.text.clone())
    } else if path.starts_with("/image/") {
        ("image/jpeg", bodies.jpeg.clone())
    } else if path.starts_with("/ad/") || path.starts_with("/ads/") {
        // An ad the module let through: a GIF, as an ad server would send.
        ("image/gif", Bytes::from_static(BLANK_GIF))
    } else {
        ("text/html; charset=utf-8", Bytes::from_static(PAGE))
    };
    let mut r = Response::new(Full::new(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    h.insert(ORIGIN_HEADER, HeaderValue::from_static("1"));
    r
}

const PAGE: &[u8] =
    b"<!doctype html><html><head><title>news</title></head><body><p>Today.</p></body></html>\n";
const BLANK_GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff\x21\xf9\x04\x01\x00\x00\x00\x00\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00\x3b";

/// `size` bytes of C-like source: repetitive as code is, so it compresses as code does
/// (about 3:1 with gzip), with numbers that vary so it is not trivially repetitive.
pub fn source_text(size: usize) -> Vec<u8> {
    let mut out = String::with_capacity(size + 128);
    let mut i = 0u64;
    while out.len() < size {
        let x = i.wrapping_mul(2654435761) % 9973;
        out.push_str(&format!(
            "static int block_{i}(struct state *s, unsigned len)\n{{\n    if (len > {x}) \
             return s->avail - {};\n    s->next += len; /* consumed */\n    return 0;\n}}\n\n",
            x % 97
        ));
        i += 1;
    }
    out.truncate(size);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_text_has_the_size_asked_for_and_varies() {
        let t = source_text(8192);
        assert_eq!(t.len(), 8192);
        let s = String::from_utf8(t).unwrap();
        assert!(s.contains("block_0") && s.contains("block_40"), "{s}");
    }
}
