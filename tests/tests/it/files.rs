//! Reading, writing and editing files through the real socket: the three layers (`tools/call`,
//! `file/*`, `fs/*`), the read-before-write policy of each session, path containment, and the
//! text and file-system properties that a write or an edit must keep. Real files live in the
//! daemon's temp folder; several sessions take part where isolation matters.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use filectx_protocol::ReadResult;
use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, root_of, rpc, tool_err, tool_ok};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// The `FS_*` identifier of a request that must fail.
fn fails(raw: &mut Raw, method: &str, params: Value) -> String {
    let response = rpc(raw, method, params);
    fs_error(&response).to_owned()
}

fn read(raw: &mut Raw, path: &str) -> ReadResult {
    read_window(raw, path, None, None)
}

fn read_window(raw: &mut Raw, path: &str, offset: Option<u64>, limit: Option<u64>) -> ReadResult {
    let mut params = json!({"path": path});
    if let Some(offset) = offset {
        params["offset"] = json!(offset);
    }
    if let Some(limit) = limit {
        params["limit"] = json!(limit);
    }
    serde_json::from_value(ok(raw, "file/read", params)).unwrap()
}

/// `file/edit`, whole response.
fn edit(raw: &mut Raw, path: &str, old: &str, new: &str) -> Value {
    rpc(raw, "file/edit", json!({"path": path, "oldString": old, "newString": new}))
}

/// `file/edit` that must succeed; returns its result.
fn edit_ok(raw: &mut Raw, path: &str, old: &str, new: &str) -> Value {
    let response = edit(raw, path, old, new);
    assert!(response.get("error").is_none(), "edit of {path} failed: {response}");
    response["result"].clone()
}

/// `file/edit` that must fail; returns its `FS_*` identifier.
fn edit_err(raw: &mut Raw, path: &str, old: &str, new: &str) -> String {
    fs_error(&edit(raw, path, old, new)).to_owned()
}

/// Whether `text` mentions every one of `words`, case-insensitively.
fn mentions(text: &str, words: &[&str]) -> bool {
    let text = text.to_lowercase();
    words.iter().all(|w| text.contains(&w.to_lowercase()))
}

/// Whether a tool error text tells the model that the file changed since it was read and to
/// read it again.
fn says_stale(text: &str) -> bool {
    let lower = text.to_lowercase();
    (lower.contains("changed") || lower.contains("modified")) && lower.contains("read")
}

fn numbered(lines: impl IntoIterator<Item = (u64, String)>) -> String {
    lines.into_iter().map(|(n, line)| format!("{n}\t{line}")).collect::<Vec<_>>().join("\n")
}

/// `n` lines `line 1`, `line 2`, … each ending in `\n`.
fn lines_text(n: u64) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn version_of(raw: &mut Raw, path: &str) -> String {
    ok(raw, "fs/stat", json!({"path": path}))["version"].as_str().unwrap().to_owned()
}

// ---------------------------------------------------------------------------------------------
// Read-before-write policy
// ---------------------------------------------------------------------------------------------

/// Any window counts as a read: lines 100–150 of 10,000 authorize an edit at line 9000, in
/// both the structured layer and the tools layer.
#[test]
fn a_small_window_authorizes_an_edit_anywhere_in_the_file() {
    let daemon = Daemon::start(&[]);
    let path = root_of(&daemon).join("big.txt");
    fs::write(&path, lines_text(10_000)).unwrap();

    let mut raw = daemon.session();
    let window = read_window(&mut raw, "big.txt", Some(100), Some(51));
    assert_eq!(window.display_path, "big.txt");
    assert_eq!(window.start_line, 100);
    assert_eq!(window.lines.len(), 51);
    assert_eq!(window.lines[0], "line 100");
    assert_eq!(window.lines[50], "line 150");
    assert_eq!(window.total_lines, 10_000);
    assert!(window.partial);
    assert!(window.truncated_lines.is_empty());

    let result = edit_ok(&mut raw, "big.txt", "line 9000\n", "line nine thousand\n");
    assert_eq!(result["replacements"], 1);
    assert_eq!(result["replaceAll"], false);
    assert_eq!(result["displayPath"], "big.txt");
    let after = fs::read_to_string(&path).unwrap();
    assert_eq!(after, lines_text(10_000).replace("line 9000\n", "line nine thousand\n"));
    assert_eq!(result["version"], json!(version_of(&mut raw, "big.txt")));

    // The same through the tools, in another session, with an absolute path.
    let mut agent = daemon.session();
    let text = tool_ok(&mut agent, "read", json!({"file_path": s(&path), "offset": 100, "limit": 51}));
    assert!(text.starts_with("100\tline 100\n"), "{text}");
    let text = tool_ok(
        &mut agent,
        "edit",
        json!({"file_path": s(&path), "old_string": "line 9001\n", "new_string": "line 9001 edited\n"}),
    );
    assert!(!text.is_empty());
    assert!(fs::read_to_string(&path).unwrap().contains("\nline 9001 edited\nline 9002\n"));
}

/// A change from outside with the same size and the same mtime is still detected: freshness is
/// decided by content. The stale check runs before matching, so the edit is reported stale even
/// though its old text no longer occurs.
#[test]
fn an_outside_change_with_same_size_and_mtime_is_detected() {
    let daemon = Daemon::start(&[]);
    let path = root_of(&daemon).join("config.txt");
    fs::write(&path, "value = 1\nother = x\n").unwrap();
    let mut raw = daemon.session();
    let mut agent = daemon.session();
    let seen = read(&mut raw, "config.txt");
    tool_ok(&mut agent, "read", json!({"file_path": "config.txt"}));

    let before = fs::metadata(&path).unwrap();
    let mtime = before.modified().unwrap();
    fs::write(&path, "value = 2\nother = x\n").unwrap();
    fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    let after = fs::metadata(&path).unwrap();
    assert_eq!((after.len(), after.modified().unwrap(), after.ino()), (before.len(), mtime, before.ino()));

    let stale = edit(&mut raw, "config.txt", "value = 1", "value = 10");
    assert_eq!(fs_error(&stale), "FS_STALE_VERSION", "{stale}");
    let (code, text) = tool_err(
        &mut agent,
        "edit",
        json!({"file_path": "config.txt", "old_string": "other = x", "new_string": "other = y"}),
    );
    assert_eq!(code, "FS_STALE_VERSION");
    assert!(says_stale(&text), "{text}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "value = 2\nother = x\n");

    // The refusal showed the whole change, which counts as read (see `writes`): the session's
    // record moved on to the current version, so its next edit needs no read.
    assert_eq!(stale["error"]["data"]["reauthorized"], true, "{stale}");
    let stat = ok(&mut raw, "file/stat", json!({"path": "config.txt"}));
    assert_eq!(stat["fresh"], true, "{stat}");
    assert_ne!(stat["version"], json!(seen.version), "{stat}");
    edit_ok(&mut raw, "config.txt", "value = 2", "value = 3");
    assert_eq!(fs::read_to_string(&path).unwrap(), "value = 3\nother = x\n");
}

/// Rewriting identical bytes from outside (even with a new mtime and inode) keeps the version,
/// so the observation stays fresh.
#[test]
fn rewriting_identical_bytes_keeps_the_observation_fresh() {
    let daemon = Daemon::start(&[]);
    let path = root_of(&daemon).join("same.txt");
    fs::write(&path, "keep me\n").unwrap();
    let mut raw = daemon.session();
    let seen = read(&mut raw, "same.txt");

    // In place, then a new inode by rename, each with a different mtime.
    fs::write(&path, "keep me\n").unwrap();
    let later = fs::metadata(&path).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
    fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
    let stat = ok(&mut raw, "file/stat", json!({"path": "same.txt"}));
    assert_eq!(stat["version"], json!(seen.version), "{stat}");
    assert_eq!(stat["fresh"], true, "{stat}");
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, "keep me\n").unwrap();
    fs::rename(&tmp, &path).unwrap();
    assert_eq!(version_of(&mut raw, "same.txt"), seen.version);

    edit_ok(&mut raw, "same.txt", "keep me", "kept");
    assert_eq!(fs::read_to_string(&path).unwrap(), "kept\n");
}

