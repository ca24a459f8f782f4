//! Tests of the `filectx` binary: help, exit codes and messages, and its output against a fake
//! daemon (tests against the real daemon live in the workspace's `tests/` crate).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::{FakeDaemon, TestResult};

const BIN: &str = env!("CARGO_BIN_EXE_filectx");

fn filectx(args: &[&str], cwd: &Path) -> TestResult<Output> {
    Ok(Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env_remove("FILECTX_SOCKET")
        .env("RUST_BACKTRACE", "1")
        .output()?)
}

/// Runs the binary off the runtime thread so the fake daemon keeps being served meanwhile.
async fn filectx_async(args: Vec<String>, cwd: &Path) -> TestResult<Output> {
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        filectx(&args, &cwd)
    })
    .await?
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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
        "--socket",
        "FILECTX_SOCKET",
        "XDG_RUNTIME_DIR/filectx.sock",
        "--json",
        "Exit codes:",
        "0  success",
        "2  usage error",
        "3  the daemon is not reachable",
        "4  the request failed",
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
            format!("filectx: no daemon is listening at {socket} (start one with: filectxd)\n")
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
    let out =
        Command::new(BIN).arg("status").current_dir(dir.path()).env("FILECTX_SOCKET", &socket).output()?;
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
    assert_eq!(stderr, "filectx: the daemon answered error -31013 FS_BUSY: the file is locked\n");
    assert_clean_stderr(&stderr);
    // The session is still closed politely after the failure.
    let received = daemon.received().await?;
    let methods: Vec<&str> = received.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["initialize", "daemon/status", "shutdown", "exit"]);
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
