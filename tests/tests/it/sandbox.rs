//! The sandbox under attack: a process inside a root swaps folders and files for symlinks to
//! outside while requests are in flight, hard links and FIFOs are planted, refusals are probed
//! for what they reveal, paths are made huge, roots and deny rules are pushed, and another local
//! user watches for staging files. Every test plays the attacker against one promise of
//! "Confinement and limits" (PROTOCOL.md, protocol 2) over the real socket.
//!
//! Races are bounded by both a count and a time budget; their counts are printed (run with
//! `--nocapture` to see them) and the assertions are on behaviour only: zero escapes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use filectx_tests::skip::{NOBODY, can_play_another_user};
use filectx_tests::{Daemon, PATIENCE, Raw, bin, fs_error, ok, rpc, test_name};
use serde_json::{Value, json};

/// Most swaps an attacker thread makes (it also stops when the client is done).
const MAX_SWAPS: u64 = 2_000_000;

/// Most rounds a racing client makes (each round is a few requests).
const MAX_ROUNDS: u64 = 600;

/// Time budget of one race.
const RACE_BUDGET: Duration = Duration::from_secs(20);

/// How long a request may take before the test calls it a hang (a hang check, not a timing
/// assertion).
const HANG: Duration = Duration::from_secs(20);

/// Set (to the spy's work folder) only in the environment of the spy process.
const SPY_ENV: &str = "FILECTX_TEST_SANDBOX_SPY";

/// What the outside files contain: any answer containing it is an escape.
const SECRET: &str = "SECRET outside the root\n";

/// What the inside files contain at first.
const INSIDE: &str = "inside\n";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A scratch folder (canonical) holding `root/` (the session's root) and `outside/` (a folder
/// next to it that no session may reach), with the temp folder that owns them.
struct Sandbox {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
}

impl Sandbox {
    /// Makes the scratch folder; `outside_name` names the outside folder.
    fn new(outside_name: &str) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join(outside_name);
        fs::create_dir(&root).unwrap();
        fs::create_dir(&outside).unwrap();
        Sandbox { _dir: dir, base, root, outside }
    }

    /// A session of `daemon` rooted at this sandbox's root.
    fn session(&self, daemon: &Daemon) -> Raw {
        daemon.session_with(json!({"roots": [self.root], "clientInfo": {"name": "sandbox-attacker"}}))
    }
}

/// What a folder holds and when it last changed: any create, rename or unlink in it changes
/// its mtime, so a temporary file that came and went still shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FolderState {
    names: BTreeSet<String>,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The state of folder `dir` (see [`FolderState`]).
fn folder_state(dir: &Path) -> FolderState {
    let meta = fs::metadata(dir).unwrap();
    let names =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    FolderState { names, mtime: (meta.mtime(), meta.mtime_nsec()), ctime: (meta.ctime(), meta.ctime_nsec()) }
}

/// A file's content, inode and change times: what an escaped write would alter.
fn file_state(path: &Path) -> (String, u64, u64, (i64, i64), (i64, i64)) {
    let meta = fs::symlink_metadata(path).unwrap();
    (
        fs::read_to_string(path).unwrap(),
        meta.ino(),
        meta.nlink(),
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    )
}

/// A `tools/call` request's whole response.
pub(crate) fn tool_response(raw: &mut Raw, name: &str, arguments: Value) -> Value {
    rpc(raw, "tools/call", json!({"name": name, "arguments": arguments}))
}

/// The text of a `tools/call` result.
pub(crate) fn response_text(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tool result: {response}"))
        .iter()
        .map(|b| b["text"].as_str().unwrap_or_default())
        .collect()
}

/// How a response ended: `"ok"`, or the `FS_*` code of a JSON-RPC error or of a failed
/// `tools/call` result.
pub(crate) fn outcome(response: &Value) -> String {
    if response.get("error").is_some() {
        return fs_error(response).to_owned();
    }
    let result = &response["result"];
    if result["isError"] == true {
        return result["error"]["code"].as_str().unwrap_or("tool error without a code").to_owned();
    }
    "ok".to_owned()
}

/// Counts of outcomes of a race, by `"ok"` or `FS_*` code.
#[derive(Debug, Default)]
struct Tally(BTreeMap<String, u64>);

impl Tally {
    /// Counts one response's outcome and returns it.
    fn count(&mut self, response: &Value) -> String {
        let outcome = outcome(response);
        *self.0.entry(outcome.clone()).or_default() += 1;
        outcome
    }

    /// Responses that succeeded.
    fn successes(&self) -> u64 {
        self.0.get("ok").copied().unwrap_or(0)
    }

    /// Asserts that every refusal has one of the `allowed` codes.
    fn assert_refusals_within(&self, allowed: &[&str]) {
        for (code, n) in &self.0 {
            assert!(code == "ok" || allowed.contains(&code.as_str()), "{n} answers with {code}: {self:?}");
        }
    }
}

/// An attacker thread: exchanges `a` and `b` (`renameat2(RENAME_EXCHANGE)`) over and over until
/// `stop` is set, [`MAX_SWAPS`] were made or [`RACE_BUDGET`] has passed; returns the count.
fn swapper(a: PathBuf, b: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + RACE_BUDGET;
        let mut swaps = 0u64;
        while !stop.load(Ordering::Relaxed) && swaps < MAX_SWAPS && Instant::now() < deadline {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &a,
                rustix::fs::CWD,
                &b,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
            swaps += 1;
            // Let the daemon's threads in between swaps (two cores are shared).
            if swaps.is_multiple_of(8) {
                std::thread::yield_now();
            }
        }
        swaps
    })
}

/// A watcher thread: lists `dir` over and over until `stop` (or the budget) and collects every
/// name it ever sees there besides `expected`; returns (listings, those names).
fn watcher(
    dir: PathBuf,
    expected: BTreeSet<String>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<(u64, BTreeSet<String>)> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + RACE_BUDGET + PATIENCE;
        let mut listings = 0;
        let mut strangers = BTreeSet::new();
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            for entry in fs::read_dir(&dir).unwrap() {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                if !expected.contains(&name) {
                    strangers.insert(name);
                }
            }
            listings += 1;
            std::thread::yield_now();
        }
        (listings, strangers)
    })
}