/// Observations belong to one session: B cannot use A's read; A's own edits keep A fresh but
/// make B stale; a new connection starts with nothing.
#[test]
fn sessions_are_isolated_and_reconnecting_forgets() {
    let daemon = Daemon::start(&[]);
    let path = root_of(&daemon).join("shared.txt");
    fs::write(&path, "alpha\nbeta\ngamma\n").unwrap();
    let mut a = daemon.session();
    let mut b = daemon.session();

    read(&mut a, "shared.txt");
    assert_eq!(edit_err(&mut b, "shared.txt", "beta", "BETA"), "FS_NOT_OBSERVED");
    assert_eq!(
        fails(&mut b, "file/write", json!({"path": "shared.txt", "content": "x\n"})),
        "FS_NOT_OBSERVED"
    );
    assert_eq!(ok(&mut b, "file/stat", json!({"path": "shared.txt"}))["fresh"], false);
    // The tools' refusal shows B the (small) file, which then counts as B's own read.
    let (code, text) =
        tool_err(&mut b, "edit", json!({"file_path": "shared.txt", "old_string": "beta", "new_string": "B"}));
    assert_eq!(code, "FS_NOT_OBSERVED");
    assert!(text.contains("now counted as read") && text.contains("\n2\tbeta\n3\tgamma"), "{text}");
    assert_eq!(ok(&mut b, "file/stat", json!({"path": "shared.txt"}))["fresh"], true);
    assert_eq!(fs::read_to_string(&path).unwrap(), "alpha\nbeta\ngamma\n");

    // A edits twice without re-reading: its own edit recorded the new version.
    edit_ok(&mut a, "shared.txt", "alpha", "ALPHA");
    edit_ok(&mut a, "shared.txt", "gamma", "GAMMA");

    // B reads, then A edits again: B is stale, at every layer and for write too. (Each refusal
    // shows B the change, which then counts as B's read: A changes the file again before each.)
    read(&mut b, "shared.txt");
    edit_ok(&mut a, "shared.txt", "beta", "Beta");
    assert_eq!(edit_err(&mut b, "shared.txt", "ALPHA", "alpha"), "FS_STALE_VERSION");
    edit_ok(&mut a, "shared.txt", "Beta", "BETA");
    assert_eq!(
        fails(&mut b, "file/write", json!({"path": "shared.txt", "content": "x\n"})),
        "FS_STALE_VERSION"
    );
    edit_ok(&mut a, "shared.txt", "BETA", "Beta");
    let (code, text) = tool_err(
        &mut b,
        "edit",
        json!({"file_path": "shared.txt", "old_string": "ALPHA", "new_string": "a"}),
    );
    assert_eq!(code, "FS_STALE_VERSION");
    assert!(says_stale(&text), "{text}");
    // What B was shown counts for B alone; A's own record stays fresh.
    assert_eq!(ok(&mut b, "file/stat", json!({"path": "shared.txt"}))["fresh"], true);
    assert_eq!(ok(&mut a, "file/stat", json!({"path": "shared.txt"}))["fresh"], true);
    assert_eq!(fs::read_to_string(&path).unwrap(), "ALPHA\nBeta\nGAMMA\n");

    // A's write of an existing file it has observed is an update.
    let written = ok(&mut a, "file/write", json!({"path": "shared.txt", "content": "rewritten\n"}));
    assert_eq!(written["operation"], "update");
    assert_eq!(written["displayPath"], "shared.txt");

    // Reconnecting forgets everything.
    drop(a);
    let mut a2 = daemon.session();
    assert_eq!(edit_err(&mut a2, "shared.txt", "rewritten", "again"), "FS_NOT_OBSERVED");
    let stat = ok(&mut a2, "file/stat", json!({"path": "shared.txt"}));
    assert!(stat.get("observedVersion").is_none_or(Value::is_null), "{stat}");
    assert_eq!(stat["fresh"], false);
    read(&mut a2, "shared.txt");
    edit_ok(&mut a2, "shared.txt", "rewritten", "again");
    assert_eq!(fs::read_to_string(&path).unwrap(), "again\n");
}

/// The provider layer records nothing: neither `fs/readText` nor `fs/editText` lets a later
/// `file/edit` or tool edit through.
#[test]
fn a_refused_write_or_edit_of_a_small_unread_file_shows_it_and_counts_as_read() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("settings.toml"), "# do not overwrite\nmode = 1\n").unwrap();
    fs::write(root.join("app.py"), "x = 1\ny = 2\n").unwrap();
    let mut raw = daemon.session();
    let mut other = daemon.session();

    // The write is refused and changes nothing, but the refusal shows the whole file, numbered
    // as read numbers it: the model has seen it, so the retry goes through without a read.
    let (code, text) =
        tool_err(&mut raw, "write", json!({"file_path": "settings.toml", "content": "mode = 2\n"}));
    assert_eq!(code, "FS_NOT_OBSERVED");
    assert_eq!(
        text,
        "settings.toml was not read in this session; here it is, now counted as read. Retry the write \
         only with content that keeps what should stay:\n1\t# do not overwrite\n2\tmode = 1"
    );
    assert_eq!(fs::read_to_string(root.join("settings.toml")).unwrap(), "# do not overwrite\nmode = 1\n");
    // What one session was shown authorizes no other.
    let (code, _) = tool_err(&mut other, "write", json!({"file_path": "settings.toml", "content": "z\n"}));
    assert_eq!(code, "FS_NOT_OBSERVED");
    let written = tool_ok(&mut raw, "write", json!({"file_path": "settings.toml", "content": "mode = 2\n"}));
    assert_eq!(written, "Overwrote settings.toml.");

    // The same for an edit.
    let edit_args = json!({"file_path": "app.py", "old_string": "y = 2", "new_string": "y = 3"});
    let (code, text) = tool_err(&mut raw, "edit", edit_args.clone());
    assert_eq!(code, "FS_NOT_OBSERVED");
    assert!(text.ends_with("Retry your edit if it still fits, else adapt it:\n1\tx = 1\n2\ty = 2"), "{text}");
    assert!(tool_ok(&mut raw, "edit", edit_args).starts_with("Edited app.py."));
    assert_eq!(fs::read_to_string(root.join("app.py")).unwrap(), "x = 1\ny = 3\n");

    // A file it cannot show whole (over 200 lines, or a line cut at 2000 characters) is refused
    // as before, and nothing is recorded: the retry is refused too.
    fs::write(root.join("long.txt"), lines_text(201)).unwrap();
    fs::write(root.join("wide.txt"), format!("{}\n", "w".repeat(2001))).unwrap();
    for name in ["long.txt", "wide.txt"] {
        for _ in 0..2 {
            let (code, text) = tool_err(&mut raw, "write", json!({"file_path": name, "content": "gone\n"}));
            assert_eq!(code, "FS_NOT_OBSERVED");
            assert!(text.ends_with("Read it (any window), then retry the write."), "{text}");
        }
        let stat = ok(&mut raw, "file/stat", json!({"path": name}));
        assert_eq!(stat["fresh"], false, "{name}: {stat}");
    }
    assert_eq!(fs::read_to_string(root.join("long.txt")).unwrap(), lines_text(201));

    // Below the tools nothing is shown or recorded: file/write and file/edit stay refused.
    fs::write(root.join("plain.txt"), "one\n").unwrap();
    for _ in 0..2 {
        assert_eq!(
            fails(&mut raw, "file/write", json!({"path": "plain.txt", "content": "x\n"})),
            "FS_NOT_OBSERVED"
        );
        assert_eq!(edit_err(&mut raw, "plain.txt", "one", "1"), "FS_NOT_OBSERVED");
    }
    assert_eq!(fs::read_to_string(root.join("plain.txt")).unwrap(), "one\n");
}

