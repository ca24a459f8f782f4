//! Test harness shared by the integration tests: start the real `filectxd` binary in a temp
//! folder with its own socket, and talk to it with a raw client that frames bytes by hand (no
//! code of ours on the client side), so the wire format is pinned independently of our client.
//! Also what the tests of the one test binary (`tests/it/`) share because they share a process:
//! [`alone`] for a test that must have the machine to itself, and [`run_seconds`] for the length
//! of the long runs; [`skip`], the one way a test is skipped (recorded for `tests/run`); [`lsp`],
//! a plain client of a language server and where the real servers are installed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod lsp;
pub mod skip;
pub mod versus;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for anything the daemon should do promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Path of a binary built by `cargo test --workspace` next to the test executables.
pub fn bin(name: &str) -> PathBuf {
    let env = format!("FILECTX_{}_BIN", name.to_uppercase());
    if let Some(path) = std::env::var_os(&env) {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/<test-exe> → target/<profile>/<name>
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not found: run the tests with `cargo test --workspace` (which builds it), or set {env}",
        path.display()
    );
    path
}

/// A program the benches compare with (`b3sum`, `rg`): found on the PATH or in cargo's `bin`
/// folder, else installed once with `cargo install <krate> --locked`; `None` when that fails.
pub fn find_or_install(program: &str, krate: &str) -> Option<PathBuf> {
    let find = || {
        let mut dirs: Vec<PathBuf> =
            std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
        if let Some(home) = std::env::var_os("CARGO_HOME") {
            dirs.push(PathBuf::from(home).join("bin"));
        }
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home).join(".cargo/bin"));
        }
        dirs.into_iter().map(|d| d.join(program)).find(|p| p.is_file())
    };
    if let Some(found) = find() {
        return Some(found);
    }
    eprintln!("{program} not found; trying `cargo install {krate} --locked` once…");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    match Command::new(cargo).args(["install", krate, "--locked"]).status() {
        Ok(status) if status.success() => find(),
        _ => {
            eprintln!("{program} is missing and could not be installed");
            None
        }
    }
}

/// Set to `1` (CI's `.ci/run` does) to run the long tests at full length: the soak and the
/// stable-toolchain fuzz runs go 60 s instead of 3 s. Their own variables (`FILECTX_SOAK_SECONDS`,
/// `FILECTX_FUZZ_SECONDS`) still win when set.
pub const LONG_TESTS_ENV: &str = "FILECTX_LONG_TESTS";

