//! `file/didChange` through the real socket: the outside-writer matrix (`>` redirect, append,
//! write-temp-and-rename, the real `sed -i`, copy-truncate, delete, rename over, a write
//! through a hard link in another folder (also one made after the read), a symlink retarget, a
//! real vim save), changes by other sessions, bursts, watched folders that are deleted and
//! re-created, a session that never reads its socket, and the `watchedPaths` count of
//! `daemon/status`.
//!
//! After every change the session that read the file must get `file/didChange` within 2 s (the
//! contract's bound) with the canonical path, the path as shown to it, and the file's version
//! (compared with a fresh `fs/stat`, which records nothing); its next `file/edit` is
//! `FS_STALE_VERSION`; a fresh `file/read` works again and so does the edit after it.
//!
//! Notifications are exactly-once per recorded version, so every request in this file (the
//! `rpc` helper) also asserts that no `file/didChange` arrives while it waits for its response:
//! once the expected notice is consumed, anything more is a duplicate or a self-notification.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use filectx_tests::skip::skip;
use filectx_tests::{Daemon, Raw, fs_error, root_of};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const DID_CHANGE: &str = "file/didChange";

/// The contract's bound: a change is notified within 2 s.
const NOTICE: Duration = Duration::from_secs(2);

/// How long we listen before concluding that no notification is coming. The daemon coalesces
/// over ~50 ms, so a notification that is due arrives well within this.
const QUIET: Duration = Duration::from_millis(750);

/// How long to wait for anything asynchronous that has no bound of its own in the contract
/// (a disconnect being noticed, thousands of notifications being processed).
const SLOW: Duration = Duration::from_secs(20);

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// The whole response of a request. A `file/didChange` that arrives before the response is a
/// failure: every test consumes the notices it expects before it sends the next request.
fn rpc(raw: &mut Raw, method: &str, params: Value) -> Value {
    let mut notes = Vec::new();
    let response = raw.request_collecting_notifications(method, Some(params.clone()), &mut notes);
    let changes: Vec<&Value> = notes.iter().filter(|n| n["method"] == DID_CHANGE).collect();
    assert!(
        changes.is_empty(),
        "unexpected file/didChange while waiting for {method} {params} (a duplicate, or a session told \
         about its own change): {changes:?}"
    );
    response
}

/// The result of a request that must succeed.
fn ok(raw: &mut Raw, method: &str, params: Value) -> Value {
    let response = rpc(raw, method, params.clone());
    assert!(response.get("error").is_none(), "{method} {params} failed: {response}");
    response["result"].clone()
}

/// `file/read` that must succeed; returns its result.
fn read(raw: &mut Raw, path: &str) -> Value {
    ok(raw, "file/read", json!({"path": path}))
}

/// The text a `file/read` result shows (lines joined with `\n`, final newline assumed).
fn text_of(result: &Value) -> String {
    result["lines"].as_array().unwrap().iter().map(|l| format!("{}\n", l.as_str().unwrap())).collect()
}

/// `file/edit`, whole response.
fn edit(raw: &mut Raw, path: &str, old: &str, new: &str) -> Value {
    rpc(raw, "file/edit", json!({"path": path, "oldString": old, "newString": new}))
}

/// `file/edit` that must succeed; returns the new version.
fn edit_ok(raw: &mut Raw, path: &str, old: &str, new: &str) -> String {
    let response = edit(raw, path, old, new);
    assert!(response.get("error").is_none(), "edit of {path} failed: {response}");
    response["result"]["version"].as_str().unwrap().to_owned()
}

/// The file's current version by `fs/stat` (records nothing); `None` when it does not exist.
fn version_of(raw: &mut Raw, path: &str) -> Option<String> {
    let stat = ok(raw, "fs/stat", json!({"path": path}));
    stat.get("version").and_then(Value::as_str).map(str::to_owned)
}

/// The version of an empty file (an intermediate state of truncate-then-write writers).
fn empty_version(raw: &mut Raw, root: &Path) -> String {
    let empty = root.join(".empty-for-version");
    fs::write(&empty, "").unwrap();
    version_of(raw, &s(&empty)).unwrap()
}

/// Runs `sh -c script sh args…` and checks that it succeeded.
fn sh(script: &str, args: &[&Path]) {
    let out = Command::new("sh").arg("-c").arg(script).arg("sh").args(args).output().unwrap();
    assert!(out.status.success(), "sh -c {script:?} {args:?}: {out:?}");
}

/// `daemon/status` through a fresh session (which observes nothing).
fn status(daemon: &Daemon) -> Value {
    daemon.status()
}

fn watched_paths(daemon: &Daemon) -> u64 {
    status(daemon)["watchedPaths"].as_u64().unwrap_or_else(|| panic!("{}", status(daemon)))
}