#[test]
fn fs_read_text_records_nothing() {
    let daemon = Daemon::start(&[]);
    let path = root_of(&daemon).join("provider.txt");
    fs::write(&path, "one\ntwo\nthree\n").unwrap();
    let mut raw = daemon.session();

    let window = ok(&mut raw, "fs/readText", json!({"path": "provider.txt", "offset": 2, "limit": 1}));
    let window: ReadResult = serde_json::from_value(window).unwrap();
    assert_eq!((window.start_line, window.lines.clone(), window.total_lines), (2, vec!["two".to_owned()], 3));
    assert!(window.partial);
    assert_eq!(window.display_path, "provider.txt");
    assert_eq!(window.version, version_of(&mut raw, "provider.txt"));

    assert_eq!(edit_err(&mut raw, "provider.txt", "two", "2"), "FS_NOT_OBSERVED");
    assert_eq!(
        fails(&mut raw, "file/write", json!({"path": "provider.txt", "content": "x"})),
        "FS_NOT_OBSERVED"
    );
    let stat = ok(&mut raw, "file/stat", json!({"path": "provider.txt"}));
    assert!(stat.get("observedVersion").is_none_or(Value::is_null), "{stat}");
    assert_eq!(stat["fresh"], false);

    // The provider's own edit works with an explicit version, and still records nothing.
    let edited = ok(
        &mut raw,
        "fs/editText",
        json!({"path": "provider.txt", "oldString": "two", "newString": "2", "expectedVersion": window.version}),
    );
    assert_eq!(edited["replacements"], 1);
    assert_eq!(fs::read_to_string(&path).unwrap(), "one\n2\nthree\n");
    assert_eq!(edit_err(&mut raw, "provider.txt", "one", "1"), "FS_NOT_OBSERVED");
    // The old version no longer applies.
    assert_eq!(
        fails(
            &mut raw,
            "fs/editText",
            json!({"path": "provider.txt", "oldString": "one", "newString": "1", "expectedVersion": window.version})
        ),
        "FS_STALE_VERSION"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "one\n2\nthree\n");
    // Nor does it authorize the tools: their refusal shows the file (the tools' own read, which
    // is what then counts), not what fs/readText returned.
    let (code, text) = tool_err(
        &mut raw,
        "edit",
        json!({"file_path": "provider.txt", "old_string": "2", "new_string": "two"}),
    );
    assert_eq!(code, "FS_NOT_OBSERVED");
    assert!(text.contains("now counted as read") && text.ends_with(":\n1\tone\n2\t2\n3\tthree"), "{text}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "one\n2\nthree\n");
}

/// 8 sessions increment their own counter line of one shared file 20 times each with edit +
/// re-read-on-stale loops: no increment is lost.
#[test]
fn concurrent_read_edit_loops_lose_no_update() {
    const WORKERS: usize = 8;
    const ROUNDS: u64 = 20;
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let path = root.join("counters.txt");
    let initial: String = (0..WORKERS).map(|i| format!("counter_{i} = 0\n")).collect();
    fs::write(&path, &initial).unwrap();

    let socket = daemon.socket.clone();
    let stale_retries: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|i| {
                let (socket, root) = (socket.clone(), root.clone());
                scope.spawn(move || {
                    let mut raw = Raw::connect(&socket);
                    raw.initialize(&root);
                    let mut retries = 0;
                    let mut current = read(&mut raw, "counters.txt");
                    for k in 0..ROUNDS {
                        loop {
                            let mine = format!("counter_{i} = {k}");
                            assert!(current.lines.contains(&mine), "worker {i}: {:?}", current.lines);
                            let response = edit(
                                &mut raw,
                                "counters.txt",
                                &format!("{mine}\n"),
                                &format!("counter_{i} = {}\n", k + 1),
                            );
                            if response.get("error").is_none() {
                                break;
                            }
                            assert_eq!(fs_error(&response), "FS_STALE_VERSION", "worker {i}: {response}");
                            retries += 1;
                            assert!(retries < 100_000, "worker {i} never got through");
                            current = read(&mut raw, "counters.txt");
                        }
                        // Our own edit recorded the new version; what we know of the others' lines
                        // may be old, but our line is ours alone.
                        let old = format!("counter_{i} = {k}");
                        for line in &mut current.lines {
                            if *line == old {
                                *line = format!("counter_{i} = {}", k + 1);
                            }
                        }
                    }
                    retries
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    eprintln!("{stale_retries} stale retries");
    let expected: String = (0..WORKERS).map(|i| format!("counter_{i} = {ROUNDS}\n")).collect();
    assert_eq!(fs::read_to_string(&path).unwrap(), expected, "after {stale_retries} stale retries");
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// Every way out of the root is refused with `FS_OUTSIDE_ROOT` at every layer, and nothing is
/// written outside: a symlink out (to a file, to a folder, dangling), `..`, an absolute path,
/// and the prefix trick (root `x/app`, sibling `x/app-evil`).
#[test]
fn escapes_from_the_root_are_refused_and_write_nothing_outside() {
    let daemon = Daemon::start(&[]);
    let base = root_of(&daemon).join("x");
    let app = base.join("app");
    let evil = base.join("app-evil");
    let outside = root_of(&daemon).join("outside");
    for dir in [&app.join("sub"), &evil, &outside] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    fs::write(evil.join("file.txt"), "evil\n").unwrap();
    fs::write(app.join("inside.txt"), "inside\n").unwrap();
    symlink(outside.join("secret.txt"), app.join("link-out")).unwrap();
    symlink("../../../outside/secret.txt", app.join("sub/relative-link-out")).unwrap();
    symlink(&outside, app.join("dir-out")).unwrap();
    symlink(outside.join("dangling.txt"), app.join("dangling-out")).unwrap();

    let mut raw = daemon.session_with(json!({"roots": [app]}));
    let escapes = [
        "link-out".to_owned(),
        "sub/relative-link-out".to_owned(),
        "dir-out/secret.txt".to_owned(),
        "dir-out/new.txt".to_owned(),
        "dir-out/deeper/new.txt".to_owned(),
        "dangling-out".to_owned(),
        "../../outside/secret.txt".to_owned(),
        "sub/../../../outside/new.txt".to_owned(),
        s(&app.join("../../outside/secret.txt")),
        s(&outside.join("secret.txt")),
        s(&outside.join("new.txt")),
        "../app-evil/file.txt".to_owned(),
        s(&evil.join("file.txt")),
        s(&evil.join("new.txt")),
        "/etc/hostname".to_owned(),
    ];
    for path in &escapes {
        let calls = [
            ("file/read", json!({"path": path})),
            ("file/stat", json!({"path": path})),
            ("file/write", json!({"path": path, "content": "pwned\n"})),
            ("file/edit", json!({"path": path, "oldString": "secret", "newString": "pwned"})),
            ("fs/resolve", json!({"path": path})),
            ("fs/stat", json!({"path": path})),
            ("fs/readText", json!({"path": path})),
            ("fs/writeText", json!({"path": path, "content": "pwned\n", "expect": {"kind": "any"}})),
            (
                "fs/writeText",
                json!({"path": path, "content": "pwned\n", "expect": {"kind": "createIfAbsent"}}),
            ),
            (
                "fs/editText",
                json!({"path": path, "oldString": "secret", "newString": "pwned", "expectedVersion": "0"}),
            ),
        ];
        for (method, params) in calls {
            assert_eq!(fails(&mut raw, method, params.clone()), "FS_OUTSIDE_ROOT", "{method} {params}");
        }
        let tools = [
            ("read", json!({"file_path": path})),
            ("write", json!({"file_path": path, "content": "pwned\n"})),
            ("edit", json!({"file_path": path, "old_string": "secret", "new_string": "pwned"})),
        ];
        for (name, arguments) in tools {
            let (code, _) = tool_err(&mut raw, name, arguments.clone());
            assert_eq!(code, "FS_OUTSIDE_ROOT", "{name} {arguments}");
        }
    }

    // Nothing was written or created outside the root.
    let listing = |dir: &Path| {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listing(&outside), ["secret.txt"]);
    assert_eq!(listing(&evil), ["file.txt"]);
    assert_eq!(fs::read_to_string(outside.join("secret.txt")).unwrap(), "secret\n");
    assert_eq!(fs::read_to_string(evil.join("file.txt")).unwrap(), "evil\n");
    assert!(fs::symlink_metadata(app.join("dangling-out")).unwrap().file_type().is_symlink());

    // `..` that stays inside is fine, and resolves to the canonical path.
    assert_eq!(read(&mut raw, "sub/../inside.txt").lines, ["inside"]);
    let resolved = ok(&mut raw, "fs/resolve", json!({"path": "sub/../inside.txt"}));
    assert_eq!(resolved["path"], json!(s(&app.join("inside.txt"))));
    assert_eq!(resolved["root"], json!(s(&app)));
    assert_eq!(resolved["exists"], true);
    assert_eq!(resolved["displayPath"], "inside.txt");
}

/// Relative paths resolve against the session cwd; `displayPath` is relative to the cwd inside
/// it and absolute outside it.
#[test]
fn paths_resolve_against_the_cwd_and_display_relative_to_it() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let sub = root.join("pkg");
    fs::create_dir_all(sub.join("src")).unwrap();
    fs::write(sub.join("src/lib.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("top.txt"), "top\n").unwrap();
    let mut raw = daemon.session_with(json!({"roots": [root], "cwd": sub}));

    let window = read(&mut raw, "src/lib.rs");
    assert_eq!(window.display_path, "src/lib.rs");
    assert_eq!(window.lines, ["fn main() {}"]);
    let window = read(&mut raw, &s(&sub.join("src/lib.rs")));
    assert_eq!(window.display_path, "src/lib.rs");
    let window = read(&mut raw, "../top.txt");
    assert_eq!(window.display_path, s(&root.join("top.txt")));
    let stat = ok(&mut raw, "file/stat", json!({"path": s(&root.join("top.txt"))}));
    assert_eq!(stat["displayPath"], json!(s(&root.join("top.txt"))));
    let created = ok(&mut raw, "file/write", json!({"path": "src/new.rs", "content": "// new\n"}));
    assert_eq!(created["displayPath"], "src/new.rs");
    assert_eq!(fs::read_to_string(sub.join("src/new.rs")).unwrap(), "// new\n");
}

// ---------------------------------------------------------------------------------------------
// What an edit keeps
// ---------------------------------------------------------------------------------------------

/// Mode bits survive an edit and a write; an edit through a symlink changes the target and
/// leaves the link a link; two hard links stay one shared file (with no deny rule: under one, a
/// file with several names is not written, see `attack_deny`).
#[test]
fn edits_keep_mode_bits_symlinks_and_hard_links() {
    let daemon = Daemon::start_without_deny_rules(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;

    let script = root.join("run.sh");
    fs::write(&script, "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    read(&mut raw, "run.sh");
    edit_ok(&mut raw, "run.sh", "echo old", "echo new");
    assert_eq!(mode(&script), 0o755);
    assert_eq!(fs::read_to_string(&script).unwrap(), "#!/bin/sh\necho new\n");
    ok(&mut raw, "file/write", json!({"path": "run.sh", "content": "#!/bin/sh\necho newer\n"}));
    assert_eq!(mode(&script), 0o755);
    let private = root.join("private.txt");
    fs::write(&private, "token = a\n").unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
    read(&mut raw, "private.txt");
    edit_ok(&mut raw, "private.txt", "token = a", "token = b");
    assert_eq!(mode(&private), 0o600);

    // Symlink (relative target) inside the root.
    let target = root.join("real.txt");
    let link = root.join("link.txt");
    fs::write(&target, "through the link\n").unwrap();
    symlink("real.txt", &link).unwrap();
    assert_eq!(read(&mut raw, "link.txt").lines, ["through the link"]);
    edit_ok(&mut raw, "link.txt", "through", "via");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("real.txt"));
    assert_eq!(fs::read_to_string(&target).unwrap(), "via the link\n");
    // The observation is of the file, whichever name reached it.
    edit_ok(&mut raw, "real.txt", "via", "by");
    ok(&mut raw, "file/write", json!({"path": "link.txt", "content": "written via the link\n"}));
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_to_string(&target).unwrap(), "written via the link\n");

    // Hard links.
    let first = root.join("first.txt");
    let second = root.join("second.txt");
    fs::write(&first, "shared content\n").unwrap();
    fs::hard_link(&first, &second).unwrap();
    let inode = fs::metadata(&first).unwrap().ino();
    read(&mut raw, "first.txt");
    edit_ok(&mut raw, "first.txt", "shared", "still shared");
    for name in [&first, &second] {
        let meta = fs::metadata(name).unwrap();
        assert_eq!((meta.nlink(), meta.ino()), (2, inode), "{}", name.display());
        assert_eq!(fs::read_to_string(name).unwrap(), "still shared content\n");
    }
    ok(&mut raw, "file/write", json!({"path": "first.txt", "content": "rewritten\n"}));
    assert_eq!(fs::metadata(&second).unwrap().nlink(), 2);
    assert_eq!(fs::read_to_string(&second).unwrap(), "rewritten\n");
}

/// CRLF, BOM, a missing or present final newline, and multibyte text all survive an edit;
/// reads show neither `\r` nor the BOM.
#[test]
fn text_conventions_survive_edits() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    // (name, bytes, lines read, old, new, bytes after)
    type Case =
        (&'static str, &'static str, &'static [&'static str], &'static str, &'static str, &'static str);
    let cases: &[Case] = &[
        (
            "crlf.txt",
            "one\r\ntwo\r\nthree\r\n",
            &["one", "two", "three"],
            "one\ntwo",
            "uno\ndos\ndos",
            "uno\r\ndos\r\ndos\r\nthree\r\n",
        ),
        (
            "bom.txt",
            "\u{feff}first\nsecond\n",
            &["first", "second"],
            "first",
            "primero",
            "\u{feff}primero\nsecond\n",
        ),
        ("bom-crlf.txt", "\u{feff}a\r\nb\r\n", &["a", "b"], "a\nb", "x\ny", "\u{feff}x\r\ny\r\n"),
        ("no-final-newline.txt", "a\nb", &["a", "b"], "b", "c", "a\nc"),
        ("final-newline.txt", "a\nb\n", &["a", "b"], "b", "c", "a\nc\n"),
        ("last-line.txt", "a\nb", &["a", "b"], "a\nb", "a\nb\nc", "a\nb\nc"),
        (
            "multibyte.txt",
            "héllo wörld ✓ 日本\nzwei 🦀\n",
            &["héllo wörld ✓ 日本", "zwei 🦀"],
            "wörld ✓",
            "wörld ✓✓ 日本語",
            "héllo wörld ✓✓ 日本語 日本\nzwei 🦀\n",
        ),
    ];
    for &(name, bytes, lines, old, new, after) in cases {
        fs::write(root.join(name), bytes).unwrap();
        let window = read(&mut raw, name);
        assert_eq!(window.lines, lines, "{name}");
        assert_eq!(window.total_lines, lines.len() as u64, "{name}");
        assert!(!window.partial, "{name}");
        let text = tool_ok(&mut raw, "read", json!({"file_path": name}));
        assert!(!text.contains('\r') && !text.contains('\u{feff}'), "{name}: {text:?}");
        edit_ok(&mut raw, name, old, new);
        assert_eq!(fs::read_to_string(root.join(name)).unwrap(), after, "{name}");
    }

    // Line counting: a final newline does not start a line; an empty file has none.
    fs::write(root.join("empty.txt"), "").unwrap();
    let window = read(&mut raw, "empty.txt");
    assert_eq!((window.lines.len(), window.total_lines, window.partial), (0, 0, false));
    let window = read_window(&mut raw, "empty.txt", Some(1), None);
    assert_eq!(window.total_lines, 0);
    fs::write(root.join("lone-newline.txt"), "\n").unwrap();
    assert_eq!(read(&mut raw, "lone-newline.txt").lines, [""]);

    // Multibyte content written by the tool arrives byte for byte.
    let content = "héllo wörld ✓ 日本\r\nmixed\n";
    tool_ok(&mut raw, "write", json!({"file_path": "written.txt", "content": content}));
    assert_eq!(fs::read_to_string(root.join("written.txt")).unwrap(), content);
}

/// Binary files (NUL bytes) and invalid UTF-8 are `FS_NOT_TEXT`: not read, not edited.
#[test]
fn binary_and_invalid_utf8_are_refused() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    let cases: &[(&str, &[u8])] = &[
        ("nul.bin", b"abc\0def\nplain text\n"),
        ("latin1.txt", b"caf\xe9 au lait\n"),
        ("truncated.txt", b"ok\n\xe6\x97"),
        ("lone-continuation.txt", b"\x80 starts badly\n"),
    ];
    for &(name, bytes) in cases {
        fs::write(root.join(name), bytes).unwrap();
        assert_eq!(fails(&mut raw, "file/read", json!({"path": name})), "FS_NOT_TEXT", "{name}");
        assert_eq!(fails(&mut raw, "fs/readText", json!({"path": name})), "FS_NOT_TEXT", "{name}");
        let (code, _) = tool_err(&mut raw, "read", json!({"file_path": name}));
        assert_eq!(code, "FS_NOT_TEXT", "{name}");
        // The session could not read it, so it cannot edit it either.
        let code = edit_err(&mut raw, name, "plain", "fancy");
        assert!(code == "FS_NOT_TEXT" || code == "FS_NOT_OBSERVED", "{name}: {code}");
        let (code, _) =
            tool_err(&mut raw, "edit", json!({"file_path": name, "old_string": "ok", "new_string": "ko"}));
        assert!(code == "FS_NOT_TEXT" || code == "FS_NOT_OBSERVED", "{name}: {code}");
        // Even with the right version in hand, the provider refuses to edit it.
        let version = version_of(&mut raw, name);
        let params =
            json!({"path": name, "oldString": "plain", "newString": "fancy", "expectedVersion": version});
        assert_eq!(fails(&mut raw, "fs/editText", params), "FS_NOT_TEXT", "{name}");
        assert_eq!(fs::read(root.join(name)).unwrap(), bytes, "{name}");
    }

    // Other kinds of path.
    fs::create_dir(root.join("folder")).unwrap();
    assert_eq!(fails(&mut raw, "file/read", json!({"path": "folder"})), "FS_NOT_REGULAR_FILE");
    assert_eq!(tool_err(&mut raw, "read", json!({"file_path": "folder"})).0, "FS_NOT_REGULAR_FILE");
    assert_eq!(
        fails(&mut raw, "file/write", json!({"path": "folder", "content": "x"})),
        "FS_NOT_REGULAR_FILE"
    );
    assert_eq!(fails(&mut raw, "file/read", json!({"path": "missing.txt"})), "FS_NOT_FOUND");
    assert_eq!(fails(&mut raw, "fs/readText", json!({"path": "missing.txt"})), "FS_NOT_FOUND");
    let (code, text) = tool_err(&mut raw, "read", json!({"file_path": "missing.txt"}));
    assert_eq!(code, "FS_NOT_FOUND");
    assert!(text.contains("missing.txt"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// The model-facing projection
// ---------------------------------------------------------------------------------------------

/// The read tool's text: `cat -n` numbering, the footers, a capped limit, offset past the end,
/// cut lines (and `file/read`, which returns them whole unless asked to cut them).
#[test]
fn read_tool_projection() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    fs::write(root.join("five.txt"), "alpha\nbeta\ngamma\ndelta\nepsilon\n").unwrap();

    let read_text = |raw: &mut Raw, args: Value| tool_ok(raw, "read", args).trim_end().to_owned();
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt"})),
        "1\talpha\n2\tbeta\n3\tgamma\n4\tdelta\n5\tepsilon\n\n(End of file - total 5 lines)"
    );
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt", "offset": 2, "limit": 2})),
        "2\tbeta\n3\tgamma\n\n(Showing lines 2-3 of 5. Use offset=4 to continue.)"
    );
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt", "offset": 4, "limit": 2})),
        "4\tdelta\n5\tepsilon\n\n(End of file - total 5 lines)"
    );
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "five.txt", "offset": 5})),
        "5\tepsilon\n\n(End of file - total 5 lines)"
    );
    // A limit above 2000 is capped, not refused, and the footer says so.
    fs::write(root.join("long.txt"), lines_text(3000)).unwrap();
    let first_2000 = format!(
        "{}\n\n(Showing lines 1-2000 of 3000. Use offset=2001 to continue.)",
        numbered((1..=2000).map(|n| (n, format!("line {n}"))))
    );
    let capped = first_2000.replace("continue.)", "continue. Limit capped at 2000 lines.)");
    assert!(read_text(&mut raw, json!({"file_path": "long.txt", "limit": 2500})) == capped);
    assert!(read_text(&mut raw, json!({"file_path": "long.txt"})) == first_2000);
    assert_eq!(
        read_text(&mut raw, json!({"file_path": "long.txt", "offset": 2999})),
        "2999\tline 2999\n3000\tline 3000\n\n(End of file - total 3000 lines)"
    );

    // Offset past the end: FS_NOT_FOUND, with a text that says how long the file is.
    let (code, text) = tool_err(&mut raw, "read", json!({"file_path": "five.txt", "offset": 6}));
    assert_eq!(code, "FS_NOT_FOUND");
    assert!(mentions(&text, &["5 lines"]), "{text}");
    let response = rpc(&mut raw, "file/read", json!({"path": "five.txt", "offset": 9}));
    assert_eq!(fs_error(&response), "FS_NOT_FOUND");
    assert_eq!(response["error"]["data"]["totalLines"], 5, "{response}");
    // An empty file reads fine at offset 1.
    fs::write(root.join("empty.txt"), "").unwrap();
    let text = tool_ok(&mut raw, "read", json!({"file_path": "empty.txt", "offset": 1}));
    assert!(text.contains("0 lines"), "{text}");

    // Cut lines: by the tool at 2000 characters (not bytes), with the design's suffix; by
    // file/read only when asked (maxLineChars), listed in truncatedLines.
    let exact = "e".repeat(2000);
    let long = format!("{}{}", "a".repeat(2000), "b".repeat(500));
    let wide = "é".repeat(2001);
    fs::write(root.join("wide.txt"), format!("short\n{long}\n{wide}\n{exact}\n")).unwrap();
    let window = read(&mut raw, "wide.txt");
    assert_eq!(window.lines, ["short".to_owned(), long.clone(), wide.clone(), exact.clone()]);
    assert!(window.truncated_lines.is_empty());
    let params = json!({"path": "wide.txt", "maxLineChars": 2000});
    let window: ReadResult = serde_json::from_value(ok(&mut raw, "file/read", params)).unwrap();
    assert_eq!(window.lines, ["short".to_owned(), "a".repeat(2000), "é".repeat(2000), exact.clone()]);
    assert_eq!(window.truncated_lines, [2, 3]);
    let text = tool_ok(&mut raw, "read", json!({"file_path": "wide.txt"}));
    let shown: Vec<&str> = text.lines().collect();
    assert_eq!(shown[0], "1\tshort");
    assert_eq!(shown[1], format!("2\t{}... (line truncated to 2000 chars)", "a".repeat(2000)));
    assert_eq!(shown[2], format!("3\t{}... (line truncated to 2000 chars)", "é".repeat(2000)));
    assert_eq!(shown[3], format!("4\t{exact}"), "a line of exactly 2000 characters is not cut");
}

