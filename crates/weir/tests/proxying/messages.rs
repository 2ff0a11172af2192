//! Messages across versions and methods: an HTTP/1.0 origin, `Expect: 100-continue`, HEAD.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::helpers::{absolute, via_values};

/// A bare HTTP/1.0 origin: reads each request (head and Content-Length body), answers
/// `HTTP/1.0 200 OK` with "ok" and closes. Stops on drop.
struct Http10Origin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Http10Origin {
    fn start() -> Http10Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the HTTP/1.0 origin");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (st, sv) = (stop.clone(), served.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                if Http10Origin::read_request(&mut conn) {
                    sv.fetch_add(1, Ordering::SeqCst);
                    let _ = conn.write_all(
                        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n\r\nok",
                    );
                    let _ = conn.flush();
                }
            }
        });
        Http10Origin {
            addr,
            stop,
            served,
            thread: Some(thread),
        }
    }

    /// Reads one request whole; false if the connection ended first.
    fn read_request(conn: &mut std::net::TcpStream) -> bool {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break pos + 4;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let body_len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + body_len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        true
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for Http10Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn http10_origin_responses_reach_the_client_as_http11() {
    let origin = Http10Origin::start();
    let proxy = Proxy::forward();
    let addr = origin.addr;
    // GET goes through the cache's fetch, POST through plain forwarding.
    for (method, extra, body) in [("GET", "", ""), ("POST", "Content-Length: 4\r\n", "data")] {
        let req = format!(
            "{method} http://{addr}/old HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n{body}"
        );
        let r = raw_exchange(proxy.forward_addr(), req.as_bytes());
        assert_eq!(
            format!("{} {}", r.version, r.status),
            "HTTP/1.1 200",
            "{method}: status line of the response to an HTTP/1.1 client"
        );
        assert_eq!(r.text(), "ok", "{method}");
        let via = via_values(
            &r.header_all("via")
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
        );
        assert!(
            via.iter().any(|v| v == "1.0 weir"),
            "{method}: Via {via:?} should record the origin's HTTP/1.0 as `1.0 weir`"
        );
    }
    assert_eq!(origin.served(), 2);
}

#[test]
fn expect_100_continue() {
    let origin = TestOrigin::start();
    origin.route("/upload", Reply::echo());
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute(
        "POST",
        &origin,
        "/upload",
        "Content-Length: 11\r\nExpect: 100-continue\r\n",
    ));
    assert!(
        conn.has_data_within(Duration::from_secs(5)),
        "no 100 Continue within 5 s"
    );
    let interim = conn.read_head().expect("interim response");
    assert_eq!(interim.status, 100, "expected 100 Continue before the body");
    conn.send(b"hello world");
    let r = conn.read_final(false).expect("final response");
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    assert_eq!(origin.count("/upload"), 1);
    let seen = origin.last("/upload").unwrap();
    assert_eq!(&seen.body[..], b"hello world");
    assert!(
        !seen.has_header("expect"),
        "the expectation was forwarded to the origin"
    );
}

#[test]
fn head_requests_get_headers_and_no_body() {
    let origin = TestOrigin::start();
    origin.route("/head", Reply::ok("hello world").cc("no-store"));
    origin.route("/after", Reply::ok("after").cc("no-store"));
    let proxy = Proxy::forward();
    let mut conn = RawConn::connect(proxy.forward_addr());
    conn.send(&absolute("HEAD", &origin, "/head", ""));
    let r = conn.read_final(true).expect("HEAD response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("11"));
    // A following response on the same connection parses cleanly: no body bytes were
    // sent after the HEAD response.
    conn.send(&absolute("GET", &origin, "/after", ""));
    let r = conn.read_final(false).expect("response after HEAD");
    assert_eq!((r.status, r.text().as_str()), (200, "after"));
    assert_eq!(origin.count("/head"), 1);
    assert_eq!(origin.count("/after"), 1);
}
