//! Tests of the `filectx` binary: help, exit codes and messages, and its output against a fake
//! daemon (tests against the real daemon live in the workspace's `tests/` crate, and autostart's
//! in `autostart.rs`). Every run here has autostart off (`FILECTX_NO_AUTOSTART=1`), so that a
//! missing or hung-up fake daemon never brings up a real one.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use filectx_protocol::{ChunkError, FsErrorCode, TextChunk, WriteOperation};
use serde_json::{Value, json};

use crate::support::{self, FakeDaemon, TestResult, method_names, text};

const BIN: &str = env!("CARGO_BIN_EXE_filectx");

/// Turns autostart off for every run of the binary here.
const NO_AUTOSTART: (&str, &str) = ("FILECTX_NO_AUTOSTART", "1");

fn filectx(args: &[&str], cwd: &Path) -> TestResult<Output> {
    filectx_stdin(args, cwd, None)
}

/// Runs the binary with `stdin` piped in (none: stdin is closed).
fn filectx_stdin(args: &[&str], cwd: &Path, stdin: Option<&[u8]>) -> TestResult<Output> {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("FILECTX_SOCKET")
        .env("RUST_BACKTRACE", "1")
        .env(NO_AUTOSTART.0, NO_AUTOSTART.1);
    let Some(input) = stdin else { return Ok(command.output()?) };
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut pipe = child.stdin.take().ok_or("no stdin pipe")?;
    pipe.write_all(input)?;
    drop(pipe);
    Ok(child.wait_with_output()?)
}

/// Runs the binary off the runtime thread so the fake daemon keeps being served meanwhile.
async fn filectx_async(args: Vec<String>, cwd: &Path) -> TestResult<Output> {
    filectx_async_stdin(args, cwd, None).await
}

/// [`filectx_async`] with `stdin` piped in.
async fn filectx_async_stdin(args: Vec<String>, cwd: &Path, stdin: Option<Vec<u8>>) -> TestResult<Output> {
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        filectx_stdin(&args, &cwd, stdin.as_deref())
    })
    .await?
}

/// `filectx --socket <fake daemon> ARGS...`, run in `cwd`.
async fn against(daemon: &FakeDaemon, args: &[&str], cwd: &Path) -> TestResult<Output> {
    against_stdin(daemon, args, cwd, None).await
}

/// [`against`] with `stdin` piped in.
async fn against_stdin(
    daemon: &FakeDaemon,
    args: &[&str],
    cwd: &Path,
    stdin: Option<&[u8]>,
) -> TestResult<Output> {
    let mut all = vec!["--socket".to_owned(), daemon.socket.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    filectx_async_stdin(all, cwd, stdin.map(<[u8]>::to_vec)).await
}

fn assert_clean_stderr(stderr: &str) {
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("filectx: "), "{stderr:?}");
    for noise in ["panicked", "backtrace", "Backtrace", "Os {", "Custom {", "Error {", "kind:"] {
        assert!(!stderr.contains(noise), "{noise:?} in {stderr:?}");
    }
}

#[test]
fn help_explains_subcommands_flags_and_exit_codes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = filectx(&["--help"], dir.path())?;
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "status",
        "tools",
        "cat      Stream a text file",
        "--socket",
        "FILECTX_SOCKET",
        "XDG_RUNTIME_DIR/filectx.sock",
        "--json",
        "--root <DIR>",
        "filectx read PATH [--offset N] [--limit N] [--json [--max-line-chars N]]",
        "filectx cat PATH [--offset N] [--chunk-lines N]",
        "filectx write PATH [--content TEXT | --from FILE]",
        "filectx edit PATH --old TEXT --new TEXT [--replace-all]",
        "filectx stat PATH",
        "filectx watch PATH...",
        "once per version",
        "~50 ms arrive as one notice",
        "FS_NOT_OBSERVED",
        "filectx: FS_NOT_FOUND: ...",
        "--no-autostart",
        "FILECTX_NO_AUTOSTART",
        "Autostart:",
        "~/.local/state/filectx/filectxd.log",
        "FILECTX_DAEMON",
        "Exit codes:",
        "0  success",
        "2  usage error",
        "3  the daemon is not reachable",
        "4  the request failed",
        "5  the socket was refused",
        "filectx trusts only a daemon of its own user",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from --help:\n{help}");
    }
    Ok(())
}

#[test]
fn no_daemon_exits_3_with_a_one_line_message() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("none.sock");
    let socket = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    for command in ["status", "tools"] {
        let out = filectx(&["--socket", socket, command], dir.path())?;
        assert_eq!(out.status.code(), Some(3), "{command}: {out:?}");
        let stderr = text(&out.stderr);
        assert_eq!(
            stderr,
            format!(
                "filectx: no daemon is listening at {socket} (autostart is off; start one with: filectxd)\n"
            )
        );
        assert_clean_stderr(&stderr);
        assert!(out.stdout.is_empty());
    }
    Ok(())
}

#[test]
fn the_socket_env_var_is_used_when_no_flag_is_given() -> TestResult {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("env.sock");
    let out = Command::new(BIN)
        .arg("status")
        .current_dir(dir.path())
        .env("FILECTX_SOCKET", &socket)
        .env(NO_AUTOSTART.0, NO_AUTOSTART.1)
        .output()?;
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains(&socket.display().to_string()), "{out:?}");
    Ok(())
}

