//! Searches under attack from inside a root: ignore files that are FIFOs, links to `/dev/zero`,
//! `/dev/urandom` or to files outside the roots, a `.git` that points outside, a searched folder
//! swapped for a link to outside while it is walked, filters retired mid-grep while files come
//! and go, and the daemon's share of the user's inotify watches. Each test plays the attacker
//! against the real daemon and asserts what a user would notice: an answer that comes, the same
//! answer as without the attack, no outside file listed, counted or read, memory that stays put.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, Raw, ok, root_of};
use serde_json::{Value, json};

use super::search::{project, put, session};

/// How long an answer may take before the test calls it a hang (every answer here takes
/// milliseconds when nothing holds it).
const PROMPT: Duration = Duration::from_secs(5);

/// The answer to request `id`, which must begin to arrive within `within`; notifications are
/// skipped.
fn answer_within(raw: &mut Raw, id: u64, within: Duration, what: &str) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let frame =
            raw.recv_before(deadline).unwrap_or_else(|| panic!("{what}: no answer within {within:?}"));
        if frame.get("id") == Some(&json!(id)) {
            return frame;
        }
        assert!(frame.get("id").is_none(), "{what}: an answer to another request: {frame}");
    }
}

/// The answer to request `id`, the next frame, which must come within [`PROMPT`] while the
/// daemon's resident memory stays below `before_kib + growth_kib` (looked at every 20 ms until
/// it comes).
fn answer_below(
    daemon: &Daemon,
    raw: &mut Raw,
    id: u64,
    before_kib: u64,
    growth_kib: u64,
    what: &str,
) -> Value {
    let deadline = Instant::now() + PROMPT;
    let answer = loop {
        if let Some(frame) = raw.recv_within(Duration::from_millis(20)) {
            break frame;
        }
        let rss = daemon.rss_kib();
        assert!(
            rss < before_kib + growth_kib,
            "{what}: the daemon grew from {} MiB to {} MiB",
            before_kib / 1024,
            rss / 1024
        );
        assert!(Instant::now() < deadline, "{what}: no answer within {PROMPT:?}");
    };
    assert_eq!(answer["id"], json!(id), "{answer}");
    answer
}

/// The text of a successful tools/call answer.
fn tool_text(answer: &Value, what: &str) -> String {
    assert!(answer.get("error").is_none(), "{what}: {answer}");
    let result = &answer["result"];
    assert_eq!(result["isError"], false, "{what}: {answer}");
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

/// A tools/call that must answer (successfully) within [`PROMPT`].
fn prompt_text(raw: &mut Raw, name: &str, arguments: Value) -> String {
    let what = format!("{name} {arguments}");
    let id = raw.send_tool(name, arguments);
    let answer = answer_within(raw, id, PROMPT, &what);
    tool_text(&answer, &what)
}

fn sorted(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort_unstable();
    lines
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from(0o644), 0)
        .unwrap();
}