/// Whether [`LONG_TESTS_ENV`] asks for the long runs (set, and neither empty nor `0`).
pub fn long_tests() -> bool {
    std::env::var_os(LONG_TESTS_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// How long a long-running test runs, in seconds: the number in `var` when it is set, else
/// `long` when [`long_tests`] (CI), else `short` (a developer's plain `cargo test`).
pub fn run_seconds(var: &str, short: f64, long: f64) -> f64 {
    match std::env::var(var) {
        Ok(value) => value.parse().unwrap_or_else(|_| panic!("{var} must be a number, not {value:?}")),
        Err(_) if long_tests() => long,
        Err(_) => short,
    }
}

/// The name libtest knows a test by, for running this binary again on that test alone
/// (`--exact`): the test's module path without the crate, then its name. Call it with
/// `module_path!()` from the test's own module.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// Who may start daemons: any number of tests at once ([`Share`]), or one test [`alone`].
struct GateState {
    /// Live shares: daemons started through [`Daemon`], and other [`Share`]s.
    shares: usize,
    /// The thread of the test that runs alone, while it does.
    alone: Option<ThreadId>,
    /// Tests waiting to run alone.
    waiting: usize,
}

static GATE: Mutex<GateState> = Mutex::new(GateState { shares: 0, alone: None, waiting: 0 });
static GATE_CHANGED: Condvar = Condvar::new();

fn gate() -> MutexGuard<'static, GateState> {
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A share of the machine, held by every daemon started through [`Daemon`] (and by any test
/// that takes one for a process of its own); see [`alone`]. Dropping it gives the share back.
pub struct Share(());

impl Share {
    /// Waits while a test runs [`alone`] (unless it is this thread's); when one is waiting for
    /// its turn and no share is out, waits for that test first, so it is not starved. A thread
    /// that already holds a share is never held up by a waiting test (shares are out then).
    pub fn take() -> Share {
        let me = std::thread::current().id();
        let mut state = gate();
        while state.alone.is_some_and(|t| t != me)
            || (state.alone.is_none() && state.waiting > 0 && state.shares == 0)
        {
            state = GATE_CHANGED.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.shares += 1;
        Share(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        gate().shares -= 1;
        GATE_CHANGED.notify_all();
    }
}

/// Held by a test that runs [`alone`]; dropping it lets the others start daemons again.
pub struct Alone(());

impl Drop for Alone {
    fn drop(&mut self) {
        gate().alone = None;
        GATE_CHANGED.notify_all();
    }
}

/// Runs the calling test alone among those of this binary that start daemons: waits until no
/// [`Share`] is out (every daemon another test started is gone), and keeps other tests from
/// starting one until the guard drops; this thread still may. The integration tests share one
/// process and run two at a time (the CI machine has two cores); a test that keeps both cores
/// busy on purpose (the soak: 64 sessions for a minute in CI) takes this so that it does not
/// skew the others' bounds, as it did not when it was a test binary of its own.
pub fn alone() -> Alone {
    let me = std::thread::current().id();
    let mut state = gate();
    state.waiting += 1;
    while state.shares > 0 || state.alone.is_some() {
        state = GATE_CHANGED.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
    state.waiting -= 1;
    state.alone = Some(me);
    Alone(())
}

/// A `filectxd` process serving a socket in its own temp folder; killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub log: PathBuf,
    /// Its share of the machine (see [`alone`]), given back once the process is gone.
    pub share: Share,
}

/// The flag that keeps the built-in language servers off in the tests' daemons.
const NO_BUILTINS: &str = "--no-builtin-language-servers";

impl Daemon {
    /// Starts the daemon with extra flags and waits until its socket accepts connections.
    pub fn start(extra: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/filectx.sock");
        Self::start_at(dir, socket, extra)
    }

    /// Starts the daemon on a given socket path inside `dir`.
    pub fn start_at(dir: tempfile::TempDir, socket: PathBuf, extra: &[&str]) -> Daemon {
        let log = dir.path().join(format!("daemon-{}.log", std::process::id()));
        let share = Share::take();
        let child = Self::spawn(&socket, &log, extra);
        let daemon = Daemon { child, dir, socket, log, share };
        daemon.wait_ready();
        daemon
    }

    /// Spawns `filectxd` without waiting for it.
    pub fn spawn(socket: &Path, log: &Path, extra: &[&str]) -> Child {
        Self::with_log(Self::command(socket, extra), log).spawn().unwrap()
    }

    /// The command that runs `filectxd` on `socket` with extra flags (no stdio set up).
    pub fn command(socket: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(bin("filectxd"));
        command.arg("--socket").arg(socket).args(["--log-level", "debug"]).args(extra).env_remove("RUST_LOG");
        // No built-in language server from the developer's PATH: a test writing a .py file
        // would wait for one (see `Daemon::start_with_builtin_language_servers`).
        command.arg(NO_BUILTINS);
        // Each daemon its own journal and search index, beside its socket (the user's are for
        // the user's daemon).
        if !extra.iter().any(|arg| arg.starts_with("--journal-dir") || *arg == "--no-journal") {
            let journal = socket.parent().unwrap_or(Path::new("/tmp")).join("journal");
            command.arg("--journal-dir").arg(journal);
        }
        if !extra.iter().any(|arg| arg.starts_with("--search-index-dir")) {
            let index = socket.parent().unwrap_or(Path::new("/tmp")).join("index");
            command.arg("--search-index-dir").arg(index);
        }
        command
    }

    fn with_log(mut command: Command, log: &Path) -> Command {
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        command
    }

    /// Starts the daemon with no deny rule at all (`deny_write = []` in a config file of its
    /// own, replacing the default `**/.git/**`) and extra flags: files with several hard links
    /// are then written in place, which any deny rule refuses (a rule holds for names, and a
    /// second name gets around it).
    pub fn start_without_deny_rules(extra: &[&str]) -> Daemon {
        Self::start_configured(extra, without_deny_rules)
    }

    /// Starts the daemon through a command of the test's making: `configure` gets the temp
    /// folder (to prepare before the start) and the usual `filectxd` command, and returns the
    /// command to run — the same one with environment variables added, or another that ends by
    /// executing it (e.g. `unshare -m … sh -c '…; exec filectxd …'`, so the pid stays the
    /// daemon's). Waits until the socket accepts connections.
    pub fn start_configured(extra: &[&str], configure: impl FnOnce(&Path, Command) -> Command) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/filectx.sock");
        let log = dir.path().join(format!("daemon-{}.log", std::process::id()));
        let command = configure(dir.path(), Self::command(&socket, extra));
        let share = Share::take();
        let child = Self::with_log(command, &log).spawn().unwrap();
        let daemon = Daemon { child, dir, socket, log, share };
        daemon.wait_ready();
        daemon
    }

    /// Starts the daemon with the built-in language servers looked up on `path` (its `PATH`)
    /// and `extra` flags.
    pub fn start_with_builtin_language_servers(extra: &[&str], path: &std::ffi::OsStr) -> Daemon {
        Self::start_configured(extra, |_, usual| {
            let mut command = Command::new(usual.get_program());
            command.args(usual.get_args().filter(|arg| *arg != NO_BUILTINS));
            for (key, value) in usual.get_envs() {
                match value {
                    Some(value) => command.env(key, value),
                    None => command.env_remove(key),
                };
            }
            command.env("PATH", path);
            command
        })
    }

    /// Starts the daemon with the fail points `spec` armed (`FILECTX_FAILPOINTS`, in the `fail`
    /// crate's syntax) and checks that this `filectxd` has them (see [`Daemon::require_feature`]).
    pub fn start_failing(spec: &str) -> Daemon {
        Self::start_failing_configured(spec, |_, command| command)
    }

    /// [`Daemon::start_failing`] through a command of the test's making, as
    /// [`Daemon::start_configured`] starts one.
    pub fn start_failing_configured(spec: &str, configure: impl FnOnce(&Path, Command) -> Command) -> Daemon {
        let daemon = Self::start_configured(&[], |dir, command| {
            let mut command = configure(dir, command);
            command.env("FILECTX_FAILPOINTS", spec);
            command
        });
        daemon.require_feature("fail point configured", "failpoints");
        daemon
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Ok(mut probe) = UnixStream::connect(&self.socket) {
                // The probe's connection counts as a session until the daemon has ended it: let
                // it end before the test starts (and counts `sessions`, or fills the connection
                // cap). Half-close, then wait for the daemon to close its side; the gauge drops
                // right after (a timeout or an error just moves on).
                let _ = probe.shutdown(std::net::Shutdown::Write);
                let _ = probe.set_read_timeout(Some(PATIENCE));
                let _ = probe.read_to_end(&mut Vec::new());
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("daemon did not start; its log:\n{}", self.log_text());
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// What the daemon has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Resident memory of the daemon, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Anonymous resident memory of the daemon (heap, stacks, queues: what buffering costs), in
    /// KiB. Unlike [`Daemon::rss_kib`] it leaves out pages of memory-mapped files, which the
    /// kernel counts as resident once touched although they are shared page cache.
    pub fn rss_anon_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Sends a signal to the daemon.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits for the daemon to exit on its own.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("daemon did not exit; its log:\n{}", self.log_text());
    }

    /// Fails with a clear message when this `filectxd` was built without the test-only cargo
    /// `feature` (its log lacks `log_line`, which the feature logs at start): features are
    /// unified only when the whole workspace is built, so `cargo test -p filectx-tests` alone may
    /// run a `filectxd` built without them.
    pub fn require_feature(&self, log_line: &str, feature: &str) {
        // Once a request is answered, start-up (and its logging) is over.
        self.status();
        assert!(
            self.log_text().contains(log_line),
            "{} was built without the `{feature}` feature; run the tests with `cargo test --workspace` \
             (which builds it with the features filectx-tests enables). Its log:\n{}",
            bin("filectxd").display(),
            self.log_text()
        );
    }

    /// A raw client that has already initialized a session rooted at the daemon's temp folder.
    pub fn session(&self) -> Raw {
        let mut raw = Raw::connect(&self.socket);
        raw.initialize(self.dir.path());
        raw
    }

    /// A raw client that has initialized a session with the given `initialize` params.
    pub fn session_with(&self, params: Value) -> Raw {
        let mut raw = Raw::connect(&self.socket);
        raw.call("initialize", Some(params));
        raw
    }

    /// The daemon's `daemon/status`, through a fresh session.
    pub fn status(&self) -> Value {
        let mut raw = self.session();
        raw.call("daemon/status", None)
    }

    /// The daemon's gate token (what `gate/register` must carry as `gateToken`), read from the
    /// file next to its socket; `None` when the daemon keeps none.
    pub fn gate_token(&self) -> Option<String> {
        std::fs::read_to_string(gate_token_file(&self.socket)).ok().map(|token| token.trim().to_owned())
    }

    /// `params` with the daemon's gate token added as `gateToken`, when it keeps one.
    pub fn with_gate_token(&self, mut params: Value) -> Value {
        if let Some(token) = self.gate_token() {
            params["gateToken"] = json!(token);
        }
        params
    }

    /// `daemon/status` as the daemon's owner sees it (with the gate token: every session's
    /// gates), through a fresh session.
    pub fn owner_status(&self) -> Value {
        let mut raw = self.session();
        let params = self.with_gate_token(json!({}));
        raw.call("daemon/status", Some(params))
    }
}

/// `command` (a `filectxd` command in `dir`, the daemon's temp folder) with no deny rule at
/// all: a config file of its own with `deny_write = []` (see
/// [`Daemon::start_without_deny_rules`]), for the tests of in-place writes of hard-linked files.
pub fn without_deny_rules(dir: &Path, mut command: Command) -> Command {
    let config = dir.join("no-deny-rules.toml");
    std::fs::write(&config, "deny_write = []\n").unwrap();
    command.arg("--config").arg(&config);
    command
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what the daemon said last.
        if std::thread::panicking() {
            let log = self.log_text();
            let tail = log.char_indices().rev().nth(16 << 10).map_or(log.as_str(), |(at, _)| &log[at..]);
            eprintln!("--- the daemon's log, its end ---\n{tail}");
        }
    }
}

/// A hand-framed JSON-RPC client over a blocking Unix socket.
pub struct Raw {
    pub stream: UnixStream,
    next_id: u64,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Raw { stream, next_id: 1 }
    }

    /// Writes bytes exactly as given.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Frames a body with a correct Content-Length and writes it.
    pub fn send_body(&mut self, body: &[u8]) {
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body);
        self.send_bytes(&frame);
    }

    pub fn send(&mut self, message: &Value) {
        self.send_body(message.to_string().as_bytes());
    }

    /// Reads one frame; `None` when the daemon closed the connection.
    pub fn recv_opt(&mut self) -> Option<Value> {
        let mut first = [0u8; 1];
        loop {
            // A signal (the test process has children) may interrupt the read: read again.
            return match self.stream.read(&mut first) {
                Ok(0) => None,
                Ok(_) => self.recv_rest(first[0]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
                Err(e) => panic!("reading a frame header: {e}"),
            };
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_opt().expect("the daemon closed the connection")
    }

    /// True when the daemon closes the connection (after any frames it still sends).
    pub fn closed(&mut self) -> bool {
        loop {
            match self.recv_opt() {
                None => return true,
                Some(_) => continue,
            }
        }
    }

    /// Sends a request and returns the whole response object.
    pub fn request(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = self.send_request(method, params);
        let response = self.recv();
        assert_eq!(response["id"], json!(id), "{response}");
        response
    }

    /// Sends a request that must succeed and returns its result.
    pub fn call(&mut self, method: &str, params: Option<Value>) -> Value {
        let response = self.request(method, params);
        assert!(response.get("error").is_none(), "{method} failed: {response}");
        response["result"].clone()
    }

    /// Like [`Raw::request`], but skips the server's notifications (frames without an `id`,
    /// such as `file/didChange`) that arrive before the response.
    pub fn request_skipping_notifications(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = self.send_request(method, params);
        loop {
            let frame = self.recv();
            if frame.get("id").is_none() && frame.get("method").is_some() {
                continue;
            }
            assert_eq!(frame["id"], json!(id), "{frame}");
            return frame;
        }
    }

    /// Sends a `tools/call` of tool `name` with `arguments` without waiting for its answer;
    /// returns its id.
    pub fn send_tool(&mut self, name: &str, arguments: Value) -> u64 {
        self.send_request("tools/call", Some(json!({"name": name, "arguments": arguments})))
    }

    /// The response to request `id`, which must be the next frame with an id: server
    /// notifications (and requests, such as a gate's `gate/writeIntent`) that come first are
    /// skipped.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            let frame = self.recv();
            if frame.get("id").is_none() {
                continue;
            }
            assert_eq!(frame["id"], json!(id), "{frame}");
            return frame;
        }
    }

    /// Sends a request without waiting for its answer; returns its id.
    pub fn send_request(&mut self, method: &str, params: Option<Value>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message);
        id
    }

    /// Reads one frame if one starts arriving within `wait` (the rest of it is then awaited
    /// with the usual patience); `None` when none does, or when the daemon closed the
    /// connection.
    pub fn recv_within(&mut self, wait: Duration) -> Option<Value> {
        let mut first = [0u8; 1];
        self.stream.set_read_timeout(Some(wait.max(Duration::from_millis(1)))).unwrap();
        let mut got = self.stream.read(&mut first);
        while got.as_ref().is_err_and(|e| e.kind() == ErrorKind::Interrupted) {
            got = self.stream.read(&mut first);
        }
        self.stream.set_read_timeout(Some(PATIENCE)).unwrap();
        match got {
            Ok(0) => None,
            Ok(_) => self.recv_rest(first[0]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
            Err(e) => panic!("reading a frame header: {e}"),
        }
    }

    /// The rest of a frame whose first header byte was already read.
    fn recv_rest(&mut self, first: u8) -> Option<Value> {
        let mut header = vec![first];
        let mut byte = [0u8; 1];
        while !header.ends_with(b"\r\n\r\n") {
            match self.stream.read(&mut byte) {
                Ok(0) => return None,
                Ok(_) => header.push(byte[0]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading a frame header: {e}"),
            }
        }
        let header = String::from_utf8(header).unwrap();
        let length: usize = header
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap_or_else(|| panic!("no Content-Length in {header:?}"))
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body).unwrap();
        Some(serde_json::from_slice(&body).unwrap())
    }

    /// Waits until `deadline` for the next frame; `None` when none has begun to arrive by then.
    /// A frame is only read once its first byte is there (then with the usual patience), so a
    /// timeout never leaves the stream in the middle of a frame.
    pub fn recv_before(&mut self, deadline: Instant) -> Option<Value> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // A zero timeout means "block forever" to the socket API: wait at least 1 ms.
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
            let mut byte = [0u8; 1];
            let ready = rustix::net::recv(&self.stream, &mut byte[..], rustix::net::RecvFlags::PEEK)
                .map(|(_, len)| len);
            self.stream.set_read_timeout(Some(PATIENCE)).unwrap();
            match ready {
                Ok(0) => panic!("the daemon closed the connection"),
                Ok(_) => return Some(self.recv()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => {
                    if Instant::now() >= deadline {
                        return None;
                    }
                }
                Err(e) => panic!("waiting for a frame: {e}"),
            }
        }
    }

    /// Waits up to `within` for the next server notification named `method` and returns its
    /// `params`; `None` when none came. Notifications of other methods are skipped; a response
    /// (a frame with an `id`) is a mistake of the test and panics.
    pub fn next_notification(&mut self, method: &str, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let frame = self.recv_before(deadline)?;
            assert!(frame.get("id").is_none(), "expected a {method} notification, got a response: {frame}");
            if frame["method"] == method {
                assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
                return Some(frame.get("params").cloned().unwrap_or(Value::Null));
            }
        }
    }

    /// Like [`Raw::next_notification`], but the notification must come.
    pub fn expect_notification(&mut self, method: &str, within: Duration) -> Value {
        self.next_notification(method, within)
            .unwrap_or_else(|| panic!("no {method} notification within {within:?}"))
    }

    /// Every `method` notification that arrives during `period` (its `params`, in order).
    pub fn notifications_during(&mut self, method: &str, period: Duration) -> Vec<Value> {
        let deadline = Instant::now() + period;
        let mut seen = Vec::new();
        while let Some(params) =
            self.next_notification(method, deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(params);
        }
        seen
    }

    /// Asserts that no `method` notification arrives during `period`.
    pub fn assert_no_notification(&mut self, method: &str, period: Duration) {
        let seen = self.notifications_during(method, period);
        assert!(seen.is_empty(), "unexpected {method} notification(s) within {period:?}: {seen:?}");
    }

    /// Like [`Raw::request_skipping_notifications`], but hands the skipped notifications (whole
    /// frames) to `notes` instead of dropping them.
    pub fn request_collecting_notifications(
        &mut self,
        method: &str,
        params: Option<Value>,
        notes: &mut Vec<Value>,
    ) -> Value {
        let id = self.send_request(method, params);
        loop {
            let frame = self.recv();
            if frame.get("id").is_none() && frame.get("method").is_some() {
                notes.push(frame);
                continue;
            }
            assert_eq!(frame["id"], json!(id), "{frame}");
            return frame;
        }
    }

    /// `initialize` with one root.
    pub fn initialize(&mut self, root: &Path) -> Value {
        self.call("initialize", Some(json!({"roots": [root], "clientInfo": {"name": "filectx-tests"}})))
    }
}

