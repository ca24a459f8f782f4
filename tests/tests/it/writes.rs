//! Writes, edits and stale refusals over the socket: a write keeps the file's BOM and CRLF
//! endings (`fs/writeText` only when asked), content with NUL is refused at every layer saying
//! where, `fs/writeText`'s expectation kinds and `fs/stat`'s shape, stale refusals that show
//! what changed (and re-authorize only when they showed it all), the edited region in the edit
//! tool's text, and the bounded store of versions behind the diffs.

use std::fs;
use std::path::Path;

use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, root_of, rpc, tool_err, tool_ok};
use serde_json::{Value, json};

const BOM: &[u8] = b"\xEF\xBB\xBF";

fn read(raw: &mut Raw, path: &str) -> Value {
    ok(raw, "file/read", json!({"path": path}))
}

fn edit(raw: &mut Raw, path: &str, old: &str, new: &str) -> Value {
    rpc(raw, "file/edit", json!({"path": path, "oldString": old, "newString": new}))
}

fn tool_edit(path: &str, old: &str, new: &str) -> Value {
    json!({"file_path": path, "old_string": old, "new_string": new})
}

fn version_of(raw: &mut Raw, path: &str) -> Value {
    ok(raw, "fs/stat", json!({"path": path}))["version"].clone()
}

fn bytes(root: &Path, name: &str) -> Vec<u8> {
    fs::read(root.join(name)).unwrap()
}