/// Ignore files that are FIFOs (nobody ever writes them) are not ignore files: a search over
/// them answers at once, and searches from two sessions over them never hold the file-work
/// slots another session's read needs.
#[test]
fn fifo_ignore_files_neither_hang_searches_nor_stall_other_sessions() {
    let daemon = Daemon::start(&["--file-slots", "4"]);
    let (root, _) = project(&daemon);
    put(&root, &[("src/a.rs", "needle\n"), ("sub/inner/b.rs", "needle\n"), ("big.txt", "")]);
    // Over 64 KiB: the third session's read is file work, which needs a slot.
    fs::write(root.join("big.txt"), "line\n".repeat(20_000)).unwrap();
    fs::create_dir_all(root.join(".git/info")).unwrap();
    mkfifo(&root.join(".gitignore"));
    mkfifo(&root.join("sub/.ignore"));
    mkfifo(&root.join(".git/info/exclude"));

    // Two sessions send greps one after the other without waiting: the root's, and a
    // subfolder's (whose parents' ignore files are read too).
    let mut attackers = [session(&daemon, &root), session(&daemon, &root)];
    let mut sent = [Vec::new(), Vec::new()];
    for (raw, ids) in attackers.iter_mut().zip(&mut sent) {
        for k in 0..4 {
            let path = if k % 2 == 0 { "." } else { "sub/inner" };
            ids.push(raw.send_tool("grep", json!({"pattern": "needle", "path": path})));
        }
    }
    // Another session's read is served meanwhile.
    let mut reader = session(&daemon, &root);
    let id = reader.send_tool("read", json!({"file_path": root.join("big.txt"), "limit": 2}));
    let answer = answer_within(&mut reader, id, PROMPT, "a read while greps meet FIFO ignore files");
    assert!(tool_text(&answer, "read").contains("line"), "{answer}");
    // Every grep answers (in any order), with the files a FIFO cannot change.
    for (raw, mut ids) in attackers.iter_mut().zip(sent) {
        let deadline = Instant::now() + PROMPT;
        while !ids.is_empty() {
            let answer = raw.recv_before(deadline).expect("a grep over FIFO ignore files answers");
            let id = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
            assert!(ids.contains(&id), "{answer}");
            ids.retain(|&sent| sent != id);
            let text = tool_text(&answer, "grep");
            assert!(text.contains("b.rs"), "{text}");
        }
    }
    assert_eq!(
        sorted(&prompt_text(&mut reader, "glob", json!({"pattern": "**/*.rs"}))),
        ["src/a.rs", "sub/inner/b.rs"]
    );
    assert_eq!(daemon.status()["fileSlotsBusy"], 0, "no slot is left held by a FIFO");
}

/// An ignore file that is a link to `/dev/zero` is never read: the daemon's memory stays where
/// it was (it used to grow by gigabytes in seconds, one endless line).
#[test]
fn an_ignore_file_linked_to_dev_zero_costs_no_memory() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("src/a.rs", "needle\n"), ("deep/er/b.rs", "needle\n")]);
    symlink("/dev/zero", root.join(".gitignore")).unwrap();
    symlink("/dev/zero", root.join("deep/.ignore")).unwrap();
    let mut raw = session(&daemon, &root);
    let before = daemon.rss_kib();
    for (arguments, expected) in [
        (json!({"pattern": "**/*.rs"}), vec!["deep/er/b.rs", "src/a.rs"]),
        (json!({"pattern": "**/*.rs", "path": "deep/er"}), vec!["deep/er/b.rs"]),
    ] {
        let id = raw.send_tool("glob", arguments.clone());
        let what = format!("glob {arguments} over /dev/zero");
        let answer = answer_below(&daemon, &mut raw, id, before, 128 * 1024, &what);
        assert_eq!(sorted(&tool_text(&answer, "glob")), expected, "{arguments}");
    }
    let after = daemon.rss_kib();
    assert!(after < before + 64 * 1024, "RSS went from {} KiB to {} KiB", before, after);
}

/// An ignore file that is a link to `/dev/urandom` (an endless stream of short "lines") is never
/// read: a search answers at once, and a cancelled one frees its slot.
#[test]
fn an_ignore_file_linked_to_dev_urandom_neither_pins_a_slot_nor_ignores_cancellation() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    put(&root, &[("src/a.rs", "needle\n"), ("src/b.txt", "needle\n")]);
    symlink("/dev/urandom", root.join(".gitignore")).unwrap();
    let mut raw = session(&daemon, &root);
    // Cancelled at once: answered (cancelled, or done already) within the deadline.
    let id = raw.send_tool("grep", json!({"pattern": "needle"}));
    raw.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let answer = answer_within(&mut raw, id, PROMPT, "a cancelled grep over /dev/urandom rules");
    let result = &answer["result"];
    assert!(
        result["isError"] == false || result["error"]["code"] == "FS_ABORTED",
        "either its answer or its cancellation: {answer}"
    );
    let deadline = Instant::now() + PROMPT;
    while daemon.status()["fileSlotsBusy"] != 0 {
        assert!(Instant::now() < deadline, "a slot stays busy after the cancelled grep");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Not cancelled: the answer comes, with every file (no random rule applied).
    assert_eq!(
        sorted(&prompt_text(&mut raw, "grep", json!({"pattern": "needle"}))),
        ["src/a.rs", "src/b.txt"]
    );
}