#[test]
fn usage_errors_exit_2() -> TestResult {
    let dir = tempfile::tempdir()?;
    for args in [&["frobnicate"][..], &[], &["status", "--bogus"], &["--socket"]] {
        let out = filectx(args, dir.path())?;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty());
    }
    Ok(())
}

#[tokio::test]
async fn status_prints_aligned_lines_and_leaves_politely() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let socket = daemon.socket.display().to_string();
    let out = filectx_async(vec!["status".into(), "--socket".into(), socket.clone()], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("daemon:                filectxd 9.9.9\n"), "{stdout}");
    assert!(stdout.contains("uptime:                2h 3m 4s\n"), "{stdout}");
    assert!(stdout.contains("sessions:              2 (max 64)\n"), "{stdout}");
    assert!(stdout.contains("requests:              17\n"), "{stdout}");
    assert!(stdout.contains(&format!("socket:                {socket}\n")), "{stdout}");

    let received = daemon.received().await?;
    let methods: Vec<&str> = received.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["initialize", "daemon/status", "shutdown", "exit"]);
    let root = cwd.path().canonicalize()?;
    assert_eq!(
        received[0]["params"],
        json!({
            "clientInfo": {"name": "filectx", "version": env!("CARGO_PKG_VERSION")},
            "roots": [root.to_str().ok_or("tempdir path is not UTF-8")?],
        })
    );
    Ok(())
}

#[tokio::test]
async fn tools_json_prints_the_raw_result() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let args = vec!["--json".into(), "--socket".into(), daemon.socket.display().to_string(), "tools".into()];
    let out = filectx_async(args, cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed: Value = serde_json::from_slice(&out.stdout)?;
    let names: Vec<&str> =
        printed["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["read", "write", "edit"]);
    assert!(printed["tools"][0]["inputSchema"]["properties"]["file_path"].is_object());
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn tools_readable_lists_parameters() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let args = vec!["tools".into(), "--socket".into(), daemon.socket.display().to_string()];
    let out = filectx_async(args, cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("read: Read a text file.\n  file_path  string   required\n"), "{stdout}");
    assert!(stdout.contains("edit: Replace an exact, literal string in a text file.\n"), "{stdout}");
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn a_daemon_error_exits_4_with_its_code_and_message() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("daemon/status") => {
            vec![support::error(request, -31013, "the file is locked", Some(json!({"code": "FS_BUSY"})))]
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let args = vec!["status".into(), "--socket".into(), daemon.socket.display().to_string()];
    let out = filectx_async(args, cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "filectx: FS_BUSY: the file is locked\n");
    assert_clean_stderr(&stderr);
    // The session is still closed politely after the failure.
    let received = daemon.received().await?;
    let methods: Vec<&str> = received.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["initialize", "daemon/status", "shutdown", "exit"]);

    // An error without an FS_* code shows its numeric code.
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("tools/list") => vec![support::error(request, -32603, "internal error", None)],
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["tools"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stderr), "filectx: the daemon answered error -32603: internal error\n");
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn a_daemon_hanging_up_exits_3() -> TestResult {
    let daemon = FakeDaemon::start(|_| vec![support::Out::HangUp])?;
    let cwd = tempfile::tempdir()?;
    let args = vec!["status".into(), "--socket".into(), daemon.socket.display().to_string()];
    let out = filectx_async(args, cwd.path()).await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the daemon closed the connection"), "{stderr}");
    assert_clean_stderr(&stderr);
    daemon.received().await?;
    Ok(())
}

/// The `params` of the first received request named `method`.
fn params_of<'a>(received: &'a [Value], method: &str) -> &'a Value {
    received.iter().find(|m| m["method"] == method).map_or(&Value::Null, |m| &m["params"])
}

#[test]
fn edit_and_write_help_say_the_cli_reads_first() -> TestResult {
    let dir = tempfile::tempdir()?;
    for command in ["edit", "write"] {
        let out = filectx(&[command, "--help"], dir.path())?;
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        for needle in ["itself first", "FS_NOT_OBSERVED", "FS_STALE_VERSION", "long-lived session"] {
            assert!(help.contains(needle), "{needle:?} missing from {command} --help:\n{help}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn read_prints_the_tool_text_exactly() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["read", "src/lib.rs", "--offset", "2", "--limit", "3"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The text as is, plus the final newline it lacks.
    assert_eq!(text(&out.stdout), format!("{}\n", support::READ_TEXT));
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "tools/call", "shutdown", "exit"]);
    assert_eq!(
        params_of(&received, "tools/call"),
        &json!({"name": "read", "arguments": {"file_path": "src/lib.rs", "offset": 2, "limit": 3}})
    );

    // A text that already ends in a newline is printed unchanged.
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("tools/call") => vec![support::result(
            request,
            json!({"content": [{"type": "text", "text": "1\tx\n(End of file)\n"}], "isError": false}),
        )],
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["read", "/abs/x"], cwd.path()).await?;
    assert_eq!(text(&out.stdout), "1\tx\n(End of file)\n");
    let received = daemon.received().await?;
    assert_eq!(params_of(&received, "tools/call")["arguments"], json!({"file_path": "/abs/x"}));
    Ok(())
}