/// `[BOM]a\r\nb\r\n…`: a Windows-style text file.
fn windows(lines: &[&str]) -> Vec<u8> {
    let mut out = BOM.to_vec();
    for line in lines {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// `n` lines `line 1`, `line 2`, … each ending in `\n`.
fn lines_text(n: u64) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

// ---------------------------------------------------------------------------------------------
// A write keeps the file's conventions
// ---------------------------------------------------------------------------------------------

/// A model reads a CRLF file with a BOM (read hides both) and writes it back with one line
/// changed: the file keeps its BOM and CRLF, through the tool and `file/write`, and the version
/// returned is that of the bytes written. `fs/writeText` writes exact bytes unless asked.
#[test]
fn a_write_keeps_the_files_bom_and_crlf_endings() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let original = windows(&["one", "two", "three"]);
    for name in ["tool.txt", "file.txt", "raw.txt"] {
        fs::write(root.join(name), &original).unwrap();
    }
    let mut raw = daemon.session();

    let shown = tool_ok(&mut raw, "read", json!({"file_path": "tool.txt"}));
    assert!(shown.starts_with("1\tone\n2\ttwo\n3\tthree\n"), "{shown:?}");
    tool_ok(&mut raw, "write", json!({"file_path": "tool.txt", "content": "one\nTWO\nthree\n"}));
    assert_eq!(bytes(&root, "tool.txt"), windows(&["one", "TWO", "three"]));

    read(&mut raw, "file.txt");
    let written = ok(&mut raw, "file/write", json!({"path": "file.txt", "content": "one\ntwo\nTHREE\n"}));
    assert_eq!(bytes(&root, "file.txt"), windows(&["one", "two", "THREE"]));
    assert_eq!(written["version"], version_of(&mut raw, "file.txt"), "the version of the bytes written");
    // Its own write refreshed its record: content that already has a BOM and CRLF is not
    // doubled, and a missing final newline stays missing.
    ok(&mut raw, "file/write", json!({"path": "file.txt", "content": "\u{feff}uno\r\ndos\ntres"}));
    assert_eq!(bytes(&root, "file.txt"), b"\xEF\xBB\xBFuno\r\ndos\r\ntres");

    // A file that is not all CRLF, and a new file, are written as given.
    fs::write(root.join("mixed.txt"), "a\r\nb\n").unwrap();
    read(&mut raw, "mixed.txt");
    ok(&mut raw, "file/write", json!({"path": "mixed.txt", "content": "x\ny\n"}));
    assert_eq!(bytes(&root, "mixed.txt"), b"x\ny\n");
    ok(&mut raw, "file/write", json!({"path": "new.txt", "content": "a\nb\n"}));
    assert_eq!(bytes(&root, "new.txt"), b"a\nb\n");

    // fs/writeText: the content's bytes exactly…
    let version = version_of(&mut raw, "raw.txt");
    let expect = json!({"kind": "replaceIfVersion", "version": version});
    ok(&mut raw, "fs/writeText", json!({"path": "raw.txt", "content": "one\ntwo\n", "expect": expect}));
    assert_eq!(bytes(&root, "raw.txt"), b"one\ntwo\n");
    // …unless asked to keep the file's conventions.
    fs::write(root.join("raw.txt"), &original).unwrap();
    let params = json!({"path": "raw.txt", "content": "one\ntwo\n", "expect": {"kind": "any"}, "keepConventions": true});
    let written = ok(&mut raw, "fs/writeText", params);
    assert_eq!(bytes(&root, "raw.txt"), windows(&["one", "two"]));
    assert_eq!(written["version"], version_of(&mut raw, "raw.txt"));
}

// ---------------------------------------------------------------------------------------------
// write writes text
// ---------------------------------------------------------------------------------------------

/// Content with a NUL byte is `FS_INVALID_ARGUMENT` at every layer, saying where; nothing is
/// written.
#[test]
fn content_with_nul_is_refused_at_every_layer_saying_where() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("text.txt"), "plain\n").unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "text.txt");
    let content = "ok\nbad\0here\n";

    let (code, said) = tool_err(&mut raw, "write", json!({"file_path": "new.txt", "content": content}));
    assert_eq!(code, "FS_INVALID_ARGUMENT");
    assert!(said.contains("NUL") && said.contains("line 2, column 4"), "{said}");
    for (method, params) in [
        ("file/write", json!({"path": "new.txt", "content": content})),
        ("file/write", json!({"path": "text.txt", "content": content})),
        ("fs/writeText", json!({"path": "new.txt", "content": content, "expect": {"kind": "any"}})),
    ] {
        let response = rpc(&mut raw, method, params);
        assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{method}: {response}");
        let data = &response["error"]["data"];
        assert_eq!(
            (data["line"].as_u64(), data["column"].as_u64(), data["offset"].as_u64()),
            (Some(2), Some(4), Some(6))
        );
        assert!(response["error"]["message"].as_str().unwrap().contains("line 2, column 4"), "{response}");
    }
    // An edit's new text too.
    let (code, said) = tool_err(&mut raw, "edit", tool_edit("text.txt", "plain", "pl\0in"));
    assert_eq!(code, "FS_INVALID_ARGUMENT");
    assert!(said.contains("line 1, column 3"), "{said}");
    let response = edit(&mut raw, "text.txt", "plain", "a\nb\0");
    assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{response}");
    assert_eq!(response["error"]["data"]["line"], 2, "{response}");

    assert!(!root.join("new.txt").exists());
    assert_eq!(fs::read_to_string(root.join("text.txt")).unwrap(), "plain\n");
}

// ---------------------------------------------------------------------------------------------
// Provider shapes
// ---------------------------------------------------------------------------------------------

