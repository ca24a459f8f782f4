//! The `glob` and `grep` tools over the real socket: ignore files and hidden folders skipped,
//! binary files listed by glob but never searched, symlinks never followed out of the roots,
//! deny rules, every output mode, the budget footer, `path` outside the roots, a content grep
//! counting as a read (edit without a read, refused as stale after an outside change), the warm
//! listing a repeated search answers from (and every change it must reflect, newest first
//! also for the files a glob's walk left undated), and which
//! sessions get the tools.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use filectx_tests::{Daemon, Raw, ok, root_of, tool, tool_ok};
use serde_json::{Value, json};

/// A project folder `proj` (the session's root) and a sibling `outside` in the daemon's temp dir.
pub(crate) fn project(daemon: &Daemon) -> (PathBuf, PathBuf) {
    let base = root_of(daemon);
    let (root, outside) = (base.join("proj"), base.join("outside"));
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&outside).unwrap();
    (root, outside)
}

/// Writes each `(path, content)` of `files` below `root`, making their folders.
pub(crate) fn put(root: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
}

/// A session rooted at `root` with the search tools (and read, write, edit).
pub(crate) fn session(daemon: &Daemon, root: &Path) -> Raw {
    daemon.session_with(json!({"roots": [root], "tools": ["read", "write", "edit", "glob", "grep"]}))
}

/// The `FS_*` code of a tools/call that must fail as a tool.
fn fails(raw: &mut Raw, name: &str, arguments: Value) -> String {
    let result = tool(raw, name, arguments.clone());
    assert_eq!(result["isError"], true, "{name} {arguments}: {result}");
    result["error"]["code"].as_str().unwrap().to_owned()
}

fn lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

fn age(path: &Path, seconds: u64) {
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds)).unwrap();
}

#[test]
fn ignore_files_hidden_folders_and_binary_files() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(
        &root,
        &[
            (".gitignore", "target/\n*.log\n"),
            (".ignore", "vendor/\n"),
            ("src/a.rs", "fn needle() {}\n"),
            ("src/b.txt", "a needle here\n"),
            ("src/target/gen.rs", "needle\n"),
            ("target/out.rs", "needle\n"),
            ("app.log", "needle\n"),
            ("vendor/v.rs", "needle\n"),
            (".hidden/h.rs", "needle\n"),
            (".env", "needle\n"),
        ],
    );
    fs::write(root.join("blob.bin"), b"needle\0\x01\x02needle\n").unwrap();
    let mut raw = session(&daemon, &root);

    // No .git anywhere: .gitignore applies all the same; hidden entries are skipped.
    assert_eq!(
        lines(&tool_ok(&mut raw, "glob", json!({"pattern": "**/*"}))),
        ["blob.bin", "src/a.rs", "src/b.txt"]
    );
    assert_eq!(lines(&tool_ok(&mut raw, "glob", json!({"pattern": "**/*.rs"}))), ["src/a.rs"]);
    assert_eq!(
        tool_ok(&mut raw, "glob", json!({"pattern": "*.rs"})),
        "No files found",
        "* stays in one folder"
    );
    // Binary files are listed but never searched.
    assert_eq!(lines(&tool_ok(&mut raw, "grep", json!({"pattern": "needle"}))), ["src/a.rs", "src/b.txt"]);
    // The root's .gitignore applies to a search of a subfolder too.
    assert_eq!(
        lines(&tool_ok(&mut raw, "grep", json!({"pattern": "needle", "path": "src"}))),
        ["src/a.rs", "src/b.txt"]
    );
    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "**/*.rs", "path": "src"})), "src/a.rs");
    // glob and type narrow a grep.
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "needle", "glob": "*.rs"})), "src/a.rs");
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "needle", "type": "rust"})), "src/a.rs");
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "needle", "glob": "!*.rs"})), "src/b.txt");
    assert_eq!(
        fails(&mut raw, "grep", json!({"pattern": "needle", "type": "nosuchtype"})),
        "FS_INVALID_ARGUMENT"
    );
    assert_eq!(fails(&mut raw, "grep", json!({"pattern": "("})), "FS_INVALID_ARGUMENT");
    // A file named explicitly is searched.
    assert_eq!(
        tool_ok(&mut raw, "grep", json!({"pattern": "needle", "path": "src/b.txt", "output_mode": "count"})),
        "src/b.txt:1"
    );
}

