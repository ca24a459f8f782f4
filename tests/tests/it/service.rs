//! The daemon as a user service (issue 6): socket activation without systemd, readiness and
//! watchdog notifications, the systemd units, `--idle-exit`, and the config file with
//! `--print-config`. (A second daemon on the same socket and a peer of another uid are covered by
//! lifecycle.rs.)
//!
//! Activation passes an already-bound listener the way systemd does: as fd 3 of a process whose
//! pid is in LISTEN_PID. The listener goes in as the stdin of `sh -c '...; exec filectxd ...
//! 3<&0 </dev/null'`: `std` dups it onto fd 0 in the child only, so no other test's child can
//! inherit it, and after `exec` the daemon's pid is the shell's `$$`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use filectx_daemon::cli::CONFIG_ENV;
use filectx_daemon::config::{
    DEFAULT_MAX_BATCH_LEN, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUED_MESSAGES, DEFAULT_SHUTDOWN_GRACE_SECS,
};
use filectx_daemon::provider::ProviderConfig;
use filectx_protocol::DEFAULT_MAX_FRAME_BYTES;
use filectx_protocol::socket::SOCKET_ENV;
use filectx_tests::skip::skip;
use filectx_tests::{PATIENCE, Raw, Share, bin, wait_for_sessions};
use rustix::process::Signal;

/// Environment that would change what the daemon does, removed from every child: the tests set
/// what they mean to.
const INHERITED: &[&str] = &[
    "RUST_LOG",
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "LISTEN_FDS_FIRST_FD",
    SOCKET_ENV,
    CONFIG_ENV,
];

/// A child process (the daemon, or `sh` that becomes it) with stdout and stderr in files; killed
/// when dropped.
struct Proc {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    /// Its share of the machine, like every daemon of these tests ([`filectx_tests::alone`]).
    _share: Share,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr going to files `<name>.out` / `<name>.err` in `dir`.
    fn spawn(cmd: Command, dir: &Path, name: &str) -> Proc {
        Self::try_spawn(cmd, dir, name).unwrap()
    }

