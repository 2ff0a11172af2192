//! `weir-bench tunnel`: what relaying a CONNECT tunnel costs the proxy, with its bytes
//! copied socket to socket and with them going through a module (`TunnelData`).
//!
//! Two `weir` processes run side by side, each a forward proxy to a source server on
//! loopback that sends `--mib` MiB on every connection and closes it: `plain` with no
//! module, `modules` with the `clients` module's `bandwidth` set far above what
//! loopback carries, so every read goes through the module and none is held back. The
//! runs alternate between the two; each opens one tunnel, reads to the end and takes
//! the proxy's CPU time from /proc before and after. Prints, per proxy, the median MiB
//! relayed per CPU-second of the proxy and per wall-clock second. `--peer` adds a
//! forward proxy already running (Squid, say) to the same runs.
//!
//! With `--idle N`, it then opens N tunnels through each proxy to a second server (on
//! the source's port + 1 when `--source-port` is given), which greets each connection
//! with 2,000 bytes and then waits; once each tunnel has carried its greeting, it
//! reads the proxy's resident memory and prints what each waiting tunnel added.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cpu::cpu_seconds;
use crate::stats::median;
use crate::weir::{default_binary, WeirProcess};

/// Options of `weir-bench tunnel`.
#[derive(clap::Args)]
pub struct Args {
    /// MiB the source sends through each tunnel.
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Tunnels per proxy (alternating between the two).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// The `weir` binary (default: the one next to this program).
    #[arg(long)]
    weir: Option<PathBuf>,
    /// The source's port (default: a free one); a peer's configuration must allow
    /// CONNECT to it.
    #[arg(long, default_value_t = 0)]
    source_port: u16,
    /// A peer forward proxy already running (e.g. Squid), measured in the same runs.
    #[arg(long, requires = "peer_pid")]
    peer: Option<SocketAddr>,
    /// The peer's process id, for its CPU time.
    #[arg(long)]
    peer_pid: Option<u32>,
    /// Waiting tunnels to hold through each proxy for the memory measure (0: none).
    #[arg(long, default_value_t = 0)]
    idle: usize,
}

/// The greeting of the waiting tunnels' server.
const GREETING: usize = 2000;

/// Starts the server of waiting tunnels: each connection gets `GREETING` bytes and
/// is then held open, unread, until this process exits.
fn start_greeter(port: u16) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            if conn.write_all(&[b'g'; GREETING]).is_ok() {
                held.push(conn);
            }
        }
    });
    Ok(addr)
}

/// Opens `n` tunnels through `proxy` to `greeter`, each read to the end of its
/// greeting, and returns them with the bytes of resident memory each added to `pid`.
fn hold_idle(
    proxy: SocketAddr,
    pid: u32,
    greeter: SocketAddr,
    n: usize,
) -> Result<(Vec<TcpStream>, f64), String> {
    let (before, _) = crate::idle::memory(pid)?;
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = TcpStream::connect(proxy).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        write!(
            conn,
            "CONNECT {greeter} HTTP/1.1\r\nHost: {greeter}\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .is_none_or(|end| got.len() < end + 4 + GREETING)
        {
            let n = conn
                .read(&mut buf)
                .map_err(|e| format!("a waiting tunnel: {e}"))?;
            if n == 0 {
                return Err("a waiting tunnel closed before its greeting".into());
            }
            got.extend_from_slice(&buf[..n]);
        }
        held.push(conn);
    }
    std::thread::sleep(Duration::from_secs(1));
    let (after, _) = crate::idle::memory(pid)?;
    Ok((
        held,
        after.saturating_sub(before) as f64 * 1024.0 / n as f64,
    ))
}

/// One read's worth of the source's bytes.
const BLOCK: usize = 64 * 1024;

/// Starts the source: each connection gets `bytes` bytes, then is closed.
fn start_source(bytes: u64, port: u16) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let block = vec![b's'; BLOCK];
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(BLOCK as u64) as usize;
                    if conn.write_all(&block[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            });
        }
    });
    Ok(addr)
}

