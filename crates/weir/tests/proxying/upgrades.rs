//! Requests that ask to switch protocols (a WebSocket handshake's shape): the origin's
//! 101 reaches the client and the connections are joined; an origin that does not
//! switch answers as usual; a tunnel does not hold one of the origin's connections,
//! and is closed after a silence; and a real browser's WebSocket (headless Chromium)
//! through a reverse listener.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::browser::{attribute, chromium, dump_dom};
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

/// The modules see a switch's request to the origin and its answer, as on a
/// pass-through (the built-in `add-headers` adds a field at each header event).
#[test]
fn modules_see_the_request_to_the_origin_and_its_answer() {
    let origin = UpgradeOrigin::start();
    let proxy = Proxy::builder()
        .reverse(&format!("http://{}", origin.addr))
        .raw("[[module]]\nname = \"add-headers\"\n")
        .start();
    let (mut conn, head) = switched(proxy.reverse_addr());
    assert_eq!(head.status, 101);
    // Response headers, then deliver headers.
    assert_eq!(head.header("x-weir-out-1"), Some("1"));
    assert_eq!(head.header("x-weir-out-2"), Some("1"));
    assert_eq!(conn.read_bytes(5).unwrap(), b"hello");
    conn.send(b"bytes");
    assert_eq!(conn.read_bytes(5).unwrap(), b"BYTES");
    // Request headers, then upstream request.
    let seen = origin.last_head();
    assert!(seen.contains("\r\nx-weir-in-1: 1\r\n"), "{seen}");
    assert!(seen.contains("\r\nx-weir-in-2: 1\r\n"), "{seen}");
    let r = raw_exchange(
        proxy.reverse_addr(),
        format!("GET /refused HTTP/1.1\r\nHost: ws.test\r\n{ASK}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "no switch"));
    assert_eq!(r.header("x-weir-out-1"), Some("1"));
    assert!(origin.last_head().contains("\r\nx-weir-in-2: 1\r\n"));
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

/// A switched connection (a WebSocket whose peers stopped talking) is closed after
/// `[timeouts] tunnel_idle` of silence, as a CONNECT tunnel is.
#[test]
fn a_silent_switched_connection_is_closed_after_tunnel_idle() {
    let origin = UpgradeOrigin::start();
    let proxy = Proxy::builder()
        .reverse(&format!("http://{}", origin.addr))
        .option("timeouts", "tunnel_idle", "1s")
        .start();
    let (mut conn, head) = switched(proxy.reverse_addr());
    assert_eq!(head.status, 101);
    assert_eq!(conn.read_bytes(5).unwrap(), b"hello");
    let end = conn
        .read_bytes(1)
        .expect_err("closed after a second of silence");
    assert_eq!(end.kind(), std::io::ErrorKind::UnexpectedEof, "{end}");
    let closed = metric(&proxy.metrics(), "weir_tunnels_idle_closed_total", &[]);
    assert_eq!(closed, Some(1.0));
}

/// SHA-1 (FIPS 180-4), for the WebSocket handshake's accept value (RFC 6455 §4.2.2).
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&(data.len() as u64 * 8).to_be_bytes());
    for block in message.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// The page the browser loads: it opens a WebSocket to its own host, sends `ping`,
/// and shows what comes back. Until then it fetches `/tick` (which the origin answers
/// after 10 ms) again and again: the browser's virtual time stands still while a fetch
/// is pending, and a socket alone does not hold it, so without them the page could be
/// dumped before the socket has answered. (One fetch held until the socket is done
/// holds the socket's events too.)
const PAGE: &str = r#"<html><body><p id="out" data-got="nothing"></p><script>
let got = null;
const out = document.getElementById("out");
const ws = new WebSocket("ws://" + location.host + "/ws");
ws.onopen = () => ws.send("ping");
ws.onmessage = e => { got = e.data; out.setAttribute("data-got", e.data); };
ws.onerror = () => { got = "error"; out.setAttribute("data-got", "error"); };
(async () => { for (let i = 0; i < 500 && got === null; i++) { await fetch("/tick"); } })();
</script></body></html>"#;

/// A WebSocket origin (RFC 6455): serves [`PAGE`] at `/`, and on `/ws` completes the
/// handshake, reads one masked text frame and answers `echo:` and its text. Keeps
/// the texts it read.
fn websocket_origin() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    use base64::Engine as _;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let texts = Arc::new(Mutex::new(Vec::new()));
    let kept = texts.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut writer = conn;
                loop {
                    let mut head = String::new();
                    while !head.ends_with("\r\n\r\n") {
                        if reader.read_line(&mut head).unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    let key = head.lines().find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("sec-websocket-key")
                            .then(|| value.trim().to_owned())
                    });
                    let (Some(key), "/ws") = (key, path.as_str()) else {
                        if path == "/tick" {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        let body = if path == "/" { PAGE } else { "" };
                        let _ = write!(
                            writer,
                            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                             Cache-Control: no-store\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        continue;
                    };
                    let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
                    let accept = base64::engine::general_purpose::STANDARD
                        .encode(sha1(format!("{key}{guid}").as_bytes()));
                    let _ = write!(
                        writer,
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                         Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                    );
                    // One short masked text frame from the client.
                    let mut frame = [0u8; 6];
                    if reader.read_exact(&mut frame).is_err() {
                        return;
                    }
                    let mut text = vec![0u8; (frame[1] & 0x7f) as usize];
                    if reader.read_exact(&mut text).is_err() {
                        return;
                    }
                    for (i, byte) in text.iter_mut().enumerate() {
                        *byte ^= frame[2 + i % 4];
                    }
                    let text = String::from_utf8_lossy(&text).into_owned();
                    let reply = format!("echo:{text}");
                    kept.lock().unwrap().push(text);
                    let _ = writer.write_all(&[0x81, reply.len() as u8]);
                    let _ = writer.write_all(reply.as_bytes());
                    // Until the browser goes away.
                    let _ = reader.read(&mut [0u8; 64]);
                    return;
                }
            });
        }
    });
    (addr, texts)
}

#[test]
fn sha1_gives_the_handshake_example_of_rfc_6455() {
    use base64::Engine as _;
    let accept = base64::engine::general_purpose::STANDARD.encode(sha1(
        b"dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11",
    ));
    assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

/// A real browser's WebSocket through a reverse listener: the page and the socket both
/// go through Weir, and the browser gets the origin's answer.
#[test]
fn a_browsers_websocket_goes_through_a_reverse_listener() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED: the WebSocket browser test: no chromium (./test.sh installs it)");
        return;
    };
    let (origin, texts) = websocket_origin();
    let proxy = Proxy::reverse(&format!("http://{origin}"));
    let out = dump_dom(&browser, &proxy.reverse_url("/"), 10_000);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        attribute(&dom, "out", "data-got"),
        Some("echo:ping"),
        "{dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(*texts.lock().unwrap(), ["ping"]);
}