#[test]
fn symlinks_are_never_followed_out_of_the_roots() {
    let daemon = Daemon::start(&[]);
    let (root, outside) = project(&daemon);
    put(&root, &[("src/a.rs", "needle in\n")]);
    put(&outside, &[("secret.txt", "needle out\n"), ("dir/s.rs", "needle out\n")]);
    symlink(outside.join("secret.txt"), root.join("link_out.txt")).unwrap();
    symlink(outside.join("dir"), root.join("dir_out")).unwrap();
    symlink(root.join("src/a.rs"), root.join("link_in.rs")).unwrap();
    symlink(root.join("src"), root.join("src_link")).unwrap();
    let mut raw = session(&daemon, &root);

    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "**/*"})), "src/a.rs");
    let content = tool_ok(&mut raw, "grep", json!({"pattern": "needle", "output_mode": "content"}));
    assert_eq!(content, "src/a.rs\n1\tneedle in");
    assert!(!content.contains("out"), "{content}");
    for path in ["dir_out", "../outside", "/", outside.to_str().unwrap()] {
        assert_eq!(
            fails(&mut raw, "grep", json!({"pattern": "needle", "path": path})),
            "FS_OUTSIDE_ROOT",
            "{path}"
        );
        assert_eq!(
            fails(&mut raw, "glob", json!({"pattern": "*", "path": path})),
            "FS_OUTSIDE_ROOT",
            "{path}"
        );
    }
}

#[test]
fn deny_rules_filter_what_is_listed_and_searched() {
    let daemon = Daemon::start(&["--deny-read", "*.pem"]);
    let (root, _) = project(&daemon);
    put(&root, &[("secrets/key.txt", "needle\n"), ("key.pem", "needle\n"), ("notes.txt", "needle\n")]);
    let tools = ["read", "write", "edit", "glob", "grep"];
    let mut raw =
        daemon.session_with(json!({"roots": [root], "tools": tools, "deny": {"read": ["secrets/**"]}}));
    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "**/*"})), "notes.txt");
    assert_eq!(
        tool_ok(&mut raw, "grep", json!({"pattern": "needle", "output_mode": "content"})),
        "notes.txt\n1\tneedle"
    );
    // A denied folder lists nothing; a denied file named outright is refused.
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "needle", "path": "secrets"})), "No files found");
    for path in ["secrets/key.txt", "key.pem"] {
        assert_eq!(
            fails(&mut raw, "grep", json!({"pattern": "needle", "path": path})),
            "FS_PERMISSION_DENIED"
        );
    }
}