/// The files a session sees in a tree, as `glob **/*` lists them (relative to the root).
fn listed(raw: &mut Raw, path: &str) -> Vec<String> {
    let text = prompt_text(raw, "glob", json!({"pattern": "**/*", "path": path}));
    if text == "No files found" { Vec::new() } else { sorted(&text) }
}

/// Each folder of `paths` lists for `raw` the files it lists for `control` (a session of the
/// same tree without the attack), and some.
fn assert_lists_alike(raw: &mut Raw, control: &mut Raw, paths: &[&str]) {
    for path in paths {
        let expected = listed(control, path);
        assert!(!expected.is_empty(), "{path}");
        assert_eq!(listed(raw, path), expected, "a search of {path:?}");
    }
}

/// Ignore files full of wildcard patterns (each compiles to up to 15 KiB, and a nested chain of
/// them is in force at once) cost the daemon a bounded amount of memory: past the walk's budget
/// of compiled rules a file gives none, and the answer lists the files it would have hidden.
#[test]
fn ignore_files_full_of_wildcards_cost_bounded_memory() {
    let daemon = Daemon::start(&[]);
    let (root, _) = project(&daemon);
    // 900 wildcard lines (about 13 MiB compiled each: globset compiles one regex per glob that
    // needs a given extension), in twelve nested folders.
    let rules: String = (0..900).map(|i| format!("w{i}/*.q\n")).collect();
    let mut folder = root.clone();
    for depth in 0..12 {
        put(&folder, &[("f.txt", "x\n")]);
        fs::write(folder.join(".gitignore"), &rules).unwrap();
        folder = folder.join(format!("d{depth}"));
    }
    put(&folder, &[("f.txt", "x\n")]);
    put(&root, &[("w1/hidden-by-the-root.q", "x\n")]);
    let mut raw = session(&daemon, &root);
    let before = daemon.rss_kib();
    let id = raw.send_tool("glob", json!({"pattern": "**/*"}));
    let answer = answer_below(&daemon, &mut raw, id, before, 96 * 1024, "compiling ignore rules");
    let listed = sorted(&tool_text(&answer, "glob"));
    // The root's rules apply (they fit); the thirteen f.txt are listed.
    assert_eq!(listed.len(), 13, "{listed:?}");
    assert!(listed.iter().all(|path| path.ends_with("f.txt")), "{listed:?}");
    assert!(daemon.rss_kib() < before + 96 * 1024);
    assert!(
        daemon.log_text().contains("holds more rules than one search takes at once"),
        "{}",
        daemon.log_text()
    );
}

/// Ignore files that are links to a file outside the roots are not read: its lines never
/// become rules (which would tell a session, by what a search leaves out, what the outside file
/// says). The answers are those of the same tree without the links.
#[test]
fn ignore_files_linked_outside_the_roots_give_no_rules() {
    let daemon = Daemon::start(&[]);
    let (root, outside) = project(&daemon);
    let control = root_of(&daemon).join("control");
    let tree = [
        ("keep.txt", "x\n"),
        ("src/a.rs", "x\n"),
        ("sub/b.rs", "x\n"),
        ("sub/inner/c.rs", "x\n"),
        ("deep/er/d.rs", "x\n"),
        ("deep/er/est/e.rs", "x\n"),
    ];
    put(&root, &tree);
    put(&control, &tree);
    put(&outside, &[("rules", "*.rs\n")]);
    // Absolute and relative links, at the root, in a walked folder and on the way to one.
    symlink(outside.join("rules"), root.join(".gitignore")).unwrap();
    symlink(outside.join("rules"), root.join("sub/.ignore")).unwrap();
    symlink("../../../outside/rules", root.join("deep/er/.gitignore")).unwrap();
    let mut raw = session(&daemon, &root);
    let mut seen = session(&daemon, &control);
    assert_lists_alike(&mut raw, &mut seen, &[".", "sub", "sub/inner", "deep/er/est", "deep"]);
    let grep = prompt_text(&mut raw, "grep", json!({"pattern": "x", "output_mode": "count"}));
    assert_eq!(grep.lines().count(), tree.len(), "{grep}");
}

