//! Attacks on what the daemon stores and what it holds open (issue 26, classes 4 and 5): a
//! full disk, a quota and kill -9 in the middle of the in-place rewrite of a file with several
//! hard links (old or new content, never a mix, under both names), and clients that try to
//! take every file descriptor (many roots, many connections, a daemon already out of them):
//! other sessions keep reading and writing, new connections are answered, and what cannot be
//! had is refused with a clear error.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use filectx_tests::skip::skip;
use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, root_of, rpc, without_deny_rules};
use serde_json::{Value, json};

use super::faults::{NO_MOUNT_NAMESPACE, can_unshare_mounts, names, seen_by, unshared};

/// About 8 KiB of old content, with a marker in the middle for edits.
fn old_text() -> String {
    let lines: String =
        (0..120).map(|n| format!("old line {n:04} of the file that has two names\n")).collect();
    format!("{lines}MARKER-OLD\n{lines}")
}

/// About 64 KiB of new content: much more than the old.
fn new_text() -> String {
    (0..1400).map(|n| format!("new line {n:04}, longer than the old content was\n")).collect()
}

/// Starts a daemon inside a private mount namespace: `prepare` fills its temp folder first (from
/// this process), then `setup` runs there (shell, `$1` is the temp folder).
fn start_unshared_with(prepare: impl FnOnce(&Path), setup: &str) -> Daemon {
    // In-place writes of hard-linked files happen only where no deny rule applies.
    Daemon::start_configured(&[], |dir, filectxd| {
        let filectxd = without_deny_rules(dir, filectxd);
        prepare(dir);
        unshared(dir, &filectxd, setup)
    })
}

/// Both names of the linked file hold exactly `expected`, are still one file (same inode, two
/// links), and the folder holds nothing but `names_left` (no copy or temporary file behind).
fn assert_one_file_holding(view: &Path, expected: &str, names_left: &[&str], when: &str) {
    let (keep, twin) = (view.join("keep.txt"), view.join("twin.txt"));
    for path in [&keep, &twin] {
        let content = std::fs::read_to_string(path).unwrap();
        assert!(
            content == expected,
            "{when}: {} holds {} bytes, not the {} expected (starts {:?})",
            path.display(),
            content.len(),
            expected.len(),
            &content[..content.len().min(60)]
        );
    }
    let (a, b) = (std::fs::metadata(&keep).unwrap(), std::fs::metadata(&twin).unwrap());
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "{when}: the two names are no longer one file");
    assert_eq!(names(view), names_left, "{when}: left behind");
}