/// Opens a tunnel through `proxy` to `source` and reads it to its end: the bytes read
/// and how long it took.
fn one_tunnel(proxy: SocketAddr, source: SocketAddr) -> Result<(u64, Duration), String> {
    let mut conn = TcpStream::connect(proxy).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    write!(conn, "CONNECT {source} HTTP/1.1\r\nHost: {source}\r\n\r\n")
        .map_err(|e| e.to_string())?;
    // The response's head a byte at a time, so that no tunnelled byte is read with it.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return Err("the proxy closed before answering the CONNECT".into()),
        }
    }
    if !head.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "CONNECT refused: {}",
            String::from_utf8_lossy(&head)
        ));
    }
    let mut buf = vec![0u8; BLOCK];
    let mut total = 0u64;
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Ok((total, started.elapsed())),
            Ok(n) => total += n as u64,
            Err(e) => return Err(format!("reading the tunnel: {e}")),
        }
    }
}

pub fn run(args: Args) -> Result<(), String> {
    let binary = args.weir.unwrap_or_else(default_binary);
    let bytes = args.mib * 1024 * 1024;
    let source = start_source(bytes, args.source_port)?;
    let greeter = match args.idle {
        0 => None,
        n => {
            crate::idle::raise_fd_limit(4 * n)?;
            Some(start_greeter(
                args.source_port
                    .checked_add(1)
                    .filter(|_| args.source_port != 0)
                    .unwrap_or(0),
            )?)
        }
    };
    let base = std::env::temp_dir().join(format!("weir-bench-tunnel-{}", std::process::id()));
    let config = |modules: &str| {
        format!(
            "[admin]\nlisten = \"off\"\n[log]\naccess = \"off\"\n[cache]\ndisk = \"off\"\n\
             [[listen]]\naddr = \"{{LISTEN}}\"\nmode = \"forward\"\nconnect_ports = [{}, {}]\n\n{modules}",
            source.port(),
            greeter.map_or(source.port(), |g| g.port())
        )
    };
    let setups = [
        ("plain", String::new()),
        (
            "modules",
            "[[module]]\nname = \"clients\"\nbandwidth = \"64GiB\"\n".to_string(),
        ),
    ];
    let mut weirs = Vec::new();
    for (name, modules) in &setups {
        let dir = base.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        weirs.push(WeirProcess::start(&binary, &dir, &config(modules))?);
    }
    // (name, address, process id) of each proxy measured.
    let mut proxies: Vec<(String, SocketAddr, u32)> = setups
        .iter()
        .zip(&weirs)
        .map(|((name, _), weir)| (format!("weir, {name}"), weir.addr, weir.pid()))
        .collect();
    if let (Some(addr), Some(pid)) = (args.peer, args.peer_pid) {
        proxies.push(("peer".to_string(), addr, pid));
    }
    let mut per_cpu: Vec<Vec<f64>> = vec![Vec::new(); proxies.len()];
    let mut per_wall: Vec<Vec<f64>> = vec![Vec::new(); proxies.len()];
    for run in 0..args.runs {
        for i in 0..proxies.len() {
            // Alternating which goes first: a slowdown of the machine hits both.
            let i = if run % 2 == 0 {
                i
            } else {
                proxies.len() - 1 - i
            };
            let (_, addr, pid) = proxies[i];
            let before = cpu_seconds(pid).ok_or("the proxy's /proc is not readable")?;
            let (read, took) = one_tunnel(addr, source)?;
            let after = cpu_seconds(pid).ok_or("the proxy's /proc is not readable")?;
            if read != bytes {
                return Err(format!("read {read} bytes of {bytes}"));
            }
            let mib = read as f64 / (1024.0 * 1024.0);
            per_cpu[i].push(mib / (after - before).max(0.01));
            per_wall[i].push(mib / took.as_secs_f64());
        }
    }
    let mut idle = Vec::new();
    if let Some(greeter) = greeter {
        for (_, addr, pid) in &proxies {
            let (held, each) = hold_idle(*addr, *pid, greeter, args.idle)?;
            idle.push(each);
            drop(held);
        }
    }
    drop(weirs);
    let _ = std::fs::remove_dir_all(&base);
    println!(
        "{} MiB per tunnel, {} tunnels per proxy, medians:",
        args.mib, args.runs
    );
    println!("| proxy | MiB per CPU-second of the proxy | MiB per second | resident bytes per waiting tunnel |");
    println!("| --- | ---: | ---: | ---: |");
    for (i, (name, ..)) in proxies.iter().enumerate() {
        let each = idle.get(i).map_or("-".to_string(), |b| format!("{b:.0}"));
        println!(
            "| {name} | {:.0} | {:.0} | {each} |",
            median(&per_cpu[i]),
            median(&per_wall[i])
        );
    }
    Ok(())
}