/// Paging with `offset=` from each footer until the end of the file shows every line once.
#[test]
fn paging_through_a_file_covers_every_line_exactly_once() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    for (total, limit) in [(4321u64, Some(1000u64)), (4000, Some(1000)), (4500, None), (7, Some(3))] {
        fs::write(root.join("pages.txt"), lines_text(total)).unwrap();
        let mut seen = Vec::new();
        let mut offset = 1u64;
        for _page in 0..100 {
            let mut args = json!({"file_path": "pages.txt", "offset": offset});
            if let Some(limit) = limit {
                args["limit"] = json!(limit);
            }
            let text = tool_ok(&mut raw, "read", args);
            let (body, footer) = text.trim_end().rsplit_once("\n\n").unwrap_or_else(|| panic!("{text}"));
            for line in body.lines() {
                let (n, content) = line.split_once('\t').unwrap();
                let n: u64 = n.trim_start().parse().unwrap();
                assert_eq!(content, format!("line {n}"));
                seen.push(n);
            }
            let last = *seen.last().unwrap();
            if footer == format!("(End of file - total {total} lines)") {
                break;
            }
            assert_eq!(
                footer,
                format!("(Showing lines {offset}-{last} of {total}. Use offset={} to continue.)", last + 1)
            );
            offset = last + 1;
        }
        assert_eq!(seen, (1..=total).collect::<Vec<_>>(), "{total} lines by {limit:?}");
    }
}

