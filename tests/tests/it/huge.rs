//! Huge and sparse files, and fairness between sessions, through the real socket: a read of a
//! file whose first chunk is binary answers `FS_NOT_TEXT` without hashing the rest (the
//! daemon's `hashedBytes` counter shows it), while stat and version checks still hash it all;
//! reads over `--max-hash-bytes` are `FS_TOO_LARGE` and stat answers without a version; one file
//! is never mapped beyond `--max-mapped-bytes`; and one session's many slow requests (the
//! test-only `debug/hold`, which takes a file-work slot like any file method) never keep another
//! session's small read waiting. Nothing here measures time: counts, markers and orders only.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Raw, fs_error, ok, rpc};
use serde_json::json;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

fn s(path: &Path) -> String {
    path.display().to_string()
}

fn hashed(daemon: &Daemon) -> u64 {
    daemon.status()["hashedBytes"].as_u64().unwrap()
}

/// A sparse file of `len` bytes: NUL bytes all the way, no disk space.
fn sparse(path: &Path, len: u64) {
    File::create(path).unwrap().set_len(len).unwrap();
}

/// `lines` lines of text, `line {n}` padded to 64 bytes each.
fn text_lines(lines: u64) -> Vec<u8> {
    (1..=lines).flat_map(|n| format!("{:<63}\n", format!("line {n}")).into_bytes()).collect()
}

