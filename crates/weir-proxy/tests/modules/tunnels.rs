//! A tunnel's bytes through the modules that ask for them (`Event::TunnelData`): both
//! ways, changed or refused by a module, and what it kept seen again by its log event.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weir_api::http::StatusCode;
use weir_api::{Event, Events, Flow, Module, Reply, TunnelChunk, TunnelDirection, Txn};

use super::helpers::Shared;
use crate::support::eventually;
use crate::support::modules::*;
use crate::support::origin::TestOrigin;

/// The bytes each way one transaction's tunnel carried, as the module saw them.
#[derive(Default)]
struct Seen {
    up: u64,
    down: u64,
}

/// Upper-cases what the server sends, closes the tunnel when the client sends
/// `CLOSE`, and keeps each logged transaction's status and byte counts.
#[derive(Default)]
struct Watch {
    logged: Mutex<Vec<(u16, u64, u64)>>,
}

impl Module for Watch {
    fn name(&self) -> &str {
        "watch"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::TunnelData, Event::Log])
    }

    fn on_tunnel_data<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut TunnelChunk) -> Flow<'a> {
        let seen = txn.state::<Seen>();
        match chunk.direction {
            TunnelDirection::ToServer => {
                seen.up += chunk.data.len() as u64;
                if chunk.data.windows(5).any(|w| w == b"CLOSE") {
                    return Flow::Respond(Reply::text(StatusCode::FORBIDDEN, "closed"));
                }
            }
            TunnelDirection::ToClient => {
                seen.down += chunk.data.len() as u64;
                chunk.data = chunk.data.to_ascii_uppercase().into();
            }
        }
        Flow::Continue
    }

    fn on_log(&self, txn: &Txn) {
        let status = txn.completion().map_or(0, |c| c.status);
        let seen = txn.state_ref::<Seen>().map_or((0, 0), |s| (s.up, s.down));
        self.logged.lock().unwrap().push((status, seen.0, seen.1));
    }
}

/// An echo server on a free port, counting the bytes it received.
async fn echo_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(AtomicUsize::new(0));
    let counted = received.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    counted.fetch_add(n, Ordering::SeqCst);
                    if conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, received)
}

/// A forward listener (the proxy's second) that lets CONNECT reach `port`.
fn forward_listener(port: u16) -> &'static str {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\nmode = \"forward\"\nconnect_ports = [{port}]\n"
    );
    Box::leak(text.into_boxed_str())
}

/// A connection to `proxy` on which a CONNECT to `port` was answered 200.
async fn tunnel_to(proxy: SocketAddr, port: u16) -> TcpStream {
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    let ask = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    conn.write_all(ask.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = tokio::time::timeout(Duration::from_secs(5), conn.read_u8())
            .await
            .expect("the CONNECT answered")
            .expect("the head of the CONNECT's response");
        head.push(byte);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    conn
}

/// A proxy with `Watch` and a tunnel through its forward listener to an echo server:
/// the module, the tunnel, and the count of bytes the echo server received.
async fn watched_tunnel(origin: &TestOrigin) -> (Weir, Arc<Watch>, TcpStream, Arc<AtomicUsize>) {
    let (port, received) = echo_server().await;
    let watch = Arc::new(Watch::default());
    let weir = Setup::new(origin)
        .module("watch", Shared(watch.clone()))
        .extra(forward_listener(port))
        .start()
        .await;
    let conn = tunnel_to(weir.addrs[1], port).await;
    (weir, watch, conn, received)
}

/// Sends `msg` through the tunnel and returns as many bytes as came back.
async fn round_trip(conn: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    conn.write_all(msg).await.unwrap();
    let mut back = vec![0u8; msg.len()];
    tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut back))
        .await
        .expect("the echo came back")
        .unwrap();
    back
}

#[tokio::test]
async fn a_tunnels_bytes_go_through_the_modules_that_ask_and_one_may_close_it() {
    let origin = TestOrigin::start();
    let (weir, watch, mut conn, received) = watched_tunnel(&origin).await;
    // The server sent what it got; the module changed it on its way to the client.
    assert_eq!(
        round_trip(&mut conn, b"hello tunnel").await,
        b"HELLO TUNNEL"
    );

    conn.write_all(b"CLOSE").await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the module closed the tunnel");
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(
        received.load(Ordering::SeqCst),
        12,
        "what the module refused never reached the server"
    );
    eventually("the tunnel's log event", || {
        !watch.logged.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(*watch.logged.lock().unwrap(), vec![(200, 17, 12)]);
    weir.stop().await;
}

/// A tunnel still open when the proxy stops is waited for within the grace period
/// (`shutdown_grace = "1s"` here), as client connections are, then closed, and its
/// transaction is logged before the shutdown returns.
#[tokio::test]
async fn a_stopping_proxy_waits_for_an_open_tunnel_then_closes_and_logs_it() {
    let origin = TestOrigin::start();
    let (weir, watch, mut conn, _) = watched_tunnel(&origin).await;
    assert_eq!(round_trip(&mut conn, b"still here").await, b"STILL HERE");

    let started = std::time::Instant::now();
    weir.stop().await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "{took:?}: the tunnel had its grace period"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(*watch.logged.lock().unwrap(), vec![(200, 10, 10)]);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(2), conn.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the client's side of the tunnel was closed");
}