/// `fs/writeText`'s kinds: `createIfAbsent` (an existing file is `FS_NOT_OBSERVED`),
/// `replaceIfVersion` (a missing file or another version is `FS_STALE_VERSION`), `any`; the old
/// kinds are gone. `fs/stat` answers `{version, type, size?}` or null.
#[test]
fn write_expectation_kinds_and_the_stat_shape() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::create_dir(root.join("dir")).unwrap();
    fs::write(root.join("there.txt"), "there\n").unwrap();
    let mut raw = daemon.session();
    let write = |path: &str, expect: Value| json!({"path": path, "content": "mine\n", "expect": expect});

    let response = rpc(&mut raw, "fs/writeText", write("there.txt", json!({"kind": "createIfAbsent"})));
    assert_eq!(fs_error(&response), "FS_NOT_OBSERVED", "{response}");
    let created = ok(&mut raw, "fs/writeText", write("fresh.txt", json!({"kind": "createIfAbsent"})));
    assert_eq!(created["operation"], "create");

    let there = version_of(&mut raw, "there.txt");
    let response = rpc(
        &mut raw,
        "fs/writeText",
        write("missing.txt", json!({"kind": "replaceIfVersion", "version": there})),
    );
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert!(response["error"]["data"]["currentVersion"].is_null(), "{response}");
    assert!(!root.join("missing.txt").exists());
    let expect = json!({"kind": "replaceIfVersion", "version": created["version"]});
    let response = rpc(&mut raw, "fs/writeText", write("there.txt", expect));
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert_eq!(response["error"]["data"]["currentVersion"], there, "{response}");
    assert_eq!(response["error"]["data"]["reauthorized"], false, "{response}");
    assert_eq!(fs::read_to_string(root.join("there.txt")).unwrap(), "there\n");
    let expect = json!({"kind": "replaceIfVersion", "version": there});
    assert_eq!(ok(&mut raw, "fs/writeText", write("there.txt", expect))["operation"], "update");
    assert_eq!(
        ok(&mut raw, "fs/writeText", write("there.txt", json!({"kind": "any"})))["operation"],
        "update"
    );
    assert_eq!(ok(&mut raw, "fs/writeText", write("any.txt", json!({"kind": "any"})))["operation"], "create");
    for old in [json!({"kind": "absent"}), json!({"kind": "version", "version": there})] {
        assert_eq!(error_code(&rpc(&mut raw, "fs/writeText", write("x.txt", old))), -32602);
    }

    let version = version_of(&mut raw, "there.txt");
    assert_eq!(
        ok(&mut raw, "fs/stat", json!({"path": "there.txt"})),
        json!({"version": version, "type": "file", "size": 5})
    );
    assert_eq!(
        ok(&mut raw, "fs/stat", json!({"path": "dir"})),
        json!({"version": null, "type": "directory"})
    );
    assert_eq!(ok(&mut raw, "fs/stat", json!({"path": "nothing.txt"})), Value::Null);
}

// ---------------------------------------------------------------------------------------------
// Stale refusals that show what changed
// ---------------------------------------------------------------------------------------------

/// A stale edit's refusal shows the change since the session's last look as a unified diff
/// numbered as the current file (tool text and `data.diff`); that counts as read, so a retry
/// that is still right goes through without a read. The stale check still comes before the
/// match.
#[test]
fn a_stale_edit_shows_the_change_and_its_retry_needs_no_read() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let path = root.join("code.txt");
    fs::write(&path, lines_text(20)).unwrap();
    let mut raw = daemon.session();
    tool_ok(&mut raw, "read", json!({"file_path": "code.txt", "limit": 5}));

    // Someone inserts a line at the top and changes line 10.
    let changed = format!("header\n{}", lines_text(20).replace("line 10\n", "line ten\n"));
    fs::write(&path, &changed).unwrap();
    let (code, said) = tool_err(&mut raw, "edit", tool_edit("code.txt", "line 15\n", "line fifteen\n"));
    assert_eq!(code, "FS_STALE_VERSION");
    let diff = "\
--- code.txt (as you last saw it)
+++ code.txt (now)
@@ -1,3 +1,4 @@
+header
 line 1
 line 2
 line 3
@@ -7,7 +8,7 @@
 line 7
 line 8
 line 9
-line 10
+line ten
 line 11
 line 12
 line 13
