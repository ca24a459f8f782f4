//! Language servers through the daemon, with the scripted `fake-lsp` (tests/src/bin/fake_lsp)
//! doing on demand what real servers can't be made to do: a write's or edit's answer says what
//! it introduced (line shifts never make an old error new, other files it broke are counted),
//! a late server reads as still running (the edit landed), a crash restarts the server (the
//! write succeeded), a server that never initializes, floods, sends control bytes or huge
//! messages, or reports versions out of order; servers that check only on save; one server per
//! project shared by sessions; nothing of a server outlives a `kill -9` of the daemon; what a
//! session may not read is never named; the structured reports, `lsp/diagnostics`, the
//! `diagnostics` tool, and the session option `diagnostics: "off"`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, Raw, ok, root_of, tool_ok};
use serde_json::{Value, json};

/// The fake server's program.
fn fake() -> &'static str {
    env!("CARGO_BIN_EXE_fake-lsp")
}

/// A daemon with one language server: `fake-lsp` with `flags`, named `name`, serving `.fk` files
/// of projects marked by `fake.toml` (the daemon's own `extra` flags too), and a project beside it.
struct Lab {
    daemon: Daemon,
    /// The session root.
    root: PathBuf,
    /// The project (holding `fake.toml`).
    project: PathBuf,
    /// The fake's log.
    log: PathBuf,
}

fn lab_named(name: &str, flags: &[&str], extra: &[&str], entry: &str) -> Lab {
    let flags: Vec<String> = flags.iter().map(|f| format!("{f:?}")).collect();
    // A long wait unless the test sets one: on a loaded machine an answer expected fresh must
    // not turn into "still running".
    let mut extra = extra.to_vec();
    if !extra.contains(&"--diagnostics-wait") {
        extra.extend(["--diagnostics-wait", "20"]);
    }
    let daemon = Daemon::start_configured(&extra, |dir, mut command| {
        let log = dir.join("fake.log");
        let config = dir.join("config.toml");
        let markers = if entry.contains("root_markers") { "" } else { "root_markers = [\"fake.toml\"]\n" };
        let toml = format!(
            "[[language_server]]\nname = {name:?}\ncommand = {:?}\n\
             args = [\"--log\", {:?}, {}]\nextensions = [\".fk\"]\n{markers}{entry}\n",
            fake(),
            log.display().to_string(),
            flags.join(", "),
        );
        std::fs::write(&config, toml).unwrap();
        command.arg("--config").arg(config);
        command
    });
    let root = root_of(&daemon).join("work");
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("fake.toml"), "").unwrap();
    let log = root_of(&daemon).join("fake.log");
    Lab { daemon, root, project, log }
}

fn lab(flags: &[&str], extra: &[&str]) -> Lab {
    lab_named("fake", flags, extra, "")
}

impl Lab {
    /// A session rooted at the lab's root, with every tool.
    fn session(&self) -> Raw {
        self.session_with(json!({}))
    }

    fn session_with(&self, more: Value) -> Raw {
        let mut params = json!({
            "roots": [self.root],
            "tools": ["read", "write", "edit", "glob", "grep", "undo", "diagnostics"],
            "clientInfo": {"name": "diagnostics-test"},
        });
        for (k, v) in more.as_object().unwrap() {
            params[k] = v.clone();
        }
        let raw = self.daemon.session_with(params);
        // Patient past the daemon's wait for the server.
        raw.stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        raw
    }

