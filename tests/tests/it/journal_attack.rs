//! The journal under attack: kill -9 at each step of a journaled edit (the file old or new,
//! every landed change restorable after a restart), the byte, per-file and age caps, a restart
//! between change and restore, two sessions and two owners, paths a session may not read (never
//! listed, diffed or restored), a read-only session, the journal's privacy (0700, files 0600,
//! another user cannot read it), the journal off, and a gate asked about a restore.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use filectx_tests::skip::{NOBODY, can_play_another_user};
use filectx_tests::{Daemon, Raw, fs_error, ok, root_of, rpc, tool_as, tool_ok};
use serde_json::{Value, json};

/// A session rooted at `root`.
fn session_at(daemon: &Daemon, root: &Path) -> Raw {
    daemon.session_with(json!({"roots": [root], "clientInfo": {"name": "journal-attack"}}))
}

/// The entries `params` list.
fn list(raw: &mut Raw, params: Value) -> Vec<Value> {
    ok(raw, "journal/list", params)["entries"].as_array().unwrap().clone()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The journal folder a [`Daemon::start`]ed daemon uses by default.
fn journal_dir_of(daemon: &Daemon) -> PathBuf {
    daemon.socket.parent().unwrap().join("journal")
}

#[test]
fn a_kill_at_each_step_of_a_journaled_edit_leaves_old_or_new_and_a_landed_edit_restores() {
    let old = "first line\nMARKER-OLD\nlast line\n".to_owned();
    let new = old.replace("MARKER-OLD", "MARKER-NEW");
    for point in ["journal::kept", "journal::begun", "provider::stage::written", "provider::replace::renamed"]
    {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().canonicalize().unwrap();
        let file = root.join("target.txt");
        std::fs::write(&file, &old).unwrap();

        let mut dead = Daemon::start_failing(&format!("{point}=return"));
        let mut raw = session_at(&dead, &root);
        tool_ok(&mut raw, "read", json!({"file_path": file}));
        raw.send_tool(
            "edit",
            json!({"file_path": file, "old_string": "MARKER-OLD", "new_string": "MARKER-NEW"}),
        );
        let answer = raw.recv_within(Duration::from_secs(20));
        assert!(answer.is_none(), "{point}: the edit was answered: {answer:?}\n{}", dead.log_text());
        let status = dead.wait_exit();
        assert_eq!(status.signal(), Some(9), "{point}: not killed: {status:?}");
        assert!(dead.log_text().contains(&format!("crash point {point}")), "{point}: not reached");

        let content = read(&file);
        assert!(content == old || content == new, "{point}: half-written: {content:?}");
        let landed = content == new;
        assert_eq!(landed, point == "provider::replace::renamed", "{point}: {content:?}");

        let journal = journal_dir_of(&dead);
        let journal = journal.display().to_string();
        let fresh = Daemon::start(&["--journal-dir", &journal]);
        let mut raw = session_at(&fresh, &root);
        let entries = list(&mut raw, json!({"path": file}));
        if landed {
            assert_eq!(entries.len(), 1, "{point}: {entries:?}");
            assert_eq!(entries[0]["operation"], "edit", "{point}");
            assert_eq!(entries[0]["restorable"], true, "{point}");
            ok(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
            assert_eq!(read(&file), old, "{point}: the restore did not put back the old content");
        } else {
            for entry in &entries {
                let refused = rpc(&mut raw, "journal/restore", json!({"entry": entry["entry"]}));
                assert!(
                    refused.get("error").is_some(),
                    "{point}: an entry of a change that never landed restored: {entry}"
                );
                assert_eq!(fs_error(&refused), "FS_STALE_VERSION", "{point}");
                assert_eq!(read(&file), old, "{point}");
            }
            assert_eq!(fresh.status()["journalEntries"], entries.len() as u64, "{point}");
        }
    }
}

#[test]
fn the_byte_cap_drops_the_oldest_and_keeps_the_newest_restorable() {
    let daemon = Daemon::start(&["--no-fsync", "--journal-max-bytes", "65536"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("big.txt");
    let body = |n: usize| format!("{n:04}{}\n", "x".repeat(4091));
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": body(0)}));
    for n in 1..40 {
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": body(n)}));
        let bytes = daemon.status()["journalBytes"].as_u64().unwrap();
        assert!(bytes <= 65536, "after {n} writes the journal holds {bytes} bytes");
    }
    let entries = list(&mut raw, json!({"path": file, "limit": 1000}));
    assert!(entries.len() < 40, "nothing was dropped: {}", entries.len());
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e["operation"] != "create"), "the oldest entry stayed");
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs[0], 40, "the newest is kept: {seqs:?}");
    ok(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
    assert_eq!(read(&file), body(38));
}

#[test]
fn a_file_over_the_per_file_cap_is_listed_unrestorable_and_left_alone() {
    let daemon = Daemon::start(&["--no-fsync", "--journal-max-file-bytes", "1024"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("four.txt");
    let old = "a line of the file\n".repeat(4096 / 19 + 1);
    std::fs::write(&file, &old).unwrap();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let new = format!("{old}more\n");
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": new}));
    let entries = list(&mut raw, json!({"path": file}));
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["restorable"], false);
    let refused = rpc(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
    assert_eq!(fs_error(&refused), "FS_TOO_LARGE");
    assert_eq!(read(&file), new);
}

#[test]
fn entries_older_than_the_age_limit_go() {
    let daemon = Daemon::start(&["--no-fsync", "--journal-max-age", "1"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("aged.txt");
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": "one\n"}));
    let first = list(&mut raw, json!({"path": file}));
    assert_eq!(first.len(), 1);
    std::thread::sleep(Duration::from_millis(1500));
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": "two\n"}));
    let now = list(&mut raw, json!({"path": file}));
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0]["entry"], first[0]["entry"], "the old entry is still listed");
    let gone = rpc(&mut raw, "journal/restore", json!({"entry": first[0]["entry"]}));
    assert_eq!(fs_error(&gone), "FS_NOT_FOUND");
}

#[test]
fn a_restart_between_change_and_restore_loses_nothing() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    let file = root.join("kept.txt");
    std::fs::write(&file, "before\n").unwrap();
    let mut first = Daemon::start(&[]);
    let journal = journal_dir_of(&first).display().to_string();
    let mut raw = session_at(&first, &root);
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    tool_ok(&mut raw, "edit", json!({"file_path": file, "old_string": "before", "new_string": "after"}));
    drop(raw);
    first.signal(rustix::process::Signal::TERM);
    first.wait_exit();

    let second = Daemon::start(&["--journal-dir", &journal]);
    let mut raw = session_at(&second, &root);
    let entries = list(&mut raw, json!({"path": file}));
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["operation"], "edit");
    ok(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
    assert_eq!(read(&file), "before\n");
}

#[test]
fn two_sessions_and_two_owners_filter_and_restore_each_others_entries() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let mut a = session_at(&daemon, &root);
    let (fa, fb) = (root.join("alice.txt"), root.join("bob.txt"));
    tool_as(&mut a, Some("alice"), "write", json!({"file_path": fa, "content": "alice\n"}));
    tool_as(&mut a, Some("bob"), "write", json!({"file_path": fb, "content": "bob\n"}));
    let all = list(&mut a, json!({}));
    assert_eq!(all.len(), 2);
    let sid = all[0]["sessionId"].as_str().unwrap().to_owned();
    let alice = list(&mut a, json!({"sessionId": sid, "owner": "alice"}));
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0]["path"], fa.display().to_string());
    assert_eq!(alice[0]["owner"], "alice");
    let bob = list(&mut a, json!({"owner": "bob"}));
    assert_eq!(bob.len(), 1);
    assert_eq!(bob[0]["path"], fb.display().to_string());
    assert!(list(&mut a, json!({"sessionId": "no-such-session"})).is_empty());

    let mut b = session_at(&daemon, &root);
    let seen = list(&mut b, json!({"sessionId": sid}));
    assert_eq!(seen.len(), 2);
    ok(&mut b, "journal/restore", json!({"entry": alice[0]["entry"]}));
    assert!(!fa.exists(), "restoring the creation removes the file");
    assert_eq!(read(&fb), "bob\n");
}