/// A `.git` that points outside the roots (a link to a folder, a `.git` file naming a git dir,
/// a link in place of `.git/info` or `.git/info/exclude`) is never followed: no outside
/// `info/exclude` becomes rules.
#[test]
fn a_dot_git_pointing_outside_is_never_followed() {
    let daemon = Daemon::start(&[]);
    let (root, outside) = project(&daemon);
    let control = root_of(&daemon).join("control");
    let tree = [
        ("v1/x.rs", "x\n"),
        ("v1/sub/y.rs", "x\n"),
        ("v2/x.rs", "x\n"),
        ("v3/x.rs", "x\n"),
        ("v4/x.rs", "x\n"),
        ("v4/sub/y.rs", "x\n"),
        ("plain.txt", "x\n"),
    ];
    put(&root, &tree);
    put(&control, &tree);
    put(&outside, &[("gitdir/info/exclude", "*.rs\n"), ("wt/commondir", "../gitdir\n"), ("rules", "*.rs\n")]);
    symlink(outside.join("gitdir"), root.join("v1/.git")).unwrap();
    fs::write(root.join("v2/.git"), format!("gitdir: {}\n", outside.join("wt").display())).unwrap();
    fs::create_dir_all(root.join("v3/.git")).unwrap();
    symlink(outside.join("gitdir/info"), root.join("v3/.git/info")).unwrap();
    fs::create_dir_all(root.join("v4/.git/info")).unwrap();
    symlink(outside.join("rules"), root.join("v4/.git/info/exclude")).unwrap();
    let mut raw = session(&daemon, &root);
    let mut seen = session(&daemon, &control);
    assert_lists_alike(&mut raw, &mut seen, &[".", "v1", "v1/sub", "v2", "v3", "v4", "v4/sub"]);
}

/// The unreadable-files count in a grep answer's footer (0 without one).
fn unreadable(text: &str) -> usize {
    text.split("\n\n(")
        .find_map(|footer| footer.strip_suffix(" files could not be read and were skipped.)"))
        .map_or(0, |n| n.parse().unwrap())
}