/// The text of a whole-file `file/read` (a short file: one window).
fn read_text(raw: &mut Raw, path: &Path) -> String {
    let read = ok(raw, "file/read", json!({"path": path}));
    let lines: Vec<&str> = read["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Every way a session can write over the linked file with more than there is room for: each
/// must answer `FS_IO` naming `cause` and change nothing (`check` looks at the disk after each).
fn refused_growing_writes(raw: &mut Raw, keep: &Path, big: &str, cause: &str, check: &dyn Fn(&str)) {
    ok(raw, "file/read", json!({"path": keep}));
    let attempts = [
        ("file/write", json!({"path": keep, "content": big})),
        ("fs/writeText", json!({"path": keep, "content": big, "expect": {"kind": "any"}})),
        ("file/edit", json!({"path": keep, "oldString": "MARKER-OLD", "newString": big})),
    ];
    for (method, params) in attempts {
        let answer = rpc(raw, method, params);
        assert_eq!(fs_error(&answer), "FS_IO", "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(cause), "{method}: {message}");
        check(method);
    }
    let tool =
        ok(raw, "tools/call", json!({"name": "write", "arguments": {"file_path": keep, "content": big}}));
    assert_eq!(tool["error"]["code"], "FS_IO", "{tool}");
    check("tools/call write");
}

#[test]
fn a_full_disk_never_tears_a_file_with_several_links() {
    if !can_unshare_mounts() {
        skip(NO_MOUNT_NAMESPACE);
        return;
    }
    let (old, big) = (old_text(), new_text());
    // A 256 KiB tmpfs holding the file under two names, filled to the last block (dd stops at
    // ENOSPC) but for `free` KiB: none at all, and room for a copy of the old content but not
    // for the new.
    for free in [0, 24] {
        let setup = format!(
            "mkdir -p \"$1/full\"; mount -t tmpfs -o size=256k tmpfs \"$1/full\"\n\
             cp \"$1/old.txt\" \"$1/full/keep.txt\"; ln \"$1/full/keep.txt\" \"$1/full/twin.txt\"\n\
             dd if=/dev/zero of=\"$1/full/spacer\" bs=1k count={free} 2>/dev/null\n\
             dd if=/dev/zero of=\"$1/full/filler\" bs=4k 2>/dev/null || true\n\
             rm \"$1/full/spacer\"",
        );
        let daemon = start_unshared_with(|dir| std::fs::write(dir.join("old.txt"), &old).unwrap(), &setup);
        let folder = root_of(&daemon).join("full");
        let view = seen_by(&daemon, &folder);
        let left = ["filler", "keep.txt", "twin.txt"];
        assert_one_file_holding(&view, &old, &left, "before");
        let mut raw = daemon.session();
        let check =
            |what: &str| assert_one_file_holding(&view, &old, &left, &format!("{free} KiB free, {what}"));
        refused_growing_writes(&mut raw, &folder.join("keep.txt"), &big, "No space left on device", &check);
        // Room again: the same session writes, in place (both names see it).
        std::fs::remove_file(view.join("filler")).unwrap();
        ok(&mut raw, "file/write", json!({"path": folder.join("keep.txt"), "content": big}));
        assert_one_file_holding(&view, &big, &["keep.txt", "twin.txt"], "after freeing the space");
    }
}

#[test]
fn a_quota_hit_during_an_in_place_write_changes_nothing() {
    let (old, big) = (old_text(), new_text());
    // EDQUOT halfway through writing the file in place, then when reserving its new length.
    for point in ["provider::inplace::write", "provider::inplace::reserve"] {
        let daemon = Daemon::start_failing_configured(&format!("{point}=return(EDQUOT)"), without_deny_rules);
        let folder = root_of(&daemon).join("quota");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("keep.txt"), &old).unwrap();
        std::fs::hard_link(folder.join("keep.txt"), folder.join("twin.txt")).unwrap();
        let mut raw = daemon.session();
        let left = ["keep.txt", "twin.txt"];
        let check = |what: &str| assert_one_file_holding(&folder, &old, &left, &format!("{point}, {what}"));
        refused_growing_writes(&mut raw, &folder.join("keep.txt"), &big, "Disk quota exceeded", &check);
        if point == "provider::inplace::write" {
            // A write that shrinks the file fails the same way, and puts the old content back.
            let answer =
                rpc(&mut raw, "file/write", json!({"path": folder.join("keep.txt"), "content": "short\n"}));
            assert_eq!(fs_error(&answer), "FS_IO", "{answer}");
            check("a shrinking write");
        }
        assert_eq!(
            read_text(&mut raw, &folder.join("twin.txt")),
            old,
            "{point}: the daemon reads the old content"
        );
    }
}

/// A write in place, killed: what it writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum InPlace {
    /// `file/write` of much more content.
    Grow,
    /// `file/write` of much less.
    Shrink,
    /// `file/edit` that makes the file much bigger.
    Edit,
}

/// Whether the file holds its old or its new content once a restarted daemon looked at it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Holds {
    Old,
    New,
}