#[test]
fn paths_a_session_may_not_read_are_never_listed_diffed_or_restored() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let (x, y) = (root.join("x"), root.join("y"));
    std::fs::create_dir_all(x.join("secret")).unwrap();
    std::fs::create_dir(&y).unwrap();
    let f = x.join("f.txt");
    let mut a = session_at(&daemon, &x);
    tool_ok(&mut a, "write", json!({"file_path": f, "content": "x's\n"}));
    let secret = x.join("secret/s.txt");
    tool_ok(&mut a, "write", json!({"file_path": secret, "content": "hidden\n"}));
    let entries = list(&mut a, json!({}));
    assert_eq!(entries.len(), 2);
    let of_f = entries.iter().find(|e| e["path"] == f.display().to_string()).unwrap().clone();
    let of_secret = entries.iter().find(|e| e["path"] == secret.display().to_string()).unwrap().clone();

    let mut b = session_at(&daemon, &y);
    assert!(list(&mut b, json!({})).is_empty(), "y's session sees x's entries");
    for method in ["journal/diff", "journal/restore"] {
        let refused = rpc(&mut b, method, json!({"entry": of_f["entry"]}));
        assert_eq!(fs_error(&refused), "FS_NOT_FOUND", "{method}: {refused}");
    }
    assert_eq!(read(&f), "x's\n");
    let outside = rpc(&mut b, "journal/list", json!({"path": f}));
    assert_eq!(fs_error(&outside), "FS_OUTSIDE_ROOT", "{outside}");

    let mut denied = daemon.session_with(json!({"roots": [x], "deny": {"read": ["secret/**"]}}));
    let seen = list(&mut denied, json!({}));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["entry"], of_f["entry"]);
    let refused = rpc(&mut denied, "journal/restore", json!({"entry": of_secret["entry"]}));
    assert_eq!(fs_error(&refused), "FS_NOT_FOUND", "{refused}");
    assert_eq!(read(&secret), "hidden\n");

    let mut read_only = daemon.session_with(json!({"roots": [x], "readOnly": true}));
    let refused = rpc(&mut read_only, "journal/restore", json!({"entry": of_f["entry"]}));
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    assert_eq!(read(&f), "x's\n");
}

