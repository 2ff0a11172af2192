//! What idle keep-alive client connections cost: many connections, each after one
//! completed request, must add little to the proxy's resident memory, and each must
//! still serve its next request.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;

/// Sends one GET on `conn` and reads the whole answer; returns its status and body length.
fn exchange(conn: &mut TcpStream, addr: SocketAddr, path: &str) -> (u16, usize) {
    write!(conn, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send the request");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).expect("read the answer");
        assert!(n > 0, "the proxy closed the connection before answering");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let status = head[9..12].parse().expect("a status code");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().expect("a length"))
            .expect("a Content-Length");
        while buf.len() < end + 4 + length {
            let n = conn.read(&mut chunk).expect("read the body");
            assert!(n > 0, "the proxy closed the connection in the body");
            buf.extend_from_slice(&chunk[..n]);
        }
        return (status, length);
    }
}

/// The soft limit on open files of this process (the proxy inherits it).
fn open_file_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse()
                .ok()
        })
        .unwrap_or(1024)
}

/// Waits (at most 10 s) until the `n` `what` held add less than `bound` bytes each to
/// the proxy's resident memory since it was `before` KiB; panics when they do not.
fn settles_under(proxy: &Proxy, before: u64, n: usize, bound: u64, what: &str) {
    let mut each = u64::MAX;
    let settled = wait_until(Duration::from_secs(10), || {
        each = proxy.rss_kib().saturating_sub(before) * 1024 / n as u64;
        each < bound
    });
    assert!(
        settled,
        "{n} {what} cost {each} bytes each in resident memory (bound {bound})"
    );
    eprintln!("{n} {what}: {each} bytes each");
}

#[test]
fn idle_keep_alive_connections_cost_little_memory() {
    let origin = TestOrigin::start();
    origin.route("/object", Reply::ok(pattern(1024)).cc("max-age=3600"));
    let proxy = Proxy::reverse(&origin.base());
    let addr = proxy.reverse_addr();
    let mut warm = TcpStream::connect(addr).unwrap();
    assert_eq!(exchange(&mut warm, addr, "/object"), (200, 1024));
    assert_eq!(exchange(&mut warm, addr, "/object"), (200, 1024));
    drop(warm);

    // Each connection is a descriptor here and one in the proxy.
    let n = open_file_limit().saturating_sub(200).min(2000);
    assert!(n >= 500, "too few open files allowed ({n}) for a measure");
    let before = proxy.rss_kib();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = TcpStream::connect(addr).expect("connect");
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        assert_eq!(exchange(&mut conn, addr, "/object"), (200, 1024));
        held.push(conn);
    }
    // Each such connection once kept about 40 KB (hyper's buffers and the transaction's
    // future), then 6 KB (a task sized for HTTP/2's state); waiting, it now keeps about
    // 3.3 KB: its task, its socket's registration and its connection's information.
    // The bound sits below 6 KB, with room for the allocator's noise.
    settles_under(&proxy, before, n, 4_800, "idle keep-alive connections");

    // A waiting connection still serves its next request, and more after it.
    for conn in held.iter_mut().step_by(97) {
        assert_eq!(exchange(conn, addr, "/object"), (200, 1024));
        assert_eq!(exchange(conn, addr, "/object"), (200, 1024));
    }
    // Two requests sent together, the second before the first is answered.
    let conn = &mut held[1];
    write!(
        conn,
        "GET /object HTTP/1.1\r\nHost: {addr}\r\n\r\nGET /object HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    let mut answers = Vec::new();
    let mut chunk = [0u8; 8192];
    while answers.windows(8).filter(|w| w == b"HTTP/1.1").count() < 2
        || answers.len() < 2 * 1024 + 200
    {
        let n = conn.read(&mut chunk).expect("read the pipelined answers");
        assert!(n > 0, "closed before both pipelined answers");
        answers.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(
        answers
            .windows(15)
            .filter(|w| w == b"HTTP/1.1 200 OK")
            .count(),
        2
    );
    assert_eq!(origin.count("/object"), 1, "every later request was a hit");
}

/// Tunnels that wait (a browser keeps a dozen TLS connections open through a forward
/// proxy, mostly idle) hold no copy buffer: each costs its two sockets and its task.
#[test]
fn idle_tunnels_cost_little_memory() {
    let echo = EchoServer::start();
    let proxy = Proxy::builder()
        .forward()
        .connect_ports(&[echo.port()])
        .start();
    // Each tunnel is a descriptor here and two in the proxy (and a thread of the echo
    // server's).
    let n = (open_file_limit().saturating_sub(200) / 2).min(1000);
    assert!(n >= 300, "too few open files allowed ({n}) for a measure");
    let mut warm = RawConn::tunnel(proxy.forward_addr(), echo.port());
    warm.send(b"warm");
    assert_eq!(warm.read_bytes(4).unwrap(), b"warm");
    drop(warm);
    let before = proxy.rss_kib();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = RawConn::tunnel(proxy.forward_addr(), echo.port());
        conn.send(&[b'x'; 2000]);
        assert_eq!(conn.read_bytes(2000).unwrap(), [b'x'; 2000]);
        held.push(conn);
    }
    // With a copy buffer per direction for its whole life (tokio's
    // copy_bidirectional), each cost about 25 KB in a release build; waiting with none,
    // about 8 KB.
    settles_under(&proxy, before, n, 14_000, "idle tunnels");
    // A waiting tunnel still carries bytes both ways.
    for conn in held.iter_mut().step_by(97) {
        conn.send(b"again");
        assert_eq!(conn.read_bytes(5).unwrap(), b"again");
    }
}