/// The error code of a response, or panics with the response.
pub fn error_code(response: &Value) -> i64 {
    response["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error response: {response}"))
}

/// The whole response of a request (server notifications that arrive first are skipped).
pub fn rpc(raw: &mut Raw, method: &str, params: Value) -> Value {
    raw.request_skipping_notifications(method, Some(params))
}

/// Waits (at most [`PATIENCE`]) until the daemon counts `expected` sessions: a connection that
/// closed (a readiness probe's, one the daemon ended) is counted until its task has finished,
/// just after the client sees the end.
pub fn wait_for_sessions(probe: &mut Raw, expected: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let sessions = probe.call("daemon/status", None)["sessions"].as_u64().unwrap_or(u64::MAX);
        if sessions == expected {
            return;
        }
        assert!(Instant::now() < deadline, "sessions stuck at {sessions}, expected {expected}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The result of a request that must succeed.
pub fn ok(raw: &mut Raw, method: &str, params: Value) -> Value {
    let response = rpc(raw, method, params.clone());
    assert!(response.get("error").is_none(), "{method} {params} failed: {response}");
    response["result"].clone()
}

/// A `tools/call` result (a JSON-RPC success by contract), for `owner` when given, checked for
/// the shape every tool result has: text blocks, `isError`, and on an error the daemon's
/// `{name: "FsError", code}` with a known `FS_*` code.
pub fn tool_as(raw: &mut Raw, owner: Option<&str>, name: &str, arguments: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(owner) = owner {
        params["owner"] = json!(owner);
    }
    let result = ok(raw, "tools/call", params.clone());
    let content = result["content"].as_array().unwrap_or_else(|| panic!("{params}: {result}"));
    assert!(!content.is_empty(), "{params}: {result}");
    for block in content {
        assert_eq!(block["type"], "text", "{params}: {result}");
        assert!(block["text"].is_string(), "{params}: {result}");
    }
    let is_error = result["isError"].as_bool().unwrap_or_else(|| panic!("{params}: {result}"));
    if is_error {
        assert_eq!(result["error"]["name"], "FsError", "{params}: {result}");
        let code = result["error"]["code"].as_str().unwrap_or_else(|| panic!("{params}: {result}"));
        let known = serde_json::from_value::<filectx_protocol::FsErrorCode>(json!(code));
        assert!(known.is_ok(), "{params}: {result}");
    } else {
        assert!(result.get("error").is_none(), "{params}: {result}");
    }
    result
}

/// [`tool_as`] for the connection's default owner.
pub fn tool(raw: &mut Raw, name: &str, arguments: Value) -> Value {
    tool_as(raw, None, name, arguments)
}

/// The text of a tool result (its text blocks, joined).
pub fn tool_text(result: &Value) -> String {
    let blocks = result["content"].as_array().unwrap_or_else(|| panic!("no content: {result}"));
    blocks.iter().map(|b| b["text"].as_str().unwrap_or_else(|| panic!("not text: {result}"))).collect()
}

/// A tool call that must succeed; its text.
pub fn tool_ok(raw: &mut Raw, name: &str, arguments: Value) -> String {
    let result = tool(raw, name, arguments.clone());
    assert_eq!(result["isError"], false, "{name} {arguments}: {result}");
    tool_text(&result)
}

/// A tool call that must fail; its `FS_*` code and its text.
pub fn tool_err(raw: &mut Raw, name: &str, arguments: Value) -> (String, String) {
    let result = tool(raw, name, arguments.clone());
    assert_eq!(result["isError"], true, "{name} {arguments}: {result}");
    let code = result["error"]["code"].as_str().unwrap_or_else(|| panic!("no code: {result}"));
    (code.to_owned(), tool_text(&result))
}

/// The `FS_*` identifier of a failed `file/*` or `fs/*` response; checks that the numeric
/// JSON-RPC code is the one the table gives for it.
pub fn fs_error(response: &Value) -> &str {
    let code = response["error"]["data"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an FS_* error response: {response}"));
    let typed: filectx_protocol::FsErrorCode =
        serde_json::from_value(json!(code)).unwrap_or_else(|e| panic!("unknown code {code}: {e}"));
    assert_eq!(error_code(response), i64::from(typed.rpc_code()), "numeric code of {code}: {response}");
    code
}

/// The file next to a daemon's socket that holds its gate token: `<socket>.gate-token`.
pub fn gate_token_file(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".gate-token");
    PathBuf::from(name)
}

/// The daemon's temp folder, canonical (the session root as the daemon sees it).
pub fn root_of(daemon: &Daemon) -> PathBuf {
    daemon.dir.path().canonicalize().unwrap()
}

/// A spawned process with piped stdio: its stdout lines as they arrive (read on a thread of its
/// own, so a wait can be bounded), its stderr collected as it comes.
pub struct Piped {
    /// The process.
    pub child: Child,
    /// Its stdin, until closed.
    pub stdin: Option<std::process::ChildStdin>,
    /// Each stdout line as it arrives.
    pub lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Piped {
    /// Spawns `command` with all three streams piped.
    pub fn spawn(command: &mut Command) -> Piped {
        let mut child =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0_u8; 1024];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Piped { child, stdin, lines, stderr }
    }

    /// What it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits (at most 2 s) until stderr was read to its end (the process closed it).
    pub fn stderr_to_end(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr()
    }
}

impl Drop for Piped {
    /// Kills the process if it is still running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
