//! The daemon as a process: signals, one daemon per socket, stale sockets, the connection cap,
//! peers of another uid, many idle sessions, and clients that never read.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use filectx_tests::skip::{NOBODY, can_play_another_user};
use filectx_tests::{Daemon, PATIENCE, Raw, bin, error_code, test_name, wait_for_sessions};
use rustix::process::Signal;
use serde_json::json;

#[test]
fn sigterm_and_sigint_stop_cleanly_and_remove_the_socket() {
    for signal in [Signal::TERM, Signal::INT] {
        let mut daemon = Daemon::start(&[]);
        let mut idle = daemon.session();
        daemon.signal(signal);
        let status = daemon.wait_exit();
        assert_eq!(status.code(), Some(0), "{signal:?}: {status:?}\n{}", daemon.log_text());
        assert!(!daemon.socket.exists(), "socket file left behind after {signal:?}");
        assert!(idle.closed(), "open sessions are closed on shutdown");
        let log = daemon.log_text();
        assert!(log.contains("shutdown requested") && log.contains("filectxd stopped"), "{log}");
    }
}

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let daemon = Daemon::start(&[]);
    let log = daemon.dir.path().join("second.log");
    let mut second = Daemon::spawn(&daemon.socket, &log, &[]);
    let status = second.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let message = std::fs::read_to_string(&log).unwrap();
    assert!(
        message.contains("another filectxd is already serving")
            && message.contains(&daemon.pid().to_string()),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");
    // The first daemon still owns and serves its socket.
    wait_for_sessions(&mut daemon.session(), 1);
}

#[test]
fn a_stale_socket_from_a_crashed_daemon_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("filectx.sock");
    drop(UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let daemon = Daemon::start_at(dir, socket, &[]);
    wait_for_sessions(&mut daemon.session(), 1);
    assert!(daemon.log_text().contains("removing stale socket"));

    // And after a real crash (SIGKILL: no cleanup at all) a new daemon starts too.
    let mut daemon = daemon;
    daemon.signal(Signal::KILL);
    daemon.wait_exit();
    assert!(daemon.socket.exists());
    let log = daemon.dir.path().join("restarted.log");
    let mut restarted = Daemon::spawn(&daemon.socket, &log, &[]);
    let deadline = Instant::now() + PATIENCE;
    let mut raw = loop {
        if let Ok(stream) = std::os::unix::net::UnixStream::connect(&daemon.socket) {
            drop(stream);
            break Raw::connect(&daemon.socket);
        }
        assert!(Instant::now() < deadline, "{}", std::fs::read_to_string(&log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(10));
    };
    raw.initialize(daemon.dir.path());
    // The readiness probe's own connection may still be counted for a moment after it closed.
    wait_for_sessions(&mut raw, 1);
    restarted.kill().unwrap();
    restarted.wait().unwrap();
}

#[test]
fn socket_and_its_folder_are_private() {
    let daemon = Daemon::start(&[]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&daemon.socket), 0o600);
    assert_eq!(mode(daemon.socket.parent().unwrap()), 0o700);
}

#[test]
fn the_connection_over_the_cap_is_refused_clearly() {
    let daemon = Daemon::start(&["--max-connections", "3"]);
    // The readiness probe's connection holds a slot until its task has ended: wait for that.
    let mut first = daemon.session();
    wait_for_sessions(&mut first, 1);
    let mut sessions: Vec<Raw> = vec![first, daemon.session(), daemon.session()];
    let mut over = Raw::connect(&daemon.socket);
    let refusal = over.recv();
    assert_eq!(error_code(&refusal), -32009, "{refusal}");
    assert!(refusal["error"]["message"].as_str().unwrap().contains("--max-connections"));
    assert!(over.closed());
    // Closing one session frees its slot.
    sessions.pop();
    let deadline = Instant::now() + PATIENCE;
    let mut probe = loop {
        let mut raw = Raw::connect(&daemon.socket);
        raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"roots": [daemon.dir.path()]}}));
        match raw.recv_opt() {
            Some(response) if response.get("result").is_some() => break raw,
            _ => assert!(Instant::now() < deadline, "the freed slot was never reusable"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = probe.call("daemon/status", None);
    assert_eq!(status["maxSessions"], 3);
    assert!(status["refusedConnections"].as_u64().unwrap() >= 1);
}

/// Set, to the daemon's socket, only in the environment of [`foreign_peer`] run as another user.
const FOREIGN_SOCKET_ENV: &str = "FILECTX_TEST_FOREIGN_SOCKET";

/// Not a test of its own: the raw client of another uid that
/// [`a_peer_of_another_uid_is_refused_and_logged`] runs (this binary, as uid [`NOBODY`]). It sends
/// `initialize` and fails if any byte comes back before the daemon hangs up. Our own CLI cannot
/// play this part: it refuses a daemon of another user before sending anything.
#[test]
fn foreign_peer() {
    let Some(socket) = std::env::var_os(FOREIGN_SOCKET_ENV) else { return };
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"roots": ["/"]}});
    let body = body.to_string();
    // The daemon may hang up while this is being written: only what comes back matters.
    let _ = write!(stream, "Content-Length: {}\r\n\r\n{body}", body.len());
    let mut answer = Vec::new();
    match std::io::Read::read_to_end(&mut stream, &mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("reading from the daemon: {e}"),
    }
    assert!(answer.is_empty(), "a foreign uid was served: {}", String::from_utf8_lossy(&answer));
}

