//! `filectxd` binary: parse flags and the config file, set up logging, take the socket (or the
//! one systemd passed), tell systemd when ready, serve until SIGTERM/SIGINT or idle exit.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use filectx_daemon::cli::{Args, Settings};
use filectx_daemon::listen;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

fn init_logging(settings: &Settings) -> anyhow::Result<()> {
    let filter = match settings.log_level.as_str() {
        "" => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        filter => EnvFilter::try_new(filter).with_context(|| format!("invalid log level {filter:?}"))?,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

/// The listening socket systemd passed (LISTEN_FDS), if it was passed to this very process.
fn activated_listener() -> anyhow::Result<Option<std::os::unix::net::UnixListener>> {
    let Some(fds) = std::env::var_os("LISTEN_FDS") else { return Ok(None) };
    // Only when LISTEN_PID names us: the variables may have been inherited from a parent.
    let ours =
        std::env::var("LISTEN_PID").ok().and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
    // listenfd reads and unsets LISTEN_PID and LISTEN_FDS (so children do not inherit them).
    let mut passed = listenfd::ListenFd::from_env();
    if !ours {
        tracing::warn!(?fds, "ignoring LISTEN_FDS: LISTEN_PID does not name this process");
        return Ok(None);
    }
    let listener = passed.take_unix_listener(0).context("LISTEN_FDS: fd 3 is not a Unix stream listener")?;
    if let Some(listener) = &listener {
        listener.set_nonblocking(true).context("configuring the activated socket")?;
    }
    Ok(listener)
}

/// Configures the fail points named in `FILECTX_FAILPOINTS` (`name=action;name=action`, actions
/// as the `fail` crate spells them, e.g. `provider::stage::write=return`). Test builds only.
#[cfg(feature = "failpoints")]
fn configure_failpoints() -> anyhow::Result<()> {
    let Some(spec) = std::env::var_os("FILECTX_FAILPOINTS") else { return Ok(()) };
    let spec = spec.into_string().map_err(|_| anyhow::anyhow!("FILECTX_FAILPOINTS is not UTF-8"))?;
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, actions) = entry
            .split_once('=')
            .with_context(|| format!("FILECTX_FAILPOINTS: {entry:?} is not name=action"))?;
        fail::cfg(name.trim(), actions.trim())
            .map_err(|err| anyhow::anyhow!("FILECTX_FAILPOINTS: {entry:?}: {err}"))?;
        filectx_daemon::context::arm_crash_points();
        tracing::warn!(name = name.trim(), actions = actions.trim(), "fail point configured");
    }
    Ok(())
}

fn notify_systemd(state: sd_notify::NotifyState<'_>) {
    if let Err(err) = sd_notify::notify(&[state]) {
        tracing::warn!(%err, "cannot notify systemd");
    }
}

