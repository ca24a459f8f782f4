//! An impostor daemon run by another user: the library, the CLI (`read`, `write`, `status`,
//! `mcp`) and autostart refuse it — a socket in a folder another user owns, in a folder of ours
//! that others may write (sticky or not), or served by a process of another uid in a folder that
//! passes — and the impostor never receives a message (no roots, no contents). Autostart starts
//! nothing in such a folder, and its readiness probe refuses a socket someone else serves. Our
//! own daemon is still trusted.
//!
//! The impostor is this very test binary, run again as uid/gid 65534 (`nobody`) with
//! [`IMPOSTOR_SOCKET_ENV`] set, so that [`impostor_daemon`] serves instead of returning at once.
//! It binds the socket, answers every request with an `IMPOSTOR` text and records every
//! connection and message in a file. Running a process as another user (or giving it a
//! folder) needs root, which CI has: without it these tests are skipped and recorded (see
//! [`can_play_another_user`]), except [`our_own_daemon_is_trusted`], which needs no other user.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use filectx_client::{Client, ClientError, SpawnOptions, Untrusted};
use filectx_protocol::InitializeParams;
use serde_json::{Value, json};

use crate::support::skip::{NOBODY, can_play_another_user};
use crate::support::{self, TestResult, daemon_bin, text, write_script};

/// Set (to the socket path) in the impostor's environment only.
const IMPOSTOR_SOCKET_ENV: &str = "FILECTX_TEST_IMPOSTOR_SOCKET";

/// Where the impostor records what it sees, one line per event.
const IMPOSTOR_RECORD_ENV: &str = "FILECTX_TEST_IMPOSTOR_RECORD";

/// What the impostor shows as any file's content.
const IMPOSTOR_TEXT: &str = "IMPOSTOR";

/// How long a test waits for anything that should happen promptly.
const PATIENCE: Duration = Duration::from_secs(10);

/// The CLI under test.
const CLI: &str = env!("CARGO_BIN_EXE_filectx");

// ---------------------------------------------------------------------------------------------
// The impostor
// ---------------------------------------------------------------------------------------------

/// Not a test of its own: the impostor daemon, when a test runs this binary as another user
/// with [`IMPOSTOR_SOCKET_ENV`] set; otherwise it returns at once. It binds the socket, writes
/// `ready` to its record, then serves every connection: `connected`, `message <json>` for each
/// message received (answered with [`IMPOSTOR_TEXT`] as content), `closed` at its end.
#[test]
fn impostor_daemon() -> TestResult {
    let (Some(socket), Some(record)) =
        (std::env::var_os(IMPOSTOR_SOCKET_ENV), std::env::var_os(IMPOSTOR_RECORD_ENV))
    else {
        return Ok(());
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run_impostor(Path::new(&socket), Path::new(&record)))
}

/// The impostor's accept loop; returns only on failure.
async fn run_impostor(socket: &Path, record: &Path) -> TestResult {
    let listener = tokio::net::UnixListener::bind(socket)?;
    // Connectable by anyone: it is the folder rule and the peer check that must stop the
    // client, not the socket's mode.
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o777))?;
    note(record, "ready")?;
    loop {
        let (stream, _) = listener.accept().await?;
        let record = record.to_owned();
        tokio::spawn(async move {
            let _ = serve_impostor(stream, &record).await;
            let _ = note(&record, "closed");
        });
    }
}

/// Serves one connection of the impostor.
async fn serve_impostor(stream: tokio::net::UnixStream, record: &Path) -> TestResult {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_util::codec::{FramedRead, FramedWrite};

    note(record, "connected")?;
    let (read, write) = stream.into_split();
    let mut reader = FramedRead::new(read, filectx_protocol::LspCodec::default());
    let mut writer = FramedWrite::new(write, filectx_protocol::LspCodec::default());
    while let Some(frame) = reader.next().await {
        let filectx_protocol::Frame::Message(body) = frame? else { continue };
        let message: Value = serde_json::from_slice(&body)?;
        note(record, &format!("message {message}"))?;
        let Some(id) = message.get("id") else { continue };
        let result = match message["method"].as_str() {
            Some("initialize") => serde_json::to_value(support::initialize_result())?,
            _ => serde_json::to_value(support::tool_result(IMPOSTOR_TEXT))?,
        };
        writer.send(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()).await?;
    }
    Ok(())
}

/// [`impostor_daemon`]'s name as libtest knows it, for `--exact`: its module path without the
/// crate (`impostor::impostor_daemon`).
fn impostor_test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, module)| module);
    format!("{module}::impostor_daemon")
}

