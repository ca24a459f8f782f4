//! Memory per session under attack (issue 26, #6): one connection with many owners reads
//! thousands of files whose paths are 3.9 KiB long (long folder names make them cheaply). What
//! the session's observations and dedup records hold is bounded in bytes, per session and over
//! all sessions, so the daemon's memory stays bounded however many owners and files a client
//! uses; past a cap the least recently used observations are forgotten (a file then needs a
//! read before an edit, and the refusal says so); once the connection closes the memory comes
//! back to the system.
//!
//! The caps are set small here (8 MiB a session, 12 MiB in all) so that the attack is a few
//! thousand reads; the defaults (32 MiB, 256 MiB) bound the same way. Before the caps, the same
//! client with 24 owners and 2,500 files grew the daemon from 19 MiB to 274 MiB, and nothing
//! came back within 15 s of closing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Raw, fs_error, root_of, rpc};
use serde_json::{Value, json};

/// Owners of the attacking session (the daemon allows 64).
const OWNERS: usize = 8;
/// Files each owner reads, all in one folder whose path is about 3.9 KiB long.
const FILES: usize = 1_000;
/// Requests per batch (the daemon allows 1,024).
const BATCH: usize = 500;
/// The session cap this test sets, in KiB.
const SESSION_CAP_KIB: u64 = 8 * 1024;
/// The daemon-wide cap this test sets, in KiB.
const DAEMON_CAP_KIB: u64 = 12 * 1024;
/// What the daemon may grow by beyond the records' cap: what is shared by path, whatever the
/// owners (the provider's cache of 1,000 files keyed by their 3.9 KiB paths, the watcher's
/// folder), the connection's buffers, and allocator slack. Without the caps the attack grows
/// the daemon by about 40 MiB, twice this.
const SLACK_KIB: u64 = 16 * 1024;

/// A folder about 3.9 KiB long beneath `root` (16 folders of 240 bytes), created.
fn deep_folder(root: &Path) -> PathBuf {
    let mut folder = root.to_path_buf();
    for level in 0..16 {
        folder.push(format!("{level:02}{}", "d".repeat(238)));
    }
    std::fs::create_dir_all(&folder).unwrap();
    assert!(folder.as_os_str().len() > 3_800, "{}", folder.as_os_str().len());
    folder
}

/// Sends one batch of `file/read`s of `(owner, file)` pairs (owner `None`: the default one) and
/// returns the error codes among the answers.
fn read_batch(raw: &mut Raw, reads: &[(Option<usize>, usize)], next_id: &mut u64) -> Vec<String> {
    let batch: Vec<Value> = reads
        .iter()
        .map(|(owner, file)| {
            *next_id += 1;
            let mut params = json!({"path": format!("f{file:05}")});
            if let Some(owner) = owner {
                params["owner"] = json!(format!("o{owner:02}"));
            }
            json!({"jsonrpc": "2.0", "id": *next_id, "method": "file/read", "params": params})
        })
        .collect();
    raw.send(&Value::Array(batch));
    loop {
        let frame = raw.recv();
        if let Value::Array(answers) = frame {
            assert_eq!(answers.len(), reads.len());
            return answers
                .iter()
                .filter(|a| a.get("error").is_some())
                .map(|a| fs_error(a).to_owned())
                .collect();
        }
        // A notification (file/didChange) before the batch's answer: skipped.
        assert!(frame.get("method").is_some(), "{frame}");
    }
}

/// A session rooted at `root` whose relative paths are files of `folder`.
fn session(daemon: &Daemon, root: &Path, folder: &Path) -> Raw {
    let mut raw = Raw::connect(&daemon.socket);
    raw.call(
        "initialize",
        Some(json!({"roots": [root], "cwd": folder, "clientInfo": {"name": "memory-attacker"}})),
    );
    raw
}

fn edit(raw: &mut Raw, owner: Option<&str>, file: &str, old: &str, new: &str) -> Value {
    let mut params = json!({"path": file, "oldString": old, "newString": new});
    if let Some(owner) = owner {
        params["owner"] = json!(owner);
    }
    rpc(raw, "file/edit", params)
}