#[test]
fn every_output_mode() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(
        &root,
        &[
            ("old.txt", "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\nbeta again\n"),
            ("new.txt", "\u{feff}beta first\r\nsecond\r\n"),
            ("long.txt", &format!("beta {}\n", "x".repeat(3000))),
        ],
    );
    age(&root.join("old.txt"), 3600);
    age(&root.join("long.txt"), 1800);
    let mut raw = session(&daemon, &root);

    // Newest first.
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "beta"})), "new.txt\nlong.txt\nold.txt");
    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "*.txt"})), "new.txt\nlong.txt\nold.txt");
    assert_eq!(
        tool_ok(&mut raw, "grep", json!({"pattern": "beta", "output_mode": "count"})),
        "long.txt:1\nnew.txt:1\nold.txt:2"
    );
    let content = tool_ok(
        &mut raw,
        "grep",
        json!({"pattern": "beta", "output_mode": "content", "path": "old.txt", "context": 1}),
    );
    assert_eq!(content, "old.txt\n1\talpha\n2\tbeta\n3\tgamma\n--\n6\tzeta\n7\tbeta again");
    // Across files: each file's path once, above its lines; no `--` between files.
    let content = tool_ok(
        &mut raw,
        "grep",
        json!({"pattern": "beta", "output_mode": "content", "glob": "*.txt", "context": 1}),
    );
    assert_eq!(
        content,
        format!(
            "long.txt\n1\tbeta {}... (line truncated to 2000 chars)\nnew.txt\n1\tbeta first\n2\tsecond\n\
             old.txt\n1\talpha\n2\tbeta\n3\tgamma\n--\n6\tzeta\n7\tbeta again",
            "x".repeat(1995)
        )
    );
    // No BOM, no \r; long lines cut like read's.
    let content = tool_ok(
        &mut raw,
        "grep",
        json!({"pattern": "^beta", "output_mode": "content", "glob": "{new,long}.txt"}),
    );
    let expected = format!(
        "long.txt\n1\tbeta {}... (line truncated to 2000 chars)\nnew.txt\n1\tbeta first",
        "x".repeat(1995)
    );
    assert_eq!(content, expected);
    assert_eq!(
        tool_ok(
            &mut raw,
            "grep",
            json!({"pattern": "BETA A", "output_mode": "content", "case_insensitive": true})
        ),
        "old.txt\n7\tbeta again"
    );
    assert_eq!(
        tool_ok(
            &mut raw,
            "grep",
            json!({"pattern": "zeta\\nbeta", "output_mode": "content", "multiline": true})
        ),
        "old.txt\n6\tzeta\n7\tbeta again"
    );
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "nothing at all"})), "No files found");
    assert_eq!(
        tool_ok(&mut raw, "grep", json!({"pattern": "nothing", "output_mode": "content"})),
        "No matches found"
    );
    // head_limit and offset page through entries.
    expect_test::expect![[r#"
        new.txt

        (Showing files 1-1; more follow: use offset=1 to continue.)"#]]
    .assert_eq(&tool_ok(&mut raw, "grep", json!({"pattern": "beta", "head_limit": 1})));
    assert_eq!(
        tool_ok(&mut raw, "grep", json!({"pattern": "beta", "head_limit": 1, "offset": 2})),
        "old.txt"
    );
    assert_eq!(
        fails(&mut raw, "grep", json!({"pattern": "beta", "output_mode": "lines"})),
        "FS_INVALID_ARGUMENT"
    );
}

#[test]
fn the_answer_stays_within_the_budget_with_a_footer() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    let many: String = (1..=200).map(|n| format!("match number {n}\n")).collect();
    put(&root, &[("a.txt", &many), ("b.txt", &many)]);
    let tools = ["read", "write", "edit", "glob", "grep"];
    let mut raw = daemon.session_with(json!({"roots": [root], "tools": tools, "readMaxBytes": 1024}));
    let content = tool_ok(&mut raw, "grep", json!({"pattern": "match", "output_mode": "content"}));
    assert!(content.len() <= 1024, "{}", content.len());
    // Only a.txt's lines fit: its path, then its lines as read shows them.
    assert!(content.starts_with("a.txt\n1\tmatch number 1\n2\tmatch number 2\n"), "{content}");
    let shown = content.lines().filter(|l| l.contains('\t')).count();
    let footer = content.lines().last().unwrap();
    assert_eq!(
        footer,
        format!(
            "(Output capped at 1 KiB: {} more lines in 2 files not shown. Narrow the pattern, path, glob or type, or continue with offset={shown}.)",
            400 - shown
        )
    );
    let next =
        tool_ok(&mut raw, "grep", json!({"pattern": "match", "output_mode": "content", "offset": shown}));
    assert!(next.starts_with(&format!("a.txt\n{}\tmatch number {}\n", shown + 1, shown + 1)), "{next}");

    let names: Vec<String> = (0..300).map(|n| format!("f{n:03}.rs")).collect();
    for name in &names {
        fs::write(root.join(name), "").unwrap();
    }
    let listed = tool_ok(&mut raw, "glob", json!({"pattern": "*.rs"}));
    assert!(listed.len() <= 1024, "{}", listed.len());
    assert!(
        listed.ends_with(
            "more matching files not shown; at most 200 paths are listed. Narrow the pattern or path.)"
        ),
        "{listed}"
    );
}