/// Tool argument validation: bad arguments are `isError` results with `FS_INVALID_ARGUMENT`; an
/// unknown tool is a JSON-RPC error.
#[test]
fn tool_arguments_are_validated() {
    let daemon = Daemon::start(&[]);
    fs::write(root_of(&daemon).join("f.txt"), "text\n").unwrap();
    let mut raw = daemon.session();
    tool_ok(&mut raw, "read", json!({"file_path": "f.txt"}));
    let bad = [
        ("read", json!({})),
        ("read", json!({"file_path": 5})),
        ("read", json!({"file_path": "f.txt", "offset": 0})),
        ("read", json!({"file_path": "f.txt", "offset": -1})),
        ("read", json!({"file_path": "f.txt", "offset": "2"})),
        ("read", json!({"file_path": "f.txt", "offset": 1.5})),
        ("read", json!({"file_path": "f.txt", "limit": 0})),
        ("read", json!({"file_path": "f.txt", "limit": "10"})),
        ("read", json!({"file_path": "f.txt", "path": "f.txt"})),
        ("write", json!({"file_path": "g.txt"})),
        ("write", json!({"file_path": "g.txt", "content": 7})),
        ("write", json!({"file_path": "g.txt", "content": "x", "mode": 493})),
        ("edit", json!({"file_path": "f.txt", "old_string": "text"})),
        ("edit", json!({"file_path": "f.txt", "old_string": "", "new_string": "x"})),
        ("edit", json!({"file_path": "f.txt", "old_string": "text", "new_string": "text"})),
        (
            "edit",
            json!({"file_path": "f.txt", "old_string": "text", "new_string": "t", "replace_all": "yes"}),
        ),
        ("edit", json!({"file_path": "f.txt", "oldString": "text", "newString": "t"})),
    ];
    for (name, arguments) in bad {
        let (code, text) = tool_err(&mut raw, name, arguments.clone());
        assert_eq!(code, "FS_INVALID_ARGUMENT", "{name} {arguments}: {text}");
        assert!(!text.is_empty());
    }
    assert!(!root_of(&daemon).join("g.txt").exists());
    assert_eq!(fs::read_to_string(root_of(&daemon).join("f.txt")).unwrap(), "text\n");
    let response =
        rpc(&mut raw, "tools/call", json!({"name": "delete", "arguments": {"file_path": "f.txt"}}));
    assert_eq!(error_code(&response), -32602, "{response}");
}