async fn serve(
    settings: Settings,
    activated: Option<std::os::unix::net::UnixListener>,
) -> anyhow::Result<()> {
    let (listener, guard) = match activated {
        Some(listener) => {
            tracing::info!(
                pid = std::process::id(),
                "serving the socket passed by systemd (socket activation)"
            );
            (listener, None)
        }
        None => {
            let bound = listen::bind(&settings.socket, settings.folder_policy())?;
            tracing::info!(socket = %settings.socket.display(), pid = std::process::id(), "listening");
            (bound.listener, Some(bound.guard))
        }
    };
    let listener = tokio::net::UnixListener::from_std(listener).context("registering the socket")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = async move {
        let name = tokio::select! {
            _ = sigterm.recv() => "SIGTERM",
            _ = sigint.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutdown requested");
    };
    if let Some(interval) = sd_notify::watchdog_enabled() {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval((interval / 2).max(Duration::from_millis(100)));
            loop {
                tick.tick().await;
                notify_systemd(sd_notify::NotifyState::Watchdog);
            }
        });
    }
    // The listener already accepts (connections queue in the kernel): ready now.
    notify_systemd(sd_notify::NotifyState::Ready);
    let mut config = fit_open_files(settings.config());
    // The secret that marks this user's daemons' temporary files, so that one daemon removes
    // another's leftovers (and nothing else).
    config.files.staging_token = filectx_daemon::context::staging_token();
    if config.files.staging_token.is_none() {
        tracing::warn!(
            "no staging token file could be kept (XDG_STATE_HOME/HOME); leftovers of this daemon will not be cleaned by the next"
        );
    }
    // The gate token, next to the socket this daemon serves (the activated one under systemd):
    // only the daemon's user, who can read it, may register write-intent gates.
    if config.gates {
        let socket = listener.local_addr().ok().and_then(|addr| addr.as_pathname().map(Path::to_path_buf));
        match socket.map(|socket| filectx_daemon::gate::token::keep(&socket)) {
            Some(Ok(token)) => config.gate_token = Some(token),
            Some(Err(err)) => tracing::warn!(
                %err,
                "could not write the gate token next to the socket; only gate_sessions = \"any\" lets a session be a gate"
            ),
            None => tracing::warn!(
                "the socket has no path, so no gate token is kept; only gate_sessions = \"any\" lets a session be a gate"
            ),
        }
    }
    // Language servers run beneath this very binary as their guard.
    config.lsp_guard = Some(std::path::PathBuf::from("/proc/self/exe"));
    let gate_token = config.gate_token.clone();
    let served = filectx_daemon::run(listener, config, shutdown).await;
    if let Some(token) = &gate_token {
        filectx_daemon::gate::token::remove(token);
    }
    served?;
    // Whether a signal or --idle-exit ended it: the daemon is stopping now.
    notify_systemd(sd_notify::NotifyState::Stopping);
    // Dropping the guard removes the socket file we bound, then releases the lock. An activated
    // socket belongs to systemd and stays.
    drop(guard);
    Ok(())
}

/// Raises the soft limit on open files to the hard one (sessions and warm cached files each
/// hold one; the usual soft 1024 is low for a daemon), and keeps the files the cache holds open
/// within a quarter of what is allowed.
fn fit_open_files(mut config: filectx_daemon::Config) -> filectx_daemon::Config {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(err) => tracing::debug!(%err, "could not raise the open-file limit"),
        }
    }
    if let Some(allowed) = limit.current.and_then(|n| usize::try_from(n / 4).ok()) {
        config.files.max_open_files = config.files.max_open_files.min(allowed);
    }
    config
}

fn main() -> ExitCode {
    // A language server's guard (see `lsp::guard`), before anything else.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|first| first == filectx_daemon::lsp::guard::GUARD_ARG) {
        let status = filectx_daemon::lsp::guard::main(raw.collect());
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    let args = Args::parse();
    let settings = match args.settings() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("filectxd: {err}");
            return ExitCode::FAILURE;
        }
    };
    if args.print_config {
        print!("{}", settings.to_toml());
        return ExitCode::SUCCESS;
    }
    if let Err(err) = init_logging(&settings) {
        eprintln!("filectxd: {err:#}");
        return ExitCode::FAILURE;
    }
    #[cfg(feature = "failpoints")]
    if let Err(err) = configure_failpoints() {
        eprintln!("filectxd: {err:#}");
        return ExitCode::FAILURE;
    }
    // Before any other thread exists: listenfd unsets LISTEN_PID and LISTEN_FDS, which is only
    // sound while the process is single-threaded.
    let activated = match activated_listener() {
        Ok(activated) => activated,
        Err(err) => {
            eprintln!("filectxd: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match filectx_daemon::bound_blocking_pool(
        tokio::runtime::Builder::new_multi_thread().enable_all(),
        &settings.config(),
    )
    .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("filectxd: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(settings, activated)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("filectxd: {err:#}");
            ExitCode::FAILURE
        }
    }
}