#[tokio::test]
async fn read_json_prints_the_structured_file_read_result() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["read", "--json", "a.rs", "--limit", "1"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(printed, serde_json::to_value(support::read_result("a.rs"))?);
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/read", "shutdown", "exit"]);
    assert_eq!(params_of(&received, "file/read"), &json!({"path": "a.rs", "limit": 1}));
    // --max-line-chars goes to file/read as maxLineChars.
    let daemon = FakeDaemon::start(support::standard)?;
    let out = against(&daemon, &["--json", "read", "a.rs", "--max-line-chars", "80"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(params_of(&received, "file/read"), &json!({"path": "a.rs", "maxLineChars": 80}));
    Ok(())
}

#[tokio::test]
async fn a_failed_read_tool_prints_its_text_to_stderr_and_exits_4() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("tools/call") => vec![support::result(
            request,
            json!({
                "content": [{"type": "text", "text": "File not found: x.rs\n"}],
                "isError": true,
                "error": {"name": "FsError", "code": "FS_NOT_FOUND"},
            }),
        )],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["read", "x.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "filectx: FS_NOT_FOUND: File not found: x.rs\n");
    assert_clean_stderr(&stderr);
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "tools/call", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn write_creates_a_missing_file_without_reading_it() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/stat") => {
            vec![support::answer(request, support::file_stat("src/new.rs", false))]
        }
        Some("file/write") => {
            vec![support::answer(request, support::write_result("src/new.rs", WriteOperation::Create))]
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["write", "src/new.rs", "--content", "-fn f() {}\n"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "created src/new.rs\n");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/stat", "file/write", "shutdown", "exit"]);
    assert_eq!(params_of(&received, "file/stat"), &json!({"path": "src/new.rs"}));
    assert_eq!(params_of(&received, "file/write"), &json!({"path": "src/new.rs", "content": "-fn f() {}\n"}));
    Ok(())
}

#[tokio::test]
async fn write_over_an_existing_file_reads_it_first() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let out =
        against_stdin(&daemon, &["write", "src/lib.rs"], cwd.path(), Some("new text\n".as_bytes())).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "updated src/lib.rs\n");
    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        ["initialize", "file/stat", "file/read", "file/write", "shutdown", "exit"]
    );
    assert_eq!(params_of(&received, "file/read"), &json!({"path": "src/lib.rs", "limit": 1}));
    assert_eq!(params_of(&received, "file/write"), &json!({"path": "src/lib.rs", "content": "new text\n"}));
    Ok(())
}

#[tokio::test]
async fn write_takes_its_content_from_a_file_and_json_prints_the_result() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let source = cwd.path().join("content.txt");
    std::fs::write(&source, "ünïcode\r\nlines\n")?;
    let out =
        against(&daemon, &["--json", "write", "/abs/b.rs", "--from", "content.txt"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(printed, serde_json::to_value(support::write_result("/abs/b.rs", WriteOperation::Update))?);
    let received = daemon.received().await?;
    assert_eq!(
        params_of(&received, "file/write"),
        &json!({"path": "/abs/b.rs", "content": "ünïcode\r\nlines\n"})
    );
    Ok(())
}

#[test]
fn write_content_problems_are_local_failures_found_before_connecting() -> TestResult {
    let dir = tempfile::tempdir()?;
    // No daemon listens here: exit 1 (not 3) shows nothing was sent.
    let socket = dir.path().join("none.sock");
    let socket = socket.to_str().ok_or("tempdir path is not UTF-8")?;
    let out = filectx(&["--socket", socket, "write", "a.rs", "--from", "missing.txt"], dir.path())?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("filectx: cannot read missing.txt: "), "{stderr}");
    assert_clean_stderr(&stderr);

    let out = filectx_stdin(&["--socket", socket, "write", "a.rs"], dir.path(), Some(&[0x66, 0xff, 0x0a]))?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(text(&out.stderr), "filectx: the content from stdin is not valid UTF-8\n");
    Ok(())
}