/// Appends one line to the record.
fn note(record: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(record)?;
    writeln!(file, "{line}")
}

/// A running impostor; killed when dropped.
struct Impostor {
    child: Child,
    socket: PathBuf,
    record: PathBuf,
}

impl Impostor {
    /// Runs this binary as uid/gid [`NOBODY`] serving `socket`, recording in `record` (both in
    /// folders that uid can write), and waits until it listens.
    fn start(socket: &Path, record: &Path) -> TestResult<Self> {
        let mut exe = std::env::current_exe()?;
        if !reachable_by_others(&exe)? {
            // The build folder is private: run a copy beside the record instead, made by `cp`
            // so that no descriptor of it is ever open in this process (another test's
            // concurrent fork could inherit it and make the exec fail with ETXTBSY).
            let copy = record.with_file_name("impostor-exe");
            if !copy.exists() {
                let status = Command::new("cp").arg(&exe).arg(&copy).status()?;
                if !status.success() {
                    return Err(format!("cp {} {}: {status}", exe.display(), copy.display()).into());
                }
                std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
            }
            exe = copy;
        }
        let child = Command::new(&exe)
            .args(["--exact", &impostor_test_name(), "--nocapture", "--test-threads=1"])
            .env(IMPOSTOR_SOCKET_ENV, socket)
            .env(IMPOSTOR_RECORD_ENV, record)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .uid(NOBODY)
            .gid(NOBODY)
            .spawn()
            .map_err(|e| format!("cannot run the impostor as uid {NOBODY}: {e}"))?;
        let mut impostor = Self { child, socket: socket.to_owned(), record: record.to_owned() };
        impostor.wait_for("it to listen", |lines| lines.iter().any(|l| l == "ready"))?;
        Ok(impostor)
    }

    /// The record's lines so far.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.record).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// Every message the impostor received.
    fn messages(&self) -> Vec<String> {
        self.lines().into_iter().filter(|line| line.starts_with("message ")).collect()
    }

    /// How many connections it accepted, and how many of them ended.
    fn connections(&self) -> (usize, usize) {
        let lines = self.lines();
        (lines.iter().filter(|l| *l == "connected").count(), lines.iter().filter(|l| *l == "closed").count())
    }