";
    assert!(said.contains(diff), "{said}");
    assert!(said.contains("counts as read"), "{said}");
    assert_eq!(fs::read_to_string(&path).unwrap(), changed, "refused: nothing written");
    let done = tool_ok(&mut raw, "edit", tool_edit("code.txt", "line 15\n", "line fifteen\n"));
    assert!(done.contains("16\tline fifteen"), "numbered as the current file: {done}");

    // file/edit: data.diff and data.reauthorized; the current version is the one shown.
    fs::write(&path, fs::read_to_string(&path).unwrap().replace("line 3\n", "line three\n")).unwrap();
    let response = edit(&mut raw, "code.txt", "line 2\n", "line two\n");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    let data = &response["error"]["data"];
    assert_eq!(data["reauthorized"], true, "{response}");
    assert!(data["diff"].as_str().unwrap().contains("-line 3\n+line three\n"), "{response}");
    assert_eq!(data["currentVersion"], version_of(&mut raw, "code.txt"));
    let edited = ok(
        &mut raw,
        "file/edit",
        json!({"path": "code.txt", "oldString": "line 2\n", "newString": "line two\n"}),
    );
    assert_eq!(edited["replacements"], 1);

    // Stale before matching: the old text is gone, yet the refusal is the stale one.
    fs::write(&path, fs::read_to_string(&path).unwrap().replace("line 4\n", "line four\n")).unwrap();
    let response = edit(&mut raw, "code.txt", "line 4\n", "line 4!\n");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    let response = edit(&mut raw, "code.txt", "line 4\n", "line 4!\n");
    assert_eq!(fs_error(&response), "FS_EDIT_NOT_FOUND", "shown, so no longer stale: {response}");

    // A stale write shows the change too, and says that a write replaces everything.
    fs::write(&path, "short now\n").unwrap();
    let (code, said) = tool_err(&mut raw, "write", json!({"file_path": "code.txt", "content": "mine\n"}));
    assert_eq!(code, "FS_STALE_VERSION");
    assert!(said.contains("+short now\n") && said.contains("keeps these changes"), "{said}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "short now\n");
}

/// What re-authorizes nothing: a change too large to show, a deleted file, a version too large
/// to keep, and every `fs/*` refusal. The next attempt is refused again.
#[test]
fn a_change_not_shown_whole_reauthorizes_nothing() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let path = root.join("big.txt");
    fs::write(&path, lines_text(400)).unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "big.txt");

    // A big outside change: every line differs.
    fs::write(&path, lines_text(400).replace("line", "LINE")).unwrap();
    for _ in 0..2 {
        let response = edit(&mut raw, "big.txt", "LINE 7\n", "x\n");
        assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response:.400}");
        let data = &response["error"]["data"];
        assert_eq!(data["reauthorized"], false, "{response:.400}");
        assert!(data.get("diff").is_none(), "{response:.400}");
    }
    let (code, said) = tool_err(&mut raw, "edit", tool_edit("big.txt", "LINE 7\n", "x\n"));
    assert_eq!(code, "FS_STALE_VERSION");
    assert!(said.contains("too much to show") && said.contains("Read it again"), "{said}");
    read(&mut raw, "big.txt");
    assert_eq!(
        ok(&mut raw, "file/edit", json!({"path": "big.txt", "oldString": "LINE 7\n", "newString": "x\n"}))["replacements"],
        1
    );

    // Deleted: nothing to show; a file put back is still not the one read.
    fs::write(root.join("gone.txt"), "here\n").unwrap();
    read(&mut raw, "gone.txt");
    fs::remove_file(root.join("gone.txt")).unwrap();
    let response = edit(&mut raw, "gone.txt", "here", "there");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert!(response["error"]["data"]["currentVersion"].is_null(), "{response}");
    assert_eq!(response["error"]["data"]["reauthorized"], false, "{response}");
    fs::write(root.join("gone.txt"), "back\n").unwrap();
    assert_eq!(fs_error(&edit(&mut raw, "gone.txt", "back", "there")), "FS_STALE_VERSION");

    // A version over the store's per-file cap (1 MiB by default) is not kept: nothing to diff.
    let huge: String = (0..40_000).map(|i| format!("row {i:>24}\n")).collect();
    assert!(huge.len() > 1024 * 1024);
    fs::write(root.join("huge.txt"), &huge).unwrap();
    read(&mut raw, "huge.txt");
    fs::write(root.join("huge.txt"), huge.replace(&format!("row {:>24}\n", 7), "row 7\n")).unwrap();
    for _ in 0..2 {
        let response = edit(&mut raw, "huge.txt", "row", "ROW");
        assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response:.400}");
        assert_eq!(response["error"]["data"]["reauthorized"], false, "{response:.400}");
    }

    // fs/editText never re-authorizes, nor shows a diff: the session's own record stays put.
    fs::write(root.join("raw.txt"), "one\ntwo\n").unwrap();
    let seen = read(&mut raw, "raw.txt")["version"].clone();
    fs::write(root.join("raw.txt"), "one\nTWO\n").unwrap();
    let params = json!({"path": "raw.txt", "oldString": "one", "newString": "1", "expectedVersion": seen});
    let response = rpc(&mut raw, "fs/editText", params);
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert_eq!(response["error"]["data"]["reauthorized"], false, "{response}");
    assert!(response["error"]["data"].get("diff").is_none(), "{response}");
    let stat = ok(&mut raw, "file/stat", json!({"path": "raw.txt"}));
    assert_eq!((stat["fresh"].clone(), stat["observedVersion"].clone()), (json!(false), seen), "{stat}");
}