/// Success texts of write and edit; ambiguous and missing matches tell the model what to do.
#[test]
fn write_and_edit_texts_and_match_counting() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();

    let text =
        tool_ok(&mut raw, "write", json!({"file_path": "notes.txt", "content": "foo\nbar foo\nfoo\n"}));
    assert!(mentions(&text, &["created"]), "{text}");
    // The session's own write recorded the version: writing again is an update, no read needed.
    let text =
        tool_ok(&mut raw, "write", json!({"file_path": "notes.txt", "content": "foo\nbar foo\nbaz foo\n"}));
    assert!(mentions(&text, &["overwrote"]), "{text}");

    let (code, text) = tool_err(
        &mut raw,
        "edit",
        json!({"file_path": "notes.txt", "old_string": "foo", "new_string": "qux"}),
    );
    assert_eq!(code, "FS_AMBIGUOUS_EDIT");
    assert!(mentions(&text, &["3", "replace_all"]), "{text}");
    assert_eq!(edit_err(&mut raw, "notes.txt", "foo", "qux"), "FS_AMBIGUOUS_EDIT");
    let (code, text) = tool_err(
        &mut raw,
        "edit",
        json!({"file_path": "notes.txt", "old_string": "absent", "new_string": "x"}),
    );
    assert_eq!(code, "FS_EDIT_NOT_FOUND");
    assert!(mentions(&text, &["not found"]), "{text}");
    assert_eq!(edit_err(&mut raw, "notes.txt", "absent", "x"), "FS_EDIT_NOT_FOUND");
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "foo\nbar foo\nbaz foo\n");

    let text = tool_ok(
        &mut raw,
        "edit",
        json!({"file_path": "notes.txt", "old_string": "foo", "new_string": "qux", "replace_all": true}),
    );
    assert!(mentions(&text, &["3"]), "{text}");
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "qux\nbar qux\nbaz qux\n");
    let text = tool_ok(
        &mut raw,
        "edit",
        json!({"file_path": "notes.txt", "old_string": "bar", "new_string": "BAR"}),
    );
    assert!(mentions(&text, &["1"]), "{text}");

    let result = ok(
        &mut raw,
        "file/edit",
        json!({"path": "notes.txt", "oldString": "qux", "newString": "q", "replaceAll": true}),
    );
    assert_eq!((result["replacements"].clone(), result["replaceAll"].clone()), (json!(3), json!(true)));
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "q\nBAR q\nbaz q\n");
    // replace_all with a single occurrence is fine too.
    let result = ok(
        &mut raw,
        "file/edit",
        json!({"path": "notes.txt", "oldString": "baz", "newString": "z", "replaceAll": true}),
    );
    assert_eq!(result["replacements"], 1);
}

