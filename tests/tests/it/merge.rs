//! Merged stale edits (`initialize` `staleEdits: "merge"`): an `edit` tool call whose
//! observation is stale is applied over an outside change that keeps away from what it
//! replaces (the text says so and shows the change, the file keeps both, the observation moves
//! on); every other stale edit (overlap, a changed line right above or below, a match count
//! that changed, a deleted or replaced file) is refused exactly as a default session refuses
//! it; `write`, `file/edit` and default sessions never merge; and a file that changes again
//! between the merge's check and its write (held there by the `context::merge::checked` fail
//! point) is refused as stale and keeps that second change.

use std::path::Path;
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, Raw, fs_error, ok, rpc, tool, tool_ok, tool_text};
use serde_json::{Value, json};

use crate::gate::{answer, gate, intent_within, src};
use crate::mcp::{Bridge, text};

/// A session rooted at the daemon's folder, merging stale edits or not.
fn session(daemon: &Daemon, merge: bool) -> Raw {
    let mut params = json!({"roots": [daemon.dir.path()], "clientInfo": {"name": "filectx-tests"}});
    if merge {
        params["staleEdits"] = json!("merge");
    }
    daemon.session_with(params)
}

/// A tool result as whether it is an error, and its text.
fn outcome(result: Value) -> (bool, String) {
    (result["isError"] == true, tool_text(&result))
}

/// Reads `path` whole through the `read` tool.
fn read(raw: &mut Raw, path: &str) {
    tool_ok(raw, "read", json!({"file_path": path}));
}

fn edit_args(path: &str, old: &str, new: &str) -> Value {
    json!({"file_path": path, "old_string": old, "new_string": new})
}

/// Twenty lines `line 1`…`line 20`, with `f` applied to each (its number and its text).
fn lines(f: impl Fn(usize, String) -> String) -> String {
    (1..=20).map(|i| f(i, format!("line {i}\n"))).collect()
}

