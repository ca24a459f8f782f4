//! The search index across restarts, through the real daemon: a stopped daemon's kept listings
//! and filters serve the next daemon's first searches, right after files were created, deleted
//! and rewritten (same size and modification time) while none ran; `daemon/status` says where
//! each root's listings came from; an index another user planted, a corrupt one, or another
//! root's is discarded with a log line (and the answers stay right); a daemon killed while it
//! writes the index leaves the old one or the new one, whole; no session reaches the index.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filectx_tests::skip::{NOBODY, can_play_another_user};
use filectx_tests::{Daemon, Raw, rpc, tool_ok};
use serde_json::{Value, json};

/// The racy window of these daemons (test builds): what the tests wrote is trusted once this
/// old.
const RACY_MS: u64 = 50;
/// The word a grep looks for.
const NEEDLE: &str = "needle_word";

/// A project of a few folders: every third file holds [`NEEDLE`], the others a word of its size.
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("proj");
    for i in 0..30 {
        let folder = root.join(format!("src/mod{}", i % 5));
        std::fs::create_dir_all(&folder).unwrap();
        let word = if i % 3 == 0 { NEEDLE } else { "spare_words" };
        std::fs::write(folder.join(format!("f{i}.rs")), format!("fn f{i}() {{ {word}(); }}\n")).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(root.join("src/skip.log"), NEEDLE).unwrap();
    (dir, root)
}

/// A daemon keeping its search index in `index` (with `env` set).
fn start(index: &Path, env: &[(&str, &str)]) -> Daemon {
    let dir = index.display().to_string();
    Daemon::start_configured(&["--no-fsync", "--search-index-dir", &dir], |_, mut command| {
        command.env("FILECTX_TEST_RACY_MS", RACY_MS.to_string());
        for (name, value) in env {
            command.env(name, value);
        }
        command
    })
}

fn session(daemon: &Daemon, root: &Path) -> Raw {
    daemon.session_with(json!({"roots": [root], "tools": ["read", "glob", "grep"]}))
}

/// What `daemon/status` says of `root`'s index, asked by a session rooted there.
fn index_status(raw: &mut Raw, root: &Path) -> Value {
    let status = rpc(raw, "daemon/status", json!({}));
    let indexes = status["result"]["searchIndexes"].as_array().cloned().unwrap_or_default();
    indexes.into_iter().find(|index| index["root"] == root.display().to_string()).unwrap_or(Value::Null)
}