#[test]
fn a_read_refuses_a_binary_file_from_its_first_chunk_but_stat_hashes_it_whole() {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path();
    let huge = root.join("huge.img");
    sparse(&huge, 8 * GIB);
    let mut raw = daemon.session();
    let before = hashed(&daemon);

    // Every read path: the first chunk is NUL bytes, so nothing is hashed.
    let response = rpc(&mut raw, "fs/readText", json!({"path": s(&huge)}));
    assert_eq!(fs_error(&response), "FS_NOT_TEXT", "{response}");
    assert!(response["error"]["message"].as_str().unwrap().contains("NUL byte at offset 0"), "{response}");
    assert_eq!(fs_error(&rpc(&mut raw, "file/read", json!({"path": s(&huge)}))), "FS_NOT_TEXT");
    let tool = ok(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": s(&huge)}}));
    assert_eq!(
        (tool["isError"].as_bool(), tool["error"]["code"].as_str()),
        (Some(true), Some("FS_NOT_TEXT"))
    );
    let id = raw.send_request("fs/streamText", Some(json!({"path": s(&huge)})));
    let response = raw.recv();
    assert_eq!((response["id"].as_u64(), fs_error(&response)), (Some(id), "FS_NOT_TEXT"));
    assert_eq!(hashed(&daemon), before, "four reads of an 8 GiB binary file hashed nothing");

    // A character cut by the first chunk's end is not held against a file; a NUL after the
    // first chunk is found by the whole scan, which hashes the file.
    let mut straddle = vec![b'a'; MIB as usize - 1];
    straddle.extend_from_slice("é\n".as_bytes());
    straddle.extend_from_slice(b"second line\n");
    let straddle_path = root.join("straddle.txt");
    fs::write(&straddle_path, &straddle).unwrap();
    let read = ok(&mut raw, "fs/readText", json!({"path": s(&straddle_path), "offset": 2}));
    assert_eq!(read["lines"], json!(["second line"]));
    let late = root.join("late-nul.txt");
    let mut bytes = text_lines(2 * MIB / 64);
    bytes.push(0);
    fs::write(&late, &bytes).unwrap();
    let before = hashed(&daemon);
    let response = rpc(&mut raw, "fs/readText", json!({"path": s(&late)}));
    assert_eq!(fs_error(&response), "FS_NOT_TEXT");
    assert_eq!(hashed(&daemon) - before, bytes.len() as u64, "binary only past the first chunk");

    // Versions still cover binary files: stat hashes all of it, and a write that expects that
    // version goes through (and one that expects another does not).
    let blob = root.join("blob.bin");
    sparse(&blob, 64 * MIB);
    let before = hashed(&daemon);
    let stat = ok(&mut raw, "fs/stat", json!({"path": s(&blob)}));
    let version = stat["version"].as_str().expect("a binary file has a version").to_owned();
    assert_eq!(hashed(&daemon) - before, 64 * MIB, "stat hashed the whole file");
    let file_stat = ok(&mut raw, "file/stat", json!({"path": s(&blob)}));
    assert_eq!(file_stat["version"], json!(version));
    let stale = rpc(
        &mut raw,
        "fs/writeText",
        json!({"path": s(&blob), "content": "x", "expect": {"kind": "replaceIfVersion", "version": "not-a-version"}}),
    );
    assert_eq!(fs_error(&stale), "FS_STALE_VERSION");
    let written = ok(
        &mut raw,
        "fs/writeText",
        json!({"path": s(&blob), "content": "text now\n", "expect": {"kind": "replaceIfVersion", "version": version}}),
    );
    assert_eq!(written["operation"], "update");
    assert_eq!(fs::read(&blob).unwrap(), b"text now\n");
}

#[test]
fn reads_over_the_hash_cap_are_too_large_and_stat_answers_without_a_version() {
    let cap = 32 * MIB;
    let daemon = Daemon::start(&["--max-hash-bytes", &cap.to_string()]);
    let root = daemon.dir.path();
    // Text in its first chunk (so it is not refused as binary), then 39 MiB of hole.
    let big = root.join("big.log");
    let head = text_lines(MIB / 64);
    fs::write(&big, &head).unwrap();
    grow(&big, 40 * MIB);
    let small = root.join("small.txt");
    fs::write(&small, "thirteen byte").unwrap();
    let mut raw = daemon.session();
    let before = hashed(&daemon);

    for method in ["fs/readText", "file/read"] {
        let response = rpc(&mut raw, method, json!({"path": s(&big)}));
        assert_eq!(fs_error(&response), "FS_TOO_LARGE", "{response}");
        let data = &response["error"]["data"];
        assert_eq!(
            (data["size"].as_u64(), data["limit"].as_u64()),
            (Some(40 * MIB), Some(cap)),
            "{response}"
        );
    }
    let tool = ok(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": s(&big)}}));
    assert_eq!(tool["error"]["code"], "FS_TOO_LARGE", "{tool}");
    let stat = ok(&mut raw, "fs/stat", json!({"path": s(&big)}));
    assert_eq!((stat["type"].as_str(), stat["size"].as_u64()), (Some("file"), Some(40 * MIB)), "{stat}");
    assert!(stat["version"].is_null(), "no version over the cap: {stat}");
    let file_stat = ok(&mut raw, "file/stat", json!({"path": s(&big)}));
    assert!(file_stat.get("version").is_none(), "{file_stat}");
    assert_eq!(file_stat["fresh"], false);
    assert_eq!(hashed(&daemon), before, "nothing over the cap was hashed");

    // Below the cap everything is as before.
    let read = ok(&mut raw, "file/read", json!({"path": s(&small)}));
    assert_eq!(read["lines"], json!(["thirteen byte"]));
    assert!(ok(&mut raw, "fs/stat", json!({"path": s(&small)}))["version"].is_string());
    // A write that needs the big file's version cannot check it: refused, file untouched.
    let refused = rpc(
        &mut raw,
        "fs/writeText",
        json!({"path": s(&big), "content": "x", "expect": {"kind": "replaceIfVersion", "version": read["version"]}}),
    );
    assert_eq!(fs_error(&refused), "FS_TOO_LARGE");
    assert_eq!(fs::metadata(&big).unwrap().len(), 40 * MIB);
    let printed = std::process::Command::new(filectx_tests::bin("filectxd"))
        .args(["--print-config", "--config", "/dev/null", "--max-hash-bytes", "1000", "--file-slots", "3"])
        .output()
        .unwrap();
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert!(printed.contains("max_hash_bytes = 1000") && printed.contains("file_slots = 3"), "{printed}");
}

/// Grows a file to `len` bytes with a hole.
fn grow(path: &Path, len: u64) {
    fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

#[test]
fn one_file_is_never_mapped_beyond_the_budget() {
    let budget = 8 * MIB;
    let daemon = Daemon::start(&["--max-mapped-bytes", &budget.to_string()]);
    let root = daemon.dir.path();
    let mapped = |daemon: &Daemon| daemon.status()["mappedBytes"].as_u64().unwrap();
    // 20 MiB: bigger than the whole budget, so read with positional reads.
    let big = root.join("big.txt");
    fs::write(&big, text_lines(20 * MIB / 64)).unwrap();
    let six_a = root.join("six-a.txt");
    let six_b = root.join("six-b.txt");
    fs::write(&six_a, text_lines(6 * MIB / 64)).unwrap();
    fs::write(&six_b, text_lines(6 * MIB / 64)).unwrap();
    let mut raw = daemon.session();

    let last = 20 * MIB / 64;
    let read = ok(&mut raw, "fs/readText", json!({"path": s(&big), "offset": last, "limit": 5}));
    assert_eq!(
        (read["totalLines"].as_u64(), read["lines"][0].as_str()),
        (Some(last), Some(format!("{:<63}", format!("line {last}")).as_str()))
    );
    assert_eq!(mapped(&daemon), 0, "a 20 MiB file is not mapped under an 8 MiB budget");

    // Two 6 MiB files: each fits alone, not both; the older mapping goes to make room.
    ok(&mut raw, "fs/readText", json!({"path": s(&six_a), "limit": 1}));
    assert_eq!(mapped(&daemon), 6 * MIB);
    let read = ok(&mut raw, "fs/readText", json!({"path": s(&six_b), "offset": 98_304, "limit": 1}));
    assert_eq!(read["lines"][0].as_str().map(str::trim_end), Some("line 98304"));
    assert_eq!(mapped(&daemon), 6 * MIB, "never both at once");
    let read = ok(&mut raw, "fs/readText", json!({"path": s(&six_a), "offset": 2, "limit": 1}));
    assert_eq!(read["lines"][0].as_str().map(str::trim_end), Some("line 2"));
    assert!(mapped(&daemon) <= budget);
    // The big one still reads, from the middle too.
    let read = ok(&mut raw, "fs/readText", json!({"path": s(&big), "offset": 200_000, "limit": 1}));
    assert_eq!(read["lines"][0].as_str().map(str::trim_end), Some("line 200000"));
    assert!(mapped(&daemon) <= budget);
}

// ----- Fairness ------------------------------------------------------------------------------

fn hooked(extra: &[&str]) -> Daemon {
    Daemon::start_configured(extra, |_, mut command| {
        command.env("FILECTX_TEST_HOOKS", "1");
        command
    })
}

/// Waits until `cond` holds (it must, promptly); panics with `what` otherwise.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn started(gates: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(gates)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".started").map(str::to_owned))
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

fn release(gates: &Path, name: &str) {
    File::create(gates.join(format!("{name}.go"))).unwrap().flush().unwrap();
}

fn slots(daemon: &Daemon) -> (u64, u64) {
    let status = daemon.status();
    (status["fileSlotsBusy"].as_u64().unwrap(), status["fileSlotsWaiting"].as_u64().unwrap())
}

/// The names answered by `n` `debug/hold` responses on `raw`.
fn answers(raw: &mut Raw, n: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..n)
        .map(|_| {
            let response = raw.recv();
            assert!(response.get("error").is_none(), "{response}");
            response["result"].as_str().unwrap().to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn one_sessions_slow_requests_never_keep_another_sessions_read_waiting() {
    let daemon = hooked(&["--file-slots", "4"]);
    let root = daemon.dir.path();
    let gates: PathBuf = root.join("gates");
    fs::create_dir(&gates).unwrap();
    let small = root.join("small.txt");
    fs::write(&small, "thirteen byte").unwrap();
    assert_eq!(daemon.status()["fileSlots"], 4);

    // Session a: seven slow requests. It may hold 3 of the 4 slots; 4 wait.
    let mut a = daemon.session();
    let a_names: Vec<String> = (0..7).map(|i| format!("a{i}")).collect();
    for name in &a_names {
        a.send_request("debug/hold", Some(json!({"dir": gates, "name": name})));
    }
    until("a holds 3 slots and 4 of its requests wait", || slots(&daemon) == (3, 4));
    until("a's 3 running requests started", || started(&gates, "a").len() == 3);

    // Session b's small read (cold: it needs a slot) and a stream are served meanwhile.
    let mut b = daemon.session();
    let read = ok(&mut b, "file/read", json!({"path": s(&small)}));
    assert_eq!(read["lines"], json!(["thirteen byte"]));
    let id = b.send_request("fs/streamText", Some(json!({"path": s(&small)})));
    let accepted = b.recv();
    assert_eq!(accepted["id"].as_u64(), Some(id), "{accepted}");
    assert!(accepted.get("error").is_none(), "{accepted}");
    let chunk = b.expect_notification("fs/textChunk", PATIENCE);
    assert_eq!(
        (chunk["result"]["lines"].clone(), chunk["result"]["done"].as_bool()),
        (json!(["thirteen byte"]), Some(true))
    );
    assert!(a.recv_within(Duration::from_millis(1)).is_none(), "none of a's requests finished");
    assert_eq!(started(&gates, "a").len(), 3, "none of a's waiting requests took b's slot after it");
    assert_eq!(slots(&daemon), (3, 4));

    // Session c floods too: it takes the spare slot, then waits. When one of a's slots frees,
    // c (1 slot, under its share of 2) goes before a's four older requests (a holds 2).
    let mut c = daemon.session();
    for name in ["c0", "c1"] {
        c.send_request("debug/hold", Some(json!({"dir": gates, "name": name})));
    }
    until("one of c's requests runs and the other waits", || slots(&daemon) == (4, 5));
    until("c's running request started", || started(&gates, "c").len() == 1);
    let first_a = started(&gates, "a")[0].clone();
    release(&gates, &first_a);
    assert_eq!(answers(&mut a, 1), std::slice::from_ref(&first_a));
    until("c1 got the freed slot", || started(&gates, "c").len() == 2);
    assert_eq!(started(&gates, "a").len(), 3, "a's waiting requests stayed behind c's");
    assert_eq!(slots(&daemon), (4, 4));

    // Let everything go: every request is answered once and the slots are all free again.
    for name in a_names.iter().map(String::as_str).chain(["c0", "c1"]) {
        release(&gates, name);
    }
    let mut rest = a_names.clone();
    rest.retain(|n| *n != first_a);
    assert_eq!(answers(&mut a, 6), rest);
    assert_eq!(answers(&mut c, 2), ["c0", "c1"]);
    assert_eq!(slots(&daemon), (0, 0));
}

/// The model's `edit` runs as `file/edit` does: a small edit of a local file is made at once
/// when writes are not fsynced, with no file slot, and so is its refusal as not read (which shows the small file, read at
/// once too). A stale edit needs the pool (its answer reads the current file): it waits for a
/// slot, and is answered once one frees.
#[test]
fn the_edit_tool_is_made_at_once_as_file_edit_is() {
    let daemon = hooked(&["--file-slots", "1", "--no-fsync"]);
    let root = daemon.dir.path();
    let gates: PathBuf = root.join("gates");
    fs::create_dir(&gates).unwrap();
    let (mine, unread) = (root.join("mine.py"), root.join("unread.py"));
    fs::write(&mine, "x = 1\n").unwrap();
    fs::write(&unread, "y = 2\n").unwrap();

    let mut agent = daemon.session();
    assert!(filectx_tests::tool_ok(&mut agent, "read", json!({"file_path": s(&mine)})).contains("x = 1"));
    // The folder's first edit cleans it of leftovers (on the pool); later ones may be at once.
    let first = json!({"file_path": s(&mine), "old_string": "x = 1", "new_string": "x = 2"});
    filectx_tests::tool_ok(&mut agent, "edit", first);

    // Another session holds the only file slot.
    let mut holder = daemon.session();
    holder.send_request("debug/hold", Some(json!({"dir": gates, "name": "h"})));
    until("the slot is held", || started(&gates, "h").len() == 1);
    assert_eq!(slots(&daemon), (1, 0));

    let edited = filectx_tests::tool_ok(
        &mut agent,
        "edit",
        json!({"file_path": s(&mine), "old_string": "x = 2", "new_string": "x = 3"}),
    );
    assert!(edited.contains("mine.py"), "{edited}");
    assert_eq!(fs::read_to_string(&mine).unwrap(), "x = 3\n");
    let (code, text) = filectx_tests::tool_err(
        &mut agent,
        "edit",
        json!({"file_path": s(&unread), "old_string": "y = 2", "new_string": "y = 4"}),
    );
    assert_eq!(code, "FS_NOT_OBSERVED");
    assert!(text.contains("y = 2"), "the small unread file is shown: {text}");
    assert_eq!(slots(&daemon), (1, 0), "neither took a slot or waited for one");

    // Changed outside: the stale edit waits for the slot, then is refused with what changed.
    fs::write(&mine, "x = 5\n").unwrap();
    let id =
        agent.send_tool("edit", json!({"file_path": s(&mine), "old_string": "x = 3", "new_string": "x = 6"}));
    until("the stale edit waits for the slot", || slots(&daemon) == (1, 1));
    release(&gates, "h");
    assert_eq!(answers(&mut holder, 1), ["h"]);
    let stale = agent.response(id);
    assert_eq!(stale["result"]["isError"], true, "{stale}");
    assert!(filectx_tests::tool_text(&stale["result"]).contains("x = 5"), "{stale}");
    assert_eq!(fs::read_to_string(&mine).unwrap(), "x = 5\n");
}

/// `fs/readText` and `fs/editText` start the operations `file/read` and `file/edit` start, and
/// run as they do: a small file is read, and a small edit of a local file made, at once, with no
/// file slot. An edit against a version the file is not at, or one that is no version at all
/// (its refusal names the current version, which may take hashing the file), needs the pool:
/// it waits for a slot, and is refused once one frees.
#[test]
fn fs_read_text_and_fs_edit_text_run_at_once_as_file_read_and_file_edit_do() {
    let daemon = hooked(&["--file-slots", "1", "--no-fsync"]);
    let root = daemon.dir.path();
    let gates: PathBuf = root.join("gates");
    fs::create_dir(&gates).unwrap();
    let file = root.join("plain.txt");
    fs::write(&file, "a = 1\n").unwrap();

    let mut agent = daemon.session();
    let read = agent.call("fs/readText", Some(json!({"path": s(&file)})));
    // The folder's first edit cleans it of leftovers (on the pool); later ones may be at once.
    let params = json!({"path": s(&file), "oldString": "a = 1", "newString": "a = 2", "expectedVersion": read["version"]});
    let edited = agent.call("fs/editText", Some(params));

    // Another session holds the only file slot.
    let mut holder = daemon.session();
    holder.send_request("debug/hold", Some(json!({"dir": gates, "name": "h"})));
    until("the slot is held", || started(&gates, "h").len() == 1);
    assert_eq!(slots(&daemon), (1, 0));

    let read = agent.call("fs/readText", Some(json!({"path": s(&file)})));
    assert_eq!(read["lines"], json!(["a = 2"]), "{read}");
    assert_eq!(read["version"], edited["version"], "{read}");
    let params = json!({"path": s(&file), "oldString": "a = 2", "newString": "a = 3", "expectedVersion": read["version"]});
    let again = agent.call("fs/editText", Some(params));
    assert_eq!(fs::read_to_string(&file).unwrap(), "a = 3\n");
    assert_eq!(slots(&daemon), (1, 0), "neither took a slot or waited for one");

    // Against an old version, and against no version: each waits for the slot, then is refused.
    for (expected, hold) in [(read["version"].clone(), "h"), (json!("not-a-version"), "h2")] {
        if hold != "h" {
            holder.send_request("debug/hold", Some(json!({"dir": gates, "name": hold})));
            until("the slot is held again", || started(&gates, hold).len() == 1);
        }
        let params = json!({"path": s(&file), "oldString": "a = 3", "newString": "a = 4", "expectedVersion": expected});
        let id = agent.send_request("fs/editText", Some(params));
        until("the stale edit waits for the slot", || slots(&daemon) == (1, 1));
        release(&gates, hold);
        assert_eq!(answers(&mut holder, 1), [hold]);
        let refused = agent.response(id);
        assert_eq!(filectx_tests::fs_error(&refused), "FS_STALE_VERSION", "{refused}");
        assert_eq!(refused["error"]["data"]["currentVersion"], again["version"], "{refused}");
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "a = 3\n");
}