#[test]
fn a_content_grep_counts_as_a_read_until_the_file_changes() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("notes.txt", "one\ntwo\nthree\n"), ("other.txt", "two\n")]);
    let mut raw = session(&daemon, &root);

    // files_with_matches shows no lines: no read recorded.
    assert_eq!(lines(&tool_ok(&mut raw, "grep", json!({"pattern": "two"}))), ["notes.txt", "other.txt"]);
    let edit = json!({"file_path": "notes.txt", "old_string": "two", "new_string": "TWO"});
    assert_eq!(fails(&mut raw, "edit", edit.clone()), "FS_NOT_OBSERVED");
    // A content grep that shows its lines does.
    let found =
        tool_ok(&mut raw, "grep", json!({"pattern": "two", "output_mode": "content", "path": "notes.txt"}));
    assert_eq!(found, "notes.txt\n2\ttwo");
    tool_ok(&mut raw, "edit", edit);
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "one\nTWO\nthree\n");

    // Grep again, then someone else changes the file: the edit is refused as stale.
    tool_ok(&mut raw, "grep", json!({"pattern": "three", "output_mode": "content"}));
    fs::write(root.join("notes.txt"), "one\nTWO\nthree\nfour\n").unwrap();
    let edit = json!({"file_path": "notes.txt", "old_string": "three", "new_string": "3"});
    assert_eq!(fails(&mut raw, "edit", edit), "FS_STALE_VERSION");
    assert_eq!(fs::read_to_string(root.join("notes.txt")).unwrap(), "one\nTWO\nthree\nfour\n");
}

#[test]
fn sessions_get_the_search_tools_when_they_ask() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    let names = |raw: &mut Raw| -> Vec<String> {
        let list = ok(raw, "tools/list", json!({}));
        list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    let mut plain = Raw::connect(&daemon.socket);
    let init = plain.initialize(&root);
    assert!(init["capabilities"]["features"].as_array().unwrap().contains(&json!("search")), "{init}");
    assert_eq!(names(&mut plain), ["read", "write", "edit"]);
    let response =
        filectx_tests::rpc(&mut plain, "tools/call", json!({"name": "grep", "arguments": {"pattern": "x"}}));
    assert_eq!(filectx_tests::error_code(&response), -32602, "{response}");

    let mut all = session(&daemon, &root);
    assert_eq!(names(&mut all), ["read", "write", "edit", "glob", "grep"]);
    let list = ok(&mut all, "tools/list", json!({}));
    let described: String = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "glob" || t["name"] == "grep")
        .map(|t| {
            let properties = t["inputSchema"]["properties"].as_object().unwrap();
            let fields: Vec<&str> = properties.keys().map(String::as_str).collect();
            format!(
                "{}({}): {}\n",
                t["name"].as_str().unwrap(),
                fields.join(", "),
                t["description"].as_str().unwrap()
            )
        })
        .collect();
    expect_test::expect![[r#"
        glob(path, pattern): Find files by name with a glob pattern, such as `**/*.rs` or `src/**/*.{ts,tsx}`. The pattern is matched against each file's path relative to `path` (the session's working folder by default); `*` stays within one folder, `**` crosses folders. Returns matching file paths, newest first (by modification time), one per line, written as `read` accepts them; at most 200 paths, then a footer saying how many more matched (narrow the pattern or path). Files ignored by .gitignore or .ignore, and hidden files and folders, are skipped; symbolic links are not followed. Listing files does not count as reading them.
        grep(case_insensitive, context, glob, head_limit, multiline, offset, output_mode, path, pattern, type): Search file contents with a regular expression (Rust regex syntax, like ripgrep). Searches the files under `path` (the session's working folder by default; a file path searches that file), skipping files ignored by .gitignore or .ignore, hidden files and folders, and binary files. Narrow the files with `glob` (e.g. `*.rs`, `src/**/*.ts`) or `type` (ripgrep's file types: rust, py, js, ...). `output_mode`: `files_with_matches` (default) lists matching files, newest first; `content` shows each file's path on a line of its own, then its matching lines as read shows lines: the line number, a tab, then the line (context lines alike; `--` between groups that do not adjoin); `count` shows `path:N` per file. `head_limit` keeps only the first N entries (lines, files or counts) and `offset` skips the first N. Lines longer than 2000 characters are cut and end with `... (line truncated to 2000 chars)`. The answer stays within the session's output budget (50 KiB by default); a footer says what was left out and how to narrow. A `content` search that shows lines of a file counts as a read of that file: you may then edit it without a read, until someone else changes it.
    "#]].assert_eq(&described);
}