/// Waits until `daemon/status` reports `expected` watched paths.
fn wait_watched(daemon: &Daemon, expected: u64, what: &str) {
    let deadline = Instant::now() + SLOW;
    loop {
        let now = watched_paths(daemon);
        if now == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: watchedPaths stuck at {now}, expected {expected}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the `file/didChange` of `file`; checks its path and displayPath, and that its
/// version is the file's current one (by a fresh `fs/stat`, `None` when deleted) or one of
/// `intermediate` (states a non-atomic writer passes through: the daemon reports the version
/// it saw when the coalescing interval ended). Returns the current version.
fn expect_change(
    raw: &mut Raw,
    file: &Path,
    display: &str,
    intermediate: &[Option<String>],
) -> Option<String> {
    let started = Instant::now();
    let note = raw
        .next_notification(DID_CHANGE, NOTICE)
        .unwrap_or_else(|| panic!("no file/didChange for {} within {NOTICE:?}", file.display()));
    let keys: HashSet<&str> = note.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, HashSet::from(["path", "displayPath", "version"]), "{note}");
    assert_eq!(note["path"], s(file), "{note}");
    assert_eq!(note["displayPath"], display, "{note}");
    assert!(note["version"].is_string() || note["version"].is_null(), "{note}");
    let current = version_of(raw, &s(file));
    let said = note["version"].as_str().map(str::to_owned);
    assert!(
        said == current || intermediate.contains(&said),
        "notified version {said:?} is neither the current {current:?} nor one of {intermediate:?} \
         (after {:?})",
        started.elapsed()
    );
    current
}

/// The session's next edit is stale (`data.currentVersion` is the current version); a fresh
/// read shows `expected` and records the current version; then an edit of `old` → `new`
/// succeeds (a `file/write` when `old` is empty: an empty file has nothing to match).
fn stale_then_fresh(
    raw: &mut Raw,
    rel: &str,
    file: &Path,
    current: &str,
    expected: &str,
    old: &str,
    new: &str,
) {
    let probe = if old.is_empty() { "never-there" } else { old };
    let response = edit(raw, rel, probe, "whatever");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert_eq!(response["error"]["data"]["currentVersion"], current, "{response}");
    let again = read(raw, rel);
    assert_eq!(again["version"], current, "{again}");
    assert_eq!(text_of(&again), expected, "{again}");
    let stat = ok(raw, "file/stat", json!({"path": rel}));
    assert_eq!(stat["fresh"], true, "{stat}");
    if old.is_empty() {
        let written = ok(raw, "file/write", json!({"path": rel, "content": new}));
        assert_eq!(written["operation"], "update", "{written}");
        assert_eq!(fs::read_to_string(file).unwrap(), new);
    } else {
        edit_ok(raw, rel, old, new);
        assert_eq!(fs::read_to_string(file).unwrap(), expected.replacen(old, new, 1));
    }
    // The session's own change does not come back to it as a notification.
    raw.assert_no_notification(DID_CHANGE, QUIET);
}

/// A daemon, a file `rel` with `content` in its folder, and a session that has read it.
struct Watched {
    daemon: Daemon,
    root: PathBuf,
    file: PathBuf,
    raw: Raw,
    version: String,
}

fn watched_file(rel: &str, content: &str) -> Watched {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let file = root.join(rel);
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(&file, content).unwrap();
    let mut raw = daemon.session();
    let version = read(&mut raw, rel)["version"].as_str().unwrap().to_owned();
    Watched { daemon, root, file, raw, version }
}

// ---------------------------------------------------------------------------------------------
// The outside-writer matrix
// ---------------------------------------------------------------------------------------------

/// `printf … > file`: truncate, then write in place (same inode).
#[test]
fn redirect_in_place_is_notified() {
    let Watched { daemon: _daemon, root, file, mut raw, version, .. } =
        watched_file("notes.txt", "one\ntwo\n");
    let empty = empty_version(&mut raw, &root);
    let inode = fs::metadata(&file).unwrap().ino();
    sh("printf 'uno\\ndos\\n' > \"$1\"", &[&file]);
    assert_eq!(fs::metadata(&file).unwrap().ino(), inode, "written in place");
    let current = expect_change(&mut raw, &file, "notes.txt", &[Some(empty)]).unwrap();
    assert_ne!(current, version);
    stale_then_fresh(&mut raw, "notes.txt", &file, &current, "uno\ndos\n", "dos", "DOS");
}

/// `printf … >> file`.
#[test]
fn append_is_notified() {
    let Watched { daemon: _daemon, file, mut raw, .. } = watched_file("log.txt", "first\n");
    sh("printf 'second\\n' >> \"$1\"", &[&file]);
    let current = expect_change(&mut raw, &file, "log.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "log.txt", &file, &current, "first\nsecond\n", "second", "2nd");
}

/// An editor's save: write a temp file next to the original, then rename it over the original
/// (a new inode; only the folder watch can see this).
#[test]
fn write_temp_and_rename_over_is_notified() {
    let Watched { daemon: _daemon, file, mut raw, .. } = watched_file("src/main.rs", "fn main() {}\n");
    let temp = file.with_file_name(".main.rs.swp-write");
    fs::write(&temp, "fn main() { run(); }\n").unwrap();
    fs::rename(&temp, &file).unwrap();
    let current = expect_change(&mut raw, &file, "src/main.rs", &[]).unwrap();
    stale_then_fresh(&mut raw, "src/main.rs", &file, &current, "fn main() { run(); }\n", "run()", "go()");
}

/// The real `sed -i` (GNU sed: a temp file in the same folder renamed over the original).
#[test]
fn sed_in_place_is_notified() {
    let Watched { daemon: _daemon, file, mut raw, .. } =
        watched_file("conf/app.ini", "debug = false\nport = 80\n");
    let out = Command::new("sed").args(["-i", "s/false/true/"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let current = expect_change(&mut raw, &file, "conf/app.ini", &[]).unwrap();
    stale_then_fresh(&mut raw, "conf/app.ini", &file, &current, "debug = true\nport = 80\n", "80", "8080");
}

/// logrotate's copytruncate: copy the file elsewhere, then truncate the original in place. An
/// empty file has nothing an edit could match, so the last step is a `file/write` (an update,
/// which needs the same fresh observation).
#[test]
fn copy_truncate_is_notified() {
    let Watched { daemon: _daemon, root, file, mut raw, .. } = watched_file("app.log", "line 1\nline 2\n");
    let rotated = root.join("rotated/app.log.1");
    fs::create_dir_all(rotated.parent().unwrap()).unwrap();
    sh("cp \"$1\" \"$2\" && truncate -s 0 \"$1\"", &[&file, &rotated]);
    assert_eq!(fs::read_to_string(&rotated).unwrap(), "line 1\nline 2\n");
    let current = expect_change(&mut raw, &file, "app.log", &[]).unwrap();
    assert_eq!(current, empty_version(&mut raw, &root));
    stale_then_fresh(&mut raw, "app.log", &file, &current, "", "", "line 3\n");
}

/// `rm file`: the notice says `version: null`; the next edit is stale (the stale check comes
/// first, and what was read is gone); a read is `FS_NOT_FOUND`; once the file is back, a read
/// makes it editable again.
#[test]
fn delete_is_notified_with_a_null_version() {
    let Watched { daemon: _daemon, root, file, mut raw, .. } = watched_file("gone.txt", "here\n");
    sh("rm \"$1\"", &[&file]);
    assert_eq!(expect_change(&mut raw, &file, "gone.txt", &[]), None);
    let response = edit(&mut raw, "gone.txt", "here", "there");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert!(response["error"]["data"]["currentVersion"].is_null(), "{response}");
    let response = rpc(&mut raw, "file/read", json!({"path": "gone.txt"}));
    assert_eq!(fs_error(&response), "FS_NOT_FOUND", "{response}");

    // Back again (with other bytes): the session was already told that its version is gone,
    // so no second notice; reading records the new file and the edit works.
    fs::write(root.join("gone.txt"), "back\n").unwrap();
    raw.assert_no_notification(DID_CHANGE, QUIET);
    let current = version_of(&mut raw, "gone.txt").unwrap();
    stale_then_fresh(&mut raw, "gone.txt", &file, &current, "back\n", "back", "home");
}

/// `mv other file`: another file renamed over the observed one.
#[test]
fn rename_over_is_notified() {
    let Watched { daemon: _daemon, root, file, mut raw, .. } = watched_file("target.txt", "old target\n");
    let other = root.join("other.txt");
    fs::write(&other, "the other file\n").unwrap();
    sh("mv \"$1\" \"$2\"", &[&other, &file]);
    let current = expect_change(&mut raw, &file, "target.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "target.txt", &file, &current, "the other file\n", "other", "new");
    assert!(!other.exists());
}

/// A file with two names in two folders; the session read it by one name and a process writes
/// it in place through the other (invisible to the watch of the first name's folder). No deny
/// rule, so that the session's own edits of the file go through, in place.
#[test]
fn write_through_a_hard_link_in_another_folder_is_notified() {
    let daemon = Daemon::start_without_deny_rules(&[]);
    let root = root_of(&daemon);
    fs::create_dir_all(root.join("a")).unwrap();
    fs::create_dir_all(root.join("elsewhere/deep")).unwrap();
    let file = root.join("a/shared.txt");
    let link = root.join("elsewhere/deep/alias.txt");
    fs::write(&file, "alpha\nbeta\n").unwrap();
    fs::hard_link(&file, &link).unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "a/shared.txt");
    let empty = empty_version(&mut raw, &root);

    sh("printf 'alpha\\ngamma\\n' > \"$1\"", &[&link]);
    let current = expect_change(&mut raw, &file, "a/shared.txt", &[Some(empty)]).unwrap();
    stale_then_fresh(&mut raw, "a/shared.txt", &file, &current, "alpha\ngamma\n", "gamma", "delta");
    // Still one file with two names (the session's edit wrote in place).
    assert_eq!(fs::read_to_string(&link).unwrap(), "alpha\ndelta\n");

    // An append through the other name is seen too, and the edit after it keeps the link.
    sh("printf 'epsilon\\n' >> \"$1\"", &[&link]);
    let current = expect_change(&mut raw, &file, "a/shared.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "a/shared.txt", &file, &current, "alpha\ndelta\nepsilon\n", "alpha", "ALPHA");
    assert_eq!(fs::read_to_string(&link).unwrap(), "ALPHA\ndelta\nepsilon\n");
}

/// A second name made in another folder after the session read the file (when it had one
/// name): once the session has read the file again (it now has two names), a write through the
/// new name is notified like any other change.
#[test]
fn a_hard_link_made_after_the_read_is_watched_once_read_again() {
    // No deny rule, so that the session's edit of the file with two names goes through.
    let daemon = Daemon::start_without_deny_rules(&[]);
    let root = root_of(&daemon);
    fs::create_dir_all(root.join("a")).unwrap();
    fs::create_dir_all(root.join("b")).unwrap();
    let file = root.join("a/late.txt");
    let link = root.join("b/late-alias.txt");
    fs::write(&file, "one name\n").unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "a/late.txt");
    fs::hard_link(&file, &link).unwrap();
    assert_eq!(fs::metadata(&file).unwrap().nlink(), 2);
    // The link count changed, the bytes did not: nothing to report.
    raw.assert_no_notification(DID_CHANGE, QUIET);
    read(&mut raw, "a/late.txt");

    sh("printf 'two names\\n' >> \"$1\"", &[&link]);
    let current = expect_change(&mut raw, &file, "a/late.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "a/late.txt", &file, &current, "one name\ntwo names\n", "two", "2");
    assert_eq!(fs::read_to_string(&link).unwrap(), "one name\n2 names\n");
}

/// `ln -sfn B link` after the session read `link` (→ A).
///
/// What the contract says: a read records (session, *file*) → version, and paths are resolved
/// through symlinks, so the observation is A's (keyed by A's canonical path). `file/didChange`
/// goes to sessions "whose recorded observation of that file has just become stale": A's bytes
/// did not change, so nothing the session recorded went stale and no notice is due. The
/// session's next edit through `link` now targets B, which this session never read: the contract
/// ("writing an existing file, and any edit, need a prior read of the unchanged file in this
/// session") makes that `FS_NOT_OBSERVED` — neither a silent edit of B (A's read must not
/// authorize B) nor a stale report (B did not change since a read; there was none). A itself is
/// untouched and the session's record of it is still good: an edit of A by its own name works,
/// and an outside change of A is notified under A's path (never `link`). Reading `link` again
/// records B and the edit through `link` then works.
#[test]
fn symlink_retarget_changes_no_observed_file() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let a = root.join("a.txt");
    let b = root.join("b.txt");
    let link = root.join("current.txt");
    fs::write(&a, "I am A\n").unwrap();
    fs::write(&b, "I am B\n").unwrap();
    symlink("a.txt", &link).unwrap();
    let mut raw = daemon.session();
    let seen = read(&mut raw, "current.txt");
    assert_eq!(text_of(&seen), "I am A\n");

    let out = Command::new("ln").args(["-sfn", "b.txt"]).arg(&link).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&link).unwrap(), "I am B\n");
    raw.assert_no_notification(DID_CHANGE, QUIET);

    let response = edit(&mut raw, "current.txt", "I am B", "B edited");
    assert_eq!(fs_error(&response), "FS_NOT_OBSERVED", "{response}");
    let response = edit(&mut raw, "current.txt", "I am A", "A edited");
    assert_ne!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert_eq!(fs::read_to_string(&a).unwrap(), "I am A\n");
    assert_eq!(fs::read_to_string(&b).unwrap(), "I am B\n");
    let stat = ok(&mut raw, "file/stat", json!({"path": "a.txt"}));
    assert_eq!(
        (stat["fresh"].clone(), stat["observedVersion"].clone()),
        (json!(true), seen["version"].clone())
    );

    // A by its own name: still fresh, and an outside change of A is reported as A.
    edit_ok(&mut raw, "a.txt", "I am A", "A edited");
    raw.assert_no_notification(DID_CHANGE, QUIET);
    fs::write(&a, "A changed outside\n").unwrap();
    let current = expect_change(&mut raw, &a, "a.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "a.txt", &a, &current, "A changed outside\n", "outside", "inside");

    // Reading through the link now records B; the edit through the link changes B, not the link.
    assert_eq!(text_of(&read(&mut raw, "current.txt")), "I am B\n");
    edit_ok(&mut raw, "current.txt", "I am B", "B edited");
    assert_eq!(fs::read_to_string(&b).unwrap(), "B edited\n");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    raw.assert_no_notification(DID_CHANGE, QUIET);
}

/// A save by the real vim (skipped when it is not installed): `-u NONE` keeps 'writebackup' with
/// 'backupcopy=auto', so vim renames the original away, writes a new file and deletes the
/// backup — the observed name is briefly missing. The daemon reports the version it sees when
/// the coalescing interval ends, so a notice with the new version is expected (an empty file
/// is the only other state the file passes through while vim writes it).
#[test]
fn a_real_vim_save_is_notified() {
    if Command::new("vim").arg("--version").output().is_err() {
        skip("vim is not installed (apt-get install vim)");
        return;
    }
    let Watched { daemon: _daemon, root, file, mut raw, .. } = watched_file("edit/me.txt", "hello\nworld\n");
    let empty = empty_version(&mut raw, &root);
    let out = Command::new("vim")
        .args(["-u", "NONE", "-i", "NONE", "-N", "-n", "-es", "-c", "%s/world/vim/", "-c", "wq"])
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "hello\nvim\n");
    let current = expect_change(&mut raw, &file, "edit/me.txt", &[Some(empty)]).unwrap();
    stale_then_fresh(&mut raw, "edit/me.txt", &file, &current, "hello\nvim\n", "vim", "there");
}

// ---------------------------------------------------------------------------------------------
// Other sessions, bursts, folders
// ---------------------------------------------------------------------------------------------

/// A change by another session notifies every session that had read the file, each with the
/// path shown relative to its own cwd (absolute when outside it) — and never the session that
/// made the change. Each recorded version is reported once: a session already told does not
/// hear of later changes until it reads again. Several rounds, alternating who edits, so a
/// session told of its own edit (the watcher racing the edit's bookkeeping) would show.
#[test]
fn another_sessions_change_notifies_the_others_but_not_itself() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(root.join("shared")).unwrap();
    let file = root.join("shared/x.txt");
    fs::write(&file, "round 0\n").unwrap();

    // A works in sub/: the file is outside its cwd, so it is shown absolute.
    let mut a = daemon
        .session_with(json!({"roots": [s(&root)], "cwd": s(&root.join("sub")), "clientInfo": {"name": "a"}}));
    let mut b = daemon.session();
    let mut c = daemon.session();
    let display_a = s(&file);
    let display_bc = "shared/x.txt";
    let rel_a = "../shared/x.txt";
    read(&mut a, rel_a);
    read(&mut b, display_bc);
    // C reads through the tools layer: the observation (and the notice) is the same.
    let shown = ok(&mut c, "tools/call", json!({"name": "read", "arguments": {"file_path": display_bc}}));
    assert_eq!(shown["isError"], false, "{shown}");

    // B edits: A and C are told, B is not.
    let v1 = edit_ok(&mut b, display_bc, "round 0", "round 1");
    assert_eq!(expect_change(&mut a, &file, &display_a, &[]), Some(v1.clone()));
    assert_eq!(expect_change(&mut c, &file, display_bc, &[]), Some(v1.clone()));
    b.assert_no_notification(DID_CHANGE, QUIET);

    // Rounds: the editor alternates between A and B (each re-reads when it was told of the
    // other's change). C never reads again, so it is told nothing more.
    let mut text = String::from("round 1\n");
    for round in 2..=9 {
        let (editor, other, editor_rel, other_display) = if round % 2 == 0 {
            (&mut a, &mut b, rel_a, display_bc)
        } else {
            (&mut b, &mut a, display_bc, display_a.as_str())
        };
        let response = edit(editor, editor_rel, "round", "ROUND");
        assert_eq!(fs_error(&response), "FS_STALE_VERSION", "round {round}: {response}");
        assert_eq!(text_of(&read(editor, editor_rel)), text);
        let new_text = format!("round {round}\n");
        let version = if round == 5 {
            // A whole-file write by another session counts the same as an edit.
            let written = ok(editor, "file/write", json!({"path": editor_rel, "content": new_text}));
            written["version"].as_str().unwrap().to_owned()
        } else {
            edit_ok(editor, editor_rel, &text, &new_text)
        };
        text = new_text;
        assert_eq!(expect_change(other, &file, other_display, &[]), Some(version));
        // A self-notification would have come with the other's, from the same check.
        editor.assert_no_notification(DID_CHANGE, Duration::from_millis(250));
    }
    a.assert_no_notification(DID_CHANGE, QUIET);
    b.assert_no_notification(DID_CHANGE, Duration::from_millis(50));
    c.assert_no_notification(DID_CHANGE, Duration::from_millis(50));

    // C's record is still the first version: stale, then fine after a read.
    let current = version_of(&mut c, display_bc).unwrap();
    stale_then_fresh(&mut c, display_bc, &file, &current, &text, "round", "final round");
}

/// 1,000 outside writes in a row to one read file yield a small, bounded number of notices
/// (counted over a second after the burst), all about that file; after a fresh read the next
/// burst is notified again.
#[test]
fn a_burst_of_writes_yields_a_bounded_number_of_notifications() {
    let Watched { daemon: _daemon, file, mut raw, .. } = watched_file("hot.txt", "start\n");
    for burst in 0..2 {
        for i in 0..1000 {
            fs::write(&file, format!("burst {burst} write {i}\n")).unwrap();
        }
        let notes = raw.notifications_during(DID_CHANGE, Duration::from_secs(1));
        assert!(!notes.is_empty(), "burst {burst}: no file/didChange at all");
        assert!(notes.len() <= 3, "burst {burst}: {} notifications: {notes:?}", notes.len());
        for note in &notes {
            assert_eq!(note["path"], s(&file), "{note}");
            assert_eq!(note["displayPath"], "hot.txt", "{note}");
            assert!(note["version"].is_string(), "{note}");
        }
        let current = version_of(&mut raw, "hot.txt").unwrap();
        let expected = format!("burst {burst} write 999\n");
        stale_then_fresh(&mut raw, "hot.txt", &file, &current, &expected, "999", "last");
    }
}

/// The watched folder is deleted (the session is told the file is gone), then re-created with
/// the file written again: after the session reads the new file, a further outside change is
/// notified again, and `watchedPaths` is back where it was once the session has gone.
#[test]
fn a_deleted_and_recreated_folder_is_watched_again() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let base = watched_paths(&daemon);
    let dir = root.join("pkg");
    let file = dir.join("mod.txt");
    fs::create_dir_all(&dir).unwrap();
    fs::write(&file, "v1\n").unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "pkg/mod.txt");
    assert_eq!(watched_paths(&daemon), base + 1);

    sh("rm -rf \"$1\"", &[&dir]);
    assert_eq!(expect_change(&mut raw, &file, "pkg/mod.txt", &[]), None);

    fs::create_dir(&dir).unwrap();
    fs::write(&file, "v2\n").unwrap();
    let current = version_of(&mut raw, "pkg/mod.txt").unwrap();
    stale_then_fresh(&mut raw, "pkg/mod.txt", &file, &current, "v2\n", "v2", "v3");

    fs::write(&file, "v4 from outside\n").unwrap();
    let current = expect_change(&mut raw, &file, "pkg/mod.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "pkg/mod.txt", &file, &current, "v4 from outside\n", "v4", "v5");

    drop(raw);
    wait_watched(&daemon, base, "after the session that watched the re-created folder left");
}

