//! `filectxd` binary: parse flags, set up logging, take the socket, serve until SIGTERM/SIGINT.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use filectx_daemon::cli::Args;
use filectx_daemon::listen;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

fn init_logging(args: &Args) -> anyhow::Result<()> {
    let filter = match &args.log_level {
        Some(filter) => {
            EnvFilter::try_new(filter).with_context(|| format!("invalid --log-level {filter:?}"))?
        }
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let (path, policy) = args.socket();
    let bound = listen::bind(&path, policy)?;
    let listener = tokio::net::UnixListener::from_std(bound.listener).context("registering the socket")?;
    tracing::info!(socket = %path.display(), pid = std::process::id(), "listening");
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = async move {
        let name = tokio::select! {
            _ = sigterm.recv() => "SIGTERM",
            _ = sigint.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutdown requested");
    };
    filectx_daemon::run(listener, args.config(), shutdown).await?;
    // Dropping the guard removes the socket file, then releases the lock.
    drop(bound.guard);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(err) = init_logging(&args) {
        eprintln!("filectxd: {err:#}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("filectxd: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("filectxd: {err:#}");
            ExitCode::FAILURE
        }
    }
}