/// `filectx glob` and `filectx grep` print the tools' texts (a CLI session asks for them).
#[test]
fn cli_glob_and_grep_print_the_tool_text() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("notes.txt", "one\nneedle two\n"), ("src/a.rs", "needle\n")]);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(filectx_tests::bin("filectx"))
            .env("FILECTX_NO_AUTOSTART", "1")
            .arg("--socket")
            .arg(&daemon.socket)
            .args(args)
            .current_dir(&root)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["glob", "**/*.rs"]), "src/a.rs\n");
    assert_eq!(run(&["grep", "needle", "--content", "-g", "*.txt"]), "notes.txt\n2\tneedle two\n");
    assert_eq!(run(&["grep", "NEEDLE", "src", "-i", "--count"]), "src/a.rs:1\n");
}

/// A search looks at the request's cancellation between files: cancelled midway, it stops
/// early and answers `FS_ABORTED`.
#[test]
fn a_cancelled_search_stops_between_files() {
    let daemon = Daemon::start_failing("search::file=sleep(100)");
    let (root, _) = project(&daemon);
    for n in 0..100 {
        fs::write(root.join(format!("f{n:03}.txt")), "needle\n").unwrap();
    }
    let mut raw = session(&daemon, &root);
    let started = std::time::Instant::now();
    let id = raw.send_request(
        "tools/call",
        Some(json!({"name": "grep", "arguments": {"pattern": "needle", "output_mode": "content"}})),
    );
    std::thread::sleep(Duration::from_millis(500));
    raw.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let answer = raw.recv();
    assert_eq!(answer["id"].as_u64(), Some(id), "{answer}");
    assert_eq!(answer["result"]["error"]["code"], "FS_ABORTED", "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("The search under") && text.contains("was cancelled before it finished"),
        "stopped midway, not before it ran: {text}"
    );
    assert!(started.elapsed() < Duration::from_secs(8), "100 files at 100 ms each would take 10 s");
}

/// Warm listings kept now, per `daemon/status`.
fn cached_listings(raw: &mut Raw) -> u64 {
    raw.call("daemon/status", None)["cachedListings"].as_u64().unwrap()
}

