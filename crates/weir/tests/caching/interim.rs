//! Interim responses (RFC 9110 §15.2): a `103 Early Hints` or `102 Processing` from the
//! origin reaches an HTTP/1.1 or HTTP/2 client before the final response, never an
//! HTTP/1.0 client, and is never stored with the response.
//!
//! hyper's origin server cannot send a 1xx, so these tests use a raw one.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

const EARLY_HINTS: &[u8] =
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n";
const PROCESSING: &[u8] = b"HTTP/1.1 102 Processing\r\n\r\n";
const FINAL: &[u8] =
    b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 5\r\n\r\nhello";

/// How long the origin holds its final response for a client that is to see the 1xx
/// first; the test releases it as soon as the 1xx arrived.
const HOLD: Duration = Duration::from_secs(5);

/// An origin that answers every request with `interim`, then (once released, or after
/// `HOLD`) the final response.
struct InterimOrigin {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    release: mpsc::Sender<()>,
}

impl InterimOrigin {
    fn start(interim: &'static [u8]) -> InterimOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let (release, released) = mpsc::channel();
        let released = Arc::new(Mutex::new(released));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (counted, released) = (counted.clone(), released.clone());
                std::thread::spawn(move || serve(stream, interim, &counted, &released));
            }
        });
        InterimOrigin {
            addr,
            requests,
            release,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn release(&self) {
        let _ = self.release.send(());
    }
}

fn serve(
    mut stream: TcpStream,
    interim: &[u8],
    requests: &AtomicUsize,
    released: &Mutex<mpsc::Receiver<()>>,
) {
    stream.set_read_timeout(Some(RAW_WAIT)).unwrap();
    let mut buf = Vec::new();
    loop {
        let Some(end) = read_head(&mut stream, &mut buf) else {
            return;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let body_len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + body_len {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..end + body_len);
        requests.fetch_add(1, Ordering::SeqCst);
        if stream.write_all(interim).is_err() {
            return;
        }
        let _ = released.lock().unwrap().recv_timeout(HOLD);
        if stream.write_all(FINAL).is_err() {
            return;
        }
    }
}

const RAW_WAIT: Duration = Duration::from_secs(15);

/// Reads until `buf` holds a whole request head; the offset of its end.
fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(i + 4);
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn request(method: &str, url: &str, version: &str) -> Vec<u8> {
    let host = url.trim_start_matches("http://").split('/').next().unwrap();
    let body = if method == "POST" {
        "Content-Length: 2\r\n\r\nhi"
    } else {
        "\r\n"
    };
    format!("{method} {url} {version}\r\nHost: {host}\r\n{body}").into_bytes()
}

/// Sends `req` on `conn` and reads the first thing that comes back, which must be the
/// interim response `status` while the origin still holds its final one; then releases
/// the final response and returns it.
fn interim_then_final(
    conn: &mut RawConn,
    origin: &InterimOrigin,
    req: &[u8],
    status: u16,
) -> (RawResponse, RawResponse) {
    conn.send(req);
    let interim = conn.read_head().expect("a response head");
    assert_eq!(
        interim.status, status,
        "the client saw {interim:?} first, not the {status}"
    );
    origin.release();
    let last = conn.read_final(false).expect("the final response");
    (interim, last)
}

#[test]
fn early_hints_reach_the_client_first_and_are_not_stored() {
    let origin = InterimOrigin::start(EARLY_HINTS);
    let proxy = Proxy::forward();
    let url = origin.url("/page");
    let mut conn = RawConn::connect(proxy.forward_addr());
    let (hints, page) =
        interim_then_final(&mut conn, &origin, &request("GET", &url, "HTTP/1.1"), 103);
    assert_eq!(hints.version, "HTTP/1.1");
    assert_eq!(
        hints.header("link"),
        Some("</style.css>; rel=preload; as=style")
    );
    assert_eq!((page.status, page.text().as_str()), (200, "hello"));
    assert!(
        page.header("cache-status")
            .is_some_and(|cs| cs_has(cs, "stored", None)),
        "{page:?}"
    );
    // The hit comes from the cache alone: no 103 before it.
    conn.send(&request("GET", &url, "HTTP/1.1"));
    let again = conn.read_response(false).expect("the second response");
    assert_eq!(again.status, 200, "{again:?}");
    assert!(
        is_hit(again.header("cache-status").unwrap_or("")),
        "{again:?}"
    );
    assert_eq!(again.header("link"), None);
    assert_eq!(origin.requests.load(Ordering::SeqCst), 1);
}

#[test]
fn processing_reaches_the_client_first() {
    let origin = InterimOrigin::start(PROCESSING);
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    let req = request("GET", &origin.url("/slow"), "HTTP/1.1");
    let (processing, last) = interim_then_final(&mut conn, &origin, &req, 102);
    assert_eq!(processing.reason, "Processing");
    assert_eq!(last.status, 200);
}

#[test]
fn early_hints_reach_the_client_of_a_request_that_bypasses_the_cache() {
    let origin = InterimOrigin::start(EARLY_HINTS);
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    let req = request("POST", &origin.url("/form"), "HTTP/1.1");
    let (hints, last) = interim_then_final(&mut conn, &origin, &req, 103);
    assert!(hints.header("link").is_some(), "{hints:?}");
    assert_eq!(last.status, 200);
}

#[test]
fn an_http10_client_gets_no_interim_response() {
    let origin = InterimOrigin::start(EARLY_HINTS);
    origin.release();
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&request("GET", &origin.url("/old"), "HTTP/1.0"));
    let first = conn.read_response(false).expect("a response");
    assert_eq!(first.status, 200, "an HTTP/1.0 client got {first:?}");
    assert_eq!(first.text(), "hello");
    assert_eq!(origin.requests.load(Ordering::SeqCst), 1);
}