/// Where each in-place write is killed, and what the file must hold after the restart.
const IN_PLACE_KILLS: &[(InPlace, &str, Holds)] = &[
    (InPlace::Grow, "provider::inplace::half_written", Holds::Old),
    (InPlace::Shrink, "provider::inplace::half_written", Holds::Old),
    (InPlace::Edit, "provider::inplace::half_written", Holds::Old),
    (InPlace::Grow, "provider::inplace::saved", Holds::Old),
    (InPlace::Shrink, "provider::inplace::saved", Holds::Old),
    (InPlace::Edit, "provider::inplace::saved", Holds::Old),
    // Every byte written, the length not cut yet: a grown file is whole, a shrunk one is not.
    (InPlace::Grow, "provider::inplace::written", Holds::New),
    (InPlace::Shrink, "provider::inplace::written", Holds::Old),
    (InPlace::Edit, "provider::inplace::written", Holds::New),
    (InPlace::Grow, "provider::inplace::synced", Holds::New),
    (InPlace::Shrink, "provider::inplace::synced", Holds::New),
];

#[test]
fn a_daemon_killed_inside_an_in_place_write_leaves_old_or_new_content() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    let (old, big) = (old_text(), new_text());
    let edited = old.replace("MARKER-OLD", &big);
    let short = "the new content is one short line\n".to_owned();
    let mut restored = 0;
    for (n, &(op, point, holds)) in IN_PLACE_KILLS.iter().enumerate() {
        let folder = root.join(format!("kill-{n}"));
        std::fs::create_dir(&folder).unwrap();
        let (keep, twin) = (folder.join("keep.txt"), folder.join("twin.txt"));
        std::fs::write(&keep, &old).unwrap();
        std::fs::hard_link(&keep, &twin).unwrap();

        let mut daemon = Daemon::start_failing_configured(&format!("{point}=return"), without_deny_rules);
        let mut raw = daemon.session_with(json!({"roots": [root]}));
        ok(&mut raw, "file/read", json!({"path": keep, "limit": 1}));
        let (method, params, new) = match op {
            InPlace::Grow => ("file/write", json!({"path": keep, "content": big}), &big),
            InPlace::Shrink => ("file/write", json!({"path": keep, "content": short}), &short),
            InPlace::Edit => {
                ("file/edit", json!({"path": keep, "oldString": "MARKER-OLD", "newString": big}), &edited)
            }
        };
        raw.send_request(method, Some(params));
        let answer = raw.recv_within(Duration::from_secs(20));
        assert!(answer.is_none(), "{op:?} at {point}: answered: {answer:?}\n{}", daemon.log_text());
        let status = daemon.wait_exit();
        assert_eq!(status.signal(), Some(9), "{point}: not killed: {status:?}\n{}", daemon.log_text());
        assert!(daemon.log_text().contains(&format!("crash point {point}")), "{point} not reached");
        let torn = std::fs::read_to_string(&keep).unwrap();
        restored += usize::from(torn != old && torn != *new);

        // A restarted daemon's first look at the folder (a read of the file, or a write of
        // another file there) finds the file whole.
        let expected = match holds {
            Holds::Old => &old,
            Holds::New => new,
        };
        let restarted = Daemon::start_without_deny_rules(&[]);
        let mut raw = restarted.session_with(json!({"roots": [root]}));
        let mut left = vec!["keep.txt", "twin.txt"];
        if n % 2 == 1 {
            ok(&mut raw, "file/write", json!({"path": folder.join("other.txt"), "content": "other\n"}));
            assert_one_file_holding(
                &folder,
                expected,
                &["keep.txt", "other.txt", "twin.txt"],
                "a write there",
            );
            left.insert(1, "other.txt");
        }
        let read = read_text(&mut raw, &twin);
        assert!(
            read == *expected,
            "{op:?} killed at {point}: a restarted daemon read {} bytes, not the {:?} content ({} bytes)",
            read.len(),
            holds,
            expected.len()
        );
        assert_one_file_holding(&folder, expected, &left, &format!("{op:?} at {point}"));
        // And it writes there as usual.
        ok(&mut raw, "file/write", json!({"path": twin, "content": "after the crash\n"}));
        assert_one_file_holding(&folder, "after the crash\n", &left, "a write after");
    }
    eprintln!(
        "in-place crash safety: {} kills, {restored} torn files put back by the next daemon",
        IN_PLACE_KILLS.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Descriptors
// ---------------------------------------------------------------------------------------------

/// Whether `prlimit` (util-linux) is there to start the daemon under a small open-file limit.
/// Why a test that needs `prlimit` is skipped without it.
const NO_PRLIMIT: &str = "prlimit is not installed (util-linux): it sets the daemon's open-file limit";

fn have_prlimit() -> bool {
    Command::new("prlimit").arg("--version").output().is_ok_and(|out| out.status.success())
}

/// Starts the daemon with `extra` flags under an open-file limit of `nofile` (soft and hard).
fn start_limited(nofile: u64, extra: &[&str]) -> Daemon {
    Daemon::start_configured(extra, |_, filectxd| {
        let mut command = Command::new("prlimit");
        command
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(filectxd.get_program())
            .args(filectxd.get_args())
            .env_remove("RUST_LOG");
        command
    })
}

/// `count` folders under `base`, as the strings `initialize` takes.
fn folders(base: &Path, count: usize) -> Vec<String> {
    (0..count)
        .map(|n| {
            let folder = base.join(format!("r{n:05}"));
            std::fs::create_dir_all(&folder).unwrap();
            folder.display().to_string()
        })
        .collect()
}

/// The descriptors the daemon has open now, by number, seen from outside.
fn fd_numbers(daemon: &Daemon) -> Vec<usize> {
    let listing = std::fs::read_dir(format!("/proc/{}/fd", daemon.pid())).unwrap();
    listing.map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap()).collect()
}

