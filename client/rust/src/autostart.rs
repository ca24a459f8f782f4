//! Autostart: [`Client::connect_or_spawn`] starts `filectxd` detached when nothing answers at the
//! socket, then connects as soon as a daemon answers there.
//!
//! **Race safety** comes from the daemon, not from here: every `filectxd` takes the lock file
//! `<socket>.lock` before it touches the socket, and one that finds the lock held exits at once
//! ("another filectxd is already serving …"). So clients that find no daemon at the same moment
//! may each start one: exactly one wins the lock and binds the socket, the others exit, and every
//! client keeps retrying to connect until its deadline, so each reaches the winner. Nothing here
//! takes the lock, not even to probe it: a probe could make a starting daemon believe another one
//! serves the socket.
//!
//! **Trust**: every attempt goes through [`Client::connect_with`], which checks the socket's
//! folder before connecting and the peer's uid after ([`crate::Untrusted`]). A folder that may be
//! another user's is refused on the first attempt, before anything is started, so no daemon is
//! ever started there; and the readiness probe refuses a socket that someone else's process
//! serves, even one that appeared while our daemon was starting.
//!
//! **Detached**: the daemon runs in its own process group (a Ctrl-C in the client's terminal does
//! not reach it), in `/`, with stdin and stdout on `/dev/null` and stderr appended to a log file.
//! The client never blocks on it: it is polled without waiting while the client retries, and a
//! daemon still running afterwards is waited for by a background thread, so it never lingers as a
//! zombie of a long-lived client process.

use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Client, ClientError, ConnectOptions};

/// Environment variable naming the daemon binary to autostart (a path, or a name looked up on
/// `PATH`); see [`SpawnOptions::daemon`].
pub const DAEMON_ENV: &str = "FILECTX_DAEMON";

/// Default time [`Client::connect_or_spawn`] waits for a started daemon to answer.
pub const DEFAULT_AUTOSTART_TIMEOUT: Duration = Duration::from_secs(5);

/// File name of the daemon binary.
const DAEMON_NAME: &str = "filectxd";

/// First pause between two connection attempts; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// Longest pause between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Variables that describe the *client's* service-manager context (systemd readiness, socket
/// activation, watchdog). A daemon started by a client must not inherit them: it would tell the
/// client's service manager it is ready, or take file descriptors that are not its own.
const SERVICE_MANAGER_ENV: [&str; 6] =
    ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// How [`Client::connect_or_spawn`] starts the daemon and waits for it;
/// [`SpawnOptions::default`] suits most callers.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    daemon: Option<PathBuf>,
    args: Vec<OsString>,
    log: Option<PathBuf>,
    timeout: Duration,
    connect: ConnectOptions,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            daemon: None,
            args: Vec::new(),
            log: None,
            timeout: DEFAULT_AUTOSTART_TIMEOUT,
            connect: ConnectOptions::default(),
        }
    }
}

impl SpawnOptions {
    /// The daemon binary to start: a path (relative ones against the current folder), or a bare
    /// name looked up on `PATH`. Without it: the `FILECTX_DAEMON` environment variable when set
    /// and non-empty, else a `filectxd` next to the current executable, else `filectxd` on
    /// `PATH`.
    pub fn daemon(mut self, path: impl Into<PathBuf>) -> Self {
        self.daemon = Some(path.into());
        self
    }

    /// An extra argument for the daemon, after `--socket PATH` (repeatable).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The file the daemon's stderr (its log) is appended to, created mode 0600 with its folder
    /// (0700) when missing. Default: [`default_log_path`].
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// How long to wait, from the start, for a daemon to answer (default
    /// [`DEFAULT_AUTOSTART_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The options of the connection itself (default [`ConnectOptions::default`]).
    pub fn connect_options(mut self, options: ConnectOptions) -> Self {
        self.connect = options;
        self
    }
}