    /// Waits until the record satisfies `done`; fails if the impostor died or it took too long.
    fn wait_for(&mut self, what: &str, done: impl Fn(&[String]) -> bool) -> TestResult {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if done(&self.lines()) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("the impostor exited ({status}) before {what}").into());
            }
            if Instant::now() > deadline {
                return Err(format!("timed out waiting for {what}; record: {:?}", self.lines()).into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the impostor has seen `count` connections come and go, so that anything a
    /// client sent on them is in the record.
    fn wait_connections(&mut self, count: usize) -> TestResult {
        self.wait_for(&format!("{count} connections to end"), |lines| {
            let connected = lines.iter().filter(|l| *l == "connected").count();
            let closed = lines.iter().filter(|l| *l == "closed").count();
            connected == count && closed == count
        })
    }

    /// Shows that the impostor works, so that its silent record means something: a raw client
    /// that skips the checks gets its answer, and its message (with the roots) is recorded.
    fn prove_live(&mut self) -> TestResult {
        let before = self.messages().len();
        let mut stream = std::os::unix::net::UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"roots": ["/secret-root"]}})
        .to_string();
        write!(stream, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        let mut answer = [0u8; 64];
        let read = stream.read(&mut answer)?;
        assert!(answer[..read].starts_with(b"Content-Length: "), "{:?}", &answer[..read]);
        self.wait_for("the raw message", |lines| {
            lines.iter().filter(|l| l.starts_with("message ")).count() > before
        })?;
        let messages = self.messages();
        assert!(messages.last().is_some_and(|m| m.contains("/secret-root")), "{messages:?}");
        Ok(())
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `exe` and every folder above it can be reached and run by any user.
fn reachable_by_others(exe: &Path) -> std::io::Result<bool> {
    if std::fs::metadata(exe)?.mode() & 0o005 != 0o005 {
        return Ok(false);
    }
    for folder in exe.ancestors().skip(1) {
        if std::fs::metadata(folder)?.mode() & 0o001 == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// The scene
// ---------------------------------------------------------------------------------------------

/// A temp folder under `/tmp` that uid [`NOBODY`] may enter, with: `theirs/` (owned by
/// [`NOBODY`], mode 0755; the impostor's record lives there), `ours/` (ours, 0700), `work/` (the
/// CLI's current folder and session root) and `bin/` (scripts standing in for the daemon).
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    /// The scene, `theirs/` included; `None` when this process cannot play another user (the
    /// test is then skipped, see [`can_play_another_user`], and returns at once).
    fn with_another_user() -> TestResult<Option<Self>> {
        if !can_play_another_user() {
            return Ok(None);
        }
        let scene = Self::ours_only()?;
        let theirs = scene.theirs();
        std::fs::create_dir(&theirs)?;
        std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY))?;
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755))?;
        Ok(Some(scene))
    }

    /// The scene without `theirs/`, for a test that needs no other user (nor root).
    fn ours_only() -> TestResult<Self> {
        let dir = tempfile::Builder::new().prefix("filectx-impostor-").tempdir_in("/tmp")?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let scene = Self { dir };
        for (name, mode) in [("ours", 0o700), ("work", 0o700), ("bin", 0o755)] {
            let path = scene.path(name);
            std::fs::create_dir(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
        std::fs::write(scene.path("work/notes.txt"), "the real content\n")?;
        Ok(scene)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn theirs(&self) -> PathBuf {
        self.path("theirs")
    }

    /// A folder of ours with `mode`, which the impostor (uid 65534) may write when `mode` lets
    /// others write.
    fn our_folder(&self, name: &str, mode: u32) -> TestResult<PathBuf> {
        let path = self.path(name);
        std::fs::create_dir(&path)?;
        // Set explicitly: the umask would have cut the write bits.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        Ok(path)
    }

    /// Starts the impostor on `socket`, recording in `theirs/record`.
    fn impostor(&self, socket: &Path) -> TestResult<Impostor> {
        Impostor::start(socket, &self.theirs().join("record"))
    }

    /// A stand-in for the daemon binary: a script that appends its arguments to `started` (and
    /// then runs `then`), so a test can tell whether autostart ran it.
    fn daemon_script(&self, then: &str) -> TestResult<(PathBuf, PathBuf)> {
        let script = self.path("bin/filectxd");
        let started = self.path("started");
        write_script(&script, &format!("echo \"$@\" >> '{}'\n{then}", started.display()))?;
        Ok((script, started))
    }

    /// Runs the CLI in `work/`, rooted there, with `args` after `--socket SOCKET`; autostart
    /// (when not turned off by `args`) would run `daemon`.
    fn filectx(&self, socket: &Path, daemon: Option<&Path>, args: &[&str]) -> TestResult<Output> {
        let mut command = Command::new(CLI);
        command
            .arg("--socket")
            .arg(socket)
            .args(args)
            .current_dir(self.path("work"))
            .env_remove("FILECTX_SOCKET")
            .env_remove("FILECTX_NO_AUTOSTART")
            .env("XDG_STATE_HOME", self.path("state"))
            .env("FILECTX_DAEMON", daemon.map_or_else(|| self.path("bin/none"), Path::to_owned))
            .stdin(Stdio::null());
        Ok(command.output()?)
    }
}

fn params(root: &Path) -> InitializeParams {
    InitializeParams::new(vec![root.display().to_string()])
}

/// The reason of an [`ClientError::UntrustedSocket`] for `socket`, or a failure naming what came
/// instead.
fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>, socket: &Path) -> TestResult<Untrusted> {
    match result {
        Err(ClientError::UntrustedSocket { socket: refused, reason }) => {
            assert_eq!(refused, socket);
            Ok(reason)
        }
        other => Err(format!("expected the socket to be refused, got {other:?}").into()),
    }
}

/// Asserts that the CLI refused the socket: exit 5, the message on stderr with `needles`, and
/// nothing of the impostor's on stdout.
fn assert_cli_refused(out: &Output, needles: &[&str]) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(stderr.contains("refusing the socket "), "{stderr}");
    assert!(stderr.contains("--socket PATH or FILECTX_SOCKET"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} missing from {stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(!text(&out.stdout).contains(IMPOSTOR_TEXT), "{out:?}");
}

/// Every way the client connects, against `socket`: `Client::connect`,
/// `Client::connect_session` (with roots), `Client::connect_or_spawn` (whose stand-in daemon
/// must not run), and the CLI's `read`, `write`, `status` (autostart off) and `mcp`. Each must
/// be refused with a reason `check` accepts; the CLI's message must hold `needles`. Returns how
/// many connection attempts that was (each reaches the socket when only the peer check stops
/// it).
async fn every_client_refuses(
    scene: &Scene,
    socket: &Path,
    check: impl Fn(&Untrusted) -> bool,
    needles: &[&str],
) -> TestResult<usize> {
    let work = scene.path("work");
    let reason = refusal(Client::connect(socket).await, socket)?;
    assert!(check(&reason), "{reason:?}");
    let reason = refusal(Client::connect_session(socket, params(&work)).await, socket)?;
    assert!(check(&reason), "{reason:?}");

    let (daemon, started) = scene.daemon_script("")?;
    let options = SpawnOptions::default().daemon(&daemon).log(scene.path("state/filectxd.log"));
    let reason = refusal(Client::connect_or_spawn(socket, options).await, socket)?;
    assert!(check(&reason), "{reason:?}");
    assert!(!started.exists(), "autostart must start nothing at a refused socket");

    let out = scene.filectx(socket, Some(&daemon), &["read", "notes.txt"])?;
    assert_cli_refused(&out, needles);
    let out = scene.filectx(socket, Some(&daemon), &["write", "notes.txt", "--content", "secret"])?;
    assert_cli_refused(&out, needles);
    let out = scene.filectx(socket, None, &["--no-autostart", "status"])?;
    assert_cli_refused(&out, needles);
    let out = scene.filectx(socket, Some(&daemon), &["mcp", "--root", &work.display().to_string()])?;
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(text(&out.stderr).starts_with("filectx mcp: refusing the socket "), "{out:?}");
    assert!(!started.exists(), "the CLI's autostart must start nothing at a refused socket");
    assert_eq!(std::fs::read_to_string(work.join("notes.txt"))?, "the real content\n");
    // Library: connect, connect_session, connect_or_spawn; CLI: read, write, status, mcp.
    Ok(7)
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// The impostor binds in a folder it owns (say, `/tmp/filectx-$UID` made before we were
/// there): every client refuses on the folder's owner, without even connecting.
#[tokio::test]
async fn a_socket_in_another_users_folder_is_refused() -> TestResult {
    let Some(scene) = Scene::with_another_user()? else { return Ok(()) };
    let socket = scene.theirs().join("filectx.sock");
    let mut impostor = scene.impostor(&socket)?;
    every_client_refuses(
        &scene,
        &socket,
        |reason| matches!(reason, Untrusted::FolderNotOurs { owner: NOBODY, .. }),
        &[&format!("belongs to uid {NOBODY}, not to you (uid 0)"), "remove the folder"],
    )
    .await?;
    assert_eq!(impostor.connections(), (0, 0), "nobody even connected: {:?}", impostor.lines());
    impostor.prove_live()
}

/// A folder of ours that others may write — sticky or not — lets the impostor put its socket
/// there: refused on the folder's mode, without connecting.
#[tokio::test]
async fn a_socket_in_a_folder_others_can_write_is_refused_sticky_or_not() -> TestResult {
    let Some(scene) = Scene::with_another_user()? else { return Ok(()) };
    for (name, mode) in [("open", 0o777), ("sticky", 0o1777), ("group", 0o770)] {
        let folder = scene.our_folder(name, mode)?;
        // uid NOBODY cannot write a 0770 folder of root's: bind there while it is open, as
        // anyone could have, then close it to the group-only mode.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777))?;
        let socket = folder.join("filectx.sock");
        let mut impostor = scene.impostor(&socket)?;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode))?;
        every_client_refuses(
            &scene,
            &socket,
            |reason| matches!(reason, Untrusted::FolderWritableByOthers { mode: m, .. } if *m == mode),
            &[&format!("has mode {mode:o}"), &format!("chmod go-w {}", folder.display())],
        )
        .await?;
        assert_eq!(impostor.connections(), (0, 0), "{name}: {:?}", impostor.lines());
        impostor.prove_live()?;
        drop(impostor);
        std::fs::remove_file(scene.theirs().join("record"))?;
    }
    Ok(())
}

/// The folder passes (ours, 0700), but the socket in it is served by another uid (it was moved
/// there, as a race on a folder higher up could do): every client connects, reads the peer's
/// uid, and hangs up without sending a byte. The impostor sees the connections and no message.
#[tokio::test]
async fn a_socket_another_user_serves_is_refused_after_connecting() -> TestResult {
    let Some(scene) = Scene::with_another_user()? else { return Ok(()) };
    let planted = scene.theirs().join("filectx.sock");
    let mut impostor = scene.impostor(&planted)?;
    let socket = scene.path("ours/filectx.sock");
    std::fs::rename(&planted, &socket)?;
    impostor.socket.clone_from(&socket);
    let pid = i32::try_from(impostor.child.id())?;
    let connections = every_client_refuses(
        &scene,
        &socket,
        |reason| matches!(reason, Untrusted::PeerNotOurs { peer: NOBODY, pid: Some(p), ours: 0 } if *p == pid),
        &[&format!("runs as uid {NOBODY} (pid {pid}), not as you (uid 0)"), "nothing was sent to it"],
    )
    .await?;
    impostor.wait_connections(connections)?;
    assert_eq!(impostor.messages(), Vec::<String>::new(), "the impostor must receive nothing");
    impostor.prove_live()
}

/// Autostart in an empty folder that others may write, or that another user owns, starts
/// nothing (library and CLI): the refusal comes before any start.
#[tokio::test]
async fn autostart_starts_nothing_in_a_folder_others_control() -> TestResult {
    let Some(scene) = Scene::with_another_user()? else { return Ok(()) };
    let open = scene.our_folder("open", 0o1777)?;
    let theirs = format!("belongs to uid {NOBODY}");
    for (socket, needle) in
        [(open.join("filectx.sock"), "chmod go-w"), (scene.theirs().join("filectx.sock"), theirs.as_str())]
    {
        let (daemon, started) = scene.daemon_script("")?;
        let options = SpawnOptions::default().daemon(&daemon).log(scene.path("state/filectxd.log"));
        let reason = refusal(Client::connect_or_spawn(&socket, options).await, &socket)?;
        assert!(
            matches!(reason, Untrusted::FolderWritableByOthers { .. } | Untrusted::FolderNotOurs { .. }),
            "{reason:?}"
        );
        let out = scene.filectx(&socket, Some(&daemon), &["status"])?;
        assert_cli_refused(&out, &[needle]);
        assert!(!started.exists(), "nothing may be started at {}", socket.display());
        assert!(!socket.exists());
    }
    Ok(())
}

/// Autostart's readiness probe is checked too: the folder passes and nothing answers, so the
/// client starts the "daemon" — which here moves the impostor's socket into place — and the
/// probe then refuses the socket on the peer's uid instead of connecting to it.
#[tokio::test]
async fn the_readiness_probe_refuses_a_socket_another_user_serves() -> TestResult {
    let Some(scene) = Scene::with_another_user()? else { return Ok(()) };
    let planted = scene.theirs().join("filectx.sock");
    let mut impostor = scene.impostor(&planted)?;
    let socket = scene.path("ours/filectx.sock");
    // Called as `filectxd --socket PATH`.
    let (daemon, started) = scene.daemon_script(&format!("mv '{}' \"$2\"", planted.display()))?;
    let options = SpawnOptions::default().daemon(&daemon).log(scene.path("state/filectxd.log"));
    let connected = Client::connect_session_or_spawn(&socket, params(&scene.path("work")), options).await;
    let reason = refusal(connected, &socket)?;
    assert!(matches!(reason, Untrusted::PeerNotOurs { peer: NOBODY, .. }), "{reason:?}");
    assert!(std::fs::read_to_string(&started)?.starts_with("--socket "), "the stand-in daemon ran");
    impostor.wait_connections(1)?;
    assert_eq!(impostor.messages(), Vec::<String>::new(), "the impostor must receive nothing");
    Ok(())
}

/// Our own daemon is still trusted: the real `filectxd`, autostarted in a folder of ours that
/// others may read but not write (0755), serves the library and the CLI.
#[tokio::test]
async fn our_own_daemon_is_trusted() -> TestResult {
    let scene = Scene::ours_only()?;
    let folder = scene.our_folder("shared-read", 0o755)?;
    let socket = folder.join("filectx.sock");
    let options = SpawnOptions::default().daemon(daemon_bin()?).log(scene.path("state/filectxd.log"));
    let (client, session) =
        Client::connect_session_or_spawn(&socket, params(&scene.path("work")), options).await?;
    let pid = client.status().await?.pid;
    let _stop = Stop(pid);
    assert!(!session.session_id.is_empty());
    let read = client.call_tool("read", json!({"file_path": scene.path("work/notes.txt")})).await?;
    assert!(!read.is_error, "{read:?}");
    client.close().await?;
    let out = scene.filectx(&socket, None, &["--no-autostart", "read", "notes.txt"])?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stdout).contains("the real content"), "{out:?}");
    Ok(())
}

/// Stops the daemon with this pid (SIGTERM) when dropped.
struct Stop(u32);

impl Drop for Stop {
    fn drop(&mut self) {
        if let Some(pid) = i32::try_from(self.0).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}
