//! Autostart against the real daemon: [`Client::connect_or_spawn`] starts `filectxd` when nothing
//! answers, ten clients racing to do it leave exactly one daemon, a crashed daemon's socket is
//! taken over, failures name the binary, the socket and the log; and the CLI autostarts by
//! default, detached, unless `--no-autostart` (or `FILECTX_NO_AUTOSTART`) says not to.
//!
//! The daemon binary is `target/<profile>/filectxd`, which `cargo test --workspace` builds (or
//! `$FILECTX_FILECTXD_BIN`). Every test stops the daemons it started, even when it fails: a
//! [`Daemons`] guard SIGTERMs (then SIGKILLs) every `filectxd` serving its socket when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use filectx_client::{Client, ClientError, SpawnOptions};
use filectx_protocol::InitializeParams;
use rustix::process::{Pid, Signal};

use crate::support::{TestResult, daemon_bin, text, write_script};

/// How long a test waits for anything that should happen promptly.
const PATIENCE: Duration = Duration::from_secs(10);

/// The CLI under test.
const CLI: &str = env!("CARGO_BIN_EXE_filectx");

/// The `filectxd` processes serving one socket path; dropping the guard stops them all.
struct Daemons {
    socket: PathBuf,
}

impl Daemons {
    fn of(socket: &Path) -> Self {
        Self { socket: socket.to_owned() }
    }