#[tokio::test]
async fn edit_reads_the_file_first_then_edits_it() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let args = ["edit", "src/lib.rs", "--old", "fn main", "--new", "-fn start", "--replace-all"];
    let out = against(&daemon, &args, cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "edited src/lib.rs: 2 replacements\n");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/read", "file/edit", "shutdown", "exit"]);
    assert_eq!(params_of(&received, "file/read"), &json!({"path": "src/lib.rs", "limit": 1}));
    assert_eq!(
        params_of(&received, "file/edit"),
        &json!({"path": "src/lib.rs", "oldString": "fn main", "newString": "-fn start", "replaceAll": true})
    );

    // One replacement reads in the singular; without --replace-all the field is left out.
    let daemon = FakeDaemon::start(support::standard)?;
    let out = against(&daemon, &["edit", "a.rs", "--old", "a", "--new", "b"], cwd.path()).await?;
    assert_eq!(text(&out.stdout), "edited a.rs: 1 replacement\n");
    let received = daemon.received().await?;
    assert_eq!(
        params_of(&received, "file/edit"),
        &json!({"path": "a.rs", "oldString": "a", "newString": "b"})
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_file_method_exits_4_with_its_fs_code() -> TestResult {
    // The edit itself fails.
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/edit") => {
            vec![support::fs_error(
                request,
                FsErrorCode::EditNotFound,
                "old_string was not found in src/lib.rs",
            )]
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["edit", "src/lib.rs", "--old", "x", "--new", "y"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "filectx: FS_EDIT_NOT_FOUND: old_string was not found in src/lib.rs\n");
    assert_clean_stderr(&stderr);
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/read", "file/edit", "shutdown", "exit"]);

    // The read before it fails: nothing is edited.
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/read") => vec![support::fs_error(request, FsErrorCode::NotFound, "no such file: gone.rs")],
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["edit", "gone.rs", "--old", "x", "--new", "y"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stderr), "filectx: FS_NOT_FOUND: no such file: gone.rs\n");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/read", "shutdown", "exit"]);

    // A write that the daemon refuses after the CLI's own read (the file changed in between).
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/write") => vec![support::fs_error(request, FsErrorCode::StaleVersion, "a.rs changed")],
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["write", "a.rs", "--content", "x"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stderr), "filectx: FS_STALE_VERSION: a.rs changed\n");
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn stat_prints_key_value_lines_or_raw_json() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["stat", "src/lib.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "path:    src/lib.rs\nexists:  yes\nkind:    file\nsize:    1.5 KiB (1536)\nversion: b3-0123abcd\n"
    );
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "file/stat", "shutdown", "exit"]);
    assert_eq!(params_of(&received, "file/stat"), &json!({"path": "src/lib.rs"}));

    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("file/stat") => {
            vec![support::answer(request, support::file_stat("nope", false))]
        }
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["stat", "nope"], cwd.path()).await?;
    assert_eq!(text(&out.stdout), "path:   nope\nexists: no\nkind:   none\n");
    daemon.received().await?;

    let daemon = FakeDaemon::start(support::standard)?;
    let out = against(&daemon, &["stat", "--json", "a.rs"], cwd.path()).await?;
    let printed: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(printed, serde_json::to_value(support::file_stat("a.rs", true))?);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn roots_replace_the_default_and_the_current_folder_becomes_the_cwd() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let project = tempfile::tempdir()?;
    let other = tempfile::tempdir()?;
    let sub = project.path().join("src");
    std::fs::create_dir(&sub)?;
    let other_root = other.path().to_str().ok_or("tempdir path is not UTF-8")?;
    let out = against(&daemon, &["--root", "..", "stat", "lib.rs", "--root", other_root], &sub).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let received = daemon.received().await?;
    let canonical = |p: &Path| -> TestResult<String> {
        Ok(p.canonicalize()?.to_str().ok_or("tempdir path is not UTF-8")?.to_owned())
    };
    let init = params_of(&received, "initialize");
    assert_eq!(init["roots"], json!([canonical(project.path())?, canonical(other.path())?]));
    assert_eq!(init["cwd"], json!(canonical(&sub)?));
    assert_eq!(params_of(&received, "file/stat"), &json!({"path": "lib.rs"}));
    Ok(())
}

#[test]
fn root_problems_are_local_failures() -> TestResult {
    let cwd = tempfile::tempdir()?;
    let elsewhere = tempfile::tempdir()?;
    let elsewhere = elsewhere.path().to_str().ok_or("tempdir path is not UTF-8")?;
    let socket = cwd.path().join("none.sock");
    let socket = socket.to_str().ok_or("tempdir path is not UTF-8")?;

    // A relative path when the current folder is inside no root: refused before connecting.
    let out = filectx(&["--socket", socket, "--root", elsewhere, "read", "a.rs"], cwd.path())?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("is inside no --root") && stderr.contains("\"a.rs\""), "{stderr}");
    assert_clean_stderr(&stderr);
    // An absolute path is fine (it gets as far as connecting).
    let absolute = format!("{elsewhere}/a.rs");
    let out = filectx(&["--socket", socket, "--root", elsewhere, "read", &absolute], cwd.path())?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");

    let out = filectx(&["--socket", socket, "--root", "missing", "status"], cwd.path())?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("filectx: cannot resolve the root missing: "), "{stderr}");
    assert_clean_stderr(&stderr);

    std::fs::write(cwd.path().join("file"), "x")?;
    let out = filectx(&["--socket", socket, "--root", "file", "status"], cwd.path())?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(text(&out.stderr), "filectx: the root file is not a folder\n");
    Ok(())
}

#[test]
fn file_command_usage_errors_exit_2() -> TestResult {
    let dir = tempfile::tempdir()?;
    for args in [
        &["read"][..],
        &["read", "a", "--offset", "0"],
        &["read", "a", "--limit", "x"],
        &["read", "a", "--max-line-chars", "80"],
        &["--json", "read", "a", "--max-line-chars", "0"],
        &["write", "a", "--content", "x", "--from", "y"],
        &["edit", "a", "--old", "x"],
        &["edit", "a", "--new", "x"],
        &["stat"],
        &["--root"],
        &["cat"],
        &["cat", "a", "--offset", "0"],
        &["cat", "a", "--chunk-lines", "0"],
        &["cat", "a", "--chunk-lines", "2001"],
        &["cat", "a", "--limit", "3"],
        &["--json", "cat", "a"],
        &["cat", "a", "--json"],
        &["watch"],
        &["--json", "watch"],
        &["watch", "--root"],
    ] {
        let out = filectx(args, dir.path())?;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty());
    }
    Ok(())
}

