//! Attacks on what the daemon stores (issue 26, class 4): a full disk, a quota and kill -9 in
//! the middle of the in-place rewrite of a file with several hard links (old or new content,
//! never a mix, under both names).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use filectx_tests::{Daemon, Raw, fs_error, ok, root_of, rpc};
use serde_json::json;

use super::faults::{can_unshare_mounts, names, seen_by};

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
    Daemon::start_configured(&[], |dir, filectxd| {
        prepare(dir);
        let mut command = Command::new("unshare");
        command
            .args(["-m", "--", "sh", "-euc", &format!("{setup}\nshift; exec \"$@\""), "sh"])
            .arg(dir)
            .arg(filectxd.get_program())
            .args(filectxd.get_args())
            .env_remove("RUST_LOG");
        command
    })
}

/// Fails with a clear message when the spawned `filectxd` lacks the fail points.
fn require_failpoints(daemon: &Daemon) {
    daemon.status();
    assert!(
        daemon.log_text().contains("fail point configured"),
        "filectxd was built without the `failpoints` feature; run `cargo test --workspace`"
    );
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
        eprintln!("skipped: this machine does not allow a private mount namespace (unshare -m)");
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
        let daemon = Daemon::start_configured(&[], |_, mut command| {
            command.env("FILECTX_FAILPOINTS", format!("{point}=return(EDQUOT)"));
            command
        });
        require_failpoints(&daemon);
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

        let mut daemon = Daemon::start_configured(&[], |_, mut command| {
            command.env("FILECTX_FAILPOINTS", format!("{point}=return"));
            command
        });
        require_failpoints(&daemon);
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
        let restarted = Daemon::start(&[]);
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