/// Where an autostarted daemon logs by default: `$XDG_STATE_HOME/filectx/filectxd.log` when
/// `XDG_STATE_HOME` is an absolute path, else `~/.local/state/filectx/filectxd.log`; `None` when
/// no home folder is known either.
pub fn default_log_path() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from).filter(|dir| dir.is_absolute());
    let state = state.or_else(|| {
        std::env::home_dir().filter(|home| home.is_absolute()).map(|home| home.join(".local/state"))
    })?;
    Some(state.join("filectx").join(format!("{DAEMON_NAME}.log")))
}

/// Whether a connection failure means that nothing answers at the socket: no socket file (or
/// no folder), or a socket file nobody listens on (left by a daemon that crashed).
fn nobody_answers(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Connect { source, .. }
            if matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
    )
}

/// See [`Client::connect_or_spawn`].
pub(crate) async fn connect_or_spawn(socket: &Path, options: SpawnOptions) -> Result<Client, ClientError> {
    // A refused socket (`UntrustedSocket`) ends here too: nothing is started in such a folder.
    match Client::connect_with(socket, options.connect.clone()).await {
        Err(error) if nobody_answers(&error) => {}
        other => return other,
    }
    let started = Instant::now();
    let deadline = started + options.timeout;
    // The daemon runs in `/`, so it gets the socket as an absolute path.
    let absolute_socket = std::path::absolute(socket)
        .map_err(|source| ClientError::Connect { path: socket.to_owned(), source })?;
    let requested = options
        .daemon
        .clone()
        .or_else(|| std::env::var_os(DAEMON_ENV).filter(|v| !v.is_empty()).map(PathBuf::from));
    let daemon = daemon_binary(requested.as_deref()).map_err(|source| ClientError::Spawn {
        daemon: requested.clone().unwrap_or_else(|| PathBuf::from(DAEMON_NAME)),
        socket: absolute_socket.clone(),
        log: options.log.clone(),
        source,
    })?;
    let log = options.log.clone().or_else(default_log_path).ok_or_else(|| ClientError::Spawn {
        daemon: daemon.clone(),
        socket: absolute_socket.clone(),
        log: None,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no folder for its log file: neither XDG_STATE_HOME nor a home folder is known",
        ),
    })?;
    let mut child = {
        let (daemon, socket, log, args) =
            (daemon.clone(), absolute_socket.clone(), log.clone(), options.args.clone());
        // Creating the log folder and forking are blocking system calls: off the runtime.
        tokio::task::spawn_blocking(move || spawn(&daemon, &socket, &log, &args))
            .await
            .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())))
    }
    .map_err(|source| ClientError::Spawn {
        daemon: daemon.clone(),
        socket: absolute_socket.clone(),
        log: Some(log.clone()),
        source,
    })?;

    let mut backoff = FIRST_BACKOFF;
    let result = loop {
        match Client::connect_with(socket, options.connect.clone()).await {
            Err(error) if nobody_answers(&error) => {}
            // Connected (to our daemon or to the one that won the race), or a failure waiting
            // will not cure (e.g. permission denied, or a socket another user serves).
            other => break other,
        }
        let now = Instant::now();
        if now >= deadline {
            break Err(ClientError::AutostartTimeout {
                daemon: daemon.clone(),
                socket: absolute_socket.clone(),
                log: log.clone(),
                waited: now.duration_since(started),
                exit: child.try_wait().ok().flatten(),
                pid: child.id(),
            });
        }
        tokio::time::sleep(backoff.min(deadline - now)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    };
    reap_in_background(child);
    result
}

