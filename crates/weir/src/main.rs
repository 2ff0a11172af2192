//! The `weir` command: runs the proxy, or checks a configuration file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use weir_proxy::{Config, Server};

mod allocator;

/// The built-in modules, and `wasm`, which loads proxy-wasm filters at run time.
fn factories() -> Vec<Box<dyn weir_api::ModuleFactory>> {
    let mut all = weir_modules::builtin();
    all.push(Box::new(weir_wasm::WasmFactory));
    all
}

/// Loads a configuration file and checks its modules against the built-in ones.
fn load(path: &std::path::Path) -> Result<Config, weir_proxy::ConfigError> {
    let config = Config::load(path)?;
    weir_proxy::check_modules(&config, &factories())?;
    Ok(config)
}

/// Weir: an extensible, high-performance caching HTTP proxy.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (on the embedded defaults when no file is given).
    Run {
        /// The configuration file.
        #[arg(short, long)]
        config: Option<PathBuf>,
    },
    /// Check a configuration file and exit: 0 when valid, 2 with the first error otherwise.
    Check {
        /// The configuration file.
        #[arg(short, long)]
        config: PathBuf,
    },
    /// A helper process of the proxy (started by the proxy itself, with a Unix socket
    /// as standard input): runs jobs of one kind.
    #[command(hide = true)]
    Helper {
        /// The kind of job, e.g. `transcode`.
        kind: String,
    },
}

fn main() -> ExitCode {
    allocator::return_freed_memory_promptly();
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Some(Command::Helper { kind }) => helper(&kind),
        None => run(Config::default(), None),
        Some(Command::Run { config: None }) => run(Config::default(), None),
        Some(Command::Run { config: Some(path) }) => match load(&path) {
            Ok(config) => run(config, Some(path)),
            Err(e) => {
                eprintln!("weir: {e}");
                ExitCode::from(2)
            }
        },
        Some(Command::Check { config }) => match load(&config) {
            Ok(_) => {
                println!("{}: ok", config.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("weir: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// A helper process's life: serve jobs until the proxy closes the socket.
fn helper(kind: &str) -> ExitCode {
    let Some(handler) = weir_modules::helper_handler(kind) else {
        eprintln!("weir helper: no helper of kind `{kind}`");
        return ExitCode::from(2);
    };
    match weir_helper::serve_stdin(handler) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir helper {kind}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run(config: Config, path: Option<PathBuf>) -> ExitCode {
    // This runtime accepts connections, serves the admin listener and waits for
    // signals; client connections are served by the proxy's own worker threads.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weir: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let factories = factories();
        let mut server = match Server::start_with_modules(config, &factories).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("weir: {e}");
                return ExitCode::FAILURE;
            }
        };
        serve_until_stopped(&mut server, path.as_deref(), &factories).await;
        tracing::info!("stopping: no new connections; finishing transactions in flight");
        server.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// Waits for SIGTERM or SIGINT, reloading on SIGHUP and on the admin listener's
/// requests meanwhile.
async fn serve_until_stopped(
    server: &mut Server,
    path: Option<&std::path::Path>,
    factories: &[Box<dyn weir_api::ModuleFactory>],
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        // Without signal handlers the process still stops on SIGTERM, just not gracefully.
        std::future::pending::<()>().await;
        return;
    };
    let mut requests = server.take_reload_requests();
    loop {
        let answer = tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => None,
            Some(request) = async { match requests.as_mut() { Some(r) => r.recv().await, None => None } } => {
                Some(request.answer)
            }
        };
        let verdict = reload(server, path, factories);
        match &verdict {
            Ok(done) => tracing::info!("{done}"),
            Err(e) => tracing::error!("reload refused, the running configuration stays: {e}"),
        }
        if let Some(answer) = answer {
            let _ = answer.send(verdict);
        }
    }
}

/// Reads the configuration file again and applies what can change while running.
fn reload(
    server: &Server,
    path: Option<&std::path::Path>,
    factories: &[Box<dyn weir_api::ModuleFactory>],
) -> Result<String, String> {
    let Some(path) = path else {
        return Err("running on the embedded defaults: there is no file to reload".into());
    };
    let config = Config::load(path).map_err(|e| e.to_string())?;
    server.reload(&config, factories).map_err(|e| e.to_string())
}