    /// The fake's log, one JSON value a line.
    fn logged(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The fake's events named `event` (start, exit, grandchild, violation).
    fn events(&self, event: &str) -> Vec<Value> {
        self.logged().into_iter().filter(|v| v["event"] == event).collect()
    }

    /// The messages the fake received with `method`.
    fn received(&self, method: &str) -> Vec<Value> {
        self.logged().into_iter().filter(|v| v["method"] == method).collect()
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.project.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Waits until `check` holds, at most `within`.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} did not happen within {within:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The lines after the usual answer (everything after the tool's own text).
fn after(text: &str) -> &str {
    text.split_once("\nNo new errors")
        .map(|_| &text[text.find("No new errors").unwrap_or(0)..])
        .or_else(|| text.find("New errors").map(|at| &text[at..]))
        .or_else(|| text.find("Diagnostics ").map(|at| &text[at..]))
        .unwrap_or("")
}

fn edit(raw: &mut Raw, path: &Path, old: &str, new: &str) -> String {
    tool_ok(raw, "edit", json!({"file_path": path, "old_string": old, "new_string": new}))
}

#[test]
fn an_edit_answer_says_what_it_introduced_and_the_fix_says_no_new_errors() {
    let lab = lab(&[], &[]);
    let file = lab.file("a.fk", "one\ntwo\nthree\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let broke = edit(&mut raw, &file, "two", "two ERROR[E1]: type mismatch");
    assert!(broke.ends_with("New errors (fake):\n2:5 type mismatch"), "{broke}");
    let fixed = edit(&mut raw, &file, "two ERROR[E1]: type mismatch", "two");
    assert!(fixed.ends_with("\nNo new errors (fake)."), "{fixed}");
    assert!(after(&fixed).len() <= 40);
    // One server, started once, with the document open once and changed twice (when the
    // read's open came after the first edit had landed, it was opened again from the text
    // before, to measure that edit).
    assert_eq!(lab.events("start").len(), 1);
    let (opened, closed) =
        (lab.received("textDocument/didOpen").len(), lab.received("textDocument/didClose").len());
    assert_eq!(opened - closed, 1, "opened {opened}, closed {closed}");
    assert_eq!(lab.received("textDocument/didChange").len(), 2);
    assert!(lab.events("violation").is_empty(), "{:?}", lab.events("violation"));
}

#[test]
fn a_line_shift_never_makes_an_old_error_new_and_what_remains_is_counted() {
    let lab = lab(&[], &[]);
    let file = lab.file("a.fk", "a\nERROR: old one\nb\nERROR: old two\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    // The first diagnostics of the opened file come before the edit is measured.
    std::thread::sleep(Duration::from_millis(300));
    let text = edit(&mut raw, &file, "a\n", "inserted\nlines\nabove\na\n");
    assert!(text.ends_with("\nNo new errors (fake).\n2 errors remain in this file."), "{text}");
    let text = edit(&mut raw, &file, "b\n", "b\nERROR: old one\n");
    assert!(text.ends_with("New errors (fake):\n7:1 old one\n2 errors remain in this file."), "{text}");
}

/// A change of a file its server does not have open (it stopped after being idle, and was
/// started again by the change) is measured against the file's old text, opened first: the
/// error that was there is not new.
#[test]
fn a_change_of_a_file_the_server_never_saw_is_measured_against_its_old_text() {
    let lab = lab(&[], &["--language-server-idle", "1"]);
    let file = lab.file("a.fk", "x\nERROR: was there\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(10), "the idle server stopping", || !lab.events("exit").is_empty());
    let text = edit(&mut raw, &file, "x\n", "new\nx\n");
    assert!(text.ends_with("\nNo new errors (fake).\n1 error remains in this file."), "{text}");
    let opened = lab.received("textDocument/didOpen");
    assert_eq!(
        opened.last().unwrap()["params"]["textDocument"]["text"],
        "x\nERROR: was there\n",
        "the old text first"
    );
}

#[test]
fn other_files_the_change_broke_are_counted_and_only_those_the_session_may_read() {
    let lab = lab(&[], &[]);
    let def = lab.file("def.fk", "DEF thing\n");
    let user = lab.file("user.fk", "USE thing\n");
    let secret = lab.file("secret.fk", "USE thing\nUSE thing\n");
    let mut raw = lab.session_with(json!({"deny": {"read": ["**/secret.fk"]}}));
    for path in [&def, &user] {
        tool_ok(&mut raw, "read", json!({"file_path": path}));
    }
    // Another session opens the secret file in the same server.
    let mut other = lab.session();
    tool_ok(&mut other, "read", json!({"file_path": secret}));
    std::thread::sleep(Duration::from_millis(300));
    let text = edit(&mut raw, &def, "DEF thing", "DEF other");
    assert!(text.contains("\nNo new errors (fake).\nproj/user.fk: 1 new error"), "{text}");
    assert!(!text.contains("secret"), "a file denied to the session was named: {text}");
}

/// Two agents editing two files of one project at once: an error the other agent's change
/// brought is never named as this change's doing.
#[test]
fn another_agents_concurrent_change_is_not_counted_as_this_ones() {
    let lab = lab(&["--late", "400"], &[]);
    let (x, y) = (lab.file("x.fk", "x\n"), lab.file("y.fk", "y\n"));
    let (mut a, mut b) = (lab.session(), lab.session());
    for raw in [&mut a, &mut b] {
        tool_ok(raw, "read", json!({"file_path": x}));
        tool_ok(raw, "read", json!({"file_path": y}));
    }
    std::thread::sleep(Duration::from_millis(800));
    let other = std::thread::spawn(move || edit(&mut b, &y, "y", "ERROR: from b"));
    std::thread::sleep(Duration::from_millis(100));
    let text = edit(&mut a, &x, "x", "x2");
    assert!(text.ends_with("\nNo new errors (fake)."), "{text}");
    let theirs = other.join().unwrap();
    assert!(theirs.ends_with("New errors (fake):\n1:1 from b"), "{theirs}");
}

#[test]
fn a_late_server_reads_as_still_running_and_the_diagnostics_tool_gets_them_later() {
    let lab = lab(&["--late", "2500"], &["--diagnostics-wait", "0.5", "--diagnostics-wait-starting", "5"]);
    let file = lab.file("a.fk", "fine\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    // Ready (a server still starting gets the longer wait).
    eventually(Duration::from_secs(10), "the server ready", || {
        lab.daemon.status()["languageServers"][0]["state"] == "ready"
    });
    let text = edit(&mut raw, &file, "fine", "ERROR: late one");
    assert!(
        text.contains("Diagnostics still running (fake, ")
            && text.ends_with("call diagnostics(file_path) to see them."),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "ERROR: late one\n", "the edit landed");
    let mut seen = String::new();
    eventually(Duration::from_secs(10), "the late diagnostics", || {
        seen = tool_ok(&mut raw, "diagnostics", json!({"file_path": file}));
        seen.contains("1:1 late one")
    });
    assert!(seen.starts_with("Errors in proj/a.fk (fake):"), "{seen}");
    // A session without the tool is not told to call it.
    let mut plain = lab.session_with(json!({"tools": ["read", "write", "edit"]}));
    tool_ok(&mut plain, "read", json!({"file_path": file}));
    let text = edit(&mut plain, &file, "ERROR: late one", "ERROR: later");
    assert!(text.ends_with(" s)."), "{text}");
}

/// A server that publishes a file checked in part, empty, while it says work goes on (pyright
/// under load), and the rest later: the answer waits for the end of the work, never reading the
/// empty step as clean.
#[test]
fn a_publish_made_while_the_server_says_work_goes_on_is_not_the_answer() {
    let lab = lab(&["--partial", "400"], &[]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let text = edit(&mut raw, &file, "one", "ERROR: found late");
    assert!(text.ends_with("New errors (fake):\n1:1 found late"), "{text}");
    let text = edit(&mut raw, &file, "ERROR: found late", "one");
    assert!(text.ends_with("\nNo new errors (fake)."), "{text}");
}

#[test]
fn a_server_that_crashes_mid_session_restarts_and_the_write_still_lands() {
    let flag = std::env::temp_dir().join(format!("fake-crash-{}", std::process::id()));
    let _ = std::fs::remove_file(&flag);
    let flag_arg = flag.display().to_string();
    let lab = lab(&["--crash-at", "1", "--crash-once", &flag_arg], &[]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let text = edit(&mut raw, &file, "one", "two");
    assert!(text.starts_with("Edited"), "{text}");
    assert!(
        text.contains("Diagnostics unavailable (fake):") || text.contains("Diagnostics still running"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two\n");
    // Started again after its pause, the document opened again from disk.
    eventually(Duration::from_secs(10), "a restart", || lab.events("start").len() == 2);
    eventually(Duration::from_secs(10), "the server ready again", || {
        lab.daemon.status()["languageServers"][0]["state"] == "ready"
    });
    let text = edit(&mut raw, &file, "two", "ERROR: after the crash");
    assert!(text.ends_with("New errors (fake):\n1:1 after the crash"), "{text}");
    assert_eq!(lab.daemon.status()["languageServers"][0]["restarts"], 1);
    let _ = std::fs::remove_file(&flag);
}

#[test]
fn a_server_that_never_initializes_never_holds_a_write_past_its_deadline() {
    let lab = lab(&["--no-init"], &["--diagnostics-wait-starting", "1"]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let started = Instant::now();
    let text = edit(&mut raw, &file, "one", "two");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(
        text.contains("Diagnostics still running (fake") || text.contains("Diagnostics unavailable (fake)"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two\n");
}

#[test]
fn a_flooding_server_with_control_bytes_and_huge_messages_reaches_neither_the_model_nor_memory() {
    let lab = lab(&["--flood", "300", "--control-bytes", "--huge", "10000000"], &[]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    std::thread::sleep(Duration::from_millis(500));
    let text = edit(&mut raw, &file, "one", "ERROR: bad");
    let shown = after(&text);
    assert!(shown.starts_with("New errors (fake):\n1:1 "), "{text}");
    assert!(shown.contains("\\u{1b}[31mbad") && shown.contains("\\u{202e}\\u{7}"), "{shown}");
    for c in shown.chars() {
        assert!(c == '\n' || !c.is_control(), "a control character reached the model: {shown:?}");
    }
    assert!(shown.len() < 300, "{} {shown}", shown.len());
    assert!(!shown.contains("fake-lsp-flood") && !shown.contains("fake-lsp-outside"), "{shown}");
    // The daemon is still well, its memory bounded.
    let status = lab.daemon.status();
    let rss = std::fs::read_to_string(format!("/proc/{}/status", status["pid"])).unwrap();
    let kib: u64 = rss
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(kib < 200 * 1024, "the daemon holds {kib} KiB");
}

/// A server whose output cannot be framed any more is ended and started again after a pause,
/// and said to be unavailable meanwhile, never read as clean; the write lands.
#[test]
fn a_server_speaking_garbage_is_unavailable_never_clean() {
    let lab = lab(&["--garbage"], &[]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(10), "the server failing", || {
        lab.daemon.status()["languageServers"][0]["state"] == "restarting"
    });
    let text = edit(&mut raw, &file, "one", "ERROR: unseen");
    assert!(
        text.contains("\nDiagnostics unavailable (fake): it sent something that is not a framed message"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "ERROR: unseen\n");
}

#[test]
fn versions_out_of_order_never_give_a_stale_answer() {
    let lab = lab(&["--out-of-order"], &[]);
    let file = lab.file("a.fk", "ERROR: first\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    std::thread::sleep(Duration::from_millis(300));
    let text = edit(&mut raw, &file, "ERROR: first", "fine");
    assert!(text.ends_with("\nNo new errors (fake)."), "{text}");
    std::thread::sleep(Duration::from_millis(300));
    let now = tool_ok(&mut raw, "diagnostics", json!({"file_path": file}));
    assert_eq!(now, "No errors in proj/a.fk (fake).", "the stale set came after");
}

#[test]
fn versionless_and_pulled_diagnostics_count_too() {
    for flags in [&["--versionless"][..], &["--pull"][..]] {
        let lab = lab(flags, &[]);
        let file = lab.file("a.fk", "one\n");
        let mut raw = lab.session();
        tool_ok(&mut raw, "read", json!({"file_path": file}));
        let text = edit(&mut raw, &file, "one", "ERROR: by pull or push");
        assert!(text.ends_with("New errors (fake):\n1:1 by pull or push"), "{flags:?}: {text}");
        let text = edit(&mut raw, &file, "ERROR: by pull or push", "one");
        assert!(text.ends_with("No new errors (fake)."), "{flags:?}: {text}");
    }
}

/// A folder for the daemon's `PATH` holding, under each built-in's command name, a script that
/// runs `fake-lsp` logging to `log` with `flags`.
fn stand_ins(dir: &Path, names: &[&str], log: &Path, flags: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir).unwrap();
    for name in names {
        let script = dir.join(name);
        let text =
            format!("#!/bin/sh\nexec {:?} --log {:?} {flags} \"$@\"\n", fake(), log.display().to_string());
        std::fs::write(&script, text).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The built-in entries for rust-analyzer and gopls, found on the daemon's `PATH` (stand-ins
/// there: CI cannot install the real ones): their root markers, rust-analyzer's `didSave` and
/// the options that keep it from running the project's code.
#[test]
fn built_in_rust_analyzer_and_gopls_stand_ins_find_their_roots_and_get_did_save() {
    let bin = tempfile::tempdir().unwrap();
    let log = bin.path().join("fake.log");
    stand_ins(bin.path(), &["rust-analyzer"], &log, "--on-save");
    stand_ins(bin.path(), &["gopls"], &log, "");
    let daemon =
        Daemon::start_with_builtin_language_servers(&["--diagnostics-wait", "20"], bin.path().as_os_str());
    let received = |method: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["method"] == method)
            .collect()
    };
    let root = root_of(&daemon).join("work");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("crates/a/src")).unwrap();
    std::fs::write(ws.join("Cargo.toml"), "[workspace]\nmembers = [\"crates/a\"]\n").unwrap();
    std::fs::write(ws.join("crates/a/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
    let file = ws.join("crates/a/src/lib.rs");
    std::fs::write(&file, "fn x() {}\n").unwrap();
    let session = |daemon: &Daemon| {
        let raw = daemon.session_with(json!({"roots": [root], "tools": ["read", "edit", "diagnostics"]}));
        raw.stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        raw
    };
    let mut raw = session(&daemon);
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let text = edit(&mut raw, &file, "fn x() {}", "ERROR[E0308]: mismatched types");
    assert!(text.ends_with("New errors (rust-analyzer):\n1:1 mismatched types"), "{text}");
    assert!(!received("textDocument/didSave").is_empty(), "rust-analyzer checks on save");
    let init = &received("initialize")[0]["params"];
    assert_eq!(init["rootUri"], filectx_tests::lsp::uri(&ws), "the workspace, not the crate");
    let options = &init["initializationOptions"];
    assert_eq!(options["cargo"]["buildScripts"]["enable"], false, "{init}");
    assert_eq!(options["procMacro"]["enable"], false, "{init}");
    assert_eq!(options["checkOnSave"], false, "{init}");

    // gopls: go.work over go.mod.
    let work = root.join("w");
    std::fs::create_dir_all(work.join("mod/pkg")).unwrap();
    std::fs::write(work.join("go.work"), "go 1.22\nuse ./mod\n").unwrap();
    std::fs::write(work.join("mod/go.mod"), "module m\n").unwrap();
    let file = work.join("mod/pkg/p.go");
    std::fs::write(&file, "package p\n").unwrap();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let text = edit(&mut raw, &file, "package p", "package p ERROR: undefined: x");
    assert!(text.ends_with("New errors (gopls):\n1:11 undefined: x"), "{text}");
    let roots: Vec<Value> = received("initialize").iter().map(|i| i["params"]["rootUri"].clone()).collect();
    assert!(roots.contains(&json!(filectx_tests::lsp::uri(&work))), "{roots:?}");
    let status = daemon.status();
    let names: Vec<&Value> =
        status["languageServers"].as_array().unwrap().iter().map(|s| &s["name"]).collect();
    assert_eq!(names.len(), 2, "{status}");
}

/// A built-in whose command the daemon's `PATH` finds inside a session's root (a venv or a
/// `node_modules/.bin` of the repository) is never run: the repository would choose what the
/// daemon executes. The answer says so; the write lands.
#[test]
fn a_built_in_found_inside_a_session_root_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let venv = root.join(".venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    let ran = dir.path().join("ran");
    let script = venv.join("basedpyright-langserver");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {:?}\nexec {:?} \"$@\"\n", ran.display().to_string(), fake()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let daemon = Daemon::start_with_builtin_language_servers(&[], venv.as_os_str());
    let file = root.join("a.py");
    std::fs::write(&file, "x = 1\n").unwrap();
    let mut raw = daemon.session_with(json!({"roots": [root], "tools": ["read", "edit", "diagnostics"]}));
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let text = edit(&mut raw, &file, "x = 1", "x = 2");
    assert!(
        text.contains("\nDiagnostics unavailable (basedpyright): its command ")
            && text.contains("lies inside this session's root"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = 2\n");
    assert!(!ran.exists(), "the repository's server ran");
}

#[test]
fn two_sessions_editing_two_files_of_one_project_share_one_server() {
    let lab = lab(&[], &[]);
    let (a, b) = (lab.file("a.fk", "a\n"), lab.file("b.fk", "b\n"));
    let (mut one, mut two) = (lab.session(), lab.session());
    tool_ok(&mut one, "read", json!({"file_path": a}));
    tool_ok(&mut two, "read", json!({"file_path": b}));
    assert!(edit(&mut one, &a, "a", "ERROR: in a").ends_with("1:1 in a"));
    assert!(edit(&mut two, &b, "b", "ERROR: in b").ends_with("1:1 in b"));
    assert_eq!(lab.events("start").len(), 1, "one server process");
    let servers = lab.daemon.status()["languageServers"].clone();
    assert_eq!(servers.as_array().unwrap().len(), 1, "{servers}");
    assert_eq!(servers[0]["sessions"], 2, "{servers}");
    assert_eq!(servers[0]["openDocuments"], 2, "{servers}");
}

#[test]
fn nothing_a_server_started_outlives_a_kill_9_of_the_daemon() {
    let mut lab = lab(&["--grandchild"], &[]);
    let file = lab.file("a.fk", "a\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(10), "the grandchild", || !lab.events("grandchild").is_empty());
    let server = lab.events("start")[0]["pid"].as_u64().unwrap();
    let grandchild = lab.events("grandchild")[0]["pid"].as_u64().unwrap();
    let alive = |pid: u64| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    assert!(alive(server) && alive(grandchild));
    let daemon = lab.daemon.child.id();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let _ = lab.daemon.wait_exit();
    eventually(Duration::from_secs(10), "the server and its child ending", || {
        !alive(server) && !alive(grandchild)
    });
}

#[test]
fn structured_reports_lsp_diagnostics_and_the_off_switch() {
    let lab = lab(&[], &[]);
    let file = lab.file("a.fk", "ok\n");
    let mut raw = lab.session();
    ok(&mut raw, "file/read", json!({"path": file}));
    let edited =
        ok(&mut raw, "file/edit", json!({"path": file, "oldString": "ok", "newString": "ERROR[X1]: no"}));
    let report = &edited["diagnostics"];
    assert_eq!(report["status"], "fresh", "{edited}");
    assert_eq!(report["server"], "fake");
    assert_eq!(
        report["introduced"],
        json!([{"path": "proj/a.fk", "line": 1, "column": 1, "severity": "error", "message": "no", "source": "fake", "code": "X1"}])
    );
    assert_eq!(report["remaining"], 0);
    let now = ok(&mut raw, "lsp/diagnostics", json!({"path": file}));
    assert_eq!(now["status"], "fresh", "{now}");
    assert_eq!(now["diagnostics"][0]["message"], "no");
    assert_eq!(now["version"], edited["version"]);
    let none = ok(&mut raw, "lsp/diagnostics", json!({"path": lab.file("notes.md", "x\n")}));
    assert_eq!(none["status"], "none", "{none}");
    // The journal's restore is waited for too.
    let entries = ok(&mut raw, "journal/list", json!({"path": file}))["entries"].clone();
    let restored = ok(&mut raw, "journal/restore", json!({"entry": entries[0]["entry"]}));
    assert_eq!(restored["diagnostics"]["status"], "fresh", "{restored}");
    assert_eq!(restored["diagnostics"]["introduced"], json!([]));
    // Off: nothing waited for, nothing said.
    let mut off = lab.session_with(json!({"diagnostics": "off"}));
    tool_ok(&mut off, "read", json!({"file_path": file}));
    let text = edit(&mut off, &file, "ok", "ERROR: unseen");
    assert!(!text.contains("errors") && !text.contains("Diagnostics"), "{text}");
    let written = ok(&mut off, "file/write", json!({"path": file, "content": "x\n"}));
    assert!(written.get("diagnostics").is_none(), "{written}");
}

#[test]
fn a_cancel_during_the_wait_answers_the_landed_write_with_its_diagnostics_pending() {
    let lab = lab(&["--late", "5000"], &["--diagnostics-wait", "10"]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    let id = raw.send_tool("edit", json!({"file_path": file, "old_string": "one", "new_string": "two"}));
    std::thread::sleep(Duration::from_millis(700));
    raw.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let started = Instant::now();
    let answer = raw.response(id);
    assert!(started.elapsed() < Duration::from_secs(3), "the cancel was not answered at once");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(text.starts_with("Edited") && text.contains("Diagnostics still running (fake"), "{text}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two\n");
}

#[test]
fn the_memory_budget_stops_a_server_and_says_why() {
    let lab = lab(&["--rss", "64"], &["--language-server-memory", "16777216"]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(15), "the budget stopping it", || {
        lab.daemon.status()["languageServers"].as_array().unwrap().is_empty()
            && lab.events("start").len() == 1
    });
    let text = edit(&mut raw, &file, "one", "two");
    assert!(
        text.contains("Diagnostics unavailable (fake): the language servers' memory budget (16 MiB"),
        "{text}"
    );
}

/// A server that stops reading its input never makes the daemon hold what it is sent: past
/// 32 MiB waiting it counts as hung, is ended and started again, and says why.
#[test]
fn a_server_that_stops_reading_is_ended_before_its_queue_grows() {
    let lab = lab(&["--deaf"], &[]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session_with(json!({"diagnostics": "off"}));
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(10), "the server deaf", || !lab.events("deaf").is_empty());
    for i in 0..48 {
        let content = format!("{i}\n{}\n", "x".repeat(1 << 20));
        tool_ok(&mut raw, "write", json!({"file_path": file, "content": content}));
    }
    eventually(Duration::from_secs(20), "a restart", || {
        lab.daemon.status()["languageServers"][0]["restarts"].as_u64().unwrap_or(0) >= 1
    });
    assert!(lab.daemon.log_text().contains("it stopped reading its input (32 MiB or 1024 messages waited)"));
    assert!(lab.daemon.rss_kib() < 200 * 1024, "the daemon holds {} KiB", lab.daemon.rss_kib());
}

#[test]
fn an_idle_server_stops() {
    let lab = lab(&[], &["--language-server-idle", "1"]);
    let file = lab.file("a.fk", "one\n");
    let mut raw = lab.session();
    tool_ok(&mut raw, "read", json!({"file_path": file}));
    eventually(Duration::from_secs(5), "the server starting", || lab.events("start").len() == 1);
    eventually(Duration::from_secs(10), "the idle server stopping", || {
        lab.daemon.status()["languageServers"].as_array().unwrap().is_empty()
    });
    eventually(Duration::from_secs(5), "its process ending", || !lab.events("exit").is_empty());
    // Used again: started again.
    let text = edit(&mut raw, &file, "one", "ERROR: back");
    assert!(text.ends_with("1:1 back"), "{text}");
}