/// An HTTP/2 client (prior knowledge) on the proxy's reverse listener.
async fn h2_client(proxy: &Proxy) -> h2::client::SendRequest<bytes::Bytes> {
    let tcp = tokio::net::TcpStream::connect(proxy.reverse_addr())
        .await
        .expect("connect to the proxy");
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    client
}

/// Sends a GET for `path` and returns the interim responses seen while the origin holds
/// its final one (up to `interim`), then releases it and returns the final head and
/// body.
async fn h2_get(
    client: &mut h2::client::SendRequest<bytes::Bytes>,
    proxy: &Proxy,
    origin: &InterimOrigin,
    path: &str,
    interim: usize,
) -> (Vec<http::Response<()>>, http::Response<()>, String) {
    let req = http::Request::get(proxy.reverse_url(path))
        .body(())
        .unwrap();
    let mut sent = client.clone().ready().await.expect("stream capacity");
    let (mut response, _) = sent.send_request(req, true).expect("send the request");
    *client = sent;
    let mut seen = Vec::new();
    while seen.len() < interim {
        let next = tokio::time::timeout(
            HOLD,
            std::future::poll_fn(|cx| response.poll_informational(cx)),
        )
        .await
        .expect("an interim response before the origin's final one");
        match next {
            Some(Ok(r)) => seen.push(r),
            other => panic!("no interim response: {other:?}"),
        }
    }
    origin.release();
    let response = response.await.expect("the final response");
    let (head, mut body) = response.into_parts();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("body data");
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    (
        seen,
        http::Response::from_parts(head, ()),
        String::from_utf8_lossy(&text).into_owned(),
    )
}

#[tokio::test]
async fn early_hints_reach_an_http2_client_first_and_are_not_stored() {
    let origin = InterimOrigin::start(EARLY_HINTS);
    let proxy = Proxy::reverse(&format!("http://{}", origin.addr));
    let mut client = h2_client(&proxy).await;
    let (hints, page, body) = h2_get(&mut client, &proxy, &origin, "/h2", 1).await;
    assert_eq!(hints[0].status().as_u16(), 103);
    assert_eq!(
        hints[0].headers().get("link").unwrap(),
        "</style.css>; rel=preload; as=style"
    );
    assert_eq!((page.status().as_u16(), body.as_str()), (200, "hello"));
    assert!(page.headers().get("date").is_some(), "{page:?}");
    let cache_status = page
        .headers()
        .get("cache-status")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(cs_has(cache_status, "stored", None), "{page:?}");
    // The hit comes from the cache alone: no 103 before it, on the same connection.
    let (hints, again, body) = h2_get(&mut client, &proxy, &origin, "/h2", 0).await;
    assert!(hints.is_empty());
    assert_eq!((again.status().as_u16(), body.as_str()), (200, "hello"));
    let cache_status = again
        .headers()
        .get("cache-status")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(is_hit(cache_status), "{again:?}");
    assert_eq!(again.headers().get("link"), None);
    assert_eq!(origin.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn processing_reaches_an_http2_client_first() {
    let origin = InterimOrigin::start(PROCESSING);
    let proxy = Proxy::reverse(&format!("http://{}", origin.addr));
    let mut client = h2_client(&proxy).await;
    let (seen, last, body) = h2_get(&mut client, &proxy, &origin, "/slow", 1).await;
    assert_eq!(seen[0].status().as_u16(), 102);
    assert_eq!((last.status().as_u16(), body.as_str()), (200, "hello"));
}