// ---------------------------------------------------------------------------------------------
// The edit's text
// ---------------------------------------------------------------------------------------------

/// The edit tool's text shows the edited lines with two lines of context, numbered as `read`
/// numbers the new version.
#[test]
fn the_edit_text_shows_the_edited_lines_numbered_as_read() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("notes.txt"), windows(&["a", "b", "c", "d", "e", "f", "g", "h"])).unwrap();
    let mut raw = daemon.session();
    tool_ok(&mut raw, "read", json!({"file_path": "notes.txt", "limit": 1}));
    let said = tool_ok(&mut raw, "edit", tool_edit("notes.txt", "d\ne\n", "D\nnew\nE\n"));
    let expected = "\
Edited notes.txt. Lines now:
2\tb
3\tc
4\tD
5\tnew
6\tE
7\tf
8\tg";
    assert_eq!(said, expected);
    let shown = tool_ok(&mut raw, "read", json!({"file_path": "notes.txt", "offset": 2, "limit": 7}));
    assert!(shown.starts_with(&format!("{}\n", &expected[expected.find("\n2\t").unwrap() + 1..])), "{shown}");
}

// ---------------------------------------------------------------------------------------------
// The store behind the diffs
// ---------------------------------------------------------------------------------------------

/// `daemon/status` counts the versions kept and their bytes, which stay under the cap; a
/// version over the per-file cap is not kept. The features are announced.
#[test]
fn the_store_of_versions_is_bounded_and_counted() {
    let daemon = Daemon::start(&["--max-snapshot-bytes", "65536", "--max-snapshot-file-bytes", "16384"]);
    let root = root_of(&daemon);
    let mut raw = Raw::connect(&daemon.socket);
    let features = raw.initialize(&root)["capabilities"]["features"].clone();
    for feature in ["staleDiffs", "keepConventions", "editRegions"] {
        assert!(features.as_array().unwrap().contains(&json!(feature)), "{features}");
    }
    let status = raw.call("daemon/status", None);
    assert_eq!(
        (status["snapshots"].as_u64(), status["snapshotBytes"].as_u64()),
        (Some(0), Some(0)),
        "{status}"
    );

    let ten_kib = "0123456789abcdef".repeat(640);
    for i in 0..40 {
        let name = format!("f{i}.txt");
        fs::write(root.join(&name), format!("{i}\n{ten_kib}\n")).unwrap();
        read(&mut raw, &name);
        let status = raw.call("daemon/status", None);
        let (count, held) =
            (status["snapshots"].as_u64().unwrap(), status["snapshotBytes"].as_u64().unwrap());
        assert!(held <= 65536, "{status}");
        assert!((1..=6).contains(&count), "{status}");
    }
    let before = raw.call("daemon/status", None);
    fs::write(root.join("over.txt"), "x".repeat(20_000)).unwrap();
    read(&mut raw, "over.txt");
    let after = raw.call("daemon/status", None);
    assert_eq!(after["snapshotBytes"], before["snapshotBytes"], "over the per-file cap: {after}");
    // The last file read is still kept, so its stale refusal shows the change.
    fs::write(root.join("f39.txt"), format!("39!\n{ten_kib}\n")).unwrap();
    let response = edit(&mut raw, "f39.txt", "39\n", "x\n");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response:.300}");
    assert_eq!(response["error"]["data"]["reauthorized"], true, "{response:.300}");
}