/// Whether a racing client should go on: under [`MAX_ROUNDS`], within the budget, and the
/// attacker still at work.
fn keep_racing(round: u64, deadline: Instant, attacker: &JoinHandle<u64>) -> bool {
    round < MAX_ROUNDS && Instant::now() < deadline && !attacker.is_finished()
}

/// The version the daemon gives the outside file `name`, through a session rooted outside
/// (so an answer carrying it can be recognised).
fn outside_version(daemon: &Daemon, sandbox: &Sandbox, name: &str) -> String {
    let mut raw = daemon.session_with(json!({"roots": [sandbox.outside]}));
    ok(&mut raw, "fs/stat", json!({"path": name}))["version"].as_str().unwrap().to_owned()
}

/// Asserts that no answer of a race carried the outside content or its version; returns how
/// many did (always 0 when it returns).
fn escapes(responses: &[Value], secret_version: &str) -> u64 {
    let leaked: Vec<&Value> = responses
        .iter()
        .filter(|r| {
            let text = r.to_string();
            text.contains("SECRET") || text.contains(secret_version)
        })
        .collect();
    assert!(leaked.is_empty(), "{} answers leaked the outside file, e.g. {}", leaked.len(), leaked[0]);
    0
}

/// Sends a request and waits up to [`HANG`] for its answer (skipping notifications); panics
/// when none comes, which means a request hung.
fn answered(raw: &mut Raw, method: &str, params: Value) -> Value {
    let id = raw.send_request(method, Some(params.clone()));
    loop {
        let frame =
            raw.recv_within(HANG).unwrap_or_else(|| panic!("{method} {params} got no answer: it hangs"));
        if frame.get("id").is_none() {
            continue;
        }
        assert_eq!(frame["id"], json!(id), "{frame}");
        return frame;
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Races on reads
// ---------------------------------------------------------------------------------------------

/// One round of reads of `path` through every layer; the responses are tallied and kept.
fn read_round(raw: &mut Raw, path: &str, tally: &mut Tally, seen: &mut Vec<Value>) {
    for response in [
        rpc(raw, "fs/readText", json!({"path": path})),
        rpc(raw, "file/read", json!({"path": path})),
        tool_response(raw, "read", json!({"file_path": path})),
        rpc(raw, "fs/stat", json!({"path": path})),
        rpc(raw, "file/stat", json!({"path": path})),
    ] {
        tally.count(&response);
        seen.push(response);
    }
}

/// Races reads of `read_path` against an attacker swapping `a` and `b`; asserts no answer
/// carried the outside file and returns (swaps, tally).
fn race_reads(daemon: &Daemon, sandbox: &Sandbox, a: &Path, b: &Path, read_path: &str) -> (u64, Tally) {
    let secret_version = outside_version(daemon, sandbox, "f.txt");
    let mut raw = sandbox.session(daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = swapper(a.to_owned(), b.to_owned(), stop.clone());
    let deadline = Instant::now() + RACE_BUDGET;
    let (mut tally, mut seen, mut round) = (Tally::default(), Vec::new(), 0);
    while keep_racing(round, deadline, &attacker) {
        read_round(&mut raw, read_path, &mut tally, &mut seen);
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = attacker.join().unwrap();
    let escaped = escapes(&seen, &secret_version);
    eprintln!(
        "race reads of {read_path}: swaps {swaps}, rounds {round}, answers {tally:?}, escapes {escaped}"
    );
    assert_eq!(fs::read_to_string(sandbox.outside.join("f.txt")).unwrap(), SECRET);
    (swaps, tally)
}

/// A folder of the root swapped with a symlink to an outside folder, over and over, while a
/// client reads `dir/f.txt` through `fs/readText`, `file/read`, the read tool and the stats:
/// no answer ever carries the outside file (its content or its version). Before the change
/// resolution checked names and later steps reopened the string, so a read could land outside.
#[test]
fn swapping_a_folder_for_a_symlink_never_lets_a_read_out() {
    let daemon = Daemon::start(&[]);
    let sandbox = Sandbox::new("outside");
    fs::create_dir(sandbox.root.join("dir")).unwrap();
    fs::write(sandbox.root.join("dir/f.txt"), INSIDE).unwrap();
    fs::write(sandbox.outside.join("f.txt"), SECRET).unwrap();
    symlink(&sandbox.outside, sandbox.root.join("swap")).unwrap();
    let (swaps, tally) =
        race_reads(&daemon, &sandbox, &sandbox.root.join("dir"), &sandbox.root.join("swap"), "dir/f.txt");
    tally.assert_refusals_within(&["FS_OUTSIDE_ROOT", "FS_BUSY", "FS_NOT_FOUND"]);
    assert!(swaps > 0 && tally.successes() > 0, "the race ran: {swaps} swaps, {tally:?}");
}

/// The same with the file itself swapped for a symlink to an outside file.
#[test]
fn swapping_the_file_for_a_symlink_never_lets_a_read_out() {
    let daemon = Daemon::start(&[]);
    let sandbox = Sandbox::new("outside");
    fs::write(sandbox.root.join("f.txt"), INSIDE).unwrap();
    fs::write(sandbox.outside.join("f.txt"), SECRET).unwrap();
    symlink(sandbox.outside.join("f.txt"), sandbox.root.join("swap")).unwrap();
    let (swaps, tally) =
        race_reads(&daemon, &sandbox, &sandbox.root.join("f.txt"), &sandbox.root.join("swap"), "f.txt");
    tally.assert_refusals_within(&["FS_OUTSIDE_ROOT", "FS_BUSY", "FS_NOT_FOUND"]);
    assert!(swaps > 0 && tally.successes() > 0, "the race ran: {swaps} swaps, {tally:?}");
}

// ---------------------------------------------------------------------------------------------
// 2. Races on writes
// ---------------------------------------------------------------------------------------------

/// The folder swap while a client creates `dir/new-N.txt` (`fs/writeText` any, the write tool,
/// `file/write`) and overwrites `dir/f.txt` (write and edit tools after a read): the outside
/// folder never gains a file, not even a temporary one for a moment (a watcher lists it all
/// along, and its mtime would change), and its `f.txt` is untouched.
#[test]
fn swapping_a_folder_for_a_symlink_never_lets_a_write_out() {
    let daemon = Daemon::start(&["--no-fsync"]);
    let sandbox = Sandbox::new("outside");
    fs::create_dir(sandbox.root.join("dir")).unwrap();
    fs::write(sandbox.root.join("dir/f.txt"), INSIDE).unwrap();
    fs::write(sandbox.outside.join("f.txt"), SECRET).unwrap();
    symlink(&sandbox.outside, sandbox.root.join("swap")).unwrap();
    let folder_before = folder_state(&sandbox.outside);
    let file_before = file_state(&sandbox.outside.join("f.txt"));

    let mut raw = sandbox.session(&daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = swapper(sandbox.root.join("dir"), sandbox.root.join("swap"), stop.clone());
    let watch = watcher(sandbox.outside.clone(), folder_before.names.clone(), stop.clone());
    let deadline = Instant::now() + RACE_BUDGET;
    let (mut tally, mut round) = (Tally::default(), 0);
    while keep_racing(round, deadline, &attacker) {
        let fresh = format!("dir/new-{round}.txt");
        tally.count(&rpc(
            &mut raw,
            "fs/writeText",
            json!({"path": fresh, "content": "pwned\n", "expect": {"kind": "any"}}),
        ));
        tally.count(&tool_response(
            &mut raw,
            "write",
            json!({"file_path": format!("dir/tool-{round}.txt"), "content": "pwned\n"}),
        ));
        tally.count(&rpc(
            &mut raw,
            "file/write",
            json!({"path": format!("dir/file-{round}.txt"), "content": "pwned\n"}),
        ));
        let read = tool_response(&mut raw, "read", json!({"file_path": "dir/f.txt"}));
        tally.count(&read);
        if outcome(&read) == "ok" {
            tally.count(&tool_response(
                &mut raw,
                "write",
                json!({"file_path": "dir/f.txt", "content": "overwritten\n"}),
            ));
            let read = tool_response(&mut raw, "read", json!({"file_path": "dir/f.txt"}));
            if outcome(&read) == "ok" {
                tally.count(&tool_response(
                    &mut raw,
                    "edit",
                    json!({"file_path": "dir/f.txt", "old_string": "overwritten", "new_string": "edited"}),
                ));
            }
        }
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = attacker.join().unwrap();
    let (listings, strangers) = watch.join().unwrap();
    let escaped =
        u64::from(!strangers.is_empty()) + u64::from(folder_state(&sandbox.outside) != folder_before);
    let some: Vec<&String> = strangers.iter().take(5).collect();
    eprintln!(
        "race writes into dir/: swaps {swaps}, rounds {round}, answers {tally:?}, outside listings {listings}, \
         names seen outside {} (e.g. {some:?}), escapes {escaped}",
        strangers.len()
    );
    assert!(
        strangers.is_empty(),
        "{} files appeared outside during the race, e.g. {some:?}",
        strangers.len()
    );
    assert_eq!(folder_state(&sandbox.outside), folder_before, "the outside folder changed");
    assert_eq!(file_state(&sandbox.outside.join("f.txt")), file_before, "the outside file changed");
    // FS_EDIT_NOT_FOUND: an edit after a write that the race refused finds last round's text.
    tally.assert_refusals_within(&[
        "FS_OUTSIDE_ROOT",
        "FS_BUSY",
        "FS_NOT_FOUND",
        "FS_STALE_VERSION",
        "FS_EDIT_NOT_FOUND",
    ]);
    assert!(swaps > 0 && tally.successes() > 0, "the race ran: {swaps} swaps, {tally:?}");
}

// ---------------------------------------------------------------------------------------------
// 3. Hard links
// ---------------------------------------------------------------------------------------------

/// `root/hl.txt` has a second link inside the root, so writes rewrite it in place (the daemon
/// has no deny rule, under which it would refuse them); the attacker swaps it with a symlink
/// to an outside victim that also has two links, while the client reads, edits and writes
/// `hl.txt` at every layer: the victim never changes.
#[test]
fn swapping_a_multi_link_file_never_lets_an_in_place_rewrite_out() {
    let daemon = Daemon::start_without_deny_rules(&["--no-fsync"]);
    let sandbox = Sandbox::new("outside");
    fs::write(sandbox.root.join("hl.txt"), INSIDE).unwrap();
    fs::hard_link(sandbox.root.join("hl.txt"), sandbox.root.join("hl-second.txt")).unwrap();
    fs::write(sandbox.outside.join("victim.txt"), SECRET).unwrap();
    fs::hard_link(sandbox.outside.join("victim.txt"), sandbox.outside.join("victim-second.txt")).unwrap();
    symlink(sandbox.outside.join("victim.txt"), sandbox.root.join("swap")).unwrap();
    let folder_before = folder_state(&sandbox.outside);
    let victim_before = file_state(&sandbox.outside.join("victim.txt"));
    assert_eq!(victim_before.2, 2);

    let mut raw = sandbox.session(&daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = swapper(sandbox.root.join("hl.txt"), sandbox.root.join("swap"), stop.clone());
    let deadline = Instant::now() + RACE_BUDGET;
    let (mut tally, mut round) = (Tally::default(), 0);
    while keep_racing(round, deadline, &attacker) {
        tally.count(&rpc(
            &mut raw,
            "fs/writeText",
            json!({"path": "hl.txt", "content": format!("fs {round}\n"), "expect": {"kind": "any"}}),
        ));
        let read = rpc(&mut raw, "file/read", json!({"path": "hl.txt"}));
        tally.count(&read);
        if outcome(&read) == "ok" {
            let first = read["result"]["lines"][0].as_str().unwrap().to_owned();
            tally.count(&rpc(
                &mut raw,
                "file/edit",
                json!({"path": "hl.txt", "oldString": first, "newString": format!("edit {round}")}),
            ));
        }
        let read = rpc(&mut raw, "file/read", json!({"path": "hl.txt"}));
        tally.count(&read);
        if outcome(&read) == "ok" {
            tally.count(&rpc(
                &mut raw,
                "file/write",
                json!({"path": "hl.txt", "content": format!("write {round}\n")}),
            ));
        }
        let read = tool_response(&mut raw, "read", json!({"file_path": "hl.txt"}));
        tally.count(&read);
        if outcome(&read) == "ok" {
            tally.count(&tool_response(
                &mut raw,
                "write",
                json!({"file_path": "hl.txt", "content": format!("tool {round}\n")}),
            ));
        }
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = attacker.join().unwrap();
    let victim_after = file_state(&sandbox.outside.join("victim.txt"));
    let escaped = u64::from(victim_after != victim_before);
    eprintln!(
        "race in-place rewrites of hl.txt: swaps {swaps}, rounds {round}, answers {tally:?}, escapes {escaped}"
    );
    assert_eq!(victim_after, victim_before, "the outside victim changed");
    assert_eq!(fs::read_to_string(sandbox.outside.join("victim-second.txt")).unwrap(), SECRET);
    assert_eq!(folder_state(&sandbox.outside), folder_before, "the outside folder changed");
    tally.assert_refusals_within(&[
        "FS_OUTSIDE_ROOT",
        "FS_BUSY",
        "FS_NOT_FOUND",
        "FS_STALE_VERSION",
        "FS_NOT_OBSERVED",
    ]);
    assert!(swaps > 0 && tally.successes() > 0, "the race ran: {swaps} swaps, {tally:?}");
    // The inside file is still one file with two links (rewritten in place, never replaced).
    let real =
        ["hl.txt", "swap"].map(|n| sandbox.root.join(n)).into_iter().find(|p| !p.is_symlink()).unwrap();
    assert_eq!(
        fs::metadata(&real).unwrap().ino(),
        fs::metadata(sandbox.root.join("hl-second.txt")).unwrap().ino()
    );
}

/// With no deny rule (under one, any file with several names is refused: see `attack_deny`):
/// `--refuse-multi-link-writes` refuses a write or an edit of a file with two links at every
/// layer with FS_PERMISSION_DENIED naming the setting, and the file is unchanged; without the
/// setting the edit goes through in place and both links see it.
#[test]
fn multi_link_writes_are_refused_when_configured_and_shared_otherwise() {
    for refuse in [true, false] {
        let flags: &[&str] = if refuse { &["--refuse-multi-link-writes"] } else { &[] };
        let daemon = Daemon::start_without_deny_rules(flags);
        let sandbox = Sandbox::new("outside");
        let (first, second) = (sandbox.root.join("hl.txt"), sandbox.root.join("other-link.txt"));
        fs::write(&first, INSIDE).unwrap();
        fs::hard_link(&first, &second).unwrap();
        let mut raw = sandbox.session(&daemon);
        ok(&mut raw, "file/read", json!({"path": "hl.txt"}));
        assert_eq!(outcome(&tool_response(&mut raw, "read", json!({"file_path": "hl.txt"}))), "ok");
        if refuse {
            let version = ok(&mut raw, "fs/stat", json!({"path": "hl.txt"}))["version"].clone();
            for response in [
                rpc(&mut raw, "file/write", json!({"path": "hl.txt", "content": "changed\n"})),
                rpc(
                    &mut raw,
                    "file/edit",
                    json!({"path": "hl.txt", "oldString": "inside", "newString": "changed"}),
                ),
                rpc(
                    &mut raw,
                    "fs/writeText",
                    json!({"path": "hl.txt", "content": "changed\n", "expect": {"kind": "any"}}),
                ),
                rpc(
                    &mut raw,
                    "fs/editText",
                    json!({"path": "hl.txt", "oldString": "inside", "newString": "changed", "expectedVersion": version}),
                ),
            ] {
                assert_eq!(fs_error(&response), "FS_PERMISSION_DENIED", "{response}");
                let message = response["error"]["message"].as_str().unwrap();
                assert!(message.contains("refuse_multi_link_writes"), "{response}");
            }
            for response in [
                tool_response(&mut raw, "write", json!({"file_path": "hl.txt", "content": "changed\n"})),
                tool_response(
                    &mut raw,
                    "edit",
                    json!({"file_path": "hl.txt", "old_string": "inside", "new_string": "changed"}),
                ),
            ] {
                assert_eq!(outcome(&response), "FS_PERMISSION_DENIED", "{response}");
                assert!(response_text(&response).contains("refuse_multi_link_writes"), "{response}");
            }
            assert_eq!(fs::read_to_string(&first).unwrap(), INSIDE);
            assert_eq!(fs::read_to_string(&second).unwrap(), INSIDE);
        } else {
            ok(
                &mut raw,
                "file/edit",
                json!({"path": "hl.txt", "oldString": "inside", "newString": "changed"}),
            );
            assert_eq!(fs::read_to_string(&first).unwrap(), "changed\n");
            assert_eq!(fs::read_to_string(&second).unwrap(), "changed\n");
        }
        assert_eq!(fs::metadata(&first).unwrap().ino(), fs::metadata(&second).unwrap().ino());
    }
}

// ---------------------------------------------------------------------------------------------
// 4. FIFOs
// ---------------------------------------------------------------------------------------------

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// A FIFO in the root (no writer ever opens it): every layer answers at once — reads are
/// FS_NOT_REGULAR_FILE, stats say "other", writes are refused and the FIFO stays a FIFO — and 40
/// FIFO reads in flight from several sessions at once hold nothing up: another session's read
/// is answered. Before the change a read opened the FIFO blocking, for ever.
#[test]
fn fifos_are_refused_at_once_and_hold_nothing_up() {
    let daemon = Daemon::start(&[]);
    let sandbox = Sandbox::new("outside");
    let pipe = sandbox.root.join("pipe");
    mkfifo(&pipe);
    fs::write(sandbox.root.join("a.txt"), INSIDE).unwrap();
    let mut raw = sandbox.session(&daemon);

    for (method, params) in [
        ("fs/readText", json!({"path": "pipe"})),
        ("file/read", json!({"path": "pipe"})),
        ("fs/writeText", json!({"path": "pipe", "content": "x\n", "expect": {"kind": "any"}})),
    ] {
        let response = answered(&mut raw, method, params);
        assert_eq!(fs_error(&response), "FS_NOT_REGULAR_FILE", "{method}: {response}");
    }
    let response =
        answered(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": "pipe"}}));
    assert_eq!(outcome(&response), "FS_NOT_REGULAR_FILE", "{response}");
    let stat = answered(&mut raw, "fs/stat", json!({"path": "pipe"}));
    assert_eq!(stat["result"]["type"], "other", "{stat}");
    assert!(stat["result"]["version"].is_null(), "{stat}");
    let stat = answered(&mut raw, "file/stat", json!({"path": "pipe"}));
    assert_eq!(stat["result"]["kind"], "other", "{stat}");
    // Never read, so never observed; either refusal is right, as long as it is answered.
    for response in [
        answered(&mut raw, "file/write", json!({"path": "pipe", "content": "x\n"})),
        answered(&mut raw, "file/edit", json!({"path": "pipe", "oldString": "a", "newString": "b"})),
        answered(
            &mut raw,
            "tools/call",
            json!({"name": "write", "arguments": {"file_path": "pipe", "content": "x\n"}}),
        ),
    ] {
        let code = outcome(&response);
        eprintln!("FIFO: a write or edit without a read answers {code}");
        assert!(code == "FS_NOT_REGULAR_FILE" || code == "FS_NOT_OBSERVED", "{response}");
    }
    assert!(fs::symlink_metadata(&pipe).unwrap().file_type().is_fifo_like(), "the FIFO was replaced");

    // 40 FIFO reads in flight over four sessions, sent without waiting.
    let mut sessions: Vec<Raw> = (0..4).map(|_| sandbox.session(&daemon)).collect();
    let mut pending = Vec::new();
    for (i, session) in sessions.iter_mut().enumerate() {
        for j in 0..10 {
            let id = match (i + j) % 4 {
                0 => session.send_request("fs/readText", Some(json!({"path": "pipe"}))),
                1 => session.send_request("file/read", Some(json!({"path": "pipe"}))),
                2 => session.send_request(
                    "tools/call",
                    Some(json!({"name": "read", "arguments": {"file_path": "pipe"}})),
                ),
                _ => session.send_request("fs/readText", Some(json!({"path": pipe}))),
            };
            pending.push((i, id));
        }
    }
    let mut other = sandbox.session(&daemon);
    let normal = answered(&mut other, "file/read", json!({"path": "a.txt"}));
    assert_eq!(normal["result"]["lines"], json!(["inside"]), "{normal}");
    let mut refused = 0;
    for (i, _) in &pending {
        let response = sessions[*i].recv_within(HANG).expect("a FIFO read hangs");
        assert_eq!(outcome(&response), "FS_NOT_REGULAR_FILE", "{response}");
        refused += 1;
    }
    eprintln!("FIFO: {refused} concurrent reads refused, the other session's read answered");
    assert_eq!(refused, 40);
}

/// `is_fifo` without importing `FileTypeExt` everywhere.
trait FifoLike {
    /// Whether this is a FIFO.
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Refusals reveal nothing
// ---------------------------------------------------------------------------------------------

/// Builds a request's params around a path.
type Params = fn(&str) -> Value;

/// Every way out — `..` into an outside folder (to a file, a missing file, below a file),
/// absolute outside paths, symlinks (absolute and relative) to an outside file or folder and
/// paths below them — answers FS_OUTSIDE_ROOT with one shape per method: no `data.resolved`,
/// the same message once the given path is blanked out, and nothing in it names the outside
/// folder or its files beyond what the client itself wrote.
#[test]
fn refusals_name_nothing_outside_and_all_look_alike() {
    let daemon = Daemon::start(&[]);
    let sandbox = Sandbox::new("hidden-vault");
    fs::write(sandbox.outside.join("secret.txt"), SECRET).unwrap();
    fs::write(sandbox.root.join("a.txt"), INSIDE).unwrap();
    symlink(sandbox.outside.join("secret.txt"), sandbox.root.join("door")).unwrap();
    symlink("../hidden-vault/secret.txt", sandbox.root.join("rel-door")).unwrap();
    symlink(&sandbox.outside, sandbox.root.join("gate")).unwrap();
    symlink(sandbox.outside.join("missing.txt"), sandbox.root.join("dangling")).unwrap();
    let abs = |name: &str| sandbox.outside.join(name).display().to_string();
    let cases = [
        "../hidden-vault/secret.txt/x".to_owned(),
        "../hidden-vault/missing.txt".to_owned(),
        "../hidden-vault/secret.txt".to_owned(),
        "../hidden-vault".to_owned(),
        abs("secret.txt"),
        abs("missing.txt"),
        abs("secret.txt/x"),
        "/etc/passwd".to_owned(),
        "door".to_owned(),
        "door/x".to_owned(),
        "rel-door".to_owned(),
        "gate/secret.txt".to_owned(),
        "gate/missing.txt".to_owned(),
        "gate/secret.txt/x".to_owned(),
        "dangling".to_owned(),
    ];
    let methods: [(&str, Params); 9] = [
        ("fs/readText", |p| json!({"path": p})),
        ("file/read", |p| json!({"path": p})),
        ("fs/stat", |p| json!({"path": p})),
        ("file/stat", |p| json!({"path": p})),
        ("fs/resolve", |p| json!({"path": p})),
        ("fs/writeText", |p| json!({"path": p, "content": "pwned\n", "expect": {"kind": "any"}})),
        ("file/write", |p| json!({"path": p, "content": "pwned\n"})),
        ("file/edit", |p| json!({"path": p, "oldString": "SECRET", "newString": "pwned"})),
        ("tools/call", |p| json!({"name": "read", "arguments": {"file_path": p}})),
    ];
    let mut raw = sandbox.session(&daemon);
    let mut checked = 0;
    for (method, params) in methods {
        let mut shapes = BTreeMap::new();
        for case in &cases {
            let response = rpc(&mut raw, method, params(case));
            assert_eq!(outcome(&response), "FS_OUTSIDE_ROOT", "{method} {case}: {response}");
            let shape = if method == "tools/call" {
                let mut result = response["result"].clone();
                let text = response_text(&response).replace(case.as_str(), "<PATH>");
                result["content"] = json!(text);
                result
            } else {
                let mut error = response["error"].clone();
                assert!(error["data"].get("resolved").is_none(), "{method} {case}: {response}");
                assert_eq!(error["data"]["path"], json!(case), "{method} {case}: {response}");
                error["data"]["path"] = json!("<PATH>");
                error["message"] = json!(error["message"].as_str().unwrap().replace(case.as_str(), "<PATH>"));
                error
            };
            let blanked = shape.to_string();
            for word in ["hidden-vault", "secret", "missing", "SECRET", sandbox.base.to_str().unwrap()] {
                assert!(!blanked.contains(word), "{method} {case} names {word:?}: {response}");
            }
            shapes.entry(blanked).or_insert_with(Vec::new).push(case.clone());
            checked += 1;
        }
        assert_eq!(shapes.len(), 1, "{method}: refusals differ by where they lead: {shapes:#?}");
    }
    eprintln!("refusals: {checked} answers, all FS_OUTSIDE_ROOT, one shape per method");
    assert_eq!(fs::read_to_string(sandbox.outside.join("secret.txt")).unwrap(), SECRET);
    assert_eq!(folder_state(&sandbox.outside).names, BTreeSet::from(["secret.txt".to_owned()]));
}

// ---------------------------------------------------------------------------------------------
// 6. Paths
// ---------------------------------------------------------------------------------------------

/// A 36 MB path, a 4,097-byte path and a 256-byte component are FS_INVALID_ARGUMENT at every
/// layer, answered with a short message, and the connection stays usable; `a.txt/..` (`..`
/// after something that is not a folder) is FS_INVALID_ARGUMENT too.
#[test]
fn huge_paths_and_dot_dot_after_a_file_are_invalid_arguments() {
    let daemon = Daemon::start(&[]);
    let sandbox = Sandbox::new("outside");
    fs::write(sandbox.root.join("a.txt"), INSIDE).unwrap();
    let mut raw = sandbox.session(&daemon);
    let huge = "d/".repeat(18_000_000);
    let long = format!("{}/f", "x".repeat(4095));
    assert_eq!(long.len(), 4097);
    let wide = format!("ok/{}", "y".repeat(256));
    for path in [&huge, &long, &wide] {
        for (method, params) in [
            ("file/read", json!({"path": path})),
            ("fs/stat", json!({"path": path})),
            ("fs/writeText", json!({"path": path, "content": "x", "expect": {"kind": "any"}})),
        ] {
            let response = answered(&mut raw, method, params);
            assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{method} of {} bytes", path.len());
            assert!(
                response.to_string().len() < 2000,
                "the answer echoes the whole path: {} bytes",
                response.to_string().len()
            );
        }
        let response =
            answered(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": path}}));
        assert_eq!(outcome(&response), "FS_INVALID_ARGUMENT");
        assert!(response.to_string().len() < 2000);
        assert_eq!(ok(&mut raw, "file/read", json!({"path": "a.txt"}))["lines"], json!(["inside"]));
    }
    for path in ["a.txt/..", "a.txt/../a.txt", "./a.txt/.."] {
        let response = rpc(&mut raw, "file/read", json!({"path": path}));
        assert_eq!(fs_error(&response), "FS_INVALID_ARGUMENT", "{path}: {response}");
    }
    // At the limits exactly: 255-byte names are fine.
    let name = "z".repeat(255);
    ok(&mut raw, "fs/writeText", json!({"path": name, "content": "x\n", "expect": {"kind": "any"}}));
    assert_eq!(fs::read_to_string(sandbox.root.join(&name)).unwrap(), "x\n");
}

// ---------------------------------------------------------------------------------------------
// 7. Roots
// ---------------------------------------------------------------------------------------------

/// The `initialize` answer for `roots` on a fresh connection to `daemon`.
fn initialize(daemon: &Daemon, roots: &[&Path]) -> Value {
    let mut raw = Raw::connect(&daemon.socket);
    raw.request("initialize", Some(json!({"roots": roots})))
}

/// `/` as a root is refused unless the daemon allows it by name; `--allow-root DIR` fences
/// every root inside DIR.
#[test]
fn roots_are_fenced_by_allowed_roots() {
    let sandbox = Sandbox::new("outside");
    let daemon = Daemon::start(&[]);
    assert_eq!(fs_error(&initialize(&daemon, &[Path::new("/")])), "FS_PERMISSION_DENIED");
    assert!(initialize(&daemon, &[&sandbox.root]).get("error").is_none());

    let allowed = sandbox.base.join("allowed");
    fs::create_dir_all(allowed.join("project")).unwrap();
    symlink(&sandbox.outside, allowed.join("sneaky")).unwrap();
    let fenced = Daemon::start(&["--allow-root", allowed.to_str().unwrap()]);
    for refused in [&sandbox.outside, &sandbox.root, Path::new("/"), &sandbox.base, &allowed.join("sneaky")] {
        let response = initialize(&fenced, &[refused]);
        assert_eq!(fs_error(&response), "FS_PERMISSION_DENIED", "{}: {response}", refused.display());
    }
    let response = initialize(&fenced, &[&allowed.join("project"), &sandbox.outside]);
    assert_eq!(fs_error(&response), "FS_PERMISSION_DENIED", "one root outside spoils the lot: {response}");
    for accepted in [allowed.join("project"), allowed.clone()] {
        let response = initialize(&fenced, &[&accepted]);
        assert!(response.get("error").is_none(), "{}: {response}", accepted.display());
    }

    let everything = Daemon::start(&["--allow-root", "/"]);
    let response = initialize(&everything, &[Path::new("/")]);
    assert!(response.get("error").is_none(), "{response}");
}

// ---------------------------------------------------------------------------------------------
// 8. Deny rules
// ---------------------------------------------------------------------------------------------

/// Asserts that `response` (a `file/*`, `fs/*` or `tools/call` answer) is FS_PERMISSION_DENIED
/// naming `rule`.
fn assert_denied(response: &Value, rule: &str, what: &str) {
    assert_eq!(outcome(response), "FS_PERMISSION_DENIED", "{what}: {response}");
    if response.get("error").is_some() {
        assert_eq!(response["error"]["data"]["rule"], json!(rule), "{what}: {response}");
    } else {
        assert!(response_text(response).contains(rule), "{what}: {response}");
    }
}

/// The default write rule `**/.git/**` refuses writes and edits under any `.git` folder at
/// every layer (reads stay allowed); a session's `deny.read` and the daemon's `--deny-read`
/// refuse reads and stats at every layer; `--print-config` shows the default.
#[test]
fn deny_rules_hold_at_every_layer() {
    let daemon = Daemon::start(&["--deny-read", "*.pem"]);
    let sandbox = Sandbox::new("outside");
    for (path, content) in [
        (".git/config", "[core]\n"),
        ("sub/.git/HEAD", "ref: refs/heads/main\n"),
        ("secrets/x", "token\n"),
        ("key.pem", "-----BEGIN-----\n"),
        ("notes.txt", "fine\n"),
    ] {
        let path = sandbox.root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    let mut raw = daemon.session_with(json!({"roots": [sandbox.root], "deny": {"read": ["secrets/**"]}}));
    for path in [".git/config", "sub/.git/HEAD"] {
        let before = fs::read_to_string(sandbox.root.join(path)).unwrap();
        // Reading is allowed, and authorizes nothing that the rule refuses.
        let read = ok(&mut raw, "file/read", json!({"path": path}));
        let first = read["lines"][0].as_str().unwrap().to_owned();
        assert_eq!(outcome(&tool_response(&mut raw, "read", json!({"file_path": path}))), "ok");
        ok(&mut raw, "fs/readText", json!({"path": path}));
        let version = read["version"].clone();
        for (what, response) in [
            ("file/write", rpc(&mut raw, "file/write", json!({"path": path, "content": "pwned\n"}))),
            (
                "file/edit",
                rpc(&mut raw, "file/edit", json!({"path": path, "oldString": first, "newString": "pwned"})),
            ),
            (
                "fs/writeText",
                rpc(
                    &mut raw,
                    "fs/writeText",
                    json!({"path": path, "content": "pwned\n", "expect": {"kind": "any"}}),
                ),
            ),
            (
                "fs/editText",
                rpc(
                    &mut raw,
                    "fs/editText",
                    json!({"path": path, "oldString": first, "newString": "pwned", "expectedVersion": version}),
                ),
            ),
            (
                "write tool",
                tool_response(&mut raw, "write", json!({"file_path": path, "content": "pwned\n"})),
            ),
            (
                "edit tool",
                tool_response(
                    &mut raw,
                    "edit",
                    json!({"file_path": path, "old_string": first, "new_string": "pwned"}),
                ),
            ),
        ] {
            assert_denied(&response, "**/.git/**", &format!("{what} {path}"));
        }
        // Creating a new file under .git is a write too.
        let fresh = path.replace("config", "hooks-new").replace("HEAD", "hooks-new");
        let response = rpc(
            &mut raw,
            "fs/writeText",
            json!({"path": fresh, "content": "x\n", "expect": {"kind": "any"}}),
        );
        assert_denied(&response, "**/.git/**", &format!("create {fresh}"));
        assert!(!sandbox.root.join(&fresh).exists());
        assert_eq!(fs::read_to_string(sandbox.root.join(path)).unwrap(), before);
    }
    for (path, rule) in [("secrets/x", "secrets/**"), ("key.pem", "*.pem")] {
        for (what, response) in [
            ("file/read", rpc(&mut raw, "file/read", json!({"path": path}))),
            ("fs/readText", rpc(&mut raw, "fs/readText", json!({"path": path}))),
            ("fs/stat", rpc(&mut raw, "fs/stat", json!({"path": path}))),
            ("file/stat", rpc(&mut raw, "file/stat", json!({"path": path}))),
            ("read tool", tool_response(&mut raw, "read", json!({"file_path": path}))),
        ] {
            assert_denied(&response, rule, &format!("{what} {path}"));
            assert!(
                !response.to_string().contains("token") && !response.to_string().contains("BEGIN"),
                "{response}"
            );
        }
    }
    // The session's rule is its own: another session reads secrets/x.
    let mut plain = sandbox.session(&daemon);
    assert_eq!(ok(&mut plain, "file/read", json!({"path": "secrets/x"}))["lines"], json!(["token"]));
    assert_denied(
        &rpc(&mut plain, "file/read", json!({"path": "key.pem"})),
        "*.pem",
        "key.pem, other session",
    );
    assert_eq!(ok(&mut raw, "file/read", json!({"path": "notes.txt"}))["lines"], json!(["fine"]));

    let printed = Command::new(bin("filectxd")).arg("--print-config").output().unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert!(printed.contains("deny_write = [\"**/.git/**\"]"), "{printed}");
}

// ---------------------------------------------------------------------------------------------
// 9. Staging files and another local user
// ---------------------------------------------------------------------------------------------

/// Not a test of its own: the spy, when a test runs this binary as another user with
/// [`SPY_ENV`] set (to its work folder); otherwise it returns at once. It writes `ready`, then
/// lists `<work>/watched` over and over, trying to open every `*.tmp` file there for reading,
/// until `<work>/stop` appears (or 60 s pass), and writes its counts to `<work>/report`.
#[test]
fn temp_file_spy() {
    let Some(work) = std::env::var_os(SPY_ENV).map(PathBuf::from) else { return };
    let watched = fs::read_to_string(work.join("watched")).unwrap();
    let watched = Path::new(watched.trim());
    fs::write(work.join("ready"), "ready\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut listings, mut seen, mut attempts, mut opened) = (0u64, BTreeSet::new(), 0u64, Vec::new());
    while !work.join("stop").exists() && Instant::now() < deadline {
        let Ok(entries) = fs::read_dir(watched) else { continue };
        listings += 1;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                seen.insert(name.clone());
                attempts += 1;
                if fs::File::open(watched.join(&name)).is_ok() {
                    opened.push(name);
                }
            }
        }
    }
    let report = format!(
        "listings {listings}\nseen {}\nattempts {attempts}\nopened {}\n{}\n",
        seen.len(),
        opened.len(),
        opened.join("\n")
    );
    fs::write(work.join("report"), report).unwrap();
}

/// Whether every folder above `path` lets others through (so another user can run it).
fn reachable_by_others(path: &Path) -> bool {
    path.ancestors().skip(1).all(|dir| fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0))
        && fs::metadata(path).is_ok_and(|m| m.mode() & 0o005 == 0o005)
}

/// Another local user (uid [`NOBODY`], this very binary run again as [`temp_file_spy`]) lists a
/// world-writable folder in the root and tries to open every staging file while the daemon
/// overwrites a 0600 file there hundreds of times: it opens none (staging files are created
/// 0600; before the change they were 0666 & ~umask until the rename). A staged file ends with
/// the target's mode: 0600 stays 0600, 0755 stays 0755. Needs root (CI runs as root): skipped
/// otherwise (see [`can_play_another_user`]).
#[test]
fn another_user_never_opens_a_staging_file() {
    if !can_play_another_user() {
        return;
    }
    let daemon = Daemon::start(&["--no-fsync"]);
    let sandbox = Sandbox::new("outside");
    let shared = sandbox.root.join("shared");
    let work = sandbox.base.join("spy");
    fs::create_dir(&shared).unwrap();
    fs::create_dir(&work).unwrap();
    for (dir, mode) in [(&sandbox.base, 0o755), (&sandbox.root, 0o755), (&shared, 0o777), (&work, 0o777)] {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).unwrap();
    }
    let target = shared.join("target.txt");
    fs::write(&target, "private\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(work.join("watched"), shared.display().to_string()).unwrap();

    let mut exe = std::env::current_exe().unwrap();
    if !reachable_by_others(&exe) {
        // Copied by `cp`, so that no descriptor of the copy is ever open in this process, where
        // another test's concurrent fork could inherit it and make its exec fail with ETXTBSY.
        let copy = sandbox.base.join("spy-exe");
        let status = Command::new("cp").arg(&exe).arg(&copy).status().unwrap();
        assert!(status.success(), "cp {} {}: {status}", exe.display(), copy.display());
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        exe = copy;
    }
    let mut spy = Command::new(&exe)
        .args(["--exact", &test_name(module_path!(), "temp_file_spy"), "--nocapture", "--test-threads=1"])
        .env(SPY_ENV, &work)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run the spy as uid {NOBODY}: {e}"));
    let ready_by = Instant::now() + PATIENCE;
    while !work.join("ready").exists() {
        assert!(spy.try_wait().unwrap().is_none(), "the spy exited early");
        assert!(Instant::now() < ready_by, "the spy did not start");
        std::thread::sleep(Duration::from_millis(5));
    }

    let mut raw = sandbox.session(&daemon);
    let content: String = (0..4096).map(|i| format!("line {i:05} of a file worth peeking at\n")).collect();
    let deadline = Instant::now() + RACE_BUDGET;
    let mut writes = 0;
    while writes < 400 && Instant::now() < deadline {
        ok(
            &mut raw,
            "fs/writeText",
            json!({"path": "shared/target.txt", "content": content, "expect": {"kind": "any"}}),
        );
        writes += 1;
    }
    fs::write(work.join("stop"), "").unwrap();
    let stop_by = Instant::now() + PATIENCE;
    while spy.try_wait().unwrap().is_none() {
        assert!(Instant::now() < stop_by, "the spy did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = fs::read_to_string(work.join("report")).unwrap();
    eprintln!("staging spy: {writes} writes of {} bytes; spy report:\n{report}", content.len());
    let opened: u64 = report.lines().find_map(|l| l.strip_prefix("opened ")).unwrap().parse().unwrap();
    assert_eq!(opened, 0, "another user opened staging files: {report}");
    assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o600);

    // Modes survive a staged write.
    for (name, mode) in [("private.txt", 0o600), ("run.sh", 0o755), ("plain.txt", 0o644)] {
        let path = shared.join(name);
        fs::write(&path, "before\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        ok(
            &mut raw,
            "fs/writeText",
            json!({"path": format!("shared/{name}"), "content": "after\n", "expect": {"kind": "any"}}),
        );
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(
            (fs::read_to_string(&path).unwrap().as_str(), meta.mode() & 0o7777),
            ("after\n", mode),
            "{name}"
        );
    }
    let leftovers: Vec<_> = folder_state(&shared).names.into_iter().filter(|n| n.ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "staging files left behind: {leftovers:?}");
}

// ---------------------------------------------------------------------------------------------
// 10. Leftovers
// ---------------------------------------------------------------------------------------------

/// The first 8 hex digits of this boot's id (as staging names carry it).
fn boot_prefix() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect()
}

/// A user's files that merely look like staging files survive a write into their folder: an
/// old-style name of a dead pid, and a new-style name of a dead creator with another family's
/// token. A real leftover of this family (same token, dead creator) beside them is removed,
/// so the cleaning did run. Before the change any name of the old shape with a dead pid went.
#[test]
fn files_that_only_look_like_leftovers_survive() {
    const TOKEN: &str = "0123456789abcdef";
    let sandbox = Sandbox::new("outside");
    let state = sandbox.base.join("state");
    fs::create_dir_all(state.join("filectx")).unwrap();
    fs::write(state.join("filectx/staging-token"), TOKEN).unwrap();
    let daemon = Daemon::start_configured(&["--no-fsync"], |_, mut command| {
        command.env("XDG_STATE_HOME", &state);
        command
    });
    let mut dead = 999_999;
    while Path::new(&format!("/proc/{dead}")).exists() {
        dead -= 1;
    }
    let boot = boot_prefix();
    let random = "0123456789abcdef0123456789abcdef";
    let old_style = format!(".a.txt.filectx-{dead}-0.tmp");
    let foreign = format!(".a.txt.filectx-fedcba9876543210-{boot}-{dead}-1-{random}.tmp");
    let ours = format!(".a.txt.filectx-{TOKEN}-{boot}-{dead}-1-{random}.tmp");
    for name in [&old_style, &foreign, &ours] {
        fs::write(sandbox.root.join(name), "a user's file\n").unwrap();
    }
    fs::write(sandbox.root.join("a.txt"), INSIDE).unwrap();
    let mut raw = sandbox.session(&daemon);
    ok(&mut raw, "fs/writeText", json!({"path": "a.txt", "content": "written\n", "expect": {"kind": "any"}}));
    assert_eq!(fs::read_to_string(sandbox.root.join("a.txt")).unwrap(), "written\n");
    let by = Instant::now() + PATIENCE;
    while sandbox.root.join(&ours).exists() && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The look-alikes first: they are what the change protects (once the real leftover is
    // gone, the folder has been cleaned).
    for name in [&old_style, &foreign] {
        assert_eq!(
            fs::read_to_string(sandbox.root.join(name)).ok().as_deref(),
            Some("a user's file\n"),
            "{name} was removed"
        );
    }
    assert!(!sandbox.root.join(&ours).exists(), "this family's leftover of a dead daemon was not cleaned");
}