/// The daemon binary autostart runs: `requested` (a path, made absolute, or a bare name looked
/// up on `PATH`), else a `filectxd` next to the current executable, else `filectxd` on `PATH`.
/// `filectx service install` writes the same one into its unit.
pub fn daemon_binary(requested: Option<&Path>) -> std::io::Result<PathBuf> {
    if let Some(requested) = requested {
        if requested.components().count() > 1 || requested.is_absolute() {
            return std::path::absolute(requested);
        }
        return on_path(requested.as_os_str())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such executable on PATH"));
    }
    let exe_dir = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_owned));
    if let Some(beside) = exe_dir.as_ref().map(|dir| dir.join(DAEMON_NAME)).filter(|p| is_executable(p)) {
        return Ok(beside);
    }
    on_path(DAEMON_NAME.as_ref()).ok_or_else(|| {
        let beside = exe_dir.map(|dir| format!("in {} nor ", dir.display())).unwrap_or_default();
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("it was found neither {beside}on PATH; install it, or name it with {DAEMON_ENV}"),
        )
    })
}

/// The first executable file called `name` in a folder of `PATH`.
fn on_path(name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a regular file (through symlinks) that someone may execute.
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Starts `daemon --socket SOCKET ARGS…` detached, its stderr appended to `log`.
fn spawn(daemon: &Path, socket: &Path, log: &Path, args: &[OsString]) -> std::io::Result<Child> {
    // The error names the log file already.
    let log_error =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot open its log file: {e}"));
    if let Some(dir) = log.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(log_error)?;
    }
    let log_file = OpenOptions::new().create(true).append(true).mode(0o600).open(log).map_err(log_error)?;
    let mut command = Command::new(daemon);
    command
        .arg("--socket")
        .arg(socket)
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        // Its own process group: signals sent to the client's group (Ctrl-C) do not reach it.
        .process_group(0);
    for name in SERVICE_MANAGER_ENV {
        command.env_remove(name);
    }
    command.spawn()
}

/// Makes sure the exited daemon is reaped without blocking the caller: at once when it has
/// exited already (a daemon that lost the race), else by a thread that waits for it.
fn reap_in_background(mut child: Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    // Should the thread not start, dropping `child` neither kills nor waits for the daemon: it
    // then lingers as a zombie once it exits, until this process exits too.
    let _ = std::thread::Builder::new().name("filectxd-reaper".to_owned()).spawn(move || child.wait());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_or_dead_socket_means_nobody_answers() {
        let connect = |kind: std::io::ErrorKind| ClientError::Connect {
            path: PathBuf::from("/s"),
            source: std::io::Error::from(kind),
        };
        assert!(nobody_answers(&connect(std::io::ErrorKind::NotFound)));
        assert!(nobody_answers(&connect(std::io::ErrorKind::ConnectionRefused)));
        assert!(!nobody_answers(&connect(std::io::ErrorKind::PermissionDenied)));
        assert!(!nobody_answers(&ClientError::Transport("gone".to_owned())));
        let refused = ClientError::UntrustedSocket {
            socket: PathBuf::from("/s"),
            reason: crate::Untrusted::PeerNotOurs { peer: 65534, pid: None, ours: 0 },
        };
        assert!(!nobody_answers(&refused), "a refused socket must never lead to a start");
    }

    #[test]
    fn a_requested_path_is_made_absolute_and_a_bare_name_is_looked_up() -> std::io::Result<()> {
        let cwd = std::env::current_dir()?;
        assert_eq!(daemon_binary(Some(Path::new("/opt/x/filectxd")))?, PathBuf::from("/opt/x/filectxd"));
        assert_eq!(daemon_binary(Some(Path::new("bin/filectxd")))?, cwd.join("bin/filectxd"));
        // `sh` is on every PATH a test runs with.
        let sh = daemon_binary(Some(Path::new("sh")))?;
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        let missing = daemon_binary(Some(Path::new("no-such-filectxd-anywhere")));
        assert!(missing.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound));
        Ok(())
    }

    #[test]
    fn the_default_log_is_under_the_state_folder() {
        // Whatever the environment, the default ends in filectx/filectxd.log under an absolute
        // folder (or is unknown).
        if let Some(log) = default_log_path() {
            assert!(log.is_absolute() && log.ends_with("filectx/filectxd.log"), "{}", log.display());
        }
    }
}