#[tokio::test]
async fn cat_writes_the_lines_as_they_are() -> TestResult {
    let daemon = FakeDaemon::start(support::standard)?;
    let cwd = tempfile::tempdir()?;
    let out =
        against(&daemon, &["cat", "logs/a.log", "--offset", "2", "--chunk-lines", "2"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Each line followed by a newline, nothing else: no numbers, no footer.
    assert_eq!(text(&out.stdout), "\ngamma  \nδέλτα\nlast\n");
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        ["initialize", "fs/streamText", "fs/streamCancel", "shutdown", "exit"]
    );
    assert_eq!(
        params_of(&received, "fs/streamText"),
        &json!({"path": "logs/a.log", "offset": 2, "chunkLines": 2})
    );

    let daemon = FakeDaemon::start(support::standard)?;
    let out = against(&daemon, &["cat", "/abs/a.log"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "alpha\n\ngamma  \nδέλτα\nlast\n");
    let received = daemon.received().await?;
    assert_eq!(params_of(&received, "fs/streamText"), &json!({"path": "/abs/a.log"}));
    Ok(())
}

#[tokio::test]
async fn cat_an_empty_file_writes_nothing() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => {
            vec![support::subscribed(request, "s"), support::chunk_out("s", &support::chunk(1, &[], 0, true))]
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["cat", "empty"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn cat_writes_long_lines_whole_and_stops_at_a_line_too_large() -> TestResult {
    // Since protocol 2 streams carry whole lines: a 5,000-character line is written as it is,
    // with nothing said about it.
    let long = "x".repeat(5000);
    let chunks = [support::chunk(1, &[&long, "short"], 3, false), support::chunk(3, &[&long], 3, true)];
    let daemon = FakeDaemon::start(move |request: &Value| match request["method"].as_str() {
        Some("fs/streamText") => {
            let mut out = vec![support::subscribed(request, "s")];
            out.extend(chunks.iter().map(|chunk| support::chunk_out("s", chunk)));
            out
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["cat", "wide.csv", "--chunk-lines", "2"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stdout) == format!("{}\nshort\n{}\n", "x".repeat(5000), "x".repeat(5000)));
    assert!(out.stderr.is_empty(), "{out:?}");
    daemon.received().await?;

    // A line over the daemon's window cap ends the stream with an FS_TOO_LARGE item.
    let too_large = TextChunk {
        error: Some(ChunkError {
            code: FsErrorCode::TooLarge,
            message: "line 2 is 9000000 bytes, over the limit of 8388608 bytes one chunk may hold".to_owned(),
        }),
        ..support::chunk(2, &[], 2, true)
    };
    let daemon = FakeDaemon::start(move |request: &Value| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            support::chunk_out("s", &support::chunk(1, &["one"], 2, false)),
            support::chunk_out("s", &too_large),
        ],
        _ => support::standard(request),
    })?;
    let out = against(&daemon, &["cat", "min.js"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stdout), "one\n");
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("filectx: FS_TOO_LARGE: line 2 is 9000000 bytes"), "{stderr}");
    assert_clean_stderr(&stderr);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn cat_a_file_that_changes_midway_exits_4_after_the_lines_written() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            support::chunk_out("s", &support::chunk(1, &["one", "two"], 4, false)),
            support::chunk_out("s", &support::stale_item(3, 4)),
        ],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["cat", "a.log", "--chunk-lines", "2"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stdout), "one\ntwo\n");
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr,
        "filectx: FS_STALE_VERSION: the file changed while it was being streamed; start again\n"
    );
    assert_clean_stderr(&stderr);
    // The session is still closed politely.
    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        ["initialize", "fs/streamText", "fs/streamCancel", "shutdown", "exit"]
    );
    Ok(())
}

#[tokio::test]
async fn cat_a_refused_stream_exits_4_with_its_fs_code() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![support::fs_error(request, FsErrorCode::NotText, "x.bin is not text")],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["cat", "x.bin"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "filectx: FS_NOT_TEXT: x.bin is not text\n");
    assert_clean_stderr(&stderr);
    let received = daemon.received().await?;
    assert_eq!(method_names(&received), ["initialize", "fs/streamText", "shutdown", "exit"]);
    Ok(())
}