    /// The live (not zombie) `filectxd` processes whose command line has `--socket <socket>`.
    fn pids(&self) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let socket = self.socket.as_os_str().as_encoded_bytes();
        let mut pids: Vec<i32> = entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&pid| {
                // A process that exited meanwhile, or a zombie, has no command line.
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                args.iter().any(|arg| arg.ends_with(b"filectxd"))
                    && args.windows(2).any(|pair| pair[0] == b"--socket" && pair[1] == socket)
            })
            .filter(|&pid| alive(pid))
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Waits until exactly one daemon serves the socket (racing ones that lost are gone) and
    /// returns it.
    fn wait_single(&self) -> TestResult<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let pids = self.pids();
            match pids[..] {
                [pid] => return Ok(pid),
                _ if Instant::now() >= deadline => {
                    return Err(format!(
                        "expected one filectxd on {}, found {pids:?}",
                        self.socket.display()
                    )
                    .into());
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// SIGTERMs every daemon of the socket and waits for them to exit; SIGKILLs those that do not.
    fn stop(&self) {
        for signal in [Signal::TERM, Signal::KILL] {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for pid in &pids {
                let _ = kill(*pid, signal);
            }
            let _ = wait_gone(&pids);
        }
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `pid` runs: some thread of it is neither gone nor a zombie. The main thread alone
/// does not tell: it turns zombie while other threads still tear down (the listening socket
/// still open), and a daemon whose parent exited (one a CLI started) may stay a zombie for good,
/// if nobody reaps it.
fn alive(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.filter_map(Result::ok).any(|task| {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { return false };
        // `tid (comm) state ...`: the state follows the last `)`.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        !matches!(state, None | Some('Z' | 'X'))
    })
}

fn kill(pid: i32, signal: Signal) -> TestResult {
    let pid = Pid::from_raw(pid).ok_or("pid 0")?;
    rustix::process::kill_process(pid, signal)?;
    Ok(())
}

/// Waits until none of `pids` runs.
fn wait_gone(pids: &[i32]) -> TestResult {
    let deadline = Instant::now() + PATIENCE;
    while pids.iter().any(|&pid| alive(pid)) {
        if Instant::now() >= deadline {
            return Err(format!("still running after {PATIENCE:?}: {pids:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// SIGTERMs the daemon `pid` and waits for it to exit.
fn terminate(pid: u32) -> TestResult {
    let pid = i32::try_from(pid)?;
    kill(pid, Signal::TERM)?;
    wait_gone(&[pid])
}

/// Runs the CLI in `cwd` with `envs` set and `FILECTX_SOCKET`, `FILECTX_DAEMON` and
/// `FILECTX_NO_AUTOSTART` cleared unless given.
fn filectx(args: &[&str], cwd: &Path, envs: &[(&str, &std::ffi::OsStr)]) -> TestResult<Output> {
    let mut command = Command::new(CLI);
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("FILECTX_SOCKET")
        .env_remove(filectx_client::DAEMON_ENV)
        .env_remove("FILECTX_NO_AUTOSTART")
        .env("RUST_BACKTRACE", "1");
    for (name, value) in envs {
        command.env(name, value);
    }
    Ok(command.output()?)
}

/// `initialize` parameters of a session rooted at `root`.
fn params(root: &Path) -> TestResult<InitializeParams> {
    let root = root.to_str().ok_or("tempdir path is not UTF-8")?.to_owned();
    Ok(InitializeParams::new(vec![root]))
}

/// [`Client::connect_session_or_spawn`] with a session rooted at `root`.
async fn session(socket: &Path, root: &Path, options: SpawnOptions) -> TestResult<Client> {
    Ok(Client::connect_session_or_spawn(socket, params(root)?, options).await?.0)
}

/// The `pid:` line of `filectx status`.
fn status_pid(stdout: &str) -> Option<u32> {
    stdout.lines().find_map(|line| line.strip_prefix("pid:")).and_then(|pid| pid.trim().parse().ok())
}

#[tokio::test]
async fn connect_or_spawn_starts_a_daemon_and_connects() -> TestResult {
    let bin = daemon_bin()?;
    let dir = tempfile::tempdir()?;
    // The socket's folder does not exist yet: the daemon creates it.
    let socket = dir.path().join("run/filectx.sock");
    let log = dir.path().join("state/filectxd.log");
    let daemons = Daemons::of(&socket);

    let client = Client::connect_or_spawn(&socket, SpawnOptions::default().daemon(&bin).log(&log)).await?;
    assert_eq!(client.socket(), socket);
    client.initialize(params(dir.path())?).await?;
    let pid = client.status().await?.pid;
    assert_eq!(daemons.wait_single()?, i32::try_from(pid)?);
    let logged = std::fs::read_to_string(&log)?;
    assert!(logged.contains("listening") && logged.contains(&pid.to_string()), "{logged}");

    // A daemon that answers is simply connected to: nothing is started (this binary would fail).
    let missing = dir.path().join("no-such-filectxd");
    let again = session(&socket, dir.path(), SpawnOptions::default().daemon(&missing)).await?;
    assert_eq!(again.status().await?.pid, pid);
    assert_eq!(daemons.pids(), [i32::try_from(pid)?]);

    again.close().await?;
    client.close().await?;
    terminate(pid)?;
    assert!(!socket.exists(), "the daemon removes its socket when it stops");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_racing_clients_leave_exactly_one_daemon() -> TestResult {
    let bin = daemon_bin()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let log = dir.path().join("filectxd.log");
    let daemons = Daemons::of(&socket);

    let start = Arc::new(tokio::sync::Barrier::new(10));
    let racers: Vec<_> = (0..10)
        .map(|_| {
            let (start, socket, options) =
                (start.clone(), socket.clone(), SpawnOptions::default().daemon(&bin).log(&log));
            let params = params(dir.path());
            tokio::spawn(async move {
                start.wait().await;
                let client = Client::connect_session_or_spawn(&socket, params?, options).await?.0;
                let pid = client.status().await?.pid;
                TestResult::Ok((client, pid))
            })
        })
        .collect();
    let mut clients = Vec::new();
    for racer in racers {
        clients.push(racer.await??);
    }

    // All ten reached the same daemon, and it is the only one left.
    let pid = clients[0].1;
    assert!(
        clients.iter().all(|(_, p)| *p == pid),
        "{:?}",
        clients.iter().map(|(_, p)| p).collect::<Vec<_>>()
    );
    assert_eq!(daemons.wait_single()?, i32::try_from(pid)?);
    // Several were started (the race happened), but only one ever bound the socket; the others
    // said why they left.
    let logged = std::fs::read_to_string(&log)?;
    assert_eq!(logged.matches("listening").count(), 1, "{logged}");
    assert!(logged.contains("another filectxd is already serving"), "{logged}");
    // Every connection still works, to that one daemon.
    for (client, _) in &clients {
        assert_eq!(client.status().await?.pid, pid);
    }

    for (client, _) in clients {
        client.close().await?;
    }
    terminate(pid)?;
    assert!(daemons.pids().is_empty());
    Ok(())
}

#[tokio::test]
async fn the_socket_of_a_crashed_daemon_is_taken_over() -> TestResult {
    let bin = daemon_bin()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let options = SpawnOptions::default().daemon(&bin).log(dir.path().join("filectxd.log"));
    let daemons = Daemons::of(&socket);

    let client = session(&socket, dir.path(), options.clone()).await?;
    let crashed = client.status().await?.pid;
    drop(client);
    kill(i32::try_from(crashed)?, Signal::KILL)?;
    wait_gone(&[i32::try_from(crashed)?])?;
    assert!(socket.exists(), "a killed daemon leaves its socket file behind");
    // The kernel closes the dead daemon's listener as it tears the process down; only once a
    // connection is refused is this the situation autostart must handle (before, a connection
    // can still be accepted by the dying listener and then reset).
    let deadline = Instant::now() + PATIENCE;
    loop {
        match std::os::unix::net::UnixStream::connect(&socket) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => return Err(format!("the dead daemon's socket still answers: {other:?}").into()),
        }
    }

    // Connecting is refused there now, so a new daemon is started; it replaces the socket.
    let client = session(&socket, dir.path(), options).await?;
    let pid = client.status().await?.pid;
    assert_ne!(pid, crashed);
    assert_eq!(daemons.wait_single()?, i32::try_from(pid)?);
    client.close().await?;
    terminate(pid)?;
    Ok(())
}

#[tokio::test]
async fn a_daemon_that_never_answers_is_a_timeout_naming_binary_socket_and_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let log = dir.path().join("filectxd.log");
    let fake = dir.path().join("fake-filectxd");
    write_script(&fake, "echo \"fake daemon: giving up on $*\" >&2\nexit 3")?;

    let started = Instant::now();
    let options = SpawnOptions::default().daemon(&fake).log(&log).timeout(Duration::from_secs(1));
    let error = Client::connect_or_spawn(&socket, options).await.err().ok_or("connected to nothing?")?;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(1) && waited < PATIENCE, "{waited:?}");
    match &error {
        ClientError::AutostartTimeout { daemon, socket: s, log: l, exit, .. } => {
            assert_eq!((daemon, s, l), (&fake, &socket, &log));
            assert_eq!(exit.and_then(|status| status.code()), Some(3), "{error}");
        }
        other => return Err(format!("expected AutostartTimeout, got {other:?}").into()),
    }
    assert!(error.is_disconnected());
    let message = error.to_string();
    for needle in [fake.display().to_string(), socket.display().to_string(), log.display().to_string()] {
        assert!(message.contains(&needle), "{needle} missing from: {message}");
    }
    assert!(message.contains("exit status: 3"), "{message}");
    // Its stderr went to the log, and it was given the socket.
    let logged = std::fs::read_to_string(&log)?;
    assert_eq!(logged, format!("fake daemon: giving up on --socket {}\n", socket.display()));
    Ok(())
}

#[tokio::test]
async fn a_daemon_that_cannot_be_run_is_a_spawn_error_naming_binary_socket_and_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let log = dir.path().join("filectxd.log");
    let missing = dir.path().join("no-such-filectxd");
    let options = SpawnOptions::default().daemon(&missing).log(&log);
    let error = Client::connect_or_spawn(&socket, options).await.err().ok_or("connected to nothing?")?;
    assert!(matches!(&error, ClientError::Spawn { daemon, .. } if *daemon == missing), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "cannot start the daemon {} for the socket {} (its log: {}): No such file or directory (os error 2)",
            missing.display(),
            socket.display(),
            log.display()
        )
    );

    // A log file that cannot be created says so.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "")?;
    let options = SpawnOptions::default().daemon(&missing).log(blocker.join("filectxd.log"));
    let error = Client::connect_or_spawn(&socket, options).await.err().ok_or("connected to nothing?")?;
    assert!(error.to_string().contains("cannot open its log file"), "{error}");
    Ok(())
}

#[test]
fn the_cli_autostarts_by_default() -> TestResult {
    let bin = daemon_bin()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("run/filectx.sock");
    let socket_arg = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    let state = dir.path().join("state");
    let daemons = Daemons::of(&socket);
    // The filectxd next to the CLI is the default; name it only when the tests use another one.
    let mut envs = vec![("XDG_STATE_HOME", state.as_os_str()), ("XDG_CONFIG_HOME", dir.path().as_os_str())];
    if bin.parent() != Path::new(CLI).parent() {
        envs.push((filectx_client::DAEMON_ENV, bin.as_os_str()));
    }

    let out = filectx(&["--socket", socket_arg, "status"], dir.path(), &envs)?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let pid = status_pid(&text(&out.stdout)).ok_or("no pid in the status")?;
    // The daemon outlives the command that started it.
    assert_eq!(daemons.wait_single()?, i32::try_from(pid)?);

    // The log is in the state folder, private.
    let log = state.join("filectx/filectxd.log");
    let logged = std::fs::read_to_string(&log)?;
    assert!(logged.contains("listening"), "{logged}");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(state.join("filectx"))?.permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&log)?.permissions().mode() & 0o777, 0o600);

    // The next command uses that daemon.
    let out = filectx(&["--socket", socket_arg, "status"], dir.path(), &envs)?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(status_pid(&text(&out.stdout)), Some(pid));

    terminate(pid)?;
    Ok(())
}

#[test]
fn the_cli_starts_the_daemon_detached() -> TestResult {
    let bin = daemon_bin()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let socket_arg = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    let record = dir.path().join("record");
    let wrapper = dir.path().join("wrapped-filectxd");
    // Records how it was started, then becomes the real daemon (same pid).
    write_script(
        &wrapper,
        &format!(
            "{{ echo \"args=$*\"; echo \"cwd=$(pwd)\"; echo \"pid=$$\"; \
             echo \"pgid=$(cut -d' ' -f5 /proc/$$/stat)\"; echo \"notify=${{NOTIFY_SOCKET-unset}}\"; \
             echo \"listen=${{LISTEN_FDS-unset}}\"; }} > '{}'\nexec '{}' \"$@\"",
            record.display(),
            bin.display()
        ),
    )?;
    let daemons = Daemons::of(&socket);
    let envs = [
        (filectx_client::DAEMON_ENV, wrapper.as_os_str()),
        ("XDG_STATE_HOME", dir.path().as_os_str()),
        ("XDG_CONFIG_HOME", dir.path().as_os_str()),
        // The CLI's own service-manager context, which the daemon must not inherit.
        ("NOTIFY_SOCKET", "/nonexistent/notify".as_ref()),
        ("LISTEN_FDS", "1".as_ref()),
    ];

    // A relative --socket: the daemon runs in `/`, so it is given the absolute path.
    let out = filectx(&["--socket", "filectx.sock", "status"], dir.path(), &envs)?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let pid = status_pid(&text(&out.stdout)).ok_or("no pid in the status")?;
    assert_eq!(daemons.wait_single()?, i32::try_from(pid)?);
    let recorded = std::fs::read_to_string(&record)?;
    assert_eq!(
        recorded,
        format!("args=--socket {socket_arg}\ncwd=/\npid={pid}\npgid={pid}\nnotify=unset\nlisten=unset\n"),
        "its own process group, in /, without the client's NOTIFY_SOCKET or LISTEN_FDS"
    );
    terminate(pid)?;
    Ok(())
}

#[test]
fn no_autostart_exits_3_and_starts_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let socket_arg = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    let marker = dir.path().join("started");
    let fake = dir.path().join("fake-filectxd");
    write_script(&fake, &format!("touch '{}'", marker.display()))?;
    let daemon = (filectx_client::DAEMON_ENV, fake.as_os_str());
    let state = ("XDG_STATE_HOME", dir.path().as_os_str());

    let flag = filectx(&["--no-autostart", "--socket", socket_arg, "status"], dir.path(), &[daemon, state])?;
    let env_1 = filectx(
        &["--socket", socket_arg, "tools"],
        dir.path(),
        &[daemon, state, ("FILECTX_NO_AUTOSTART", "1".as_ref())],
    )?;
    let env_yes = filectx(
        &["--socket", socket_arg, "status"],
        dir.path(),
        &[daemon, state, ("FILECTX_NO_AUTOSTART", "yes".as_ref())],
    )?;
    for out in [flag, env_1, env_yes] {
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "filectx: no daemon is listening at {socket_arg} (autostart is off; start one with: filectxd)\n"
            )
        );
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    assert!(!marker.exists(), "--no-autostart started the daemon");
    assert!(!socket.exists());
    assert!(!dir.path().join("filectx").exists(), "no log folder either");

    // FILECTX_NO_AUTOSTART=0 leaves autostart on: the fake daemon runs (and never answers, which
    // is exit 3 too, after the wait, naming the binary, the socket and the log).
    let out = filectx(
        &["--socket", socket_arg, "status"],
        dir.path(),
        &[daemon, state, ("FILECTX_NO_AUTOSTART", "0".as_ref())],
    )?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(marker.exists(), "FILECTX_NO_AUTOSTART=0 did not start the daemon");
    let stderr = text(&out.stderr);
    let log = dir.path().join("filectx/filectxd.log");
    assert!(stderr.starts_with("filectx: started the daemon "), "{stderr}");
    for needle in [fake.display().to_string(), socket.display().to_string(), log.display().to_string()] {
        assert!(stderr.contains(&needle), "{needle} missing from: {stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    Ok(())
}

#[test]
fn an_autostart_that_cannot_run_the_daemon_exits_3_with_the_reason() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("filectx.sock");
    let socket_arg = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    let missing = dir.path().join("no-such-filectxd");
    let envs =
        [(filectx_client::DAEMON_ENV, missing.as_os_str()), ("XDG_STATE_HOME", dir.path().as_os_str())];
    let out = filectx(&["--socket", socket_arg, "status"], dir.path(), &envs)?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "filectx: cannot start the daemon {} for the socket {socket_arg} (its log: {}): No such file or \
             directory (os error 2)\n",
            missing.display(),
            dir.path().join("filectx/filectxd.log").display()
        )
    );
    Ok(())
}

#[test]
fn a_daemon_found_nowhere_says_where_it_was_looked_for() -> TestResult {
    let dir = tempfile::tempdir()?;
    // A copy of the CLI with no filectxd beside it, and a PATH without one (copied by `cp`,
    // for the reason `script` gives).
    let cli = dir.path().join("filectx");
    let status = Command::new("cp").arg(CLI).arg(&cli).status()?;
    assert!(status.success(), "cp: {status}");
    let socket = dir.path().join("filectx.sock");
    let out = Command::new(&cli)
        .args(["--socket", socket.to_str().ok_or("tempdir path is not UTF-8")?, "status"])
        .current_dir(dir.path())
        .env_remove("FILECTX_SOCKET")
        .env_remove(filectx_client::DAEMON_ENV)
        .env_remove("FILECTX_NO_AUTOSTART")
        .env("PATH", dir.path().join("empty-bin"))
        .output()?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "filectx: cannot start the daemon filectxd for the socket {}: it was found neither in {} nor on \
             PATH; install it, or name it with FILECTX_DAEMON\n",
            socket.display(),
            dir.path().display()
        )
    );
    Ok(())
}