// ---------------------------------------------------------------------------------------------
// Session options and stat
// ---------------------------------------------------------------------------------------------

/// A read-only session reads, and every write path of every layer is refused with
/// `FS_PERMISSION_DENIED`, writing nothing; a session limited to `read` has no other tool.
#[test]
fn read_only_sessions_and_tool_subsets() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let path = root.join("guarded.txt");
    fs::write(&path, "original\n").unwrap();
    let mut raw = daemon.session_with(json!({"roots": [root], "readOnly": true}));
    assert_eq!(read(&mut raw, "guarded.txt").lines, ["original"]);
    tool_ok(&mut raw, "read", json!({"file_path": "guarded.txt"}));
    let version = version_of(&mut raw, "guarded.txt");

    for file in ["guarded.txt", "new.txt", "new-dir/new.txt"] {
        let calls = [
            ("file/write", json!({"path": file, "content": "changed\n"})),
            ("file/edit", json!({"path": file, "oldString": "original", "newString": "changed"})),
            ("fs/writeText", json!({"path": file, "content": "changed\n", "expect": {"kind": "any"}})),
            (
                "fs/writeText",
                json!({"path": file, "content": "changed\n", "expect": {"kind": "createIfAbsent"}}),
            ),
            (
                "fs/writeText",
                json!({"path": file, "content": "changed\n", "expect": {"kind": "replaceIfVersion", "version": version}}),
            ),
            (
                "fs/editText",
                json!({"path": file, "oldString": "original", "newString": "changed", "expectedVersion": version}),
            ),
        ];
        for (method, params) in calls {
            assert_eq!(fails(&mut raw, method, params.clone()), "FS_PERMISSION_DENIED", "{method} {params}");
        }
        let tools = [
            ("write", json!({"file_path": file, "content": "changed\n"})),
            ("edit", json!({"file_path": file, "old_string": "original", "new_string": "changed"})),
        ];
        for (name, arguments) in tools {
            let (code, _) = tool_err(&mut raw, name, arguments.clone());
            assert_eq!(code, "FS_PERMISSION_DENIED", "{name} {arguments}");
        }
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), "original\n");
    assert!(!root.join("new.txt").exists() && !root.join("new-dir").exists());

    let mut reader = daemon.session_with(json!({"roots": [root], "tools": ["read"]}));
    tool_ok(&mut reader, "read", json!({"file_path": "guarded.txt"}));
    for (name, arguments) in [
        ("edit", json!({"file_path": "guarded.txt", "old_string": "original", "new_string": "changed"})),
        ("write", json!({"file_path": "other.txt", "content": "x"})),
    ] {
        let response = rpc(&mut reader, "tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(error_code(&response), -32602, "{response}");
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), "original\n");
    assert!(!root.join("other.txt").exists());
}