/// The file `name` in the daemon's folder (its display path as the tools show it) holding
/// `content`.
fn file(daemon: &Daemon, name: &str, content: &str) -> String {
    let path = daemon.dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

/// Changes `path` from outside as an editor saving it does: a new file renamed over it.
fn save_as_editor(path: &str, content: &str) {
    let staged = format!("{path}.swp");
    std::fs::write(&staged, content).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

fn contents(path: &str) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Runs the same stale edit in a merging session and a default one (each having read `start`,
/// then the file set to `now` from outside, by `change`) and checks that the merging session
/// is refused exactly as the default one is: an error with the same text, the file left as
/// the outside change made it. Returns the text.
fn refused_as_by_default(
    daemon: &Daemon,
    start: &str,
    change: impl Fn(&str),
    edit: (&str, &str, bool),
) -> String {
    let path = file(daemon, "refused.txt", start);
    let (mut merging, mut plain) = (session(daemon, true), session(daemon, false));
    read(&mut merging, &path);
    read(&mut plain, &path);
    change(&path);
    let after = std::fs::read_to_string(&path).ok();
    let mut args = edit_args(&path, edit.0, edit.1);
    args["replace_all"] = json!(edit.2);
    let (merged_error, merged_text) = outcome(tool(&mut merging, "edit", args.clone()));
    let (plain_error, plain_text) = outcome(tool(&mut plain, "edit", args));
    assert!(plain_error, "the default session refuses: {plain_text}");
    assert!(merged_error, "not merged: {merged_text}");
    assert_eq!(merged_text, plain_text, "refused as a default session is");
    assert_eq!(std::fs::read_to_string(&path).ok(), after, "the file is as the outside change left it");
    merged_text
}

#[test]
fn the_feature_is_announced_and_the_option_checked() {
    let daemon = Daemon::start(&[]);
    let mut raw = Raw::connect(&daemon.socket);
    let init = raw.call("initialize", Some(json!({"roots": [daemon.dir.path()], "staleEdits": "merge"})));
    let features = init["capabilities"]["features"].as_array().unwrap();
    assert!(features.contains(&json!("staleEdits")), "{init}");
    let mut raw = Raw::connect(&daemon.socket);
    let refused =
        raw.request("initialize", Some(json!({"roots": [daemon.dir.path()], "staleEdits": "always"})));
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
}

#[test]
fn a_change_elsewhere_is_merged_and_shown_and_counts_as_read() {
    let daemon = Daemon::start(&[]);
    let path = file(&daemon, "a.txt", &lines(|_, l| l));
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    // An editor saves a change four lines above the edit (a new inode, as editors write).
    save_as_editor(&path, &lines(|i, l| if i == 6 { "line six, changed outside\n".into() } else { l }));
    let text = tool_ok(&mut raw, "edit", edit_args(&path, "line 10\n", "line ten\n"));
    assert!(text.starts_with("Edited a.txt. Lines now:"), "{text}");
    let notice = "Applied over an outside change since your last read (now counted as read; line numbers \
         after + are before this edit):\n\
         --- a.txt (as you last saw it)\n+++ a.txt (before this edit)\n\
         @@ -3,7 +3,7 @@\n line 3\n line 4\n line 5\n-line 6\n+line six, changed outside\n line 7\n line 8\n line 9";
    assert!(text.ends_with(notice), "{text}");
    let both = lines(|i, l| match i {
        6 => "line six, changed outside\n".into(),
        10 => "line ten\n".into(),
        _ => l,
    });
    assert_eq!(contents(&path), both);
    // The observation moved to the written version: the next edit needs no read, and is a
    // plain one (nothing changed since).
    let text = tool_ok(&mut raw, "edit", edit_args(&path, "line 20\n", "line twenty\n"));
    assert!(!text.contains("outside change"), "{text}");
    assert!(contents(&path).ends_with("line 19\nline twenty\n"));
    // A merged edit over a change that altered no line (only the endings) says so.
    let crlf = contents(&path).replace('\n', "\r\n");
    std::fs::write(&path, &crlf).unwrap();
    let text = tool_ok(&mut raw, "edit", edit_args(&path, "line 1\n", "line one\n"));
    assert!(
        text.ends_with(
            "Applied over an outside change since your last read that changed no line (only line \
             endings, the byte-order mark or the final newline)."
        ),
        "{text}"
    );
    assert!(contents(&path).starts_with("line one\r\nline 2\r\n"), "{:?}", contents(&path));
}

#[test]
fn a_change_in_or_next_to_the_edited_lines_is_refused_as_before() {
    let daemon = Daemon::start(&[]);
    let start = lines(|_, l| l);
    let set = |at: usize, to: &'static str| {
        move |path: &str| std::fs::write(path, lines(|i, l| if i == at { to.into() } else { l })).unwrap()
    };
    // The matched line itself changed (the old text, part of it, still matches).
    let text =
        refused_as_by_default(&daemon, &start, set(10, "line 10 and more\n"), ("line 10", "ten", false));
    assert!(text.contains("+line 10 and more"), "the change is shown, as always: {text}");
    // The line right above, and the line right below, of a one-line and of a two-line match.
    for (at, old) in
        [(9, "line 10\n"), (11, "line 10\n"), (9, "line 10\nline 11\n"), (12, "line 10\nline 11\n")]
    {
        refused_as_by_default(&daemon, &start, set(at, "changed\n"), (old, "x\n", false));
    }
    // A line inserted right above, a line deleted right below.
    refused_as_by_default(&daemon, &start, set(10, "inserted\nline 10\n"), ("line 10\n", "x\n", false));
    refused_as_by_default(&daemon, &start, set(11, ""), ("line 10\n", "x\n", false));
    // Two lines away merges (the same daemon, the same kind of change).
    let path = file(&daemon, "near.txt", &start);
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    set(8, "changed\n")(&path);
    let text = tool_ok(&mut raw, "edit", edit_args(&path, "line 10\n", "x\n"));
    assert!(text.contains("Applied over an outside change"), "{text}");
}

#[test]
fn a_match_count_that_changed_is_refused() {
    let daemon = Daemon::start(&[]);
    let start = lines(|_, l| l);
    // The old text now appears twice (added far away), or no longer.
    let twice = |path: &str| std::fs::write(path, format!("line 15\n{}", lines(|_, l| l))).unwrap();
    refused_as_by_default(&daemon, &start, twice, ("line 15\n", "x\n", false));
    let gone = |path: &str| {
        std::fs::write(path, lines(|i, l| if i == 15 { "LINE 15\n".into() } else { l })).unwrap()
    };
    refused_as_by_default(&daemon, &start, gone, ("line 15\n", "x\n", false));
    // With replace_all too: three places seen, four now.
    let start = "x = 1\na\nb\nc\nx = 1\nd\ne\nf\nx = 1\ng\nh\n";
    let more = |path: &str| std::fs::write(path, format!("{start}i\nj\nx = 1\n")).unwrap();
    refused_as_by_default(&daemon, start, more, ("x = 1", "x = 2", true));
}

#[test]
fn a_deleted_or_replaced_file_is_refused() {
    let daemon = Daemon::start(&[]);
    let start = lines(|_, l| l);
    let text = refused_as_by_default(
        &daemon,
        &start,
        |path| std::fs::remove_file(path).unwrap(),
        ("line 5\n", "x\n", false),
    );
    assert!(text.contains("was deleted since you last read it"), "{text}");
    // Another file renamed over it (a new inode), whose lines are all different.
    let other = |path: &str| save_as_editor(path, "fn main() {\n    println!(\"another file\");\n}\n");
    refused_as_by_default(&daemon, &start, other, ("line 5\n", "x\n", false));
}

#[test]
fn crlf_files_match_and_keep_their_endings() {
    let daemon = Daemon::start(&[]);
    let crlf = |text: String| text.replace('\n', "\r\n");
    let path = file(&daemon, "crlf.txt", &crlf(lines(|_, l| l)));
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    std::fs::write(&path, crlf(lines(|i, l| if i == 2 { "two\n".into() } else { l }))).unwrap();
    // A two-line old text with `\n`, as the model copies it from the read.
    let text = tool_ok(&mut raw, "edit", edit_args(&path, "line 10\nline 11", "ten\neleven"));
    assert!(text.contains("Applied over an outside change"), "{text}");
    let expected = lines(|i, l| match i {
        2 => "two\n".into(),
        10 => "ten\n".into(),
        11 => "eleven\n".into(),
        _ => l,
    });
    assert_eq!(contents(&path), crlf(expected));
    // Next to the change: refused, CRLF or not.
    let start = crlf(lines(|_, l| l));
    let near = |path: &str| {
        std::fs::write(path, crlf(lines(|i, l| if i == 9 { "nine\n".into() } else { l }))).unwrap()
    };
    refused_as_by_default(&daemon, &start, near, ("line 10\nline 11", "x", false));
}

#[test]
fn replace_all_merges_only_when_every_place_is_away_from_the_change() {
    let daemon = Daemon::start(&[]);
    let start = "x = 1\na\nb\nc\nx = 1\nd\ne\nf\nx = 1\ng\nh\n";
    let path = file(&daemon, "all.txt", start);
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    std::fs::write(&path, start.replace("\nb\n", "\nB\n")).unwrap();
    let mut args = edit_args(&path, "x = 1", "x = 2");
    args["replace_all"] = json!(true);
    let text = tool_ok(&mut raw, "edit", args);
    assert!(text.starts_with("Edited all.txt: 3 replacements."), "{text}");
    assert!(text.contains("Applied over an outside change"), "{text}");
    assert_eq!(contents(&path), "x = 2\na\nB\nc\nx = 2\nd\ne\nf\nx = 2\ng\nh\n");
    // A change right below the last place: refused.
    let near = |path: &str| std::fs::write(path, start.replace("\ng\n", "\nG\n")).unwrap();
    refused_as_by_default(&daemon, start, near, ("x = 1", "x = 2", true));
}

#[test]
fn write_file_edit_and_default_sessions_never_merge() {
    let daemon = Daemon::start(&[]);
    let start = lines(|_, l| l);
    let outside = lines(|i, l| if i == 2 { "two\n".into() } else { l });
    // The edit tool in a default session: refused, though the change is far away (a merging
    // session takes the same edit).
    for merge in [false, true] {
        let path = file(&daemon, "e.txt", &start);
        let mut raw = session(&daemon, merge);
        read(&mut raw, &path);
        std::fs::write(&path, &outside).unwrap();
        let (error, text) = outcome(tool(&mut raw, "edit", edit_args(&path, "line 15\n", "x\n")));
        assert_eq!(error, !merge, "{text}");
        assert_eq!(
            text.contains("changed since you last read it (line numbers after + are current)"),
            !merge,
            "{text}"
        );
        assert_eq!(contents(&path) == outside, !merge);
    }

    // `write` in a merging session: a whole new content is never merged.
    let path = file(&daemon, "w.txt", &start);
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    std::fs::write(&path, &outside).unwrap();
    let (error, text) = outcome(tool(&mut raw, "write", json!({"file_path": path, "content": "new\n"})));
    assert!(error, "{text}");
    assert!(text.contains("changed since you last read it (line numbers after + are current)"), "{text}");
    assert_eq!(contents(&path), outside);

    // `file/edit` in a merging session (its observation from `file/read`).
    let path = file(&daemon, "f.txt", &start);
    let mut raw = session(&daemon, true);
    ok(&mut raw, "file/read", json!({"path": path}));
    std::fs::write(&path, &outside).unwrap();
    let response =
        rpc(&mut raw, "file/edit", json!({"path": path, "oldString": "line 15\n", "newString": "x\n"}));
    assert_eq!(fs_error(&response), "FS_STALE_VERSION", "{response}");
    assert_eq!(contents(&path), outside);
}

#[test]
fn filectx_mcp_merges_only_with_its_flag() {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path().canonicalize().unwrap();
    let start = lines(|_, l| l);
    let outside = lines(|i, l| if i == 2 { "two\n".into() } else { l });
    for flag in [false, true] {
        let path = file(&daemon, "m.txt", &start);
        let extra: &[&str] = if flag { &["--merge-stale-edits"] } else { &[] };
        let mut bridge = Bridge::start(&daemon.socket, &root, extra);
        bridge.initialize("2025-06-18");
        assert_eq!(bridge.tool("read", json!({"file_path": "m.txt"}))["isError"], false);
        std::fs::write(&path, &outside).unwrap();
        let result = bridge
            .tool("edit", json!({"file_path": "m.txt", "old_string": "line 15\n", "new_string": "x\n"}));
        let said = text(&result);
        assert_eq!(result["isError"], json!(!flag), "{result}");
        assert_eq!(said.contains("Applied over an outside change"), flag, "{said}");
        assert_eq!(contents(&path).contains("x\n"), flag);
        assert!(contents(&path).contains("two\n"), "the outside change is kept");
        let (status, stderr) = bridge.finish();
        assert_eq!(status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains("merge"), "a daemon with staleEdits draws no note: {stderr}");
    }
}

#[test]
fn under_a_gate_the_merged_edit_is_asked_and_committed_only_onto_the_version_it_was_made_for() {
    let daemon = Daemon::start(&[]);
    let root = filectx_tests::root_of(&daemon);
    std::fs::create_dir(root.join("src")).unwrap();
    let (mut gatekeeper, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let path = root.join("src/g.txt").display().to_string();
    let outside = lines(|i, l| if i == 2 { "two\n".into() } else { l });
    for again in [false, true] {
        std::fs::write(&path, lines(|_, l| l)).unwrap();
        let mut raw = session(&daemon, true);
        read(&mut raw, &path);
        std::fs::write(&path, &outside).unwrap();
        let id = raw.send_tool("edit", edit_args(&path, "line 15\n", "fifteen\n"));
        let asked = intent_within(&mut gatekeeper, Duration::from_secs(30)).expect("the gate is asked");
        // What the gate sees is the merged edit: from the file as it is, to that plus the edit.
        let diff = asked["params"]["diff"].as_str().unwrap();
        assert!(diff.contains("-line 15\n+fifteen\n") && !diff.contains("line 2\n"), "{diff}");
        let second = lines(|i, l| if i == 2 || i == 3 { format!("second {l}") } else { l });
        if again {
            std::fs::write(&path, &second).unwrap();
        }
        answer(&mut gatekeeper, &asked, json!({"allow": true}));
        let result = raw.response(id)["result"].clone();
        if again {
            assert_eq!(result["error"]["code"], json!("FS_STALE_VERSION"), "{result}");
            assert_eq!(contents(&path), second, "the change made while the gate looked is kept");
        } else {
            assert_eq!(result["isError"], json!(false), "{result}");
            assert!(text(&result).contains("Applied over an outside change"), "{result}");
            assert_eq!(
                contents(&path),
                lines(|i, l| match i {
                    2 => "two\n".into(),
                    15 => "fifteen\n".into(),
                    _ => l,
                })
            );
        }
    }
}

/// Waits (at most a minute) until `path` exists.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_file_changed_again_between_the_check_and_the_write_is_refused_and_kept() {
    let signals = tempfile::tempdir().unwrap();
    let daemon =
        Daemon::start_failing(&format!("context::merge::checked=return({})", signals.path().display()));
    let path = file(&daemon, "race.txt", &lines(|_, l| l));
    let mut raw = session(&daemon, true);
    read(&mut raw, &path);
    std::fs::write(&path, lines(|i, l| if i == 2 { "two\n".into() } else { l })).unwrap();
    let id = raw.send_tool("edit", edit_args(&path, "line 15\n", "fifteen\n"));
    // The merge was checked against the first outside change; before it writes, a second one.
    wait_for(&signals.path().join("merge.started"));
    let second = lines(|i, l| if i == 2 || i == 3 { format!("second {l}") } else { l });
    std::fs::write(&path, &second).unwrap();
    std::fs::write(signals.path().join("merge.go"), b"").unwrap();
    let answer = raw.response(id);
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(true), "{answer}");
    assert_eq!(result["error"]["code"], json!("FS_STALE_VERSION"), "{answer}");
    assert_eq!(contents(&path), second, "the second outside change is untouched");
}
