//! The journal over the socket: every layer's changes recorded (the tools, `file/*`, `fs/*`,
//! restores), `journal/list`, `journal/diff` and `journal/restore` with their refusals (stale,
//! forced, a creation's restore removing the file), outside changes from a shell, restarts, two
//! sessions and two owners, what a session may not read never listed or restored, the caps and
//! the age limit, the journal off, and the `undo` tool.

use std::path::Path;
use std::time::Duration;

use filectx_tests::{Daemon, Raw, fs_error, ok, rpc, tool_ok};
use serde_json::{Value, json};

/// A session rooted at the daemon's folder.
fn session(daemon: &Daemon) -> Raw {
    daemon.session_with(json!({"roots": [daemon.dir.path()], "clientInfo": {"name": "journal-tests"}}))
}

fn path_of(daemon: &Daemon, name: &str) -> String {
    daemon.dir.path().join(name).display().to_string()
}

/// The entries `params` list.
fn list(raw: &mut Raw, params: Value) -> Vec<Value> {
    ok(raw, "journal/list", params)["entries"].as_array().unwrap().clone()
}

fn ops(entries: &[Value]) -> Vec<&str> {
    entries.iter().map(|e| e["operation"].as_str().unwrap()).collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn every_layer_is_journaled_newest_first_and_each_change_restores() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let mut raw = session(&daemon);
    let path = path_of(&daemon, "a.txt");
    tool_ok(&mut raw, "write", json!({"file_path": path, "content": "one\n"}));
    tool_ok(&mut raw, "edit", json!({"file_path": path, "old_string": "one", "new_string": "two"}));
    ok(&mut raw, "file/write", json!({"path": path, "content": "three\n"}));
    let now = ok(&mut raw, "fs/readText", json!({"path": path}))["version"].clone();
    ok(
        &mut raw,
        "fs/writeText",
        json!({"path": path, "content": "four\n", "expect": {"kind": "replaceIfVersion", "version": now}}),
    );
    let entries = list(&mut raw, json!({"path": path}));
    assert_eq!(ops(&entries), ["write", "write", "edit", "create"]);
    let edit = &entries[2];
    assert_eq!(edit["sessionId"], entries[0]["sessionId"]);
    assert_eq!(edit["clientName"], "journal-tests");
    assert_eq!(edit["displayPath"], "a.txt");
    assert_eq!((edit["added"].as_u64(), edit["removed"].as_u64()), (Some(1), Some(1)));
    assert!(entries.iter().all(|e| e["restorable"] == true));
    assert!(entries[3].get("before").is_none(), "a creation has no version before");
    let diff = ok(&mut raw, "journal/diff", json!({"entry": edit["entry"]}));
    assert_eq!(diff["diff"], "--- a.txt (before)\n+++ a.txt (after)\n@@ -1,1 +1,1 @@\n-one\n+two\n");
    assert_eq!(diff["truncated"], false);

    // Undo the newest, then the one before: the file walks back.
    let undone = ok(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
    assert_eq!(read(&path), "three\n");
    assert!(undone["version"].is_string());
    ok(&mut raw, "journal/restore", json!({"entry": entries[1]["entry"]}));
    assert_eq!(read(&path), "two\n");
    // The restores are entries too, and the undo of an undo works.
    let now = list(&mut raw, json!({"path": path, "limit": 2}));
    assert_eq!(ops(&now), ["restore", "restore"]);
    ok(&mut raw, "journal/restore", json!({"entry": now[0]["entry"]}));
    assert_eq!(read(&path), "three\n");
    let status = daemon.status();
    assert_eq!(status["journal"], true);
    assert_eq!(status["journalEntries"], 7);
    assert!(status["journalBytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_stale_restore_shows_the_change_since_and_force_restores_anyway() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let mut raw = session(&daemon);
    let path = path_of(&daemon, "b.txt");
    tool_ok(&mut raw, "write", json!({"file_path": path, "content": "a\nb\n"}));
    tool_ok(&mut raw, "edit", json!({"file_path": path, "old_string": "b", "new_string": "B"}));
    std::fs::write(&path, "a\nB\nc\n").unwrap();
    let edit = list(&mut raw, json!({"path": path, "limit": 10}))
        .into_iter()
        .find(|e| e["operation"] == "edit")
        .unwrap();
    let refused = rpc(&mut raw, "journal/restore", json!({"entry": edit["entry"]}));
    assert_eq!(fs_error(&refused), "FS_STALE_VERSION");
    let data = &refused["error"]["data"];
    assert_eq!(data["diff"], "--- b.txt (after the entry)\n+++ b.txt (now)\n@@ -1,2 +1,3 @@\n a\n B\n+c\n");
    assert!(refused["error"]["message"].as_str().unwrap().contains("restore with force"), "{refused}");
    assert_eq!(read(&path), "a\nB\nc\n", "nothing was restored");
    ok(&mut raw, "journal/restore", json!({"entry": edit["entry"], "force": true}));
    assert_eq!(read(&path), "a\nb\n");
}

#[test]
fn restoring_a_creation_removes_the_file_and_restoring_that_brings_it_back() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let mut raw = session(&daemon);
    let path = path_of(&daemon, "new/c.txt");
    tool_ok(&mut raw, "write", json!({"file_path": path, "content": "made\n"}));
    let created = list(&mut raw, json!({"path": path}))[0].clone();
    assert_eq!(created["operation"], "create");
    let removed = ok(&mut raw, "journal/restore", json!({"entry": created["entry"]}));
    assert!(!Path::new(&path).exists());
    assert!(removed.get("version").is_none());
    let deletion = list(&mut raw, json!({"path": path}))[0].clone();
    assert_eq!(deletion["operation"], "delete");
    assert_eq!(deletion["entry"], removed["entry"]);
    ok(&mut raw, "journal/restore", json!({"entry": deletion["entry"]}));
    assert_eq!(read(&path), "made\n");
    // The file is there again, so the creation's restore is stale only if it changed: it did not.
    let unknown = rpc(&mut raw, "journal/diff", json!({"entry": "999999"}));
    assert_eq!(fs_error(&unknown), "FS_NOT_FOUND");
}

#[test]
fn an_outside_change_to_a_read_file_is_journaled_and_undone() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let mut raw = session(&daemon);
    let path = path_of(&daemon, "d.txt");
    std::fs::write(&path, "mine\n").unwrap();
    tool_ok(&mut raw, "read", json!({"file_path": path}));
    let status =
        std::process::Command::new("sh").arg("-c").arg(format!("echo theirs >> '{path}'")).status().unwrap();
    assert!(status.success());
    raw.expect_notification("file/didChange", Duration::from_secs(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let outside = loop {
        let entries = list(&mut raw, json!({"path": path}));
        if let Some(found) = entries.into_iter().find(|e| e["operation"] == "outside") {
            break found;
        }
        assert!(std::time::Instant::now() < deadline, "no outside entry");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(outside["sessionId"], "outside");
    assert_eq!(outside["restorable"], true);
    ok(&mut raw, "journal/restore", json!({"entry": outside["entry"]}));
    assert_eq!(read(&path), "mine\n");
}

#[test]
fn the_undo_tool_puts_back_this_owners_last_change_only() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let mut raw = daemon.session_with(json!({
        "roots": [daemon.dir.path()],
        "tools": ["read", "write", "edit", "undo"],
    }));
    let listed = ok(&mut raw, "tools/list", json!({}));
    assert!(listed["tools"].as_array().unwrap().iter().any(|t| t["name"] == "undo"));
    let path = path_of(&daemon, "e.txt");
    let (alice, bob) = (Some("alice"), Some("bob"));
    filectx_tests::tool_as(&mut raw, alice, "write", json!({"file_path": path, "content": "a\nb\n"}));
    filectx_tests::tool_as(
        &mut raw,
        alice,
        "edit",
        json!({"file_path": path, "old_string": "a", "new_string": "A"}),
    );
    let nothing = filectx_tests::tool_as(&mut raw, bob, "undo", json!({"file_path": path}));
    assert_eq!(nothing["isError"], true);
    assert_eq!(
        filectx_tests::tool_text(&nothing),
        "you have made no change to e.txt in this session that can be undone."
    );
    let undone = filectx_tests::tool_as(&mut raw, alice, "undo", json!({"file_path": path}));
    assert_eq!(
        filectx_tests::tool_text(&undone),
        "Undid your last edit of e.txt: it is back as it was before, and counts as read."
    );
    assert_eq!(read(&path), "a\nb\n");
    // An undo right after an undo redoes; the file counts as read, so alice may edit at once.
    let redone = filectx_tests::tool_as(&mut raw, alice, "undo", json!({"file_path": path}));
    assert_eq!(
        filectx_tests::tool_text(&redone),
        "Undid your undo of e.txt: your change is back, and the file counts as read."
    );
    assert_eq!(read(&path), "A\nb\n");
    // Someone else changed it since: nothing is undone, and the change is shown.
    std::fs::write(&path, "A\nb\nc\n").unwrap();
    let stale = filectx_tests::tool_as(&mut raw, alice, "undo", json!({"file_path": path}));
    assert_eq!(stale["isError"], true);
    assert!(filectx_tests::tool_text(&stale).starts_with("e.txt changed since your change to it, so nothing was undone. What changed since:\n--- e.txt (after the entry)"), "{stale}");
    assert_eq!(read(&path), "A\nb\nc\n");
    // A session that does not name it has no undo tool.
    let mut plain = session(&daemon);
    let refused = rpc(&mut plain, "tools/call", json!({"name": "undo", "arguments": {"file_path": path}}));
    assert_eq!(refused["error"]["code"], -32602);
}

#[test]
fn without_a_journal_the_methods_say_it_is_off() {
    let daemon = Daemon::start(&["--no-journal"]);
    let mut raw = session(&daemon);
    let refused = rpc(&mut raw, "journal/list", json!({}));
    assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT");
    assert!(refused["error"]["message"].as_str().unwrap().contains("journal is off"), "{refused}");
    assert_eq!(daemon.status()["journal"], false);
}