#[test]
fn a_peer_of_another_uid_is_refused_and_logged() {
    if !can_play_another_user() {
        return;
    }
    let daemon = Daemon::start(&[]);
    // Open the path up, as a misconfiguration would: the uid check must still refuse.
    let open = |p: &std::path::Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(daemon.dir.path(), 0o755);
    open(daemon.socket.parent().unwrap(), 0o755);
    open(&daemon.socket, 0o666);
    // Copies of the CLI and of this test binary that uid NOBODY can execute (the build folder
    // may be private), made by `cp`: no descriptor of them is ever open in this process, where
    // another test's concurrent fork could inherit it and make their exec fail with ETXTBSY.
    let tools = tempfile::tempdir().unwrap();
    open(tools.path(), 0o755);
    let cli = tools.path().join("filectx");
    let peer = tools.path().join("foreign-peer");
    for (from, to) in [(bin("filectx"), &cli), (std::env::current_exe().unwrap(), &peer)] {
        let status = Command::new("cp").arg(&from).arg(to).status().unwrap();
        assert!(status.success(), "cp {} {}: {status}", from.display(), to.display());
        open(to, 0o755);
    }

    // Our CLI, run by another user, refuses this daemon by itself (it is not that user's) and
    // never reaches it.
    let out = Command::new(&cli)
        .args(["--no-autostart", "--socket"])
        .arg(&daemon.socket)
        .arg("status")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("belongs to uid 0, not to you (uid {NOBODY})")),
        "{out:?}"
    );

    // A raw client of another uid does reach it, and is refused there.
    let out = Command::new(&peer)
        .args(["--exact", &test_name(module_path!(), "foreign_peer"), "--nocapture", "--test-threads=1"])
        .env(FOREIGN_SOCKET_ENV, &daemon.socket)
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // `1 passed`: the filter named the peer (a test name that matched nothing would pass too).
    assert!(out.status.success() && stdout.contains(" 1 passed;"), "{stdout}");
    let deadline = Instant::now() + PATIENCE;
    while !daemon.log_text().contains("refused connection from another user") {
        assert!(Instant::now() < deadline, "refusal not logged:\n{}", daemon.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(daemon.log_text().contains(&format!("peer uid {NOBODY}")));
    assert_eq!(daemon.status()["refusedConnections"], 1);
}

#[test]
fn five_hundred_idle_sessions_are_held_cheaply() {
    let daemon = Daemon::start(&[]);
    let rss_before = daemon.rss_kib();
    let idle: Vec<Raw> = (0..500).map(|_| daemon.session()).collect();
    let mut probe = daemon.session();
    let started = Instant::now();
    let status = probe.call("daemon/status", None);
    assert_eq!(status["sessions"], 501);
    assert!(started.elapsed() < PATIENCE);
    let grown = daemon.rss_kib().saturating_sub(rss_before);
    // Generous: a few KiB per idle session is expected; this catches per-session megabytes.
    assert!(grown < 64 * 1024, "500 idle sessions cost {grown} KiB");
    drop(idle);
    wait_for_sessions(&mut probe, 1);
}

#[test]
fn a_client_that_never_reads_stalls_only_itself() {
    let daemon = Daemon::start(&[]);
    let mut flooder = daemon.session();
    let rss_before = daemon.rss_kib();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status"}).to_string();
    let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len()).repeat(1000);
    flooder.stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // Write without ever reading, until the daemon stops taking bytes.
    let mut written = 0usize;
    let stalled = loop {
        match flooder.stream.write_all(frame.as_bytes()) {
            Ok(()) => written += 1000,
            Err(_) => break true,
        }
        if written >= 1_000_000 {
            break false;
        }
    };
    assert!(stalled, "the daemon kept reading {written} requests whose answers nobody reads");
    // Everyone else is served promptly, and the daemon did not buffer the flood.
    let mut other = daemon.session();
    assert!(other.call("daemon/status", None)["sessions"].as_u64().unwrap() >= 2);
    let grown = daemon.rss_kib().saturating_sub(rss_before);
    assert!(grown < 32 * 1024, "RSS grew by {grown} KiB for a client that never reads");
    drop(flooder);
    wait_for_sessions(&mut other, 1);
}