    fn try_spawn(mut cmd: Command, dir: &Path, name: &str) -> std::io::Result<Proc> {
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let share = Share::take();
        let child = cmd.stdout(File::create(&stdout)?).stderr(File::create(&stderr)?).spawn()?;
        Ok(Proc { child, stdout, stderr, _share: share })
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    fn out(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// What the daemon logged (stderr).
    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, signal: Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits up to `within` for the process to exit on its own.
    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running after {within:?}; its log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the log contains `needle` (the process must stay up meanwhile).
    fn wait_log(&mut self, needle: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.log().contains(needle) {
            assert!(self.running(), "exited before logging {needle:?}; its log:\n{}", self.log());
            assert!(Instant::now() < deadline, "never logged {needle:?}; its log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `socket` accepts connections (the process must stay up meanwhile).
    fn wait_socket(&mut self, socket: &Path) {
        let deadline = Instant::now() + PATIENCE;
        while UnixStream::connect(socket).is_err() {
            assert!(self.running(), "exited before serving {}; its log:\n{}", socket.display(), self.log());
            assert!(Instant::now() < deadline, "{} never served; its log:\n{}", socket.display(), self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `filectxd` with a clean environment: no user config file (XDG_CONFIG_HOME is an empty folder
/// of the test) and a default socket inside the test's folder, never the user's.
fn filectxd(dir: &Path) -> Command {
    let mut cmd = Command::new(bin("filectxd"));
    clean_env(&mut cmd, dir);
    cmd
}

fn clean_env(cmd: &mut Command, dir: &Path) {
    for var in INHERITED {
        cmd.env_remove(var);
    }
    // The state folder too: the daemon's journal (and leftovers' log) stay in the test's folder,
    // never the developer's.
    cmd.env("XDG_CONFIG_HOME", dir.join("config-home"))
        .env("XDG_RUNTIME_DIR", dir.join("runtime"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null());
}

/// `sh -c '<exports>; exec filectxd <args>'`, so that `$$` in `exports` is the daemon's pid.
/// With `listener`, the daemon gets it as fd 3 (and /dev/null as stdin).
fn filectxd_via_sh(dir: &Path, exports: &str, listener: Option<UnixListener>, args: &[&str]) -> Command {
    let redirect = if listener.is_some() { " 3<&0 </dev/null" } else { "" };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!("{exports}; exec \"$0\" \"$@\"{redirect}")).arg(bin("filectxd")).args(args);
    clean_env(&mut cmd, dir);
    if let Some(listener) = listener {
        cmd.stdin(Stdio::from(OwnedFd::from(listener)));
    }
    cmd
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// A datagram socket standing in for systemd's NOTIFY_SOCKET; remembers every message.
struct Notify {
    socket: UnixDatagram,
    path: PathBuf,
    seen: Vec<String>,
}

impl Notify {
    fn bind(dir: &Path) -> Notify {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        Notify { socket, path, seen: Vec::new() }
    }

    /// Every line (`KEY=VALUE`) received until `deadline`, or until `stop` says enough.
    fn receive_until(&mut self, deadline: Instant, mut stop: impl FnMut(&[String]) -> bool) {
        let mut buf = [0u8; 4096];
        while !stop(&self.seen) && Instant::now() < deadline {
            match self.socket.recv(&mut buf) {
                Ok(len) => {
                    let text = String::from_utf8_lossy(&buf[..len]).into_owned();
                    self.seen.extend(text.lines().map(str::to_owned));
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("receiving a notification: {e}"),
            }
        }
    }

    fn count(&self, line: &str) -> usize {
        self.seen.iter().filter(|l| *l == line).count()
    }

    /// Waits (with the usual patience) for the message `line`.
    fn expect(&mut self, line: &str, daemon: &Proc) {
        let already = self.count(line);
        self.receive_until(Instant::now() + PATIENCE, |seen| {
            seen.iter().filter(|l| *l == line).count() > already
        });
        assert!(
            self.count(line) > already,
            "no {line} within {PATIENCE:?}; got {:?}; the daemon's log:\n{}",
            self.seen,
            daemon.log()
        );
    }

    /// Collects messages for `period`.
    fn listen_for(&mut self, period: Duration) {
        self.receive_until(Instant::now() + period, |_| false);
    }
}

// ---------------------------------------------------------------------------------------------
// Socket activation

#[test]
fn an_activated_daemon_serves_the_passed_socket_and_leaves_its_file_to_systemd() {
    let dir = tempfile::tempdir().unwrap();
    let passed = dir.path().join("activated.sock");
    let own = dir.path().join("own/filectx.sock");
    let listener = UnixListener::bind(&passed).unwrap();
    let cmd = filectxd_via_sh(
        dir.path(),
        "export LISTEN_PID=$$ LISTEN_FDS=1",
        Some(listener),
        &["--socket", path_arg(&own), "--log-level", "debug"],
    );
    let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");
    daemon.wait_log("serving the socket passed by systemd");

    let mut raw = Raw::connect(&passed);
    raw.initialize(dir.path());
    let status = raw.call("daemon/status", None);
    assert_eq!(status["pid"], daemon.pid(), "{status}");
    assert_eq!(status["sessions"], 1, "{status}");
    assert!(!own.parent().unwrap().exists(), "an activated daemon bound its own --socket too");
    assert!(!daemon.log().contains("ignoring LISTEN_FDS"), "{}", daemon.log());

    daemon.signal(Signal::TERM);
    let exit = daemon.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", daemon.log());
    assert!(raw.closed(), "the open session is closed on shutdown");
    assert!(is_socket(&passed), "the daemon removed the socket file systemd owns");
    let log = daemon.log();
    assert!(log.contains("shutdown requested") && log.contains("filectxd stopped"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn listen_fds_meant_for_another_process_are_ignored() {
    // LISTEN_PID naming another process (here: the test), and LISTEN_PID missing altogether.
    // (That the daemon unsets the variables cannot be observed from outside: /proc/PID/environ
    // shows the environment it was started with, and the daemon starts no children.)
    for exports in ["export LISTEN_PID=$PPID LISTEN_FDS=1", "export LISTEN_FDS=1"] {
        let dir = tempfile::tempdir().unwrap();
        let passed = dir.path().join("activated.sock");
        let own = dir.path().join("own/filectx.sock");
        let listener = UnixListener::bind(&passed).unwrap();
        let cmd = filectxd_via_sh(
            dir.path(),
            exports,
            Some(listener),
            &["--socket", path_arg(&own), "--log-level", "debug"],
        );
        let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");
        daemon.wait_socket(&own);

        let mut raw = Raw::connect(&own);
        raw.initialize(dir.path());
        assert_eq!(raw.call("daemon/status", None)["pid"], daemon.pid(), "{exports}");
        let log = daemon.log();
        assert!(log.contains("ignoring LISTEN_FDS"), "{exports}: {log}");
        assert!(!log.contains("serving the socket passed by systemd"), "{exports}: {log}");

        daemon.signal(Signal::TERM);
        let exit = daemon.wait_exit(PATIENCE);
        assert_eq!(exit.code(), Some(0), "{exports}: {exit:?}\n{}", daemon.log());
        assert!(!own.exists(), "{exports}: the daemon left the socket it bound itself");
        assert!(is_socket(&passed), "{exports}: the daemon removed a socket file it never served");
    }
}

#[test]
fn an_activated_daemon_exits_when_idle_and_the_next_one_serves_queued_clients() {
    // What systemd does: keep the listening socket, start the service on the next connection.
    let dir = tempfile::tempdir().unwrap();
    let passed = dir.path().join("activated.sock");
    let listener = UnixListener::bind(&passed).unwrap();
    let activate = |listener: UnixListener, name: &str| {
        let cmd = filectxd_via_sh(
            dir.path(),
            "export LISTEN_PID=$$ LISTEN_FDS=1",
            Some(listener),
            &["--idle-exit", "1", "--log-level", "debug"],
        );
        Proc::spawn(cmd, dir.path(), name)
    };
    let mut first = activate(listener.try_clone().unwrap(), "first");
    let exit = first.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", first.log());
    assert!(first.log().contains("no session for the idle limit"), "{}", first.log());
    assert!(is_socket(&passed), "an idle exit removed the socket file systemd owns");

    // A client connecting now waits in the listener's queue until the next daemon takes it.
    let mut raw = Raw::connect(&passed);
    let mut second = activate(listener, "second");
    raw.initialize(dir.path());
    assert_eq!(raw.call("daemon/status", None)["pid"], second.pid());
    // With a session open the second daemon stays.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(second.running(), "exited with a session open:\n{}", second.log());
    drop(raw);
    let exit = second.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", second.log());
}

// ---------------------------------------------------------------------------------------------
// Readiness and watchdog (sd_notify)

#[test]
fn ready_once_serving_and_stopping_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(dir.path());
    let socket = dir.path().join("run/filectx.sock");
    let mut cmd = filectxd(dir.path());
    cmd.args(["--socket", path_arg(&socket), "--log-level", "debug"]).env("NOTIFY_SOCKET", &notify.path);
    let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");

    notify.expect("READY=1", &daemon);
    // Ready means serving: the socket takes connections right away, and sessions are answered.
    assert!(UnixStream::connect(&socket).is_ok(), "READY=1 before the socket accepts connections");
    let mut raw = Raw::connect(&socket);
    raw.initialize(dir.path());
    assert_eq!(raw.call("daemon/status", None)["pid"], daemon.pid());
    assert_eq!(notify.count("STOPPING=1"), 0, "{:?}", notify.seen);

    daemon.signal(Signal::TERM);
    notify.expect("STOPPING=1", &daemon);
    let exit = daemon.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", daemon.log());
    notify.listen_for(Duration::from_millis(100));
    assert_eq!(notify.count("READY=1"), 1, "{:?}", notify.seen);
    assert_eq!(notify.count("WATCHDOG=1"), 0, "watchdog pings without WATCHDOG_USEC: {:?}", notify.seen);
    assert!(!daemon.log().contains("cannot notify systemd"), "{}", daemon.log());
}

#[test]
fn watchdog_pings_when_watchdog_usec_is_set_for_the_daemon() {
    // WATCHDOG_PID naming the daemon, and WATCHDOG_PID unset: both mean "ping".
    for exports in ["export WATCHDOG_PID=$$", "unset WATCHDOG_PID"] {
        let dir = tempfile::tempdir().unwrap();
        let mut notify = Notify::bind(dir.path());
        let socket = dir.path().join("run/filectx.sock");
        let mut cmd = filectxd_via_sh(dir.path(), exports, None, &["--socket", path_arg(&socket)]);
        cmd.env("NOTIFY_SOCKET", &notify.path).env("WATCHDOG_USEC", "200000");
        let daemon = Proc::spawn(cmd, dir.path(), "daemon");

        notify.expect("READY=1", &daemon);
        // Half the 200 ms interval is 100 ms; three pings come well within the patience.
        notify.receive_until(Instant::now() + PATIENCE, |seen| {
            seen.iter().filter(|l| *l == "WATCHDOG=1").count() >= 3
        });
        assert!(
            notify.count("WATCHDOG=1") >= 3,
            "{exports}: too few WATCHDOG=1: {:?}\n{}",
            notify.seen,
            daemon.log()
        );
    }
}

#[test]
fn a_watchdog_meant_for_another_process_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(dir.path());
    let socket = dir.path().join("run/filectx.sock");
    let mut cmd =
        filectxd_via_sh(dir.path(), "export WATCHDOG_PID=$PPID", None, &["--socket", path_arg(&socket)]);
    cmd.env("NOTIFY_SOCKET", &notify.path).env("WATCHDOG_USEC", "200000");
    let daemon = Proc::spawn(cmd, dir.path(), "daemon");
    notify.expect("READY=1", &daemon);
    // Pinging would mean about ten WATCHDOG=1 in this second.
    notify.listen_for(Duration::from_secs(1));
    assert_eq!(notify.count("WATCHDOG=1"), 0, "{:?}", notify.seen);
}

#[test]
fn stopping_is_sent_on_idle_exit_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(dir.path());
    let socket = dir.path().join("run/filectx.sock");
    let mut cmd = filectxd(dir.path());
    cmd.args(["--socket", path_arg(&socket), "--idle-exit", "1"]).env("NOTIFY_SOCKET", &notify.path);
    let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");
    notify.expect("READY=1", &daemon);
    let exit = daemon.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", daemon.log());
    notify.listen_for(Duration::from_millis(100));
    assert_eq!(notify.count("STOPPING=1"), 1, "{:?}", notify.seen);
}

#[test]
#[ignore = "daemon: sd-notify 0.5 treats NOTIFY_SOCKET=@name as a file path, not an abstract socket"]
fn an_abstract_notify_socket_gets_ready() {
    use std::os::linux::net::SocketAddrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("filectx-test-notify-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut notify = Notify { socket, path: PathBuf::from(format!("@{name}")), seen: Vec::new() };
    let mut cmd = filectxd(dir.path());
    cmd.args(["--socket", path_arg(&dir.path().join("run/filectx.sock"))]).env("NOTIFY_SOCKET", &notify.path);
    let daemon = Proc::spawn(cmd, dir.path(), "daemon");
    notify.expect("READY=1", &daemon);
}

// ---------------------------------------------------------------------------------------------
// The systemd units

/// `[Section]` → key → values (a key may repeat).
type Unit = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn unit_settings(text: &str) -> Unit {
    let mut sections = Unit::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.to_owned();
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or_else(|| panic!("not key=value: {line:?}"));
        sections
            .entry(current.clone())
            .or_default()
            .entry(key.trim().to_owned())
            .or_default()
            .push(value.trim().to_owned());
    }
    sections
}

fn units_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("systemd")
}

const EXEC_START: &str = "%h/.cargo/bin/filectxd";

/// Every value of `key` in `[Service]`.
fn service_values(unit: &Unit, key: &str) -> Vec<String> {
    unit.get("Service").and_then(|s| s.get(key)).cloned().unwrap_or_default()
}

#[test]
fn the_units_have_the_settings_the_issue_requires() {
    let socket = std::fs::read_to_string(units_folder().join("filectxd.socket")).unwrap();
    let service = std::fs::read_to_string(units_folder().join("filectxd.service")).unwrap();
    let socket = unit_settings(&socket);
    let service = unit_settings(&service);
    let expect = |unit: &Unit, section: &str, key: &str, value: &str| {
        let values = unit.get(section).and_then(|s| s.get(key)).cloned().unwrap_or_default();
        assert_eq!(values, [value], "[{section}] {key}");
    };
    expect(&socket, "Socket", "ListenStream", "%t/filectx.sock");
    expect(&socket, "Socket", "SocketMode", "0600");
    expect(&socket, "Socket", "DirectoryMode", "0700");
    // The service is started by the socket: not Accept=yes (one daemon serves every connection).
    assert!(socket["Socket"].get("Accept").is_none_or(|v| v == &["no"]), "{socket:?}");
    for (key, value) in [
        ("Type", "notify"),
        ("Restart", "on-failure"),
        ("NoNewPrivileges", "yes"),
        ("RestrictAddressFamilies", "AF_UNIX"),
        ("SystemCallFilter", "@system-service"),
        ("SystemCallArchitectures", "native"),
        ("LockPersonality", "yes"),
        ("RestrictRealtime", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("UMask", "0077"),
    ] {
        expect(&service, "Service", key, value);
    }
    // Node-based language servers, which the daemon starts under this sandbox, need writable
    // executable memory (V8's JIT).
    assert!(!service["Service"].contains_key("MemoryDenyWriteExecute"), "{service:?}");
    // The daemon finds language servers where pip, uv and cargo put them.
    let path = service_values(&service, "Environment")
        .into_iter()
        .find_map(|value| value.strip_prefix("PATH=").map(str::to_owned))
        .unwrap_or_default();
    for folder in ["%h/.local/bin", "%h/.cargo/bin", "/usr/bin"] {
        assert!(path.split(':').any(|f| f == folder), "PATH={path} lacks {folder}");
    }
    // ExecStart runs the installed binary (where `cargo install` puts it), with arguments the
    // daemon accepts, and without its own --socket (the socket comes from systemd).
    let exec = &service["Service"]["ExecStart"];
    assert_eq!(exec.len(), 1, "{exec:?}");
    let args = exec[0].strip_prefix(EXEC_START).unwrap_or_else(|| panic!("{exec:?}"));
    let args: Vec<&str> = args.split_whitespace().collect();
    assert!(!args.contains(&"--socket"), "{args:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = filectxd(dir.path());
    cmd.args(&args).arg("--print-config");
    let mut check = Proc::spawn(cmd, dir.path(), "print-config");
    let exit = check.wait_exit(PATIENCE);
    assert!(exit.success(), "ExecStart's arguments {args:?} are refused: {}", check.log());
}

#[test]
fn systemd_analyze_verify_accepts_both_units_without_a_word() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = std::fs::canonicalize(bin("filectxd")).unwrap();
    let socket = dir.path().join("filectxd.socket");
    let service = dir.path().join("filectxd.service");
    std::fs::copy(units_folder().join("filectxd.socket"), &socket).unwrap();
    // verify checks that ExecStart's binary exists: point it at the one under test.
    let text = std::fs::read_to_string(units_folder().join("filectxd.service")).unwrap();
    assert!(text.contains(&format!("ExecStart={EXEC_START}")), "{text}");
    std::fs::write(&service, text.replace(EXEC_START, daemon.to_str().unwrap())).unwrap();

    // System mode: user mode needs a running user manager. It exits 0 on unknown keys and
    // similar, so any output at all is a failure.
    let mut cmd = Command::new("systemd-analyze");
    cmd.arg("verify").arg(&socket).arg(&service).current_dir(dir.path()).stdin(Stdio::null());
    let mut verify = match Proc::try_spawn(cmd, dir.path(), "verify") {
        Ok(verify) => verify,
        Err(err) if err.kind() == ErrorKind::NotFound => {
            skip("systemd-analyze is not installed (apt-get install systemd)");
            return;
        }
        Err(err) => panic!("running systemd-analyze: {err}"),
    };
    let exit = verify.wait_exit(Duration::from_secs(60));
    let (out, err) = (verify.out(), verify.log());
    assert!(exit.success() && out.is_empty() && err.is_empty(), "{exit:?}\nstdout:\n{out}\nstderr:\n{err}");
}

// ---------------------------------------------------------------------------------------------
// --idle-exit

#[test]
fn idle_exit_without_any_session() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/filectx.sock");
    let mut cmd = filectxd(dir.path());
    cmd.args(["--socket", path_arg(&socket), "--idle-exit", "1", "--log-level", "debug"]);
    let started = Instant::now();
    let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");
    let exit = daemon.wait_exit(PATIENCE);
    let lived = started.elapsed();
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", daemon.log());
    assert!(lived >= Duration::from_secs(1), "exited after {lived:?}, before the idle limit");
    let log = daemon.log();
    assert!(log.contains("listening") && log.contains("no session for the idle limit"), "{log}");
    assert!(!socket.exists(), "the idle exit left its socket file behind");
}

#[test]
fn idle_exit_waits_while_a_session_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/filectx.sock");
    let mut cmd = filectxd(dir.path());
    cmd.args(["--socket", path_arg(&socket), "--idle-exit", "1", "--log-level", "debug"]);
    let mut daemon = Proc::spawn(cmd, dir.path(), "daemon");
    daemon.wait_socket(&socket);
    let mut raw = Raw::connect(&socket);
    raw.initialize(dir.path());
    std::thread::sleep(Duration::from_millis(2500));
    assert!(daemon.running(), "exited with a session open:\n{}", daemon.log());
    wait_for_sessions(&mut raw, 1);

    drop(raw);
    let exit = daemon.wait_exit(PATIENCE);
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", daemon.log());
    assert!(daemon.log().contains("no session for the idle limit"), "{}", daemon.log());
    assert!(!socket.exists());
}

// ---------------------------------------------------------------------------------------------
// The config file and --print-config

/// Runs `cmd` to completion (bounded).
fn run(cmd: Command, dir: &Path, name: &str) -> (ExitStatus, String, String) {
    let mut proc = Proc::spawn(cmd, dir, name);
    let exit = proc.wait_exit(PATIENCE);
    (exit, proc.out(), proc.log())
}

/// `--print-config` output: key → value as written (strings keep their quotes).
fn printed_settings(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, value) =
                l.split_once(" = ").unwrap_or_else(|| panic!("not `key = value`: {l:?}\n{text}"));
            (key.to_owned(), value.to_owned())
        })
        .collect()
}

fn print_config(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> (String, BTreeMap<String, String>) {
    let mut cmd = filectxd(dir);
    cmd.args(args).arg("--print-config");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let (exit, out, err) = run(cmd, dir, "print-config");
    assert!(exit.success(), "{exit:?}\n{err}");
    assert!(err.is_empty(), "--print-config wrote to stderr: {err}");
    let settings = printed_settings(&out);
    (out, settings)
}

#[test]
fn print_config_merges_flags_the_file_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("filectx.toml");
    let from_file = dir.path().join("from-file.sock");
    std::fs::write(
        &file,
        format!(
            "max_connections = 7\nfsync = false\nlock_timeout = 2.5\nlog_level = \"warn\"\nsocket = \"{}\"\n",
            from_file.display()
        ),
    )
    .unwrap();
    let (out, got) = print_config(dir.path(), &["--config", path_arg(&file), "--max-connections", "9"], &[]);
    assert!(out.contains(&format!("# config file: {}\n", file.display())), "{out}");

    let provider = ProviderConfig::default();
    let quoted = |p: &Path| format!("\"{}\"", p.display());
    let secs = |s: f64| format!("{s:?}");
    let expected: BTreeMap<String, String> = [
        // The flag beats the file.
        ("max_connections", "9".to_owned()),
        // The file beats the defaults.
        ("fsync", "false".to_owned()),
        ("lock_timeout", "2.5".to_owned()),
        ("log_level", "\"warn\"".to_owned()),
        ("socket", quoted(&from_file)),
        // Defaults for the rest.
        ("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES.to_string()),
        ("max_batch", DEFAULT_MAX_BATCH_LEN.to_string()),
        ("max_concurrent_requests", DEFAULT_MAX_CONCURRENT_REQUESTS.to_string()),
        ("max_queued_messages", DEFAULT_MAX_QUEUED_MESSAGES.to_string()),
        // The transport's byte budgets and slow-client deadlines.
        ("max_batch_response_bytes", filectx_daemon::config::DEFAULT_MAX_BATCH_RESPONSE_BYTES.to_string()),
        ("max_queued_bytes", filectx_daemon::config::DEFAULT_MAX_QUEUED_BYTES.to_string()),
        ("max_total_queued_bytes", filectx_daemon::config::DEFAULT_MAX_TOTAL_QUEUED_BYTES.to_string()),
        ("initialize_timeout", secs(filectx_daemon::config::DEFAULT_INITIALIZE_TIMEOUT_SECS as f64)),
        ("frame_timeout", secs(filectx_daemon::config::DEFAULT_FRAME_TIMEOUT_SECS as f64)),
        ("max_partial_frame_bytes", filectx_daemon::config::DEFAULT_MAX_PARTIAL_FRAME_BYTES.to_string()),
        ("max_edit_bytes", provider.max_edit_bytes.to_string()),
        ("max_cached_files", provider.max_cached_files.to_string()),
        ("max_cache_bytes", provider.max_index_bytes.to_string()),
        ("max_mapped_bytes", provider.max_mapped_bytes.to_string()),
        ("max_open_files", provider.max_open_files.to_string()),
        ("cache_idle", secs(provider.idle_release.as_secs_f64())),
        ("shutdown_grace", secs(DEFAULT_SHUTDOWN_GRACE_SECS as f64)),
        ("idle_exit", secs(0.0)),
        ("allowed_roots", "[]".to_owned()),
        ("deny_read", "[]".to_owned()),
        ("deny_write", "[\"**/.git/**\"]".to_owned()),
        ("refuse_multi_link_writes", "false".to_owned()),
        ("max_hash_bytes", provider.max_hash_bytes.to_string()),
        ("file_slots", filectx_daemon::config::default_file_slots().to_string()),
        ("max_window_bytes", provider.max_window_bytes.to_string()),
        ("read_max_bytes", filectx_protocol::tools::DEFAULT_READ_MAX_BYTES.to_string()),
        // Owners and resume.
        ("max_owners", filectx_daemon::session::owners::DEFAULT_MAX_OWNERS.to_string()),
        ("max_roots", filectx_daemon::session::DEFAULT_MAX_ROOTS.to_string()),
        ("resume_grace", secs(filectx_daemon::session::resume::DEFAULT_RESUME_GRACE_SECS as f64)),
        ("max_parked_sessions", filectx_daemon::session::resume::DEFAULT_MAX_PARKED_SESSIONS.to_string()),
        ("max_parked_bytes", filectx_daemon::session::resume::DEFAULT_MAX_PARKED_BYTES.to_string()),
        // What sessions remember, in bytes.
        (
            "max_session_observed_bytes",
            filectx_daemon::context::ledger::DEFAULT_MAX_SESSION_OBSERVED_BYTES.to_string(),
        ),
        ("max_observed_bytes", filectx_daemon::context::ledger::DEFAULT_MAX_OBSERVED_BYTES.to_string()),
        ("max_snapshot_bytes", provider.max_snapshot_bytes.to_string()),
        ("max_snapshot_file_bytes", provider.max_snapshot_file_bytes.to_string()),
        ("max_search_cache_bytes", provider.max_search_cache_bytes.to_string()),
        // The search index, in its default folder under the test's XDG_STATE_HOME.
        ("search_index_dir", quoted(&dir.path().join("state/filectx/index"))),
        ("max_search_index_bytes", (256u64 << 20).to_string()),
        ("max_watches", provider.max_watches.to_string()),
        // Write-intent gates.
        ("no_gates", "false".to_owned()),
        ("max_gate_intents", filectx_daemon::config::Config::default().max_gate_intents.to_string()),
        ("gate_sessions", "\"token\"".to_owned()),
        // Searches.
        ("search_slots", filectx_daemon::config::default_search_slots().to_string()),
        ("search_timeout", secs(filectx_daemon::config::DEFAULT_SEARCH_TIMEOUT_SECS as f64)),
        ("search_regex_bytes", filectx_daemon::config::DEFAULT_SEARCH_REGEX_BYTES.to_string()),
        // The journal, in its default folder under the test's XDG_STATE_HOME.
        ("journal", "true".to_owned()),
        ("journal_dir", quoted(&dir.path().join("state/filectx/journal"))),
        ("journal_max_bytes", (1u64 << 30).to_string()),
        ("journal_max_age", secs(7.0 * 86_400.0)),
        ("journal_max_file_bytes", (16u64 << 20).to_string()),
        // The language servers: none of the owner's, the built-ins looked for on PATH.
        ("language_server", "[]".to_owned()),
        ("builtin_language_servers", "true".to_owned()),
        ("diagnostics_wait", secs(3.0)),
        ("diagnostics_wait_starting", secs(20.0)),
        ("diagnostics_settle", secs(0.1)),
        ("diagnostics_warnings", "false".to_owned()),
        ("language_server_idle", secs(600.0)),
        ("max_language_servers", "4".to_owned()),
        ("language_server_memory", (4u64 << 30).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(got, expected, "{out}");
    assert!(!from_file.exists(), "--print-config started serving");

    // No config file at all: defaults, and the default socket under XDG_RUNTIME_DIR.
    let (out, got) = print_config(dir.path(), &[], &[]);
    assert!(out.contains("# config file: none\n"), "{out}");
    assert_eq!(got["socket"], quoted(&dir.path().join("runtime/filectx.sock")), "{out}");
    assert_eq!(got["max_connections"], DEFAULT_MAX_CONNECTIONS.to_string(), "{out}");
    assert_eq!(got["fsync"], "true", "{out}");
    assert!(!got.contains_key("log_level"), "{out}");
    assert_eq!(got.len(), expected.len() - 1, "{out}");

    // --no-fsync beats `fsync = true`.
    std::fs::write(&file, "fsync = true\n").unwrap();
    let (out, got) = print_config(dir.path(), &["--config", path_arg(&file), "--no-fsync"], &[]);
    assert_eq!(got["fsync"], "false", "{out}");
}

#[test]
fn the_config_file_is_found_through_filectx_config_and_xdg_config_home() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("named.toml");
    std::fs::write(&named, "max_batch = 11\n").unwrap();
    let (out, got) = print_config(dir.path(), &[], &[(CONFIG_ENV, &named)]);
    assert_eq!(got["max_batch"], "11", "{out}");
    assert!(out.contains(&format!("# config file: {}\n", named.display())), "{out}");

    // $XDG_CONFIG_HOME/filectx/config.toml when nothing names a file.
    let default = dir.path().join("config-home/filectx/config.toml");
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    std::fs::write(&default, "max_batch = 12\n").unwrap();
    let (out, got) = print_config(dir.path(), &[], &[]);
    assert_eq!(got["max_batch"], "12", "{out}");
    assert!(out.contains(&format!("# config file: {}\n", default.display())), "{out}");

    // A named file replaces the default one; --config beats FILECTX_CONFIG.
    let (out, got) = print_config(dir.path(), &[], &[(CONFIG_ENV, &named)]);
    assert_eq!(got["max_batch"], "11", "{out}");
    let flag = dir.path().join("flag.toml");
    std::fs::write(&flag, "max_batch = 13\n").unwrap();
    let (out, got) = print_config(dir.path(), &["--config", path_arg(&flag)], &[(CONFIG_ENV, &named)]);
    assert_eq!(got["max_batch"], "13", "{out}");
}

/// Starts the daemon (and, separately, `--print-config`) with `config`; both must exit 1 with a
/// message containing each of `names`, before touching the socket.
fn refused(config_text: &str, names: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config_text).unwrap();
    let socket = dir.path().join("run/filectx.sock");
    // --print-config first: it fails fast where the daemon would go on serving.
    for print in [true, false] {
        let mut cmd = filectxd(dir.path());
        cmd.args(["--config", path_arg(&file), "--socket", path_arg(&socket)]).env("RUST_BACKTRACE", "1");
        if print {
            cmd.arg("--print-config");
        }
        let (exit, out, err) = run(cmd, dir.path(), "daemon");
        let what =
            format!("{config_text:?} (print-config: {print}): {exit:?}\nstdout:\n{out}\nstderr:\n{err}");
        assert_eq!(exit.code(), Some(1), "{what}");
        for name in names {
            assert!(err.contains(name), "the message does not name {name:?}: {what}");
        }
        assert!(!err.contains("panicked") && !err.contains("backtrace"), "{what}");
        assert!(out.is_empty(), "{what}");
        assert!(!socket.parent().unwrap().exists(), "{what}: the daemon went on to bind");
    }
}

#[test]
fn a_bad_config_file_is_an_error_naming_the_key() {
    refused("max_conections = 7\n", &["max_conections", "config.toml"]);
    refused("max_connections = \"many\"\n", &["max_connections", "config.toml"]);
    refused("fsync = \"no\"\n", &["fsync"]);
    refused("idle_exit = true\n", &["idle_exit"]);
    refused("socket = 5\n", &["socket"]);
    refused("max_batch = 0\n", &["max_batch"]);
    refused("lock_timeout = -1.0\n", &["lock_timeout"]);
    refused("shutdown_grace = 1e9\n", &["shutdown_grace"]);
    // Not TOML at all: the file and the line.
    refused("max_connections = \n", &["config.toml", "line 1"]);
}

#[test]
fn a_missing_config_file_that_was_named_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let socket = dir.path().join("run/filectx.sock");
    for via_env in [false, true] {
        for print in [false, true] {
            let mut cmd = filectxd(dir.path());
            cmd.args(["--socket", path_arg(&socket)]);
            if via_env {
                cmd.env(CONFIG_ENV, &missing);
            } else {
                cmd.args(["--config", path_arg(&missing)]);
            }
            if print {
                cmd.arg("--print-config");
            }
            let (exit, out, err) = run(cmd, dir.path(), "daemon");
            let what = format!("env: {via_env}, print: {print}: {exit:?}\nstdout:\n{out}\nstderr:\n{err}");
            assert_eq!(exit.code(), Some(1), "{what}");
            assert!(err.contains(missing.to_str().unwrap()), "{what}");
            assert!(!err.contains("panicked"), "{what}");
            assert!(!socket.parent().unwrap().exists(), "{what}");
        }
    }
}

#[test]
fn a_bad_flag_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = filectxd(dir.path());
    cmd.args(["--max-connections", "0", "--print-config"]);
    let (exit, _, err) = run(cmd, dir.path(), "daemon");
    assert_eq!(exit.code(), Some(2), "{exit:?}\n{err}");
    assert!(err.contains("--max-connections"), "{err}");
}

#[test]
fn a_too_small_max_frame_bytes_in_the_file_is_an_error() {
    refused("max_frame_bytes = 10\n", &["max_frame_bytes"]);
}

#[test]
fn a_bad_log_level_in_the_file_is_an_error_naming_it() {
    refused("log_level = \"info,x=[[\"\n", &["log_level", "config.toml"]);
}
