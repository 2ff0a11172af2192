//! Requests that ask to switch protocols (a WebSocket handshake's shape): the origin's
//! 101 reaches the client and the connections are joined; an origin that does not
//! switch answers as usual; a tunnel does not hold one of the origin's connections.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

/// An origin that agrees to switch to `echo` on `/switch` (then sends back every byte
/// in upper case, and first a greeting written right behind its 101), and answers
/// anything else with a plain 200. Keeps each request head it read.
struct UpgradeOrigin {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl UpgradeOrigin {
    fn start() -> UpgradeOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || serve(conn, kept));
            }
        });
        UpgradeOrigin { addr, heads }
    }

    fn last_head(&self) -> String {
        self.heads
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

fn serve(conn: TcpStream, heads: Arc<Mutex<Vec<String>>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            head.push_str(&line.to_ascii_lowercase());
            if line == "\r\n" {
                break;
            }
        }
        heads.lock().unwrap().push(head.clone());
        if !head.starts_with("get /switch ") {
            let _ = writer.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nCache-Control: no-store\r\n\r\nno switch",
            );
            continue;
        }
        // The greeting goes out with the 101, in one write.
        let _ = writer.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello",
        );
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if writer.write_all(&buf[..n].to_ascii_uppercase()).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

const ASK: &str = "Connection: Upgrade\r\nUpgrade: echo\r\n";

/// Sends a head asking to switch on `/switch` and returns the connection with the
/// response head read (and what came after it).
fn switched(proxy: SocketAddr) -> (RawConn, RawResponse) {
    let mut conn = RawConn::connect(proxy);
    conn.send(format!("GET /switch HTTP/1.1\r\nHost: ws.test\r\n{ASK}\r\n").as_bytes());
    let head = conn.read_head().expect("a response to the upgrade");
    (conn, head)
}

#[test]
fn an_origin_that_switches_protocols_is_joined_to_the_client() {
    let origin = UpgradeOrigin::start();
    let proxy = Proxy::reverse(&format!("http://{}", origin.addr));
    let (mut conn, head) = switched(proxy.reverse_addr());
    assert_eq!(head.status, 101);
    assert_eq!(head.header("upgrade"), Some("echo"));
    assert_eq!(
        head.header("connection").map(|c| c.to_ascii_lowercase()),
        Some("upgrade".into())
    );
    assert!(head.header("content-length").is_none());
    // What the origin wrote behind its head, then bytes both ways, several times.
    assert_eq!(conn.read_bytes(5).unwrap(), b"hello");
    for msg in [&b"first"[..], &[0u8, 13, 10, 255][..], &vec![b'x'; 50_000]] {
        conn.send(msg);
        assert_eq!(
            conn.read_bytes(msg.len()).unwrap(),
            msg.to_ascii_uppercase()
        );
    }
    let seen = origin.last_head();
    assert!(seen.contains("\r\nconnection: upgrade\r\n"), "{seen}");
    assert!(seen.contains("\r\nupgrade: echo\r\n"), "{seen}");
    assert!(seen.contains("\r\nvia: 1.1 weir ("), "{seen}");
}

#[test]
fn an_origin_that_does_not_switch_answers_as_usual() {
    let origin = UpgradeOrigin::start();
    let proxy = Proxy::reverse(&format!("http://{}", origin.addr));
    let host = "Host: ws.test\r\n";
    let r = raw_exchange(
        proxy.reverse_addr(),
        format!("GET /refused HTTP/1.1\r\n{host}{ASK}Connection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "no switch"));
    assert!(origin.last_head().contains("\r\nupgrade: echo\r\n"));
    // `Upgrade` without `upgrade` among the connection options is a plain request,
    // and the field is not forwarded.
    let r = raw_exchange(
        proxy.reverse_addr(),
        format!("GET /plain HTTP/1.1\r\n{host}Upgrade: echo\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "no switch"));
    assert!(
        !origin.last_head().contains("upgrade"),
        "{}",
        origin.last_head()
    );
}

#[test]
fn tunnels_do_not_hold_the_origins_connections() {
    let origin = UpgradeOrigin::start();
    let proxy = Proxy::builder()
        .reverse(&format!("http://{}", origin.addr))
        .option("upstream", "max_connections_per_origin", "2")
        .option("timeouts", "origin_response", "3s")
        .start();
    // Three tunnels open at once, more than the origin's connections allow.
    let mut open = Vec::new();
    for _ in 0..3 {
        let (mut conn, head) = switched(proxy.reverse_addr());
        assert_eq!(head.status, 101);
        assert_eq!(conn.read_bytes(5).unwrap(), b"hello");
        open.push(conn);
    }
    let r = raw_exchange(
        proxy.reverse_addr(),
        b"GET /after HTTP/1.1\r\nHost: ws.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "no switch"));
    for conn in &mut open {
        conn.send(b"still");
        assert_eq!(conn.read_bytes(5).unwrap(), b"STILL");
    }
}
