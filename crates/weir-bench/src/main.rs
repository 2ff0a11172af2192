//! `weir-bench`: Weir's benchmarks, one subcommand each. Every subcommand starts what
//! it needs on loopback, bounds itself in time and stops by itself.
#![deny(missing_docs)]

mod cpu;
mod dispatcher;
mod idle;
mod modules;
mod origin;
mod polymix;
mod stats;
mod tunnel;
mod weir;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "weir-bench",
    version,
    about = "Benchmarks for the Weir caching proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Blocking (HTTP/1.1 pool) vs correlated (HTTP/2) dispatch to one slow origin:
    /// a burst of concurrent misses and a run of sequential misses through Weir.
    Dispatcher(dispatcher::Args),
    /// A PolyMix-style workload through a forward or reverse proxy: many virtual origin servers,
    /// realistic content and popularity, open-loop load; hit ratios, hit and miss
    /// times, requests per CPU-second of the proxy; Markdown, JSON and SVG report.
    Polymix(polymix::Args),
    /// Content-adaptation modules under load: a PolyMix-style background through a
    /// Weir with modules, alone and with a side load the modules adapt (fixed rate,
    /// full demand); the background's hit and miss times and the side load's rate.
    Modules(modules::Args),
    /// Idle client connections: open many to a listener, one request on each (HTTP/1.1
    /// or HTTP/2) or none, hold them idle, close them; the proxy's memory meanwhile.
    Idle(idle::Args),
    /// CONNECT tunnels: MiB relayed per CPU-second of the proxy, its bytes copied
    /// socket to socket and through a module, two proxies side by side.
    Tunnel(tunnel::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dispatcher(args) => dispatcher::run(args),
        Command::Polymix(args) => polymix::run(args),
        Command::Modules(args) => modules::run(args),
        Command::Idle(args) => idle::run(args),
        Command::Tunnel(args) => tunnel::run(args),
    };
    if let Err(e) = result {
        eprintln!("weir-bench: {e}");
        std::process::exit(1);
    }
}