#[tokio::test]
async fn cat_cut_off_by_a_hang_up_exits_3() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            support::chunk_out("s", &support::chunk(1, &["one"], 9, false)),
            support::Out::HangUp,
        ],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = against(&daemon, &["cat", "a.log"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(text(&out.stdout), "one\n");
    let stderr = text(&out.stderr);
    assert!(stderr.ends_with("broke: the daemon closed the connection\n"), "{stderr}");
    assert_clean_stderr(&stderr);
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn cat_flushes_each_chunk_and_a_closed_pipe_stops_the_stream_with_exit_0() -> TestResult {
    // The first chunk comes at once; the next only when the test pushes it.
    let (daemon, push) = FakeDaemon::start_with_push(|request| match request["method"].as_str() {
        Some("fs/streamText") => vec![
            support::subscribed(request, "s"),
            support::chunk_out("s", &support::chunk(1, &["first", "second"], 6, false)),
        ],
        Some("fs/streamCancel") => vec![support::result(request, json!(true))],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let (mut child, deadline) =
        spawn_against(&daemon, &["cat", "big.log", "--chunk-lines", "2"], cwd.path())?;
    // Off the runtime thread, so that the fake daemon keeps being served meanwhile.
    let (first, out) = tokio::task::spawn_blocking(move || -> TestResult<(String, Output)> {
        let mut reader = std::io::BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);
        // The first chunk is readable while the stream is still going: it was flushed.
        let mut first = String::new();
        std::io::BufRead::read_line(&mut reader, &mut first)?;
        // `head` has seen enough: the pipe closes, and the next chunk cannot be written.
        drop(reader);
        push_until_exit(
            &mut child,
            |n| {
                let start = 3 + 2 * n;
                support::chunk_out("s", &support::chunk(start, &["more", "lines"], start + 3, false))
            },
            &push,
        )?;
        Ok((first, finish(child, deadline)?))
    })
    .await??;
    assert_eq!(first, "first\n");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        ["initialize", "fs/streamText", "fs/streamCancel", "shutdown", "exit"]
    );
    assert_eq!(params_of(&received, "fs/streamCancel"), &json!(["s"]));
    Ok(())
}

/// How long a `watch` may run in a test before it is killed (it would otherwise hang the test
/// when it misses its end).
const WATCH_DEADLINE: Duration = Duration::from_secs(20);

/// A full version, as the daemon reports them.
const V1: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const V2: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

/// Kills a child process still running [`WATCH_DEADLINE`] after it started, unless dropped
/// first (a `watch` that misses its end would otherwise hang the test).
struct Deadline {
    done: Option<std::sync::mpsc::Sender<()>>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl Deadline {
    fn start(child: &Child) -> Self {
        let pid = rustix::process::Pid::from_child(child);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if wait.recv_timeout(WATCH_DEADLINE) == Err(RecvTimeoutError::Timeout) {
                // Not reaped yet (the test still holds the `Child`), so the pid is still its.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        });
        Self { done: Some(done), watchdog: Some(watchdog) }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
    }
}

/// Starts `filectx --socket <fake daemon> ARGS...` in `cwd`, stdout and stderr piped, under a
/// [`Deadline`].
fn spawn_against(daemon: &FakeDaemon, args: &[&str], cwd: &Path) -> TestResult<(Child, Deadline)> {
    let child = Command::new(BIN)
        .arg("--socket")
        .arg(&daemon.socket)
        .args(args)
        .current_dir(cwd)
        .env_remove("FILECTX_SOCKET")
        .env("RUST_BACKTRACE", "1")
        .env(NO_AUTOSTART.0, NO_AUTOSTART.1)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Deadline::start(&child);
    Ok((child, deadline))
}

/// Sends `next(0)`, `next(1)`, … to the client every 50 ms until `child` exits (or 20 s pass).
///
/// A test that closes its end of the child's stdout expects the child's next write to fail
/// with EPIPE. It does only once no process holds that read end, and a child that another test
/// of this binary is spawning at the same moment holds a copy until it execs (close-on-exec
/// closes it only then). A write in that window succeeds, so one message is not always enough.
fn push_until_exit(
    child: &mut Child,
    mut next: impl FnMut(u64) -> support::Out,
    push: &tokio::sync::mpsc::UnboundedSender<support::Out>,
) -> TestResult<()> {
    let until = std::time::Instant::now() + WATCH_DEADLINE;
    for n in 0.. {
        push.send(next(n))?;
        std::thread::sleep(Duration::from_millis(50));
        if child.try_wait()?.is_some() || std::time::Instant::now() > until {
            break;
        }
    }
    Ok(())
}

/// Waits for `child`'s end and collects its output (what is left of it). Blocking: call it off
/// the runtime thread.
fn finish(child: Child, deadline: Deadline) -> TestResult<Output> {
    let out = child.wait_with_output();
    drop(deadline);
    Ok(out?)
}

/// [`against`] for `watch`: run to its end off the runtime thread, killed after
/// [`WATCH_DEADLINE`].
async fn watch_against(daemon: &FakeDaemon, args: &[&str], cwd: &Path) -> TestResult<Output> {
    let (child, deadline) = spawn_against(daemon, args, cwd)?;
    tokio::task::spawn_blocking(move || finish(child, deadline)).await?
}

/// The `path` params of the received `file/read` requests, in order.
fn reads(received: &[Value]) -> Vec<&str> {
    received
        .iter()
        .filter(|m| m["method"] == "file/read")
        .filter_map(|m| m["params"]["path"].as_str())
        .collect()
}

/// A daemon for `watch a.rs b.rs ./a.rs`: the first notice (and one for a file that is not
/// watched) comes right after the first read, before the CLI has read b.rs; each re-read brings
/// the next notices, the last ones deleting both files. `./a.rs` resolves to a.rs.
fn two_file_daemon(request: &Value) -> Vec<support::Out> {
    let read = |notices: Vec<support::Out>| {
        let path = request["params"]["path"].as_str().unwrap_or_default();
        let mut out = vec![support::answer(request, support::read_result(path))];
        out.extend(notices);
        out
    };
    match (request["method"].as_str(), request["params"]["path"].as_str()) {
        (Some("file/read"), Some("a.rs")) => {
            read(vec![support::did_change("c.rs", Some(V2)), support::did_change("a.rs", Some(V1))])
        }
        (Some("fs/resolve"), Some("./a.rs")) => {
            vec![support::answer(request, support::resolve_result("a.rs"))]
        }
        (Some("file/read"), Some("/tmp/project/a.rs")) => read(vec![support::did_change("b.rs", Some(V2))]),
        (Some("file/read"), Some("/tmp/project/b.rs")) => read(vec![
            support::did_change("a.rs", None),
            // A file no longer watched: ignored.
            support::did_change("a.rs", Some(V2)),
            support::did_change("b.rs", None),
        ]),
        _ => support::standard(request),
    }
}

#[test]
fn journal_help_answers_what_where_and_how_far() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = filectx(&["--help"], dir.path())?;
    let help = text(&out.stdout);
    for needle in ["history  List the changes", "filectx undo ENTRY... | --last PATH | --session ID"] {
        assert!(help.contains(needle), "{needle:?} missing from --help:\n{help}");
    }
    for (command, needles) in [
        (
            "history",
            &[
                "ENTRY (the number diff and undo take)",
                "outside for a change",
                "--since <SPAN>",
                "under this command's roots",
            ][..],
        ),
        (
            "undo",
            &[
                "still as the entry left it",
                "--force",
                "stops the command",
                "removes the file",
                "undo an undo to redo",
                "any write gate",
            ][..],
        ),
        (
            "diff",
            &["$XDG_STATE_HOME/filectx/journal", "7 days", "1 GiB", "journal_max_file_bytes", "--no-journal"]
                [..],
        ),
    ] {
        let out = filectx(&[command, "--help"], dir.path())?;
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        for needle in needles {
            assert!(help.contains(needle), "{needle:?} missing from {command} --help:\n{help}");
        }
    }
    // One of ENTRY, --last and --session; --owner only with --session.
    for args in [
        &["undo"][..],
        &["undo", "3", "--last", "a"],
        &["undo", "--owner", "w"],
        &["history", "--since", "soon"],
    ] {
        assert_eq!(filectx(args, dir.path())?.status.code(), Some(2), "{args:?}");
    }
    Ok(())
}

#[test]
fn watch_help_explains_notices_and_how_it_ends() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = filectx(&["watch", "--help"], dir.path())?;
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "Usage: filectx watch [OPTIONS] <PATH>...",
        "once per recorded version",
        "re-arms the notice",
        "within about 50 ms",
        "changed PATH (version 0123456789ab)",
        "deleted PATH",
        "\"displayPath\"",
        "Ctrl-C (SIGINT) or SIGTERM",
        "3  the connection to the daemon was lost",
        "4  a file could not be read",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from watch --help:\n{help}");
    }
    Ok(())
}

#[tokio::test]
async fn watch_reads_every_file_first_then_prints_each_notice_and_rereads_changed_files() -> TestResult {
    let daemon = FakeDaemon::start(two_file_daemon)?;
    let cwd = tempfile::tempdir()?;
    let out = watch_against(&daemon, &["watch", "a.rs", "b.rs", "./a.rs"], cwd.path()).await?;
    // The last watched file deleted: done.
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "changed a.rs (version 0123456789ab)\nchanged b.rs (version fedcba987654)\ndeleted a.rs\ndeleted b.rs\n"
    );
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    // Every PATH is read (one line) before the first notice is handled, whose re-read comes
    // only after; each changed file is read again by its canonical path.
    assert_eq!(
        method_names(&received),
        [
            "initialize",
            "file/read",
            "fs/resolve",
            "file/read",
            "fs/resolve",
            "file/read",
            "fs/resolve",
            "file/read",
            "file/read",
            "shutdown",
            "exit"
        ]
    );
    assert_eq!(reads(&received), ["a.rs", "b.rs", "./a.rs", "/tmp/project/a.rs", "/tmp/project/b.rs"]);
    for read in received.iter().filter(|m| m["method"] == "file/read") {
        assert_eq!(read["params"]["limit"], 1, "{read}");
        assert!(read["params"].get("offset").is_none(), "{read}");
    }
    Ok(())
}