/// One connection, 8 owners, 1,000 files with 3.9 KiB paths each (8,000 observations, about
/// 33 MiB of path keys if kept): the daemon's resident memory stays within the session cap plus
/// what is shared by path; the status shows the bytes in use within the caps; a file whose
/// record was evicted is refused for editing with a text that says to read it again, then
/// edits after a read. A second session pushes the daemon past its own cap: the larger session
/// gives back, the second keeps its records. Once both close, the memory comes back near the
/// baseline within seconds.
#[test]
fn many_owners_reading_long_paths_stay_within_the_caps_and_give_memory_back() {
    let session_cap = (SESSION_CAP_KIB * 1024).to_string();
    let daemon_cap = (DAEMON_CAP_KIB * 1024).to_string();
    let daemon = Daemon::start(&[
        "--no-fsync",
        "--max-session-observed-bytes",
        &session_cap,
        "--max-observed-bytes",
        &daemon_cap,
    ]);
    let root = root_of(&daemon);
    let folder = deep_folder(&root.join("deep"));
    for file in 0..FILES {
        std::fs::write(folder.join(format!("f{file:05}")), format!("line of file {file}\n")).unwrap();
    }
    // Baseline: the daemon after start-up and one session that read one file.
    let mut probe = session(&daemon, &root, &folder);
    rpc(&mut probe, "file/read", json!({"path": "f00000"}));
    drop(probe);
    std::thread::sleep(Duration::from_millis(300));
    let before = daemon.rss_kib();

    let mut raw = session(&daemon, &root, &folder);
    let started = Instant::now();
    let mut next_id = 1_000;
    let mut peak = before;
    let pairs: Vec<(Option<usize>, usize)> =
        (0..OWNERS).flat_map(|owner| (0..FILES).map(move |file| (Some(owner), file))).collect();
    for chunk in pairs.chunks(BATCH) {
        let failed = read_batch(&mut raw, chunk, &mut next_id);
        assert!(failed.is_empty(), "reads failed: {:?}", &failed[..failed.len().min(5)]);
        peak = peak.max(daemon.rss_kib());
        assert!(started.elapsed() < Duration::from_secs(120), "the attack ran past its deadline");
    }
    let attack = started.elapsed();
    let status = daemon.status();
    eprintln!(
        "attack_memory: {OWNERS} owners × {FILES} files ({} reads) in {:.1} s; daemon RSS {before} KiB before, \
         {peak} KiB peak; observedBytes {} (session cap {}, daemon cap {}), {} evicted",
        OWNERS * FILES,
        attack.as_secs_f64(),
        status["observedBytes"],
        status["maxSessionObservedBytes"],
        status["maxObservedBytes"],
        status["observationsEvicted"],
    );
    assert!(
        peak <= before + SESSION_CAP_KIB + SLACK_KIB,
        "the daemon grew from {before} KiB to {peak} KiB for one session's records"
    );
    let used = status["observedBytes"].as_u64().unwrap_or_else(|| panic!("no observedBytes: {status}"));
    assert_eq!(status["maxSessionObservedBytes"], json!(SESSION_CAP_KIB * 1024), "{status}");
    assert_eq!(status["maxObservedBytes"], json!(DAEMON_CAP_KIB * 1024), "{status}");
    assert!(used > SESSION_CAP_KIB * 1024 / 2 && used <= SESSION_CAP_KIB * 1024, "{status}");
    assert!(status["observationsEvicted"].as_u64().unwrap() > 0, "{status}");

    // The first owner's first reads were the least recently used: evicted. Editing one is
    // refused as not read, with a text that says why and what to do; after a read it edits.
    let response = edit(&mut raw, Some("o00"), "f00000", "line", "LINE");
    assert_eq!(fs_error(&response), "FS_NOT_OBSERVED", "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("dropped") && message.contains("read it again"), "{message}");
    rpc(&mut raw, "file/read", json!({"path": "f00000", "owner": "o00"}));
    let edited = edit(&mut raw, Some("o00"), "f00000", "line", "LINE");
    assert!(edited.get("error").is_none(), "{edited}");

    // A second session: 600 reads take the daemon past its cap; the session holding the most
    // (the first) gives back, and the second keeps what it read.
    let mut second = session(&daemon, &root, &folder);
    let reads: Vec<(Option<usize>, usize)> = (0..600).map(|file| (None, file)).collect();
    for chunk in reads.chunks(BATCH) {
        assert!(read_batch(&mut second, chunk, &mut next_id).is_empty());
        peak = peak.max(daemon.rss_kib());
    }
    let status = daemon.status();
    let held = status["observedBytes"].as_u64().unwrap();
    assert!(held <= DAEMON_CAP_KIB * 1024, "the daemon's cap did not hold: {status}");
    let kept = edit(&mut second, None, "f00001", "line", "LINE");
    assert!(kept.get("error").is_none(), "the smaller session lost its record: {kept}");
    assert!(peak <= before + DAEMON_CAP_KIB + SLACK_KIB, "two sessions grew the daemon to {peak} KiB");

    // The connections close: everything they held goes, and the memory goes back to the
    // system within seconds (not at the next idle sweep, 30 s or more later): at least a
    // quarter of the records' estimated bytes (the estimate counts each path twice, and the
    // owners here share one watcher copy of each path).
    let open = daemon.rss_kib();
    drop((raw, second));
    let deadline = Instant::now() + PATIENCE;
    let (mut after, mut status);
    loop {
        status = daemon.status();
        after = daemon.rss_kib();
        let settled = status["sessions"] == json!(1)
            && status["observedBytes"] == json!(0)
            && status["watchedPaths"] == json!(0);
        if (settled && after + held / 4 / 1024 <= open) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "attack_memory: daemon RSS {peak} KiB at peak, {open} KiB before the connections closed, {after} KiB after \
         (records held {held} bytes); {status}"
    );
    assert_eq!(status["sessions"], json!(1), "{status}");
    assert_eq!(status["observedBytes"], json!(0), "{status}");
    assert_eq!(status["watchedPaths"], json!(0), "{status}");
    assert!(
        after + held / 4 / 1024 <= open,
        "the daemon kept {after} KiB after the sessions ended ({open} KiB before; they held {held} bytes)"
    );
    assert!(after <= before + SLACK_KIB, "the daemon kept {after} KiB (baseline {before} KiB)");
}