/// How many descriptors the daemon has open now, counted from outside.
fn open_fds(daemon: &Daemon) -> usize {
    fd_numbers(daemon).len()
}

/// An attacker's connection: `initialize` with as many of `roots` as it can get, asking for a
/// tenth fewer after each refusal. Returns the connection, the roots it holds and the
/// refusals it got.
fn greedy(daemon: &Daemon, roots: &[String]) -> (Raw, usize, Vec<Value>) {
    let mut raw = Raw::connect(&daemon.socket);
    let mut refusals = Vec::new();
    let mut n = roots.len();
    while n > 0 {
        let answer = raw.request("initialize", Some(json!({"roots": roots[..n]})));
        if answer.get("error").is_none() {
            return (raw, n, refusals);
        }
        refusals.push(answer);
        n = n * 9 / 10;
    }
    (raw, 0, refusals)
}

/// The victim's proof of service: it reads a file it never read (a fresh open), writes one
/// and reads it back.
fn still_served(victim: &mut Raw, root: &Path, round: usize, when: &str) {
    let fresh = root.join(format!("fresh-{round}.txt"));
    std::fs::write(&fresh, format!("fresh {round}\n")).unwrap();
    let read = rpc(victim, "file/read", json!({"path": fresh}));
    assert!(read.get("error").is_none(), "{when}: the victim's read failed: {read}");
    assert_eq!(read["result"]["lines"], json!([format!("fresh {round}")]), "{when}");
    let written = root.join(format!("written-{round}.txt"));
    let write = rpc(victim, "file/write", json!({"path": written, "content": format!("written {round}\n")}));
    assert!(write.get("error").is_none(), "{when}: the victim's write failed: {write}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), format!("written {round}\n"), "{when}");
}

/// A new connection, answered within a few seconds (never left hanging): its `initialize`'s
/// whole response.
fn new_connection(daemon: &Daemon, root: &Path) -> (Raw, Value) {
    let mut raw = Raw::connect(&daemon.socket);
    // A refused connection may be closed before this is written: its refusal is still there.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"roots": [root]}});
    let body = body.to_string();
    let _ = std::io::Write::write_all(
        &mut raw.stream,
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
    );
    let answer = raw.recv_within(Duration::from_secs(5));
    let answer = answer.unwrap_or_else(|| {
        panic!("a new connection was not answered within 5 s; the daemon's log:\n{}", daemon.log_text())
    });
    (raw, answer)
}

#[test]
fn clients_with_many_roots_cannot_take_every_descriptor() {
    if !have_prlimit() {
        skip(NO_PRLIMIT);
        return;
    }
    // Three attackers, as in the issue, each taking as many roots as it can get; the cap on
    // roots per session is raised out of the way, so that only the sharing of descriptors
    // stands between them and the limit.
    let daemon = start_limited(256, &["--max-roots", "1000"]);
    let root = root_of(&daemon);
    let roots = folders(&root.join("roots"), 400);
    let mut victim = daemon.session();
    still_served(&mut victim, &root, 0, "before the attack");

    let mut attackers = Vec::new();
    let mut held = 0;
    let mut refusals = Vec::new();
    for n in 0..3 {
        let (raw, got, refused) = greedy(&daemon, &roots);
        eprintln!("attacker {n}: {got} roots after {} refusals", refused.len());
        held += got;
        refusals.extend(refused);
        attackers.push(raw);
    }
    still_served(&mut victim, &root, 1, "after three attackers took what they could");
    let (mut newcomer, answer) = new_connection(&daemon, &root);
    assert!(answer.get("error").is_none(), "a new session is refused: {answer}");
    still_served(&mut newcomer, &root, 2, "the new session");

    // What was refused said why, and how to do with less.
    let busy = refusals.iter().find(|r| r["error"]["data"]["code"] == "FS_BUSY");
    let busy = busy.unwrap_or_else(|| panic!("no initialize was refused as FS_BUSY: {refusals:?}"));
    let message = busy["error"]["message"].as_str().unwrap();
    assert!(message.contains("descriptors") && message.contains("at most"), "{message}");
    assert!(
        refusals.iter().all(|r| r["error"]["data"]["code"] == "FS_BUSY"),
        "every refusal is the descriptor rule's: {refusals:?}"
    );

    // daemon/status shows the bounds, and they hold.
    let status = daemon.status();
    assert_eq!(status["descriptorLimit"], 256, "{status}");
    let reserve = status["descriptorReserve"].as_u64().unwrap();
    assert!((32..=128).contains(&reserve), "{status}");
    // The victim's root, the attackers', the newcomer's, and the status session's own.
    assert_eq!(status["rootsHeld"].as_u64(), Some(held as u64 + 3), "{status}");
    let open = status["openDescriptors"].as_u64().unwrap();
    assert!(open + reserve <= 256 + 8, "the reserve is kept: {status}");
    assert!(open_fds(&daemon) <= 256);
    drop(attackers);
}

#[test]
fn too_many_roots_are_refused_clearly() {
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let roots = folders(&root.join("roots"), 65);
    let mut raw = Raw::connect(&daemon.socket);
    let answer = raw.request("initialize", Some(json!({"roots": roots})));
    assert_eq!(fs_error(&answer), "FS_INVALID_ARGUMENT", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("65") && message.contains("at most 64") && message.contains("max_roots"),
        "{message}"
    );
    // The refusal leaves the session uninitialized: it may try again with fewer.
    raw.call("initialize", Some(json!({"roots": roots[..64]})));
    assert_eq!(daemon.status()["rootsHeld"], 64 + 1);
}

#[test]
fn connections_past_the_descriptor_limit_are_answered_not_left_hanging() {
    if !have_prlimit() {
        skip(NO_PRLIMIT);
        return;
    }
    let daemon = start_limited(256, &[]);
    let root = root_of(&daemon);
    let mut victim = daemon.session();
    let mut open = Vec::new();
    let refused = loop {
        assert!(open.len() < 256, "256 sessions served under a limit of 256 descriptors");
        let (raw, answer) = new_connection(&daemon, &root);
        if answer.get("error").is_some() {
            break answer;
        }
        open.push(raw);
    };
    eprintln!("{} sessions served, the next refused: {refused}", open.len());
    assert_eq!(error_code(&refused), -32009, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("descriptors"), "{message}");
    still_served(&mut victim, &root, 0, "with every connection taken");
    // Sessions that end make room.
    open.truncate(open.len() - 4);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (mut raw, answer) = new_connection(&daemon, &root);
        if answer.get("error").is_none() {
            still_served(&mut raw, &root, 1, "a session after others ended");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no room after sessions ended: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_daemon_out_of_descriptors_still_answers_new_connections() {
    if !have_prlimit() {
        skip(NO_PRLIMIT);
        return;
    }
    let daemon = Daemon::start(&[]);
    let root = root_of(&daemon);
    let mut victim = daemon.session();
    still_served(&mut victim, &root, 0, "before");
    // Something outside the daemon's accounting took every descriptor: its limit is lowered to
    // the lowest descriptor number it has not taken (a new descriptor gets the lowest free
    // number, which must be below the limit).
    let pid = daemon.pid().to_string();
    let limit = |soft: usize| {
        let done =
            Command::new("prlimit").args(["--pid", &pid, &format!("--nofile={soft}:")]).status().unwrap();
        assert!(done.success(), "prlimit --pid {pid} failed");
    };
    let taken = fd_numbers(&daemon);
    let lowest_free = (0..).find(|n| !taken.contains(n)).unwrap();
    limit(lowest_free);
    let before = taken.len().max(lowest_free);
    for _ in 0..3 {
        let (_raw, answer) = new_connection(&daemon, &root);
        assert_eq!(error_code(&answer), -32009, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("descriptor"), "{message}");
    }
    // Descriptors again: new connections are served.
    limit(before + 64);
    let (mut raw, answer) = new_connection(&daemon, &root);
    assert!(answer.get("error").is_none(), "{answer}");
    still_served(&mut raw, &root, 1, "after the limit went back up");
    still_served(&mut victim, &root, 2, "the victim after the limit went back up");
}

#[test]
fn ten_thousand_roots_are_initialized_in_linear_time() {
    // 7,000 root handles need a limit well above them (a session's roots beyond its first take
    // at most half of what is left above the budget's last quarter); the daemon raises its soft
    // limit to the hard one, which it inherits from here. Below that, prlimit raises the daemon's
    // hard limit, which only a process with CAP_SYS_RESOURCE (root, normally) may do.
    const ENOUGH: u64 = 20_000;
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let daemon = if hard.is_none_or(|hard| hard >= ENOUGH) {
        Daemon::start(&["--max-roots", "10000"])
    } else if !have_prlimit() {
        skip(NO_PRLIMIT);
        return;
    } else if !Command::new("prlimit")
        .args([&format!("--nofile={ENOUGH}:{ENOUGH}"), "true"])
        .output()
        .is_ok_and(|out| out.status.success())
    {
        skip(&format!(
            "the open-file hard limit is {}, under the {ENOUGH} that 7,000 roots need, and only root \
             (CAP_SYS_RESOURCE) may raise it: run the tests as root, or after `ulimit -Hn {ENOUGH}`",
            hard.unwrap_or_default()
        ));
        return;
    } else {
        start_limited(ENOUGH, &["--max-roots", "10000"])
    };
    let root = root_of(&daemon);
    let mut roots = folders(&root.join("roots"), 7_000);
    // Duplicates (the same folders spelt again) are dropped, not opened twice, nor counted.
    roots.extend((0..3_000).map(|n| format!("{}/roots/./r{n:05}", root.display())));
    let start = std::time::Instant::now();
    let mut raw = Raw::connect(&daemon.socket);
    raw.call("initialize", Some(json!({"roots": roots})));
    eprintln!("initialize with 10,000 roots (3,000 of them twice): {:?}", start.elapsed());
    // Its roots and the status session's own.
    assert_eq!(daemon.status()["rootsHeld"], 7_000 + 1);
}