/// Globs `glob` until the answer lists `expected` (the watcher tells the kept listing of a
/// change asynchronously).
fn until_listed(raw: &mut Raw, glob: &Value, expected: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = tool_ok(raw, "glob", glob.clone());
        if lines(&answer) == expected {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never listed {expected:?}: {answer}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the watcher dropped the warm listing after a change (it is a hint, handled
/// asynchronously; the answer after it must be a cold walk's).
fn until_forgotten(raw: &mut Raw) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cached_listings(raw) > 0 {
        assert!(std::time::Instant::now() < deadline, "the change was never noticed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_repeated_search_is_warm_and_sees_every_change() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("src/a.rs", "a\n"), ("src/b.rs", "b\n"), (".hidden/h.rs", "h\n")]);
    let mut raw = session(&daemon, &root);
    let glob = json!({"pattern": "**/*.rs"});
    assert_eq!(cached_listings(&mut raw), 0);
    assert_eq!(lines(&tool_ok(&mut raw, "glob", glob.clone())), ["src/a.rs", "src/b.rs"]);
    assert_eq!(cached_listings(&mut raw), 1, "the walk's list is kept");
    let status = raw.call("daemon/status", None);
    assert!(status["cachedListingBytes"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(lines(&tool_ok(&mut raw, "glob", glob.clone())), ["src/a.rs", "src/b.rs"]);
    assert_eq!(cached_listings(&mut raw), 1, "answered warm");

    // Files coming, going and renamed are taken in by the kept listing, without a walk.
    fs::write(root.join("src/c.rs"), "c\n").unwrap();
    until_listed(&mut raw, &glob, &["src/a.rs", "src/b.rs", "src/c.rs"]);
    fs::remove_file(root.join("src/a.rs")).unwrap();
    until_listed(&mut raw, &glob, &["src/b.rs", "src/c.rs"]);
    fs::rename(root.join("src/b.rs"), root.join("src/d.rs")).unwrap();
    until_listed(&mut raw, &glob, &["src/c.rs", "src/d.rs"]);
    assert_eq!(cached_listings(&mut raw), 1, "kept throughout");
    // So are ignored files and folders coming, and a folder a walk enters (walked on its own).
    fs::write(root.join("src/.gitignore"), "*.log\nout/\n").unwrap();
    until_forgotten(&mut raw);
    until_listed(&mut raw, &glob, &["src/c.rs", "src/d.rs"]);
    fs::write(root.join("src/debug.log"), "log\n").unwrap();
    fs::create_dir(root.join("src/out")).unwrap();
    fs::write(root.join("src/out/gen.rs"), "gen\n").unwrap();
    fs::write(root.join("src/e.rs"), "e\n").unwrap();
    until_listed(&mut raw, &glob, &["src/c.rs", "src/d.rs", "src/e.rs"]);
    assert_eq!(cached_listings(&mut raw), 1, "nothing a walk would list came but src/e.rs");
    fs::create_dir(root.join("src/mod")).unwrap();
    fs::write(root.join("src/mod/f.rs"), "f\n").unwrap();
    until_listed(&mut raw, &glob, &["src/c.rs", "src/d.rs", "src/e.rs", "src/mod/f.rs"]);
    fs::rename(root.join("src/mod"), root.join("src/lib")).unwrap();
    until_listed(&mut raw, &glob, &["src/c.rs", "src/d.rs", "src/e.rs", "src/lib/f.rs"]);
    assert_eq!(cached_listings(&mut raw), 1, "folders coming and going keep the listing");

    fs::write(root.join("src/.gitignore"), "c.rs\n*.log\nout/\n").unwrap();
    until_forgotten(&mut raw);
    assert_eq!(lines(&tool_ok(&mut raw, "glob", glob.clone())), ["src/d.rs", "src/e.rs", "src/lib/f.rs"]);
    assert_eq!(cached_listings(&mut raw), 1);
}

#[test]
fn newest_first_holds_for_files_a_glob_left_undated() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("a.rs", "hit\n"), ("b.rs", "hit\n"), ("x.py", "hit\n"), ("y.py", "hit\n")]);
    for (name, seconds) in [("a.rs", 400), ("b.rs", 100), ("x.py", 50), ("y.py", 300)] {
        age(&root.join(name), seconds);
    }
    let mut raw = session(&daemon, &root);
    // The first walk dates only what `**/*.rs` matches; the Python files are dated when a
    // later search of the kept listing sorts them.
    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "**/*.rs"})), "b.rs\na.rs");
    assert_eq!(cached_listings(&mut raw), 1);
    assert_eq!(tool_ok(&mut raw, "glob", json!({"pattern": "**/*.py"})), "x.py\ny.py");
    assert_eq!(tool_ok(&mut raw, "grep", json!({"pattern": "hit"})), "x.py\nb.rs\ny.py\na.rs");
    // A time changed since (a metadata change of a listed file) is seen by the next answer.
    age(&root.join("a.rs"), 10);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tool_ok(&mut raw, "glob", json!({"pattern": "*"})) != "a.rs\nx.py\nb.rs\ny.py" {
        assert!(std::time::Instant::now() < deadline, "the new time was never seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cached_listings(&mut raw), 1, "answered from the kept listing");
}

#[test]
fn a_listing_stands_through_atomic_replaces_of_its_files_and_hidden_churn() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("src/a.rs", "fn alpha() {}\n"), ("src/b.rs", "fn beta() {}\n")]);
    let mut raw = session(&daemon, &root);
    let cold_daemon = Daemon::start(&["--max-search-cache-bytes", "0"]);
    let mut cold = session(&cold_daemon, &root);
    let same = |raw: &mut Raw, cold: &mut Raw, pattern: &str| {
        let arguments = json!({"pattern": pattern, "output_mode": "content"});
        let warm = tool_ok(raw, "grep", arguments.clone());
        assert_eq!(warm, tool_ok(cold, "grep", arguments), "{pattern}");
        warm
    };
    same(&mut raw, &mut cold, "fn ");
    assert_eq!(cached_listings(&mut raw), 1);
    // The daemon's own edit (a staging file, then a rename onto the name): the listing stands,
    // and the next answer has the new content.
    tool_ok(&mut raw, "edit", json!({"file_path": "src/a.rs", "old_string": "alpha", "new_string": "gamma"}));
    // An outside atomic replace, and a hidden file coming and going (an editor's swap file).
    fs::write(root.join("src/.b.rs.swp"), "x").unwrap();
    fs::write(root.join("src/.b.rs.new"), "fn delta() {}\n").unwrap();
    fs::rename(root.join("src/.b.rs.new"), root.join("src/b.rs")).unwrap();
    fs::remove_file(root.join("src/.b.rs.swp")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let warm = same(&mut raw, &mut cold, "fn ");
        if warm.contains("delta") {
            assert!(warm.contains("gamma") && !warm.contains("alpha") && !warm.contains("beta"), "{warm}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the replace was never seen: {warm}");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cached_listings(&mut raw), 1, "replaced files and hidden names keep the listing");

    // A rule that whitelists makes hidden names count: one coming is listed.
    fs::write(root.join(".gitignore"), "!.keep.rs\n").unwrap();
    until_forgotten(&mut raw);
    same(&mut raw, &mut cold, "fn ");
    assert_eq!(cached_listings(&mut raw), 1);
    fs::write(root.join("src/.other.rs"), "fn other() {}\n").unwrap();
    fs::write(root.join("src/.keep.rs"), "fn kept() {}\n").unwrap();
    until_grep(&mut raw, &mut cold, "src/.keep.rs");
    assert!(!same(&mut raw, &mut cold, "fn ").contains(".other.rs"), "hidden and not whitelisted");
    // A new file is taken in by the kept listing, and the answer has it.
    fs::write(root.join("src/c.rs"), "fn epsilon() {}\n").unwrap();
    until_grep(&mut raw, &mut cold, "epsilon");
    assert_eq!(cached_listings(&mut raw), 1, "new files keep the listing");
}