/// The same, with the folder replaced at once (`rm -rf d && mkdir d && printf … > d/f`, as a
/// checkout or a build step does): the new folder exists again before the daemon gets to the
/// events. The session is told (the new version, or null if the daemon looked while the file
/// was missing) and, after reading the new file, hears of the next outside change.
#[test]
fn a_folder_replaced_at_once_is_watched_again() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let base = watched_paths(&daemon);
    let dir = root.join("gen");
    let file = dir.join("out.txt");
    fs::create_dir_all(&dir).unwrap();
    fs::write(&file, "generated 1\n").unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "gen/out.txt");
    let empty = empty_version(&mut raw, &root);

    sh("rm -rf \"$1\" && mkdir \"$1\" && printf 'generated 2\\n' > \"$2\"", &[&dir, &file]);
    let current = expect_change(&mut raw, &file, "gen/out.txt", &[None, Some(empty)]).unwrap();
    stale_then_fresh(&mut raw, "gen/out.txt", &file, &current, "generated 2\n", "2", "two");

    fs::write(&file, "generated 3\n").unwrap();
    let current = expect_change(&mut raw, &file, "gen/out.txt", &[]).unwrap();
    stale_then_fresh(&mut raw, "gen/out.txt", &file, &current, "generated 3\n", "3", "three");

    drop(raw);
    wait_watched(&daemon, base, "after the session that watched the replaced folder left");
}

