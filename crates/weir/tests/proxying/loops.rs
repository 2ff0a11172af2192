//! Requests that come back to the Weir process that sent them: a forwarding loop is
//! refused at once, a deliberate second pass (a forward listener's client asking for
//! a site a reverse listener of the same process serves) is served, and two instances
//! in a chain pass each other's requests.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::helpers::via_values;

/// A TCP relay on 127.0.0.1 to an address given after it started: a reverse listener
/// can then name, as its origin, an address that leads back to itself. Each
/// connection is relayed until either side closes.
struct Relay {
    addr: SocketAddr,
    to: Arc<Mutex<Option<SocketAddr>>>,
}

impl Relay {
    fn start() -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let to = Arc::new(Mutex::new(None::<SocketAddr>));
        let target = to.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Some(to) = *target.lock().unwrap() else {
                    continue;
                };
                let Ok(server) = TcpStream::connect_timeout(&to, Duration::from_secs(5)) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(client, server));
                std::thread::spawn(move || pipe(s2, c2));
            }
        });
        Relay { addr, to }
    }

    fn relay_to(&self, to: SocketAddr) {
        *self.to.lock().unwrap() = Some(to);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = from.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn errors(proxy: &Proxy, kind: &str) -> f64 {
    metric(&proxy.metrics(), "weir_errors_total", &[("kind", kind)]).unwrap_or(0.0)
}

#[test]
fn a_reverse_listener_whose_origin_is_itself_answers_508_at_once() -> io::Result<()> {
    let relay = Relay::start();
    let proxy = Proxy::reverse(&format!("http://{}", relay.addr));
    relay.relay_to(proxy.reverse_addr());
    let host = proxy.reverse_addr();
    for (request, what) in [
        (
            format!("GET /round HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            "GET",
        ),
        (
            format!("POST /round HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1\r\n\r\nx"),
            "POST",
        ),
    ] {
        let started = Instant::now();
        let r = try_raw_exchange(proxy.reverse_addr(), request.as_bytes())?;
        // Before, a GET waited on its own fetch until the origin timeout (60 s).
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        assert_eq!(r.status, 508, "{what}: {}", r.text());
        // The pass that refused it first, then the two it went back through.
        let cache_status = r.header("cache-status").unwrap_or("");
        assert!(
            cache_status.starts_with("weir; detail=refused, "),
            "{what}: {cache_status}"
        );
        assert!(r.text().contains("forwarding loop"), "{what}: {}", r.text());
    }
    // Each request's third pass was refused; the 508 went back through the others.
    assert_eq!(errors(&proxy, "forwarding_loop"), 2.0);
    Ok(())
}

#[tokio::test]
async fn a_second_pass_through_the_same_process_is_served() {
    let origin = TestOrigin::start();
    origin.route("/site", Reply::ok("local site").cc("max-age=60"));
    let proxy = Proxy::builder().forward().reverse(&origin.base()).start();
    let client = proxied_client(proxy.forward_addr());
    // The forward listener's client asks for the site the reverse listener serves: the
    // request passes through the process twice, under one cache key.
    let url = proxy.reverse_url("/site");
    let first = tokio::time::timeout(Duration::from_secs(10), get(&client, &url, &[]))
        .await
        .expect("not waiting on its own fetch");
    assert_eq!(
        (first.status.as_u16(), first.text().as_str()),
        (200, "local site")
    );
    assert_eq!(origin.count("/site"), 1);
    let seen = via_values(&origin.last("/site").unwrap().header_all("via"));
    assert_eq!(seen.len(), 2, "both passes' entries: {seen:?}");
    assert_eq!(seen[0], seen[1], "one process, one mark: {seen:?}");
    let again = get(&client, &url, &[]).await;
    assert_eq!(again.text(), "local site");
    assert!(
        again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    assert_eq!(origin.count("/site"), 1);
    let post = send(&client, "POST", &url, &[], Some(b"x".to_vec())).await;
    assert_eq!(post.status.as_u16(), 200);
    assert_eq!(errors(&proxy, "forwarding_loop"), 0.0);
}

#[tokio::test]
async fn two_instances_in_a_chain_pass_each_others_requests() {
    let origin = TestOrigin::start();
    origin.route("/chain", Reply::ok("through both").cc("max-age=60"));
    let parent = Proxy::reverse(&origin.base());
    let child = Proxy::reverse(&format!("http://{}", parent.reverse_addr()));
    let client = direct_client();
    let r = get(&client, &child.reverse_url("/chain"), &[]).await;
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "through both")
    );
    let seen = via_values(&origin.last("/chain").unwrap().header_all("via"));
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|v| v.starts_with("1.1 weir (")), "{seen:?}");
    assert_ne!(
        seen[0], seen[1],
        "each instance draws its own mark: {seen:?}"
    );
}