/// Every folder and file under `dir` (itself included).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_owned());
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_journal_is_private() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("p.txt");
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": "one\n"}));
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": "two\n"}));
    let journal = journal_dir_of(&daemon);
    let mut all = Vec::new();
    walk(&journal, &mut all);
    assert!(all.len() > 3, "{all:?}");
    for path in &all {
        let meta = std::fs::metadata(path).unwrap();
        let want = if meta.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(meta.permissions().mode() & 0o777, want, "{}", path.display());
    }
    if !can_play_another_user() {
        return;
    }
    // Open every folder above the journal, so that its own mode is all that keeps others out.
    for dir in [daemon.dir.path(), daemon.socket.parent().unwrap()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = std::process::Command::new("ls")
        .arg(&journal)
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert!(!out.status.success(), "another user listed the journal: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{out:?}");
    let log = all.iter().find(|p| p.file_name().unwrap().to_string_lossy().starts_with("log-")).unwrap();
    let out =
        std::process::Command::new("cat").arg(log).current_dir("/").uid(NOBODY).gid(NOBODY).output().unwrap();
    assert!(!out.status.success() && out.stdout.is_empty(), "another user read the log: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{out:?}");
}

#[test]
fn without_a_journal_nothing_offers_or_answers_it() {
    let daemon = Daemon::start(&["--no-journal"]);
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.initialize(daemon.dir.path());
    let features = init["capabilities"]["features"].as_array().unwrap();
    assert!(!features.contains(&json!("journal")), "{features:?}");
    let status = daemon.status();
    assert_eq!(status["journal"], false);
    let refused = rpc(&mut raw, "journal/list", json!({}));
    assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT");
    let with = Daemon::start(&["--no-fsync"]);
    let mut raw = Raw::connect(&with.socket);
    let features = raw.initialize(with.dir.path())["capabilities"]["features"].clone();
    assert!(features.as_array().unwrap().contains(&json!("journal")), "{features}");
}

#[test]
fn a_gate_is_asked_about_a_restore_and_its_refusal_leaves_the_file() {
    let (daemon, root) = crate::gate::setup(&["--no-fsync"]);
    let file = root.join("src/a.txt");
    let mut writer = session_at(&daemon, &root);
    tool_ok(&mut writer, "read", json!({"file_path": file}));
    tool_ok(&mut writer, "edit", json!({"file_path": file, "old_string": "two", "new_string": "2"}));
    let entry = list(&mut writer, json!({"path": file}))[0]["entry"].clone();
    let (mut gate, _) =
        crate::gate::gate(&daemon, json!({"paths": [crate::gate::src(&root)], "name": "review"}));

    let id = writer.send_request("journal/restore", Some(json!({"entry": entry})));
    let asked = crate::gate::intent_within(&mut gate, filectx_tests::PATIENCE).expect("no gate/writeIntent");
    assert_eq!(asked["params"]["path"], file.display().to_string());
    assert!(asked["params"]["diff"].as_str().unwrap().contains("-2\n+two\n"), "{asked}");
    crate::gate::answer(&mut gate, &asked, json!({"allow": false, "reason": "not now"}));
    let refused = writer.response(id);
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    assert_eq!(read(&file), "one\n2\n");

    let id = writer.send_request("journal/restore", Some(json!({"entry": entry})));
    let asked = crate::gate::intent_within(&mut gate, filectx_tests::PATIENCE).expect("no gate/writeIntent");
    crate::gate::answer(&mut gate, &asked, json!({"allow": true}));
    let done = writer.response(id);
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(read(&file), "one\ntwo\n");
}
