//! The guard between the daemon and a language server, so that no process a server started
//! outlives the daemon, even a `kill -9` of it, grandchildren included (tsserver under
//! typescript-language-server, rust-analyzer's proc-macro servers, `cargo check`).
//!
//! The daemon runs each server as `filectxd __lsp-guard DAEMON_PID PROGRAM ARGS…`: the guard
//! asks the kernel for SIGTERM when the daemon goes (`PR_SET_PDEATHSIG`, then checks the daemon
//! is still its parent), becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`: a server's
//! orphaned children come to it, never to init), and starts the server in a process group of
//! its own with the guard's stdin and stdout (the daemon's pipes). When the server exits, or
//! the daemon goes, or the daemon stops it (SIGTERM), the guard ends the whole tree: SIGTERM to
//! the server's group, a moment to leave, then SIGKILL to every descendant it still has. It
//! exits with the server's status.
//!
//! The death signal belongs to the thread that forked the guard, so the daemon forks guards
//! from one thread that lives as long as the daemon ([`Spawner`]), never from a pool thread that
//! may exit.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// The argument that makes `filectxd` a guard.
pub const GUARD_ARG: &str = "__lsp-guard";

/// How long the server's tree has to leave after SIGTERM before the guard kills what is left.
const GRACE: Duration = Duration::from_millis(1500);

/// The guard's main: `args` are what follows [`GUARD_ARG`] (the daemon's pid, the program, its
/// arguments). Returns the exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let daemon: Option<u32> = args.next().and_then(|p| p.to_str()?.parse().ok());
    let Some(program) = args.next() else {
        eprintln!("filectxd {GUARD_ARG}: usage: {GUARD_ARG} DAEMON_PID PROGRAM [ARGS...]");
        return 2;
    };
    if rustix::process::set_parent_process_death_signal(Some(Signal::TERM)).is_err() {
        return 125;
    }
    // The daemon may have gone before the death signal was asked for.
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != daemon {
        return 125;
    }
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        eprintln!("filectxd {GUARD_ARG}: cannot become a child subreaper: {e}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("filectxd {GUARD_ARG}: {e}");
            return 125;
        }
    };
    runtime.block_on(guard(program, args.collect()))
}

async fn guard(program: OsString, args: Vec<OsString>) -> i32 {
    use std::os::unix::process::CommandExt as _;
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut child), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::child()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return 125;
    };
    let server = match std::process::Command::new(&program).args(&args).process_group(0).spawn() {
        Ok(server) => server.id(),
        Err(e) => {
            eprintln!("filectxd {GUARD_ARG}: cannot start {}: {e}", program.to_string_lossy());
            return 127;
        }
    };
    loop {
        tokio::select! {
            _ = term.recv() => return end(server, 143),
            _ = int.recv() => return end(server, 130),
            _ = hup.recv() => return end(server, 129),
            _ = child.recv() => {
                if let Some(status) = reap(server) {
                    return end(server, status);
                }
            }
        }
    }
}

/// Reaps every exited child; the server's exit status when it is one of them.
fn reap(server: u32) -> Option<i32> {
    let mut status = None;
    // Any child (`wait`: `waitpid(None)` would be only those of the guard's own group).
    while let Ok(Some((pid, exit))) = rustix::process::wait(WaitOptions::NOHANG) {
        if pid.as_raw_nonzero().get() as u32 == server {
            status =
                Some(exit.exit_status().or_else(|| exit.terminating_signal().map(|s| 128 + s)).unwrap_or(1));
        }
    }
    status
}

/// Ends the server's whole tree and answers `status`.
fn end(server: u32, status: i32) -> i32 {
    let me = std::process::id();
    if let Some(group) = Pid::from_raw(server as i32) {
        let _ = rustix::process::kill_process_group(group, Signal::TERM);
    }
    super::tree::signal_descendants(me, Signal::TERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        reap(server);
        if super::tree::descendants(me).is_empty() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Whatever is left, however it got there (it changed its group: still ours as subreaper).
    for _ in 0..10 {
        if super::tree::signal_descendants(me, Signal::KILL) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        reap(server);
    }
    status
}

/// Forks every guard from one thread that lives as long as the daemon (see the module's doc).
#[derive(Debug)]
pub struct Spawner {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<Job>>,
}

type Job = (tokio::process::Command, tokio::sync::oneshot::Sender<std::io::Result<tokio::process::Child>>);

impl Spawner {
    /// The spawning thread, its children's pipes registered with `runtime`.
    pub fn start(runtime: tokio::runtime::Handle) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new().name("filectx-lsp-spawner".into()).spawn(move || {
            let _entered = runtime.enter();
            for (mut command, answer) in rx {
                let _ = answer.send(command.spawn());
            }
        })?;
        Ok(Self { tx: std::sync::Mutex::new(tx) })
    }

    /// Spawns `command` from the spawning thread.
    pub async fn spawn(&self, command: tokio::process::Command) -> std::io::Result<tokio::process::Child> {
        let (answer, spawned) = tokio::sync::oneshot::channel();
        let sent = self.tx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send((command, answer));
        if sent.is_err() {
            return Err(std::io::Error::other("the language-server spawner is gone"));
        }
        spawned.await.map_err(|_| std::io::Error::other("the language-server spawner is gone"))?
    }
}
