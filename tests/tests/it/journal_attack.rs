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
    let daemon = Daemon::start(&["--no-fsync", "--journal-max-bytes", "1048576"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("big.txt");
    let body = |n: usize| format!("{n:04}{}\n", "x".repeat(64 * 1024 - 5));
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": body(0)}));
    for n in 1..40 {
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": body(n)}));
        let bytes = daemon.status()["journalBytes"].as_u64().unwrap();
        assert!(bytes <= 1 << 20, "after {n} writes the journal holds {bytes} bytes");
        let mut all = Vec::new();
        walk(&journal_dir_of(&daemon), &mut all);
        let on_disk: u64 =
            all.iter().filter(|p| p.is_file()).map(|p| std::fs::metadata(p).unwrap().len()).sum();
        assert!(on_disk <= 1 << 20, "after {n} writes the journal holds {on_disk} bytes on disk");
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

/// The smallest byte cap holds on disk through 3,000 small changes, the log's segments included
/// (a 4 MiB segment once grew past a 1 MiB cap, leaving one entry), and a smaller cap is refused
/// at start with a clear error.
#[test]
fn the_smallest_byte_cap_holds_on_disk_and_a_smaller_one_is_refused() {
    let daemon = Daemon::start(&["--no-fsync", "--journal-max-bytes", "1048576"]);
    let root = root_of(&daemon);
    let mut raw = session_at(&daemon, &root);
    let file = root.join("small.txt");
    for n in 0..3000 {
        let content = format!("{n}\n{}\n", "y".repeat(100));
        ok(&mut raw, "fs/writeText", json!({"path": file, "content": content, "expect": {"kind": "any"}}));
    }
    let mut all = Vec::new();
    walk(&journal_dir_of(&daemon), &mut all);
    let on_disk: u64 = all.iter().filter(|p| p.is_file()).map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(on_disk <= 1 << 20, "the journal holds {on_disk} bytes on disk");
    let kept = list(&mut raw, json!({"path": file, "limit": 1000})).len();
    assert!(kept > 100, "only {kept} entries kept");

    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let out = Daemon::command(&socket, &["--journal-max-bytes", "65536"]).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("journal_max_bytes") && said.contains("at least 1048576"), "{said}");
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

/// A denied file's content never shows through a journal entry: a file read under a deny rule
/// for reads is replaced, outside, by a hard link to a denied file; the outside entry's version
/// is the denied file's, and no diff, diff stat or restore of it shows or puts it back, even to
/// a fresh session.
#[test]
fn a_denied_file_never_shows_through_a_hard_link_in_the_journal() {
    let daemon = Daemon::start(&["--no-fsync", "--deny-read", "**/*.key"]);
    let root = root_of(&daemon);
    let public = root.join("public.txt");
    let private = root.join("private.key");
    std::fs::write(&public, "hello\n").unwrap();
    std::fs::write(&private, "KEYMATERIAL-0123456789\n").unwrap();
    let mut reader = session_at(&daemon, &root);
    tool_ok(&mut reader, "read", json!({"file_path": public}));
    std::fs::remove_file(&public).unwrap();
    std::fs::hard_link(&private, &public).unwrap();
    let (code, _) = crate::journal_attack::refused_read(&mut reader, &public);
    assert_eq!(code, "FS_PERMISSION_DENIED");
    // The watcher journals the outside change.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let outside = loop {
        let entries = list(&mut reader, json!({"path": public}));
        if let Some(entry) = entries.iter().find(|e| e["operation"] == "outside") {
            break entry.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no outside entry: {entries:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut fresh = session_at(&daemon, &root);
    for raw in [&mut reader, &mut fresh] {
        let listed = list(raw, json!({"path": public}));
        let entry = listed.iter().find(|e| e["entry"] == outside["entry"]).unwrap();
        assert!(entry.get("added").is_none() && entry.get("removed").is_none(), "{entry}");
        let refused = rpc(raw, "journal/diff", json!({"entry": outside["entry"]}));
        assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
        assert!(!refused.to_string().contains("KEYMATERIAL"), "{refused}");
    }
    // The change back, outside again: its version before is the denied content. Restoring it
    // would put the key under the public name.
    std::fs::remove_file(&public).unwrap();
    std::fs::write(&public, "hello again\n").unwrap();
    let restored = rpc(&mut fresh, "journal/restore", json!({"entry": outside["entry"], "force": true}));
    assert!(restored.get("error").is_none(), "putting back hello is fine: {restored}");
    assert_eq!(read(&public), "hello\n");
    let entries = list(&mut fresh, json!({"path": public}));
    for entry in entries.iter().filter(|e| e["operation"] == "restore" || e["operation"] == "outside") {
        let diff = rpc(&mut fresh, "journal/diff", json!({"entry": entry["entry"]}));
        assert!(!diff.to_string().contains("KEYMATERIAL"), "{diff}");
    }
    // Without deny rules for reads, nothing of a linked version is hidden.
    let mut open = daemon.session_with(json!({"roots": [root], "deny": {"read": []}}));
    let _ = ok(&mut open, "journal/list", json!({}));
}

/// A read the deny rules refuse: its code and text.
pub(crate) fn refused_read(raw: &mut Raw, path: &Path) -> (String, String) {
    filectx_tests::tool_err(raw, "read", json!({"file_path": path}))
}

/// A journal the daemon cannot use never stops a write: a segment of another format version
/// means the daemon writes without one and says so everywhere; a garbage header and a stray
/// `log-*` file are left alone while the rest stays in use.
#[test]
fn a_journal_it_cannot_load_never_stops_a_write() {
    let base = tempfile::tempdir().unwrap();
    let journal = base.path().join("journal");
    let journal_arg = journal.display().to_string();
    let project = base.path().canonicalize().unwrap().join("p");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join("f.txt");
    {
        let daemon = Daemon::start(&["--no-fsync", "--journal-dir", &journal_arg]);
        let mut raw = session_at(&daemon, &project);
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": "one\n"}));
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": "two\n"}));
    }
    // Garbage and strangers: listed as before, and changes are still journaled.
    std::fs::write(journal.join("log-00000000000000000500"), b"\x00garbage\n").unwrap();
    std::fs::write(journal.join("log-stray"), b"{}\n").unwrap();
    {
        let daemon = Daemon::start(&["--no-fsync", "--journal-dir", &journal_arg]);
        let mut raw = session_at(&daemon, &project);
        assert_eq!(list(&mut raw, json!({"path": file})).len(), 2);
        tool_ok(&mut raw, "read", json!({"file_path": file}));
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": "three\n"}));
        assert_eq!(list(&mut raw, json!({"path": file})).len(), 3);
        assert!(daemon.status().get("journalProblem").is_none());
    }
    assert!(journal.join("log-stray").exists() && journal.join("log-00000000000000000500").exists());
    // Another format version: no journal, said in the log, the status and initialize.
    let newer = journal.join("log-00000000000000000900");
    std::fs::write(&newer, b"{\"format\":\"filectx-journal\",\"version\":2}\n{}\n").unwrap();
    let daemon = Daemon::start(&["--no-fsync", "--journal-dir", &journal_arg]);
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.initialize(&project);
    let features = init["capabilities"]["features"].as_array().unwrap();
    assert!(!features.contains(&json!("journal")), "{features:?}");
    for (n, content) in ["four\n", "five\n"].iter().enumerate() {
        let written = rpc(
            &mut raw,
            "fs/writeText",
            json!({"path": file, "content": content, "expect": {"kind": "any"}}),
        );
        assert!(written.get("error").is_none(), "write {n} refused: {written}");
    }
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    tool_ok(&mut raw, "edit", json!({"file_path": file, "old_string": "five", "new_string": "six"}));
    assert_eq!(read(&file), "six\n");
    let status = daemon.status();
    assert_eq!(status["journal"], false, "{status}");
    let problem = status["journalProblem"].as_str().unwrap_or_default();
    assert!(problem.contains("format 2"), "{status}");
    assert!(daemon.log_text().contains("running without a journal"), "{}", daemon.log_text());
    assert_eq!(
        std::fs::read(&newer).unwrap(),
        b"{\"format\":\"filectx-journal\",\"version\":2}\n{}\n",
        "the newer segment was touched"
    );
}

/// A restore answers the id of the entry it made, never that of a write landing next to it.
#[test]
fn a_restore_reports_its_own_entry() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let file = root.join("r.txt");
    let mut restorer = session_at(&daemon, &root);
    let mut writer = session_at(&daemon, &root);
    tool_ok(&mut restorer, "write", json!({"file_path": file, "content": "a\n"}));
    tool_ok(&mut restorer, "write", json!({"file_path": file, "content": "b\n"}));
    // The entry of the write of b: restoring it writes a.
    let first = list(&mut restorer, json!({"path": file}))[0]["entry"].clone();
    for round in 0..60 {
        let other = root.join("r.txt");
        let id = writer.send_request(
            "fs/writeText",
            Some(json!({"path": other, "content": format!("w{round}\n"), "expect": {"kind": "any"}})),
        );
        let restored = rpc(&mut restorer, "journal/restore", json!({"entry": first, "force": true}));
        let _ = writer.response(id);
        let Some(entry) = restored["result"]["entry"].as_str() else { continue };
        let entries = list(&mut restorer, json!({"path": file, "limit": 1000}));
        let made = entries.iter().find(|e| e["entry"] == entry).unwrap();
        assert_eq!(made["operation"], "restore", "round {round}: the restore reported {made}");
    }
}

/// An undo that removes a 0600 file and the undo of that undo put it back 0600, never wider.
#[test]
fn a_file_put_back_by_an_undo_keeps_its_mode() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let file = root.join("secret.env");
    let mut raw = daemon.session_with(json!({"roots": [root], "tools": ["read", "write", "edit", "undo"]}));
    tool_ok(&mut raw, "write", json!({"file_path": file, "content": "TOKEN=1\n"}));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    tool_ok(&mut raw, "undo", json!({"file_path": file}));
    assert!(!file.exists(), "the undo of a creation removes the file");
    tool_ok(&mut raw, "undo", json!({"file_path": file}));
    assert_eq!(read(&file), "TOKEN=1\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "put back {mode:o}");
}