/// `file/stat` reports what is there and whether this session's observation is fresh, and
/// follows outside changes.
#[test]
fn file_stat_fields_and_freshness() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();
    fs::create_dir(root.join("dir")).unwrap();
    fs::write(root.join("dir/a.txt"), "12345\n").unwrap();

    let stat = ok(&mut raw, "file/stat", json!({"path": "missing.txt"}));
    assert_eq!(
        (stat["exists"].clone(), stat["kind"].clone(), stat["fresh"].clone()),
        (json!(false), json!("none"), json!(false))
    );
    assert!(stat.get("version").is_none_or(Value::is_null), "{stat}");
    let stat = ok(&mut raw, "file/stat", json!({"path": "dir"}));
    assert_eq!((stat["exists"].clone(), stat["kind"].clone()), (json!(true), json!("directory")), "{stat}");
    assert_eq!(stat["displayPath"], "dir");
    // The daemon's own socket lives in the temp folder: neither file nor folder.
    let socket = daemon.socket.canonicalize().unwrap();
    let stat = ok(&mut raw, "file/stat", json!({"path": s(&socket)}));
    assert_eq!(stat["kind"], "other", "{stat}");

    let stat = ok(&mut raw, "file/stat", json!({"path": "dir/a.txt"}));
    assert_eq!(stat["exists"], true);
    assert_eq!(stat["kind"], "file");
    assert_eq!(stat["displayPath"], "dir/a.txt");
    assert_eq!(stat["size"], 6);
    let v1 = stat["version"].as_str().unwrap().to_owned();
    assert!(stat.get("observedVersion").is_none_or(Value::is_null), "{stat}");
    assert_eq!(stat["fresh"], false);

    let window = read_window(&mut raw, "dir/a.txt", Some(1), Some(1));
    assert_eq!(window.version, v1);
    let stat = ok(&mut raw, "file/stat", json!({"path": "dir/a.txt"}));
    assert_eq!((stat["observedVersion"].clone(), stat["fresh"].clone()), (json!(v1), json!(true)), "{stat}");
    assert_eq!(version_of(&mut raw, "dir/a.txt"), v1, "fs/stat and file/stat agree");

    fs::write(root.join("dir/a.txt"), "1234567\n").unwrap();
    let stat = ok(&mut raw, "file/stat", json!({"path": "dir/a.txt"}));
    assert_eq!(stat["size"], 8);
    assert_eq!(stat["observedVersion"], json!(v1));
    assert_ne!(stat["version"], json!(v1));
    assert_eq!(stat["fresh"], false);
    // Putting the old bytes back makes the observation fresh again: versions follow content.
    fs::write(root.join("dir/a.txt"), "12345\n").unwrap();
    let stat = ok(&mut raw, "file/stat", json!({"path": "dir/a.txt"}));
    assert_eq!((stat["version"].clone(), stat["fresh"].clone()), (json!(v1), json!(true)), "{stat}");
    // So does reading again after a change.
    fs::write(root.join("dir/a.txt"), "changed\n").unwrap();
    let v2 = read(&mut raw, "dir/a.txt").version;
    let stat = ok(&mut raw, "file/stat", json!({"path": "dir/a.txt"}));
    assert_eq!((stat["observedVersion"].clone(), stat["fresh"].clone()), (json!(v2), json!(true)), "{stat}");
}

// ---------------------------------------------------------------------------------------------
// Creating files
// ---------------------------------------------------------------------------------------------

/// Creating needs no read and makes missing parent folders; a file that appeared in the
/// meantime is never overwritten; `fs/writeText` honours each expectation.
#[test]
fn creating_files_and_write_expectations() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut raw = daemon.session();

    let created = ok(&mut raw, "file/write", json!({"path": "deep/er/new.txt", "content": "fresh\n"}));
    assert_eq!(created["operation"], "create");
    assert_eq!(created["displayPath"], "deep/er/new.txt");
    assert_eq!(fs::read_to_string(root.join("deep/er/new.txt")).unwrap(), "fresh\n");
    assert_eq!(created["version"], json!(version_of(&mut raw, "deep/er/new.txt")));
    let stat = ok(&mut raw, "file/stat", json!({"path": "deep/er/new.txt"}));
    assert_eq!(stat["fresh"], true, "a write records the new version: {stat}");
    let text = tool_ok(&mut raw, "write", json!({"file_path": "a/b/c.txt", "content": "tool\n"}));
    assert!(mentions(&text, &["created"]), "{text}");
    assert_eq!(fs::read_to_string(root.join("a/b/c.txt")).unwrap(), "tool\n");

    // A file that appears after the session looked is not the session's to overwrite.
    let stat = ok(&mut raw, "file/stat", json!({"path": "appeared.txt"}));
    assert_eq!(stat["exists"], false);
    fs::write(root.join("appeared.txt"), "someone else's\n").unwrap();
    assert_eq!(
        fails(&mut raw, "file/write", json!({"path": "appeared.txt", "content": "mine\n"})),
        "FS_NOT_OBSERVED"
    );
    let write = |expect: Value| json!({"path": "appeared.txt", "content": "mine\n", "expect": expect});
    assert_eq!(fails(&mut raw, "fs/writeText", write(json!({"kind": "createIfAbsent"}))), "FS_NOT_OBSERVED");
    assert_eq!(
        fails(
            &mut raw,
            "fs/writeText",
            write(json!({"kind": "replaceIfVersion", "version": created["version"]}))
        ),
        "FS_STALE_VERSION"
    );
    assert_eq!(fs::read_to_string(root.join("appeared.txt")).unwrap(), "someone else's\n");

    // The expectations that hold.
    let version = version_of(&mut raw, "appeared.txt");
    let replaced =
        ok(&mut raw, "fs/writeText", write(json!({"kind": "replaceIfVersion", "version": version})));
    assert_eq!(replaced["operation"], "update");
    assert_eq!(fs::read_to_string(root.join("appeared.txt")).unwrap(), "mine\n");
    let params = json!({"path": "x/y.txt", "content": "new\n", "expect": {"kind": "createIfAbsent"}});
    assert_eq!(ok(&mut raw, "fs/writeText", params)["operation"], "create");
    let params = json!({"path": "x/y.txt", "content": "any\n", "expect": {"kind": "any"}});
    assert_eq!(ok(&mut raw, "fs/writeText", params)["operation"], "update");
    assert_eq!(fs::read_to_string(root.join("x/y.txt")).unwrap(), "any\n");
    // fs/writeText recorded nothing for the session.
    assert_eq!(fails(&mut raw, "file/write", json!({"path": "x/y.txt", "content": "z"})), "FS_NOT_OBSERVED");

    // After a read, a write is an update; after an outside change, it is stale.
    read(&mut raw, "appeared.txt");
    fs::write(root.join("appeared.txt"), "moved on\n").unwrap();
    assert_eq!(
        fails(&mut raw, "file/write", json!({"path": "appeared.txt", "content": "mine again\n"})),
        "FS_STALE_VERSION"
    );
    assert_eq!(fs::read_to_string(root.join("appeared.txt")).unwrap(), "moved on\n");
    read_window(&mut raw, "appeared.txt", Some(1), Some(1));
    let updated = ok(&mut raw, "file/write", json!({"path": "appeared.txt", "content": "mine again\n"}));
    assert_eq!(updated["operation"], "update");
    assert_eq!(fs::read_to_string(root.join("appeared.txt")).unwrap(), "mine again\n");
}

#[test]
fn warm_reads_keep_the_file_open_and_still_see_outside_changes() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    fs::write(root.join("warm.txt"), "one\ntwo\n").unwrap();
    // Older than the racy window, so the version the daemon computes is trusted.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let mut raw = daemon.session();
    let first = read_window(&mut raw, "warm.txt", None, None);
    let status = raw.call("daemon/status", None);
    assert_eq!(
        (status["cachedFiles"].as_u64(), status["openFiles"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );
    // Its line index is counted (a small file's: a few dozen bytes, no line ends).
    assert!(status["indexBytes"].as_u64().is_some_and(|b| b > 0 && b < 4096), "{status}");
    // Served from the open file, and the same answer.
    assert_eq!(read_window(&mut raw, "warm.txt", None, None).lines, first.lines);

    // Rewritten in place by another program: same inode, same size, new content.
    fs::write(root.join("warm.txt"), "uno\ndos\n").unwrap();
    let after = read_window(&mut raw, "warm.txt", None, None);
    assert_eq!(after.lines, ["uno", "dos"]);
    assert_ne!(after.version, first.version);
    // Replaced by rename: a new inode.
    fs::write(root.join("warm.new"), "eins\n").unwrap();
    fs::rename(root.join("warm.new"), root.join("warm.txt")).unwrap();
    assert_eq!(read_window(&mut raw, "warm.txt", None, None).lines, ["eins"]);
}