#[tokio::test]
async fn watch_json_prints_each_notice_params_as_one_line() -> TestResult {
    let daemon = FakeDaemon::start(two_file_daemon)?;
    let cwd = tempfile::tempdir()?;
    let out = watch_against(&daemon, &["watch", "--json", "a.rs", "b.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<Value> = stdout.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let notice = |name: &str, version: Option<&str>| json!({"path": format!("/tmp/project/{name}"), "displayPath": name, "version": version});
    assert_eq!(
        lines,
        [notice("a.rs", Some(V1)), notice("b.rs", Some(V2)), notice("a.rs", None), notice("b.rs", None)]
    );
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(reads(&received), ["a.rs", "b.rs", "/tmp/project/a.rs", "/tmp/project/b.rs"]);
    Ok(())
}

#[tokio::test]
async fn watch_reports_a_changed_file_gone_at_its_reread_as_deleted() -> TestResult {
    let script = |request: &Value| match (request["method"].as_str(), request["params"]["path"].as_str()) {
        (Some("fs/resolve"), Some("a.rs")) => vec![
            support::answer(request, support::resolve_result("a.rs")),
            support::did_change("a.rs", Some(V1)),
        ],
        (Some("file/read"), Some("/tmp/project/a.rs")) => {
            vec![support::fs_error(request, FsErrorCode::NotFound, "no such file: /tmp/project/a.rs")]
        }
        _ => support::standard(request),
    };
    let cwd = tempfile::tempdir()?;
    let daemon = FakeDaemon::start(script)?;
    let out = watch_against(&daemon, &["watch", "a.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "changed a.rs (version 0123456789ab)\ndeleted a.rs\n");
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(reads(&received), ["a.rs", "/tmp/project/a.rs"]);

    // With --json, the deletion has the shape of a notice.
    let daemon = FakeDaemon::start(script)?;
    let out = watch_against(&daemon, &["--json", "watch", "a.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<Value> = stdout.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    assert_eq!(lines[1], json!({"path": "/tmp/project/a.rs", "displayPath": "a.rs", "version": null}));
    daemon.received().await?;
    Ok(())
}

#[tokio::test]
async fn watch_exits_4_when_a_file_cannot_be_read() -> TestResult {
    // At the start: nothing is watched, nothing printed.
    let daemon = FakeDaemon::start(|request| match request["params"]["path"].as_str() {
        Some("gone.rs") if request["method"] == "file/read" => {
            vec![support::fs_error(request, FsErrorCode::NotFound, "no such file: gone.rs")]
        }
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = watch_against(&daemon, &["watch", "a.rs", "gone.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "filectx: FS_NOT_FOUND: no such file: gone.rs\n");
    assert_clean_stderr(&stderr);
    let received = daemon.received().await?;
    assert_eq!(
        method_names(&received),
        ["initialize", "file/read", "fs/resolve", "file/read", "shutdown", "exit"]
    );

    // After a change, when the file can no longer be read: the change is printed first.
    let daemon = FakeDaemon::start(|request| {
        match (request["method"].as_str(), request["params"]["path"].as_str()) {
            (Some("fs/resolve"), Some("a.rs")) => vec![
                support::answer(request, support::resolve_result("a.rs")),
                support::did_change("a.rs", Some(V1)),
            ],
            (Some("file/read"), Some("/tmp/project/a.rs")) => {
                vec![support::fs_error(request, FsErrorCode::NotText, "a.rs is not text")]
            }
            _ => support::standard(request),
        }
    })?;
    let out = watch_against(&daemon, &["watch", "a.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(text(&out.stdout), "changed a.rs (version 0123456789ab)\n");
    assert_eq!(text(&out.stderr), "filectx: FS_NOT_TEXT: a.rs is not text\n");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received).last(), Some(&"exit"));
    Ok(())
}

#[tokio::test]
async fn watch_exits_3_when_the_connection_is_lost() -> TestResult {
    let daemon = FakeDaemon::start(|request| match request["method"].as_str() {
        Some("fs/resolve") => vec![
            support::answer(request, support::resolve_result("a.rs")),
            support::did_change("a.rs", Some(V1)),
            support::Out::HangUp,
        ],
        _ => support::standard(request),
    })?;
    let cwd = tempfile::tempdir()?;
    let out = watch_against(&daemon, &["watch", "a.rs"], cwd.path()).await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // What came before the hang-up is printed.
    assert_eq!(text(&out.stdout), "changed a.rs (version 0123456789ab)\n");
    let stderr = text(&out.stderr);
    assert!(stderr.ends_with("broke: the daemon closed the connection\n"), "{stderr}");
    assert_clean_stderr(&stderr);
    daemon.received().await?;
    Ok(())
}

/// A daemon whose first notice comes once the CLI is done reading a.rs, so the test can wait
/// for the first line and then act; more notices come through the returned sender.
fn one_file_daemon() -> TestResult<(FakeDaemon, tokio::sync::mpsc::UnboundedSender<support::Out>)> {
    FakeDaemon::start_with_push(|request| match request["method"].as_str() {
        Some("fs/resolve") => vec![
            support::answer(request, support::resolve_result("a.rs")),
            support::did_change("a.rs", Some(V1)),
        ],
        _ => support::standard(request),
    })
}

#[tokio::test]
async fn watch_stops_cleanly_on_sigint_and_sigterm() -> TestResult {
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let (daemon, _push) = one_file_daemon()?;
        let cwd = tempfile::tempdir()?;
        let (mut child, deadline) = spawn_against(&daemon, &["watch", "a.rs"], cwd.path())?;
        let (first, out) = tokio::task::spawn_blocking(move || -> TestResult<(String, Output)> {
            let mut reader = std::io::BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);
            // The line is readable while the watch goes on: it was flushed.
            let mut first = String::new();
            reader.read_line(&mut first)?;
            rustix::process::kill_process(rustix::process::Pid::from_child(&child), signal)?;
            Ok((first, finish(child, deadline)?))
        })
        .await??;
        assert_eq!(first, "changed a.rs (version 0123456789ab)\n", "{signal:?}");
        assert_eq!(out.status.code(), Some(0), "{signal:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{signal:?}: {out:?}");
        let received = daemon.received().await?;
        let methods = method_names(&received);
        assert_eq!(methods[..3], ["initialize", "file/read", "fs/resolve"], "{signal:?}");
        assert_eq!(methods[methods.len() - 2..], ["shutdown", "exit"], "{signal:?}");
    }
    Ok(())
}

#[tokio::test]
async fn watch_ends_with_exit_0_when_stdout_is_closed() -> TestResult {
    let (daemon, push) = one_file_daemon()?;
    let cwd = tempfile::tempdir()?;
    let (mut child, deadline) = spawn_against(&daemon, &["watch", "a.rs"], cwd.path())?;
    let (first, out) = tokio::task::spawn_blocking(move || -> TestResult<(String, Output)> {
        let mut reader = std::io::BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);
        let mut first = String::new();
        reader.read_line(&mut first)?;
        // `head -1` has seen enough: the next notice cannot be written.
        drop(reader);
        push_until_exit(
            &mut child,
            |n| support::did_change("a.rs", Some(if n % 2 == 0 { V2 } else { V1 })),
            &push,
        )?;
        Ok((first, finish(child, deadline)?))
    })
    .await??;
    assert_eq!(first, "changed a.rs (version 0123456789ab)\n");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let received = daemon.received().await?;
    assert_eq!(method_names(&received).last(), Some(&"exit"));
    Ok(())
}