/// Greps `fn ` (as content) until the answer holds `expected`, checked equal to `cold`'s.
fn until_grep(raw: &mut Raw, cold: &mut Raw, expected: &str) {
    let arguments = json!({"pattern": "fn ", "output_mode": "content"});
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let warm = tool_ok(raw, "grep", arguments.clone());
        if warm.contains(expected) {
            assert_eq!(warm, tool_ok(cold, "grep", arguments));
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never found {expected}: {warm}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Bytes the warm listings (and their trigram filters) hold now, per `daemon/status`.
fn cached_bytes(raw: &mut Raw) -> u64 {
    raw.call("daemon/status", None)["cachedListingBytes"].as_u64().unwrap()
}

#[test]
fn a_warm_grep_skips_files_by_their_trigrams_and_never_misses_a_change() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    let mut files: Vec<(String, String)> = (0..60)
        .map(|i| (format!("src/m{i:02}.rs"), format!("fn item_{i}() -> u32 {{ {i} }}\n").repeat(20)))
        .collect();
    files.push(("src/poll.rs".into(), "fn poll_ready(&mut self) {}\nPOLL_READY\n".into()));
    files.push(("src/bin.dat".into(), "fn poll_ready\0binary".into()));
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    put(&root, &refs);
    let mut warm = session(&daemon, &root);
    // The same answers as a daemon that keeps nothing warm, for patterns with and without
    // literals, in every mode, case-insensitive too.
    let cold_daemon = Daemon::start(&["--max-search-cache-bytes", "0"]);
    let mut cold = session(&cold_daemon, &root);
    let glob = json!({"pattern": "**/*.rs"});
    tool_ok(&mut warm, "glob", glob);
    let listed = cached_bytes(&mut warm);
    let patterns = [
        json!({"pattern": "fn poll_ready"}),
        json!({"pattern": "poll_ready", "case_insensitive": true}),
        json!({"pattern": "item_(7|42)\\b", "output_mode": "count"}),
        json!({"pattern": "[a-z]+_ready", "output_mode": "content"}),
        json!({"pattern": "u32 \\{ 5", "output_mode": "content", "head_limit": 3}),
        json!({"pattern": "absent_literal"}),
        // No literal: only the binary files are skipped unread.
        json!({"pattern": "^\\w+", "output_mode": "count"}),
        // Literals without three letters in a row: nothing is skipped for them.
        json!({"pattern": "\\{ 4[0-9] \\}", "output_mode": "count"}),
    ];
    for round in 0..2 {
        for pattern in &patterns {
            let answer = tool_ok(&mut warm, "grep", pattern.clone());
            assert_eq!(answer, tool_ok(&mut cold, "grep", pattern.clone()), "round {round}: {pattern}");
        }
    }
    // The first grep started building the files' trigram filters, off the request path.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cached_bytes(&mut warm) <= listed {
        assert!(std::time::Instant::now() < deadline, "no trigram filters were kept");
        std::thread::sleep(Duration::from_millis(5));
    }
    for pattern in &patterns {
        assert_eq!(
            tool_ok(&mut warm, "grep", pattern.clone()),
            tool_ok(&mut cold, "grep", pattern.clone()),
            "{pattern}"
        );
    }
    assert_eq!(tool_ok(&mut warm, "grep", json!({"pattern": "fn poll_ready"})), "src/poll.rs");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = warm.call("daemon/status", None);
        if status["cachedFiltersBuilding"] == false {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the filters are never built");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(status["cachedListedFiles"], 62, "{status}");
    let filters = status["cachedFilterBytes"].as_u64().unwrap();
    assert!(filters > 0 && filters < status["cachedListingBytes"].as_u64().unwrap(), "{status}");

    // A file whose filter said "no" gains the literal: the change drops its filter, and the
    // next grep reads it again.
    let before = cached_bytes(&mut warm);
    fs::write(root.join("src/m07.rs"), "fn poll_ready() {}\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cached_bytes(&mut warm) >= before {
        assert!(std::time::Instant::now() < deadline, "the change was never noticed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(cached_listings(&mut warm), 1, "a content change keeps the listing");
    let found = tool_ok(&mut warm, "grep", json!({"pattern": "fn poll_ready"}));
    assert_eq!(lines(&found), ["src/m07.rs", "src/poll.rs"]);
    assert_eq!(found, tool_ok(&mut cold, "grep", json!({"pattern": "fn poll_ready"})));

    // A binary file (kept as one that matches nothing) becomes text holding the literal.
    fs::write(root.join("src/bin.dat"), "fn poll_ready, as text now\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = tool_ok(&mut warm, "grep", json!({"pattern": "fn poll_ready"}));
        if lines(&found).contains(&"src/bin.dat") {
            assert_eq!(found, tool_ok(&mut cold, "grep", json!({"pattern": "fn poll_ready"})));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the binary file's change was never seen: {found}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