/// A folder swapped for a link to outside while searches walk it (in a loop, by a process in
/// the root): no outside file is ever listed, shown, or counted in a footer.
#[test]
fn a_folder_swapped_for_a_link_outside_mid_search_shows_nothing_outside() {
    let daemon = Daemon::start(&[]);
    let (root, outside) = project(&daemon);
    put(&root, &[("tree/keep.rs", "needle in\n"), ("tree/sub/in.rs", "needle in\n")]);
    for n in 0..40 {
        put(&outside, &[(&format!("big/out_{n}.rs"), "needle out\n")]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), root.clone(), outside.clone());
        std::thread::spawn(move || {
            let (sub, away) = (root.join("tree/sub"), root.join("tree/sub.away"));
            // A name of a kept listing that is a file, then a link to outside, then new again.
            let (flip, staged) = (root.join("tree/flip.rs"), root.join("tree/flip.staged"));
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                fs::rename(&sub, &away).unwrap();
                symlink(outside.join("big"), &sub).unwrap();
                fs::write(&staged, "needle in\n").unwrap();
                fs::rename(&staged, &flip).unwrap();
                std::thread::yield_now();
                fs::remove_file(&sub).unwrap();
                fs::rename(&away, &sub).unwrap();
                symlink(outside.join("big/out_0.rs"), &staged).unwrap();
                fs::rename(&staged, &flip).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let mut raw = session(&daemon, &root);
    let started = Instant::now();
    let mut searches = 0;
    let mut worst = 0;
    while started.elapsed() < Duration::from_secs(3) && searches < 400 {
        let (name, arguments) = match searches % 4 {
            0 => ("grep", json!({"pattern": "needle", "path": "tree"})),
            1 => ("grep", json!({"pattern": "needle", "output_mode": "count"})),
            2 => ("grep", json!({"pattern": "needle", "output_mode": "content", "path": "tree"})),
            _ => ("glob", json!({"pattern": "**/*", "path": "tree"})),
        };
        let text = prompt_text(&mut raw, name, arguments.clone());
        assert!(!text.contains("out"), "{name} {arguments} showed an outside file:\n{text}");
        // A name gone, or that is a link by turns, is no file to search: nothing is counted.
        let count = unreadable(&text);
        worst = worst.max(count);
        assert_eq!(count, 0, "{name} {arguments} counted files that are gone or outside:\n{text}");
        searches += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the folder was swapped {swaps} times only");
    eprintln!("{searches} searches during {swaps} swaps; at most {worst} unreadable files counted");
}

/// The searched folder itself swapped for a link to an outside folder holding files of the same
/// names, after its listing was kept: the grep shows and counts none of them.
#[test]
fn a_searched_folder_swapped_for_a_link_outside_counts_nothing() {
    let daemon = Daemon::start(&[]);
    let (root, outside) = project(&daemon);
    let names: Vec<String> = (0..12).map(|n| format!("tree/f{n:02}.rs")).collect();
    let inside: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "needle in\n")).collect();
    put(&root, &inside);
    let away: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "needle out\n")).collect();
    put(&outside, &away);
    let mut raw = session(&daemon, &root);
    for _ in 0..2 {
        let text = prompt_text(&mut raw, "grep", json!({"pattern": "needle", "path": "tree"}));
        assert!(text.contains("f11.rs"), "{text}");
    }
    fs::rename(root.join("tree"), root.join("tree.away")).unwrap();
    symlink(outside.join("tree"), root.join("tree")).unwrap();
    for mode in ["files_with_matches", "content", "count"] {
        let text = prompt_text(&mut raw, "grep", json!({"pattern": "needle", "output_mode": mode}));
        assert!(!text.contains("out"), "{mode}: an outside file shown:\n{text}");
        assert_eq!(unreadable(&text), 0, "{mode}: outside files counted:\n{text}");
    }
}

/// Greps of a warm listing while files are added and removed in it (each change taken in as a
/// new list with new filters, the old ones retired under a running grep) always answer: never
/// an internal error.
#[test]
fn greps_whose_filters_are_retired_midway_always_answer() {
    // Each grep pauses between its listing and its use of the listing's filters, as a grep on a
    // busy machine does: the change that drops the listing comes right then.
    let daemon = Daemon::start_failing("search::listed=sleep(20)");
    let (root, _) = project(&daemon);
    for n in 0..50 {
        put(&root, &[(&format!("f{n:02}.txt"), "a needle in a haystack\n")]);
    }
    let mut raw = session(&daemon, &root);
    // Warm, with filters built.
    for _ in 0..3 {
        prompt_text(&mut raw, "grep", json!({"pattern": "needle"}));
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let path = root.join(format!("churn{}.txt", n % 8));
                if n.is_multiple_of(2) {
                    fs::write(&path, "needle\n").unwrap();
                } else {
                    let _ = fs::remove_file(&path);
                }
                n += 1;
                // Apart, so that most walks finish unspoiled (their listing is kept, filters and
                // all) and the next change drops it under the grep using it.
                std::thread::sleep(Duration::from_millis(12));
            }
        })
    };
    let started = Instant::now();
    let mut greps = 0u32;
    while started.elapsed() < Duration::from_secs(3) && greps < 100 {
        let arguments = json!({"pattern": if greps.is_multiple_of(2) { "needle" } else { "haystack" }});
        let id = raw.send_tool("grep", arguments.clone());
        let answer = answer_within(&mut raw, id, PROMPT, "a grep while files come and go");
        let text = tool_text(&answer, &format!("grep {arguments} (number {greps})"));
        assert!(text.contains("f49.txt"), "{text}");
        greps += 1;
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    let log = daemon.log_text();
    assert!(!log.contains("panicked"), "a search panicked:\n{log}");
    eprintln!("{greps} greps while files came and went");
}