// ---------------------------------------------------------------------------------------------
// Edits made at once on the async worker
// ---------------------------------------------------------------------------------------------

/// With fsync off, a small edit is made right on the async worker (no hop to the blocking pool
/// and back); what it cannot do at once runs as before on the blocking pool: an edit of a file
/// another process holds locked waits for the lock (it is not `FS_BUSY` at once), a stale edit
/// shows what changed, a file over the bound (256 KiB) is edited all the same; every edit lands
/// whole, and a session's own edits never come back to it as `file/didChange`.
#[test]
fn edits_made_at_once_fall_back_to_the_blocking_pool_when_they_cannot() {
    use std::time::{Duration, Instant};
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = root_of(&daemon);
    let path = root.join("code.txt");
    fs::write(&path, lines_text(20)).unwrap();
    let mut raw = daemon.session();
    read(&mut raw, "code.txt");
    let mut expected = lines_text(20);
    // The first edit in the folder lists it for leftovers (on the blocking pool); the next
    // ones are made at once.
    for n in 1..=5 {
        let (old, new) = (format!("line {n}\n"), format!("LINE {n}\n"));
        let edited =
            ok(&mut raw, "file/edit", json!({"path": "code.txt", "oldString": old, "newString": new}));
        expected = expected.replacen(&old, &new, 1);
        assert_eq!(fs::read_to_string(&path).unwrap(), expected);
        assert_eq!(edited["version"], version_of(&mut raw, "code.txt"), "{edited}");
    }

    // Another process holds the file's flock for a moment: the edit waits for it.
    let held = fs::File::open(&path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
    });
    let started = Instant::now();
    let edited = ok(
        &mut raw,
        "file/edit",
        json!({"path": "code.txt", "oldString": "line 6\n", "newString": "LINE 6\n"}),
    );
    assert!(started.elapsed() >= Duration::from_millis(250), "it waited for the lock: {edited}");
    release.join().unwrap();
    expected = expected.replacen("line 6\n", "LINE 6\n", 1);
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);

    // Stale: refused with the change shown, nothing written; the retry goes ahead.
    expected = expected.replacen("line 9\n", "line nine\n", 1);
    fs::write(&path, &expected).unwrap();
    let response = edit(&mut raw, "code.txt", "line 7\n", "LINE 7\n");
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert!(
        response["error"]["data"]["diff"].as_str().unwrap().contains("-line 9\n+line nine\n"),
        "{response}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), expected, "refused: nothing written");
    ok(&mut raw, "file/edit", json!({"path": "code.txt", "oldString": "line 7\n", "newString": "LINE 7\n"}));
    expected = expected.replacen("line 7\n", "LINE 7\n", 1);
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);

    // Over the bound: edited on the blocking pool, whole.
    let big: String = (0..4000).map(|i| format!("{i:>80}\n")).collect();
    assert!(big.len() > 256 * 1024);
    fs::write(root.join("big.txt"), &big).unwrap();
    read(&mut raw, "big.txt");
    let old = format!("{:>80}\n", 3999);
    ok(&mut raw, "file/edit", json!({"path": "big.txt", "oldString": old, "newString": "the end\n"}));
    assert_eq!(fs::read_to_string(root.join("big.txt")).unwrap(), big.replacen(&old, "the end\n", 1));
    raw.assert_no_notification("file/didChange", Duration::from_millis(300));
}
