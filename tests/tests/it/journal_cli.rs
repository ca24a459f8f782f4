//! `filectx history`, `filectx diff` and `filectx undo` against the real daemon: the table of an
//! agent's changes and an outside one, an entry's diff, undo of an entry, of a file's last
//! change and of a whole session newest first, a stale undo refused with the change shown (and
//! stopping a session's undo there, changing nothing older), `--force`, and the journal off.

use std::path::Path;

use filectx_tests::{Daemon, Raw, ok, tool_ok};
use serde_json::{Value, json};

use crate::gate_cli::piped;

/// `filectx ARGS…` in `cwd`: exit code, stdout, stderr.
fn filectx(daemon: &Daemon, cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let (code, out, err) = piped(daemon, cwd, args);
    (code, String::from_utf8_lossy(&out).into_owned(), err)
}

/// An agent's session rooted at `root`, named `agent`.
fn agent(daemon: &Daemon, root: &Path) -> Raw {
    daemon.session_with(
        json!({"roots": [root], "clientInfo": {"name": "agent"}, "tools": ["read", "write", "edit"]}),
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The project folder under the daemon's, with nothing else in it.
fn project(daemon: &Daemon) -> std::path::PathBuf {
    let root = daemon.dir.path().join("proj");
    std::fs::create_dir(&root).unwrap();
    root.canonicalize().unwrap()
}

/// The entry ids of `journal/list` for `root`, newest first, and the session id of the agent.
fn entries(raw: &mut Raw, root: &Path) -> Vec<Value> {
    ok(raw, "journal/list", json!({"path": root}))["entries"].as_array().unwrap().clone()
}

#[test]
fn history_lists_diff_shows_and_undo_walks_back() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = project(&daemon);
    let a = root.join("a.txt");
    let mut raw = agent(&daemon, &root);
    tool_ok(&mut raw, "write", json!({"file_path": a, "content": "one\n"}));
    tool_ok(&mut raw, "edit", json!({"file_path": a, "old_string": "one", "new_string": "two"}));
    tool_ok(&mut raw, "write", json!({"file_path": root.join("b.txt"), "content": "b\nb\n"}));
    let listed = entries(&mut raw, &root);
    let ids: Vec<&str> = listed.iter().map(|e| e["entry"].as_str().unwrap()).collect();
    let session = listed[0]["sessionId"].as_str().unwrap().to_owned();

    let (code, out, err) = filectx(&daemon, &root, &["history"]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].split_whitespace().eq(["ENTRY", "WHEN", "WHAT", "PATH", "CHANGE", "BY"]), "{out}");
    let row = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let by = format!("{session})");
    // WHEN (columns 1 and 2) is `0s ago` or a little more.
    assert_eq!(row(lines[1])[0], ids[0], "{out}");
    assert_eq!(row(lines[1])[3..], ["create", "b.txt", "+2", "-0", "agent", "(session", &by], "{out}");
    assert_eq!(row(lines[2])[0], ids[1], "{out}");
    assert_eq!(row(lines[2])[3..], ["edit", "a.txt", "+1", "-1", "agent", "(session", &by], "{out}");
    assert_eq!(row(lines[3])[3..5], ["create", "a.txt"], "{out}");
    // A path narrows it; --json is the entries as journal/list gives them.
    let (_, out, _) = filectx(&daemon, &root, &["--json", "history", "a.txt", "--since", "1h"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["entries"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(json["more"], false);
    let (_, out, _) = filectx(&daemon, &root, &["history", "--limit", "1"]);
    assert!(
        out.ends_with("(only the newest 1: --limit N for more, or narrow with PATH, --session or --since)\n"),
        "{out}"
    );

    let (code, out, _) = filectx(&daemon, &root, &["diff", &format!("#{}", ids[1])]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "--- a.txt (before)\n+++ a.txt (after)\n@@ -1,1 +1,1 @@\n-one\n+two\n");

    // Undo a file's last change; the undo names the entry that redoes it.
    let (code, out, err) = filectx(&daemon, &root, &["undo", "--last", "a.txt"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&a), "one\n");
    let redo = out.trim_end().rsplit(' ').next().unwrap().trim_end_matches(')').to_owned();
    assert_eq!(
        out,
        format!("restored a.txt as it was before entry {} (undo this with: filectx undo {redo})\n", ids[1])
    );
    let (code, _, err) = filectx(&daemon, &root, &["undo", &redo]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&a), "two\n");
    // The restores are the CLI's, in the history.
    let (_, out, _) = filectx(&daemon, &root, &["history", "--limit", "2"]);
    let restores = out.lines().skip(1).take(2);
    assert!(
        restores.clone().count() == 2
            && restores.clone().all(|l| l.contains(" restore ") && l.contains("filectx (session")),
        "{out}"
    );

    // The whole session, newest first: b.txt's creation is undone by removing it.
    let (code, out, err) = filectx(&daemon, &root, &["undo", "--session", &session]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.starts_with("removed b.txt as it was before entry"), "{out}");
    assert!(!root.join("b.txt").exists() && !a.exists());
}

#[test]
fn a_stale_undo_is_refused_with_the_change_and_stops_a_session_there() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = project(&daemon);
    let (a, b) = (root.join("a.txt"), root.join("b.txt"));
    std::fs::write(&a, "a1\n").unwrap();
    let mut raw = agent(&daemon, &root);
    tool_ok(&mut raw, "read", json!({"file_path": a}));
    tool_ok(&mut raw, "edit", json!({"file_path": a, "old_string": "a1", "new_string": "a2"}));
    tool_ok(&mut raw, "write", json!({"file_path": b, "content": "b1\n"}));
    tool_ok(&mut raw, "edit", json!({"file_path": b, "old_string": "b1", "new_string": "b2"}));
    let session = entries(&mut raw, &root)[0]["sessionId"].as_str().unwrap().to_owned();
    // Someone changes a.txt outside the daemon: undoing the agent's edit of it is stale now.
    std::fs::write(&a, "a3 by hand\n").unwrap();
    let (code, out, err) = filectx(&daemon, &root, &["undo", "--session", &session]);
    assert_eq!(code, Some(4), "{out}{err}");
    // b.txt's two changes were undone (newest first), then a.txt stopped it.
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(!b.exists());
    assert_eq!(read(&a), "a3 by hand\n");
    assert!(err.starts_with("filectx: FS_STALE_VERSION: stopped at entry "), "{err}");
    assert!(
        err.contains("(a.txt): the file changed since (below); 2 of 3 undone, nothing older changed;"),
        "{err}"
    );
    assert!(err.contains("\n-a2\n+a3 by hand\n"), "the change since is shown: {err}");
    // --force overwrites it (and the outside change stays in the journal, undoable).
    let entry = err.split("entry ").nth(1).and_then(|s| s.split(' ').next()).unwrap().to_owned();
    let (code, _, err) = filectx(&daemon, &root, &["undo", &entry, "--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&a), "a1\n");
    // Nothing left of a file never changed: said, exit 4.
    std::fs::write(root.join("c.txt"), "c\n").unwrap();
    let (code, _, err) = filectx(&daemon, &root, &["undo", "--last", "c.txt"]);
    assert_eq!(
        (code, err.as_str()),
        (Some(4), "filectx: nothing to undo: the journal has no change to c.txt\n")
    );
    let (code, _, err) = filectx(&daemon, &root, &["undo", "nine"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn with_the_journal_off_the_commands_say_so() {
    let daemon = Daemon::start(&["--no-fsync", "--no-journal"]);
    let root = project(&daemon);
    let (code, _, err) = filectx(&daemon, &root, &["history"]);
    assert_eq!(code, Some(4));
    assert!(err.contains("journal"), "{err}");
    let (code, _, _) = filectx(&daemon, &root, &["undo", "1"]);
    assert_eq!(code, Some(4));
}