/// inotify watches the daemon holds now, as the kernel counts them (`/proc/<pid>/fdinfo`).
fn kernel_watches(daemon: &Daemon) -> usize {
    let dir = format!("/proc/{}/fdinfo", daemon.pid());
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| fs::read_to_string(entry.unwrap().path()).ok())
        .map(|info| info.lines().filter(|line| line.starts_with("inotify wd:")).count())
        .sum()
}

/// The daemon holds at most its cap of the user's inotify watches, listings and the watcher
/// together; a listing that would need more is not kept (its searches walk cold and answer
/// right), and files read in folders it could not watch are still checked when next used.
/// `daemon/status` shows the watches held and the cap; the log says so once.
#[test]
fn the_daemons_share_of_inotify_watches_is_capped() {
    let daemon = Daemon::start(&["--max-watches", "40"]);
    let (root, _) = project(&daemon);
    for n in 0..60 {
        put(&root, &[(&format!("d{n:02}/f.txt"), "needle\n")]);
    }
    let mut raw = session(&daemon, &root);
    let count = |raw: &mut Raw| prompt_text(raw, "grep", json!({"pattern": "needle"})).lines().count();
    for _ in 0..3 {
        assert_eq!(count(&mut raw), 60);
    }
    let status = daemon.status();
    assert_eq!(status["watchesCap"], 40, "{status}");
    assert!(status["watchesHeld"].as_u64().unwrap() <= 40, "{status}");
    assert_eq!(status["cachedListings"], 0, "a listing of 61 folders does not fit 40 watches: {status}");
    assert!(kernel_watches(&daemon) <= 40, "the kernel counts {} watches", kernel_watches(&daemon));
    // Cold, but right: a new file is found at once.
    put(&root, &[("d07/new.txt", "needle\n")]);
    assert_eq!(count(&mut raw), 61);

    // The watcher shares the cap: reading files in 60 folders watches at most what is left.
    for n in 0..60 {
        let path = root.join(format!("d{n:02}/f.txt"));
        let answer = prompt_text(&mut raw, "read", json!({"file_path": path}));
        assert!(answer.contains("needle"), "{answer}");
    }
    let status = daemon.status();
    let held = status["watchesHeld"].as_u64().unwrap();
    assert!(held > 0 && held <= 40, "{status}");
    assert!(kernel_watches(&daemon) <= 40, "the kernel counts {} watches", kernel_watches(&daemon));
    // Files whose folders are not watched are still checked when used: changed behind the
    // daemon's back, every edit is refused as stale.
    for n in 0..60 {
        fs::write(root.join(format!("d{n:02}/f.txt")), "needle changed\n").unwrap();
    }
    for n in (0..60).step_by(6) {
        let path = root.join(format!("d{n:02}/f.txt"));
        let result = ok(
            &mut raw,
            "tools/call",
            json!({"name": "edit", "arguments": {"file_path": path, "old_string": "needle", "new_string": "pin"}}),
        );
        assert_eq!(result["isError"], true, "{path:?}: {result}");
        assert_eq!(result["error"]["code"], "FS_STALE_VERSION", "{path:?}: {result}");
    }
    let log = daemon.log_text();
    assert_eq!(log.matches("share of inotify watches").count(), 1, "said once:\n{log}");
}