/// The files a grep for [`NEEDLE`] must list, relative to `root`, sorted.
fn holding_needle(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for folder in std::fs::read_dir(root.join("src")).unwrap().flatten() {
        if !folder.path().is_dir() {
            continue;
        }
        for file in std::fs::read_dir(folder.path()).unwrap().flatten() {
            if std::fs::read_to_string(file.path()).unwrap().contains(NEEDLE) {
                found.push(file.path().strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

fn grepped(raw: &mut Raw) -> Vec<String> {
    let text = tool_ok(raw, "grep", json!({"pattern": NEEDLE}));
    if text.starts_with("No files") {
        return Vec::new();
    }
    let mut files: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    files.sort();
    files
}

/// A daemon's life on `root`: a grep (its listing kept, its filters built), then a clean stop
/// that writes the index. The index file's path.
fn first_life(index: &Path, root: &Path) -> PathBuf {
    // Old enough for their stat data to be trusted.
    std::thread::sleep(Duration::from_millis(RACY_MS * 3));
    let mut daemon = start(index, &[]);
    let mut raw = session(&daemon, root);
    assert_eq!(grepped(&mut raw), holding_needle(root));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = rpc(&mut raw, "daemon/status", json!({}));
        if status["result"]["cachedFiltersBuilding"] == false
            && status["result"]["cachedFilterBytes"].as_u64() > Some(0)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the filters were never built: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(raw);
    daemon.signal(rustix::process::Signal::TERM);
    assert!(daemon.wait_exit().success());
    let files = index_files(index);
    assert_eq!(files.len(), 1, "{files:?}\n{}", daemon.log_text());
    files[0].clone()
}

/// The index files of the folder.
fn index_files(index: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(index)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    files.sort();
    files
}

/// Rewrites `file` to hold [`NEEDLE`] at the same size, and puts its modification time back.
fn plant_needle_keeping_size_and_time(file: &Path) {
    let meta = std::fs::metadata(file).unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("spare_words"), "{text}");
    let other = text.replace("spare_words", NEEDLE);
    assert_eq!(other.len(), text.len(), "the same size");
    std::fs::write(file, other).unwrap();
    std::fs::File::options().write(true).open(file).unwrap().set_modified(meta.modified().unwrap()).unwrap();
}

#[test]
fn a_restarted_daemon_answers_its_first_searches_from_the_index() {
    let (_dir, root) = project();
    let index = root.parent().unwrap().join("index");
    let file = first_life(&index, &root);
    assert_eq!(std::fs::metadata(&index).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    // While no daemon runs: a file comes holding the needle, one holding it goes, and one
    // without it is rewritten to hold it, keeping its size and modification time (its filter,
    // if it were trusted, would say it lacks the needle).
    std::fs::write(root.join("src/mod1/new.rs"), format!("fn new() {{ {NEEDLE}(); }}\n")).unwrap();
    std::fs::remove_file(root.join("src/mod0/f0.rs")).unwrap();
    plant_needle_keeping_size_and_time(&root.join("src/mod1/f1.rs"));
    let daemon = start(&index, &[]);
    let mut raw = session(&daemon, &root);
    let expected = holding_needle(&root);
    assert!(
        expected.contains(&"src/mod1/f1.rs".to_owned()) && expected.contains(&"src/mod1/new.rs".to_owned())
    );
    assert_eq!(grepped(&mut raw), expected);
    let globbed = tool_ok(&mut raw, "glob", json!({"pattern": "**/*.rs"}));
    assert_eq!(globbed.lines().count(), 30, "{globbed}");
    assert!(globbed.lines().next() == Some("src/mod1/new.rs"), "the newest first: {globbed}");
    let known = index_status(&mut raw, &root);
    assert_eq!(known["loaded"], true, "{known}\n{}", daemon.log_text());
    assert_eq!(known["rereadFiles"], 2, "the new file and the rewritten one: {known}");
    assert!(known["bytes"].as_u64() > Some(0), "{known}");
    // A session rooted elsewhere is not shown this root's index.
    assert!(daemon.status()["searchIndexes"].as_array().unwrap().is_empty());
}

#[test]
fn an_index_planted_by_another_user_is_discarded() {
    if !can_play_another_user() {
        return;
    }
    let (_dir, root) = project();
    let index = root.parent().unwrap().join("index");
    let file = first_life(&index, &root);
    std::os::unix::fs::chown(&file, Some(NOBODY), Some(NOBODY)).unwrap();
    let daemon = start(&index, &[]);
    let mut raw = session(&daemon, &root);
    assert_eq!(grepped(&mut raw), holding_needle(&root));
    let known = index_status(&mut raw, &root);
    assert_ne!(known["loaded"], true, "{known}");
    let log = daemon.log_text();
    assert!(log.contains("search index discarded") && log.contains(&format!("uid {NOBODY}")), "{log}");
    // Removed (the daemon may have written its own since).
    let owner = std::fs::metadata(&file).map(|meta| std::os::unix::fs::MetadataExt::uid(&meta)).ok();
    assert_ne!(owner, Some(NOBODY), "the planted index is removed");
}

#[test]
fn a_corrupt_index_or_another_roots_is_discarded_and_the_answers_stay_right() {
    let (_dir, root) = project();
    let index = root.parent().unwrap().join("index");
    let file = first_life(&index, &root);
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let daemon = start(&index, &[]);
    let mut raw = session(&daemon, &root);
    assert_eq!(grepped(&mut raw), holding_needle(&root));
    assert_ne!(index_status(&mut raw, &root)["loaded"], true);
    let log = daemon.log_text();
    assert!(log.contains("search index discarded") && log.contains("corrupt"), "{log}");
    drop(raw);
    drop(daemon);
    // Another root's index under this root's name.
    let other = root.parent().unwrap().join("other");
    std::fs::create_dir_all(other.join("src/x")).unwrap();
    std::fs::write(other.join("src/x/a.rs"), "nothing here").unwrap();
    let file = first_life(&index, &root);
    let other_name = format!("{}.idx", &blake3::hash(other.as_os_str().as_encoded_bytes()).to_hex()[..32]);
    std::fs::rename(&file, index.join(other_name)).unwrap();
    let daemon = start(&index, &[]);
    let mut raw = session(&daemon, &other);
    assert_eq!(grepped(&mut raw), Vec::<String>::new());
    let log = daemon.log_text();
    assert!(log.contains("search index discarded") && log.contains("another root"), "{log}");
}

#[test]
fn a_daemon_killed_while_it_writes_the_index_leaves_the_old_one_or_the_new_one() {
    for (point, lands) in [("index::half-written", false), ("index::renamed", true)] {
        let (_dir, root) = project();
        let index = root.parent().unwrap().join("index");
        let file = first_life(&index, &root);
        let old = std::fs::read(&file).unwrap();
        // The next daemon validates it, sees a change, and dies writing the index at its stop.
        let spec = format!("{point}=return");
        let mut dying = start(&index, &[("FILECTX_FAILPOINTS", &spec)]);
        dying.require_feature("fail point configured", "failpoints");
        let mut raw = session(&dying, &root);
        assert_eq!(grepped(&mut raw), holding_needle(&root));
        std::fs::write(root.join("src/mod2/late.rs"), format!("fn late() {{ {NEEDLE}(); }}\n")).unwrap();
        // Waited for by glob, not grep: a grep starts building the new file's filters, whose
        // first build writes the index in the background, and this daemon dies writing it; a
        // grep in a loop could be the one it dies in. The one grep below answers first.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tool_ok(&mut raw, "glob", json!({"pattern": "**/late.rs"})).contains("late.rs") {
            assert!(Instant::now() < deadline, "the new file never showed");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(grepped(&mut raw).contains(&"src/mod2/late.rs".to_owned()));
        drop(raw);
        dying.signal(rustix::process::Signal::TERM);
        let status = dying.wait_exit();
        assert_eq!(status.signal(), Some(9), "{point}: not killed there: {status:?}\n{}", dying.log_text());
        assert!(dying.log_text().contains(&format!("crash point {point}")), "{}", dying.log_text());
        let now = std::fs::read(&file).unwrap();
        assert_eq!(now == old, !lands, "{point}: the index is neither the old one nor the new one");
        let left: Vec<PathBuf> = std::fs::read_dir(&index)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
            .map(|e| e.path())
            .collect();
        assert_eq!(left.len(), usize::from(!lands), "{point}: what the kill left");
        // The next daemon cleans up and serves from whichever is there.
        let daemon = start(&index, &[]);
        let mut raw = session(&daemon, &root);
        assert_eq!(grepped(&mut raw), holding_needle(&root), "{point}");
        assert_eq!(index_status(&mut raw, &root)["loaded"], true, "{point}");
        assert_eq!(index_files(&index).len(), 1);
        assert!(left.iter().all(|temp| !temp.exists()), "{point}: the dead daemon's unfinished write stays");
    }
}

#[test]
fn no_session_reaches_the_index() {
    let (_dir, root) = project();
    let index = root.join("state/index");
    first_life(&index, &root);
    let daemon = start(&index, &[]);
    let mut raw = daemon.session_with(json!({"roots": [root], "tools": ["read", "write", "glob", "grep"]}));
    let globbed = tool_ok(&mut raw, "glob", json!({"pattern": "**/*"}));
    assert!(!globbed.contains(".idx") && !globbed.contains("state/"), "{globbed}");
    let grepped = tool_ok(&mut raw, "grep", json!({"pattern": "filectxI"}));
    assert!(!grepped.contains(".idx"), "{grepped}");
    let file = index_files(&index).remove(0);
    let (code, text) = filectx_tests::tool_err(&mut raw, "read", json!({"file_path": file}));
    assert_eq!(code, "FS_PERMISSION_DENIED", "{text}");
    let mut refused = Raw::connect(&daemon.socket);
    let answer = rpc(&mut refused, "initialize", json!({"roots": [index]}));
    assert!(answer.get("error").is_some(), "a root inside the index folder: {answer}");
}
