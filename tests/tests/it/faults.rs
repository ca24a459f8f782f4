//! Faults inside the daemon and underneath it: a panic in one request's handler (through the
//! test-only `debug/panic` method), writes into a read-only folder, and writes onto a full
//! filesystem — a real one (a small tmpfs in a private mount namespace, where the machine
//! allows it) and a simulated one (the `provider::stage::write` fail point returning ENOSPC) —
//! and a file whose hash never settles under the watcher's re-check (`provider::recheck`).
//! Each must answer the one request with the right error, leave the original file as it was
//! and no temporary file behind, and keep the daemon serving everyone else.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use filectx_protocol::error::INTERNAL_ERROR;
use filectx_tests::skip::skip;
use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, rpc, wait_for_sessions};
use serde_json::{Value, json};

/// The names in a folder, sorted.
pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Why a test that needs a private mount namespace is skipped without one.
pub(crate) const NO_MOUNT_NAMESPACE: &str =
    "this machine does not allow a private mount namespace (`unshare -m`, util-linux): run the tests as root";

/// Whether this machine lets us make a private mount namespace and mount in it (`unshare -m`:
/// root, with util-linux installed); when not, the tests that need it are skipped.
pub(crate) fn can_unshare_mounts() -> bool {
    let probe = tempfile::tempdir().unwrap();
    let target = probe.path().display().to_string();
    Command::new("unshare")
        .args(["-m", "--", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", &target])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Starts a daemon inside a private mount namespace, after running `setup` (shell, `$1` is the
/// daemon's temp folder) there; the daemon's view of its files is `/proc/<pid>/root/…`.
fn start_unshared(setup: &str) -> Daemon {
    Daemon::start_configured(&[], |dir, filectxd| unshared(dir, &filectxd, setup))
}

/// `filectxd` (a command from [`Daemon::start_configured`], whose temp folder is `dir`) run in a
/// private mount namespace after `setup` (shell, `$1` is `dir`), by `exec`, so that the pid
/// stays the daemon's.
pub(crate) fn unshared(dir: &Path, filectxd: &Command, setup: &str) -> Command {
    let mut command = Command::new("unshare");
    command
        .args(["-m", "--", "sh", "-euc", &format!("{setup}\nshift; exec \"$@\""), "sh"])
        .arg(dir)
        .arg(filectxd.get_program())
        .args(filectxd.get_args())
        .env_remove("RUST_LOG");
    command
}

/// A path as the daemon (in its mount namespace) sees it, reachable from outside.
pub(crate) fn seen_by(daemon: &Daemon, path: &Path) -> std::path::PathBuf {
    Path::new(&format!("/proc/{}/root", daemon.pid())).join(path.strip_prefix("/").unwrap())
}

// ---------------------------------------------------------------------------------------------
// A panic in one handler
// ---------------------------------------------------------------------------------------------

fn hooked_daemon() -> Daemon {
    let daemon = Daemon::start_configured(&[], |_, mut command| {
        command.env("FILECTX_TEST_HOOKS", "1");
        command
    });
    daemon.require_feature("test hooks enabled", "test-hooks");
    daemon
}

#[test]
fn a_panicking_handler_fails_only_its_own_request() {
    let daemon = hooked_daemon();
    std::fs::write(daemon.dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let mut a = daemon.session();
    let mut b = daemon.session();

    // Session A pipelines: a handler that panics after 3 s (far longer than the others take,
    // even on a loaded machine), then ordinary requests, and a panic on the blocking pool (where
    // file work runs).
    let slow_panic = a.send_request("debug/panic", Some(json!({"afterMs": 3000})));
    let read = a.send_request("file/read", Some(json!({"path": "a.txt"})));
    let blocking_panic = a.send_request("debug/panic", Some(json!({"blocking": true})));
    let status = a.send_request("daemon/status", None);
    let tool =
        a.send_request("tools/call", Some(json!({"name": "read", "arguments": {"file_path": "a.txt"}})));

    // While A's first request is still in flight, another session is served.
    let other = ok(&mut b, "file/read", json!({"path": "a.txt"}));
    assert_eq!(other["lines"], json!(["alpha", "beta"]));

    let mut answers: HashMap<u64, Value> = HashMap::new();
    let mut order = Vec::new();
    for _ in 0..5 {
        let frame = a.recv();
        let id = frame["id"].as_u64().unwrap();
        order.push(id);
        answers.insert(id, frame);
    }
    for id in [slow_panic, blocking_panic] {
        let answer = &answers[&id];
        assert_eq!(error_code(answer), i64::from(INTERNAL_ERROR), "{answer}");
    }
    assert_eq!(answers[&read]["result"]["lines"], json!(["alpha", "beta"]), "{}", answers[&read]);
    assert!(answers[&status]["result"]["pid"].is_number(), "{}", answers[&status]);
    assert_eq!(answers[&tool]["result"]["isError"], json!(false), "{}", answers[&tool]);
    assert_eq!(
        order.last(),
        Some(&slow_panic),
        "the other requests answer while the panic is pending: {order:?}"
    );

    // The session that saw the panics keeps working, and so does the daemon for new sessions.
    ok(&mut a, "file/edit", json!({"path": "a.txt", "oldString": "beta", "newString": "BETA"}));
    let mut c = daemon.session();
    assert_eq!(ok(&mut c, "file/read", json!({"path": "a.txt"}))["lines"], json!(["alpha", "BETA"]));
    // a, b and c (earlier status sessions may take a moment to be counted out)
    wait_for_sessions(&mut c, 3);

    let log = daemon.log_text();
    assert!(log.contains("method handler panicked"), "the panic is logged:\n{log}");
    assert!(log.contains("deliberate panic in a request handler"), "the panic message is logged:\n{log}");
    assert!(log.contains("deliberate panic on the blocking pool"), "the blocking panic is logged:\n{log}");
}

#[test]
fn the_panic_hook_exists_only_when_switched_on() {
    // The same binary (built with the `test-hooks` feature by `cargo test --workspace`) without
    // FILECTX_TEST_HOOKS=1: no such method.
    let daemon = Daemon::start(&[]);
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.initialize(daemon.dir.path());
    let methods = init["capabilities"]["methods"].as_array().unwrap();
    assert!(!methods.contains(&json!("debug/panic")), "{methods:?}");
    let answer = raw.request("debug/panic", None);
    assert_eq!(error_code(&answer), -32601, "{answer}");
    // Its log holds everything up to this answer.
    assert!(!daemon.log_text().contains("test hooks enabled"));
}

// ---------------------------------------------------------------------------------------------
// Read-only folders
// ---------------------------------------------------------------------------------------------

/// Session reads `ro/keep.txt`, then tries to write, edit and create next to it: every one is
/// FS_PERMISSION_DENIED; the file is unchanged and nothing else appears in the folder.
fn refused_in_read_only_folder(raw: &mut Raw, folder: &Path, outside_view: &Path) {
    let keep = folder.join("keep.txt");
    ok(raw, "file/read", json!({"path": keep}));
    let attempts = [
        ("file/write", json!({"path": keep, "content": "replaced\n"})),
        ("file/edit", json!({"path": keep, "oldString": "original", "newString": "edited"})),
        ("file/write", json!({"path": folder.join("new.txt"), "content": "new\n"})),
    ];
    for (method, params) in attempts {
        let answer = rpc(raw, method, params.clone());
        assert_eq!(fs_error(&answer), "FS_PERMISSION_DENIED", "{method} {params}: {answer}");
    }
    let tool =
        ok(raw, "tools/call", json!({"name": "write", "arguments": {"file_path": keep, "content": "x"}}));
    assert_eq!(tool["error"]["code"], "FS_PERMISSION_DENIED", "{tool}");
    assert_eq!(std::fs::read_to_string(outside_view.join("keep.txt")).unwrap(), "original\n");
    assert_eq!(names(outside_view), ["keep.txt"], "no temporary file left behind");
    // The session and the daemon go on.
    assert_eq!(ok(raw, "file/read", json!({"path": keep}))["lines"], json!(["original"]));
}

/// A 0555 folder. Root ignores permission bits (the capability `CAP_DAC_OVERRIDE`): as root the
/// daemon runs without it and its sibling `CAP_DAC_READ_SEARCH` (`setpriv` takes both out of its
/// bounding set; its uid stays 0), so the mode bits stop it as they stop anyone else.
#[test]
fn writes_into_a_read_only_folder_are_refused_and_change_nothing() {
    let daemon = if !is_root() {
        Daemon::start(&[])
    } else if Command::new("setpriv").arg("--version").output().is_ok_and(|out| out.status.success()) {
        Daemon::start_configured(&[], |_, filectxd| {
            let mut command = Command::new("setpriv");
            command
                .args(["--bounding-set", "-dac_override,-dac_read_search", "--"])
                .arg(filectxd.get_program())
                .args(filectxd.get_args())
                .env_remove("RUST_LOG");
            command
        })
    } else {
        skip(
            "setpriv is not installed (util-linux): as root it takes from the daemon the power to ignore a 0555 folder",
        );
        return;
    };
    let folder = daemon.dir.path().canonicalize().unwrap().join("ro");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("keep.txt"), "original\n").unwrap();
    std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let mut raw = daemon.session();
    refused_in_read_only_folder(&mut raw, &folder, &folder);
    std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn writes_onto_a_read_only_mount_are_refused_and_change_nothing() {
    if !can_unshare_mounts() {
        skip(NO_MOUNT_NAMESPACE);
        return;
    }
    // The folder is read-only in the daemon's mount namespace only (EROFS there, for root too).
    let daemon = start_unshared(
        "mkdir -p \"$1/ro\"; printf 'original\\n' > \"$1/ro/keep.txt\"\n\
         mount --bind \"$1/ro\" \"$1/ro\"; mount -o remount,bind,ro \"$1/ro\"",
    );
    let folder = daemon.dir.path().canonicalize().unwrap().join("ro");
    let mut raw = daemon.session();
    refused_in_read_only_folder(&mut raw, &folder, &folder);
}

// ---------------------------------------------------------------------------------------------
// A full filesystem
// ---------------------------------------------------------------------------------------------

/// Session reads `full/keep.txt` and tries to replace, edit and create files on a filesystem
/// with no space left: FS_IO naming the cause; the original is intact and no temp file stays.
fn refused_on_full_disk(raw: &mut Raw, folder: &Path, outside_view: &Path, expected_names: &[&str]) {
    let keep = folder.join("keep.txt");
    ok(raw, "file/read", json!({"path": keep}));
    let big = "much longer content than there is room for\n".repeat(200);
    let attempts = [
        ("file/write", json!({"path": keep, "content": big})),
        ("file/edit", json!({"path": keep, "oldString": "original", "newString": big})),
        (
            "fs/writeText",
            json!({"path": folder.join("new.txt"), "content": big, "expect": {"kind": "createIfAbsent"}}),
        ),
    ];
    for (method, params) in attempts {
        let answer = rpc(raw, method, params);
        assert_eq!(fs_error(&answer), "FS_IO", "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("No space left on device"), "{method}: {message}");
    }
    let tool =
        ok(raw, "tools/call", json!({"name": "write", "arguments": {"file_path": keep, "content": big}}));
    assert_eq!(tool["error"]["code"], "FS_IO", "{tool}");
    assert_eq!(std::fs::read_to_string(outside_view.join("keep.txt")).unwrap(), "original\n");
    assert_eq!(names(outside_view), expected_names, "no temporary file left behind");
    // The session's record is intact: once there is room again, the same session edits.
    assert_eq!(ok(raw, "file/read", json!({"path": keep}))["lines"], json!(["original"]));
}

#[test]
fn a_full_tmpfs_answers_fs_io_and_keeps_the_original() {
    if !can_unshare_mounts() {
        skip(NO_MOUNT_NAMESPACE);
        return;
    }
    // A 256 KiB tmpfs, filled to the last block by `filler` (dd stops at ENOSPC).
    let daemon = start_unshared(
        "mkdir -p \"$1/full\"; mount -t tmpfs -o size=256k tmpfs \"$1/full\"\n\
         printf 'original\\n' > \"$1/full/keep.txt\"\n\
         dd if=/dev/zero of=\"$1/full/filler\" bs=4k 2>/dev/null || true",
    );
    let folder = daemon.dir.path().canonicalize().unwrap().join("full");
    let view = seen_by(&daemon, &folder);
    assert_eq!(names(&view), ["filler", "keep.txt"], "the tmpfs is mounted in the daemon's namespace");
    let mut raw = daemon.session();
    refused_on_full_disk(&mut raw, &folder, &view, &["filler", "keep.txt"]);
    // Free the space: the same session's write now goes through.
    std::fs::remove_file(view.join("filler")).unwrap();
    ok(&mut raw, "file/write", json!({"path": folder.join("keep.txt"), "content": "after\n"}));
    assert_eq!(std::fs::read_to_string(view.join("keep.txt")).unwrap(), "after\n");
}

#[test]
fn enospc_from_the_fail_point_answers_fs_io_and_removes_the_temp_file() {
    let daemon = Daemon::start_failing("provider::stage::write=return");
    let folder = daemon.dir.path().canonicalize().unwrap().join("full");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("keep.txt"), "original\n").unwrap();
    let mut raw = daemon.session();
    refused_on_full_disk(&mut raw, &folder, &folder, &["keep.txt"]);
    // Reads and the other sessions are untouched by a failing disk.
    let mut other = daemon.session();
    assert_eq!(
        ok(&mut other, "file/read", json!({"path": folder.join("keep.txt")}))["lines"],
        json!(["original"])
    );
}

#[test]
fn a_failed_mmap_degrades_to_positional_reads_logged_once() {
    let daemon = Daemon::start_failing("provider::map=return");
    let root = filectx_tests::root_of(&daemon);
    // Two files past the map threshold (4 MiB): each would be mapped, and each mmap fails.
    let body: String = (1..=400_000).map(|n| format!("line {n:07}\n")).collect();
    for name in ["a.log", "b.log"] {
        std::fs::write(root.join(name), &body).unwrap();
    }
    let mut raw = daemon.session();
    for name in ["a.log", "b.log"] {
        let read = ok(&mut raw, "file/read", json!({"path": root.join(name), "offset": 300_000, "limit": 2}));
        assert_eq!(read["lines"], json!(["line 0300000", "line 0300001"]), "{name}");
        assert_eq!(read["totalLines"], 400_000);
    }
    assert_eq!(daemon.status()["mappedBytes"], 0, "nothing is mapped when mmap fails");
    let log = daemon.log_text();
    assert_eq!(
        log.matches("positional reads").count(),
        1,
        "the failure is logged once, not per read:\n{log}"
    );
}

/// A file that keeps changing under the watcher's re-check (its hash never settles: the
/// `provider::recheck` fail point answers busy twice, after the re-check made when the watch was
/// placed) is looked at again, not reported gone: the one `file/didChange` names the version
/// the file settled at, never `null`.
#[test]
fn a_file_busy_under_the_watchers_recheck_is_notified_with_its_settled_version() {
    let daemon = Daemon::start_failing("provider::recheck=1*off->2*return");
    let file = filectx_tests::root_of(&daemon).join("hot.txt");
    std::fs::write(&file, "before\n").unwrap();
    let mut raw = daemon.session();
    ok(&mut raw, "file/read", json!({"path": file}));
    std::fs::write(&file, "after\n").unwrap();
    let note = raw
        .next_notification("file/didChange", std::time::Duration::from_secs(10))
        .expect("a file/didChange once the file settles");
    let current = ok(&mut raw, "file/stat", json!({"path": file}))["version"].clone();
    assert!(current.is_string(), "{current}");
    assert_eq!(note["version"], current, "{note}");
    raw.assert_no_notification("file/didChange", std::time::Duration::from_millis(300));
}