// ---------------------------------------------------------------------------------------------
// Slow readers and the status counters
// ---------------------------------------------------------------------------------------------

/// A session that stops reading its socket while a thousand notices are due for it: the daemon
/// drops what the stuck session cannot take (counted in `notificationsDropped`) rather than
/// buffering without bound, and meanwhile keeps answering another session rightly (and keeps
/// notifying it), and answers the stuck session again once it reads. Every due notice is either
/// delivered or counted as dropped, exactly once. Nothing here is timed: a daemon held up by the
/// stuck session would leave a request unanswered, which the read timeout (`PATIENCE`, 10 s) turns
/// into a failure.
#[test]
fn a_session_that_never_reads_does_not_hold_up_the_others() {
    const FILES: usize = 1000;
    let daemon = Daemon::start(&["--max-queued-messages", "16"]);
    let root = root_of(&daemon);
    let many = root.join("many");
    fs::create_dir_all(&many).unwrap();
    let files: Vec<PathBuf> = (0..FILES).map(|i| many.join(format!("f{i:04}.txt"))).collect();
    for file in &files {
        fs::write(file, "original\n").unwrap();
    }
    let mut stuck = daemon.session();
    for file in &files {
        stuck.call("file/read", Some(json!({"path": s(file)})));
    }
    let mut other = daemon.session();
    let mine = root.join("mine.txt");
    fs::write(&mine, "mine\n").unwrap();
    read(&mut other, "mine.txt");
    let dropped_before = status(&daemon)["notificationsDropped"].as_u64().unwrap();

    // The stuck session reads nothing from here on.
    for file in &files {
        fs::write(file, "changed\n").unwrap();
    }
    fs::write(&mine, "mine, changed\n").unwrap();

    // Meanwhile the other session hears of its own file; once the daemon is dropping notices for
    // the stuck one (so that one is truly backed up), the other's requests are all answered, with
    // the file's current version.
    let current = expect_change(&mut other, &mine, "mine.txt", &[]).unwrap();
    let deadline = Instant::now() + SLOW;
    while ok(&mut other, "daemon/status", json!(null))["notificationsDropped"].as_u64().unwrap()
        == dropped_before
    {
        assert!(Instant::now() < deadline, "no notice dropped for a session that reads nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        ok(&mut other, "daemon/status", json!(null));
        assert_eq!(version_of(&mut other, "mine.txt"), Some(current.clone()));
    }
    stale_then_fresh(&mut other, "mine.txt", &mine, &current, "mine, changed\n", "changed", "kept");

    // Now the stuck session reads: whatever was delivered plus whatever was dropped is exactly
    // one notice per file.
    let deadline = Instant::now() + SLOW;
    let mut seen = HashSet::new();
    let dropped = loop {
        for note in stuck.notifications_during(DID_CHANGE, Duration::from_millis(300)) {
            let path = note["path"].as_str().unwrap().to_owned();
            assert!(files.iter().any(|f| s(f) == path), "{note}");
            assert!(note["version"].is_string(), "{note}");
            assert!(seen.insert(path), "notified twice: {note}");
        }
        let dropped = status(&daemon)["notificationsDropped"].as_u64().unwrap() - dropped_before;
        let total = seen.len() + usize::try_from(dropped).unwrap();
        assert!(total <= FILES, "{} delivered + {dropped} dropped > {FILES} files", seen.len());
        if total == FILES {
            break dropped;
        }
        assert!(Instant::now() < deadline, "{} delivered + {dropped} dropped, expected {FILES}", seen.len());
    };
    assert!(dropped > 0, "{FILES} notices to a session that never read, and none dropped");
    stuck.assert_no_notification(DID_CHANGE, Duration::from_millis(300));
    // Once it reads, the stuck session is served again, and told the same count.
    let answer = ok(&mut stuck, "daemon/status", json!(null));
    assert_eq!(answer["notificationsDropped"].as_u64().unwrap() - dropped_before, dropped);
}

/// `watchedPaths` counts watched folders (one per folder, however many files in it are observed
/// and by however many sessions) plus files with several hard links; it goes back down when
/// the sessions that needed the watches disconnect.
#[test]
fn watched_paths_follow_observations() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    for dir in ["w", "h", "h-other"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    fs::write(root.join("w/f.txt"), "f\n").unwrap();
    fs::write(root.join("w/g.txt"), "g\n").unwrap();
    fs::write(root.join("h/linked.txt"), "linked\n").unwrap();
    fs::hard_link(root.join("h/linked.txt"), root.join("h-other/linked.txt")).unwrap();
    let base = watched_paths(&daemon);

    let mut a = daemon.session();
    // fs/* records nothing and watches nothing.
    ok(&mut a, "fs/readText", json!({"path": "w/f.txt"}));
    assert_eq!(watched_paths(&daemon), base);
    read(&mut a, "w/f.txt");
    assert_eq!(watched_paths(&daemon), base + 1, "the folder w");
    read(&mut a, "w/g.txt");
    assert_eq!(watched_paths(&daemon), base + 1, "still only the folder w");
    read(&mut a, "h/linked.txt");
    assert_eq!(watched_paths(&daemon), base + 3, "w, h and the hard-linked file itself");

    let mut b = daemon.session();
    read(&mut b, "w/f.txt");
    assert_eq!(watched_paths(&daemon), base + 3, "a second observer adds no watch");

    drop(a);
    wait_watched(&daemon, base + 1, "after A left (B still observes w/f.txt)");
    // B's watch still works.
    fs::write(root.join("w/f.txt"), "f changed\n").unwrap();
    let current = expect_change(&mut b, &root.join("w/f.txt"), "w/f.txt", &[]).unwrap();
    stale_then_fresh(&mut b, "w/f.txt", &root.join("w/f.txt"), &current, "f changed\n", "changed", "again");

    drop(b);
    wait_watched(&daemon, base, "after every session left");
}

/// The daemon's own edit tells the watcher what it wrote (so that the watcher need not hash the
/// file for the events of that write); an outside write right after it — in place and of the
/// same size, so that within one timestamp tick size, mtime and ctime can all stay what the
/// daemon's write left — must still be seen: the session is told, with the outside version.
/// Many rounds, so that some land within the tick of the daemon's own write.
#[test]
fn an_outside_write_right_after_an_own_edit_is_notified() {
    use std::os::unix::fs::FileExt;
    let Watched { daemon: _daemon, file, mut raw, .. } = watched_file("hot.rs", "value: 00\n");
    let mut text = String::from("value: 00\n");
    for round in 1..=20u32 {
        let ours = format!("value: {:02}\n", (2 * round) % 100);
        edit_ok(&mut raw, "hot.rs", &text, &ours);
        let theirs = format!("value: {:02}\n", (2 * round + 1) % 100);
        let inode = fs::metadata(&file).unwrap().ino();
        fs::OpenOptions::new().write(true).open(&file).unwrap().write_all_at(theirs.as_bytes(), 0).unwrap();
        assert_eq!(fs::metadata(&file).unwrap().ino(), inode, "written in place");
        let current = expect_change(&mut raw, &file, "hot.rs", &[]);
        let again = read(&mut raw, "hot.rs");
        assert_eq!(text_of(&again), theirs, "round {round}");
        assert_eq!(again["version"].as_str(), current.as_deref(), "round {round}");
        text = theirs;
    }
    raw.assert_no_notification(DID_CHANGE, QUIET);
}

/// The watcher drops the events of the daemon's own temporary files by their exact names, never
/// by their look: a real file named like one (this family's pattern, a made-up token and random
/// part), in a folder where the daemon has just staged and renamed files of its own, is
/// watched like any other.
#[test]
fn a_file_named_like_a_staging_file_is_watched_like_any_other() {
    let name = ".notes.txt.filectx-0123456789abcdef-deadbeef-1-1-0123456789abcdef0123456789abcdef.tmp";
    let Watched { daemon: _daemon, root, file, mut raw, .. } = watched_file(name, "one\n");
    fs::write(root.join("notes.txt"), "notes\n").unwrap();
    read(&mut raw, "notes.txt");
    // The daemon's own staging in the same folder, right before the outside change.
    edit_ok(&mut raw, "notes.txt", "notes", "NOTES");
    edit_ok(&mut raw, name, "one", "uno");
    fs::write(&file, "two\n").unwrap();
    let current = expect_change(&mut raw, &file, name, &[]).unwrap();
    stale_then_fresh(&mut raw, name, &file, &current, "two\n", "two", "dos");
}

/// Another session's edit is notified to the session that observed the file without the
/// watcher hashing the file: the version the daemon wrote is taken from one `stat` of the very
/// inode it renamed there (`hashedBytes` of `daemon/status` does not move).
#[test]
fn an_own_edit_is_notified_without_hashing_the_file() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let file = root.join("shared.txt");
    fs::write(&file, format!("{}the end\n", "first\n".repeat(10_000))).unwrap();
    let (mut a, mut b) = (daemon.session(), daemon.session());
    read(&mut a, "shared.txt");
    read(&mut b, "shared.txt");
    let hashed = |daemon: &Daemon| status(daemon)["hashedBytes"].as_u64().unwrap();
    let before = hashed(&daemon);
    let version = edit_ok(&mut a, "shared.txt", "the end", "THE END");
    let note = b.next_notification(DID_CHANGE, NOTICE).expect("B is told of A's edit");
    assert_eq!(note["version"], version, "{note}");
    a.assert_no_notification(DID_CHANGE, QUIET);
    assert_eq!(hashed(&daemon), before, "the watcher hashed the file the daemon had just written");
}
