//! Weir's HTTP/1.1 client against origins that do what well-behaved test servers
//! don't: close a keep-alive connection under a request, answer before reading the
//! request body, send a body delimited by the connection's end, or frame a body twice.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

/// An origin on a raw socket: each connection is handed to `script` with its number
/// (from 0) on a thread of its own. Accepts until the test's process ends.
struct ScriptedOrigin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl ScriptedOrigin {
    fn start(script: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> ScriptedOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted origin");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let script = Arc::new(script);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let n = count.fetch_add(1, Ordering::SeqCst);
                let script = script.clone();
                std::thread::spawn(move || script(conn, n));
            }
        });
        ScriptedOrigin { addr, connections }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A forward proxy with one worker: each worker keeps its own origin connections (per
/// core), and these tests need every request to meet the connection the one before
/// left in the pool, whichever client connection it came on.
fn one_worker() -> Proxy {
    Proxy::builder()
        .forward()
        .option("server", "workers", "1")
        .start()
}

/// Reads one request head; `None` when the connection ended first.
fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

fn answer(conn: &mut TcpStream, body: &str) {
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(response.as_bytes());
}

fn get(proxy: &Proxy, origin: SocketAddr, path: &str) -> RawResponse {
    let req = format!(
        "GET http://{origin}{path} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"
    );
    raw_exchange(proxy.forward_addr(), req.as_bytes())
}

#[test]
fn a_get_the_origin_dropped_on_a_kept_connection_is_sent_again_on_a_new_one() {
    // The first connection answers once, then takes the next request and closes
    // without a word (it timed out just as the request came); later ones answer.
    let origin = ScriptedOrigin::start(|mut conn, n| {
        if n == 0 {
            if read_head(&mut conn).is_some() {
                answer(&mut conn, "first");
                let _ = read_head(&mut conn);
            }
            return;
        }
        while read_head(&mut conn).is_some() {
            answer(&mut conn, "again");
        }
    });
    let proxy = one_worker();
    assert_eq!(get(&proxy, origin.addr, "/a").text(), "first");
    let second = get(&proxy, origin.addr, "/b");
    assert_eq!(second.status, 200, "sent again, not failed: {second:?}");
    assert_eq!(second.text(), "again");
    assert_eq!(origin.connections(), 2);
}

#[test]
fn a_post_the_origin_dropped_is_not_sent_twice() {
    let posts = Arc::new(AtomicUsize::new(0));
    let seen = posts.clone();
    let origin = ScriptedOrigin::start(move |mut conn, n| {
        while let Some(head) = read_head(&mut conn) {
            if head.starts_with("POST") {
                seen.fetch_add(1, Ordering::SeqCst);
                let mut body = [0u8; 4];
                let _ = conn.read_exact(&mut body);
                if n == 0 {
                    return;
                }
            }
            answer(&mut conn, "ok");
        }
    });
    let proxy = one_worker();
    assert_eq!(get(&proxy, origin.addr, "/warm").text(), "ok");
    let addr = origin.addr;
    let req = format!(
        "POST http://{addr}/p HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndata"
    );
    let r = raw_exchange(proxy.forward_addr(), req.as_bytes());
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(
        posts.load(Ordering::SeqCst),
        1,
        "a POST is never repeated by the proxy"
    );
}

#[test]
fn an_origin_that_answers_before_reading_the_body_is_heard() {
    // The origin refuses a large upload from its head alone, then drains the rest
    // (as servers do before closing) so that the answer is not lost to a reset.
    let origin = ScriptedOrigin::start(|mut conn, _| {
        if read_head(&mut conn).is_none() {
            return;
        }
        let _ = conn.write_all(
            b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big\n",
        );
        let _ = conn.shutdown(std::net::Shutdown::Write);
        let mut sink = [0u8; 65536];
        while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
    });
    let proxy = one_worker();
    let addr = origin.addr;
    let size = 8 << 20;
    let mut conn = RawConn::connect(proxy.forward_addr());
    let head = format!(
        "PUT http://{addr}/up HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
    );
    conn.send(head.as_bytes());
    // The client keeps sending while the answer comes; it may be cut off once the
    // proxy has answered, which is allowed.
    let chunk = vec![b'x'; 64 << 10];
    for _ in 0..size / chunk.len() {
        if conn.try_send(&chunk).is_err() {
            break;
        }
    }
    let r = conn.read_response(false).expect("the origin's answer");
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.text(), "too big\n");
}

#[test]
fn a_body_ended_by_the_connection_and_a_body_framed_twice_are_not_reused() {
    let origin = ScriptedOrigin::start(|mut conn, _| {
        let Some(head) = read_head(&mut conn) else {
            return;
        };
        if head.contains("/close") {
            let _ =
                conn.write_all(b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\n\r\nuntil the end");
            return;
        }
        // Both lengths: the chunked coding wins, and the connection is not trusted.
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n4\r\nboth\r\n0\r\n\r\n",
        );
        // A proxy that trusted the connection would get this next.
        if read_head(&mut conn).is_some() {
            answer(&mut conn, "reused");
        }
    });
    let proxy = one_worker();
    assert_eq!(get(&proxy, origin.addr, "/close").text(), "until the end");
    let both = get(&proxy, origin.addr, "/both");
    assert_eq!(both.status, 200);
    assert_eq!(both.text(), "both");
    assert_eq!(get(&proxy, origin.addr, "/both").text(), "both");
    assert_eq!(origin.connections(), 3, "no connection was used twice");
}
