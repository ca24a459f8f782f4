//! Owners, deduplicated re-reads and resume, over the real socket: two owners of one session
//! never authorize each other (tools and `file/*`); an owner's write refreshes only its own
//! record and tells the owners it made stale (`file/didChange` names them); owner names and
//! counts are bounded. `dedupReads` answers one short line only for the same lines of the same
//! version, then the text again; `session/contextReset` and any outside change bring the text
//! back; off by default and never on `file/read`. A resumed session keeps its observations (all
//! owners) but a file changed meanwhile is still stale; tokens are single-use, expire, and the
//! store of ended sessions is bounded; parked sessions hold no watches.

use std::path::{Path, PathBuf};
use std::time::Duration;

use filectx_tests::{Daemon, Raw, error_code, fs_error, ok, root_of, rpc, tool_as};
use serde_json::{Value, json};

const DID_CHANGE: &str = "file/didChange";
/// The contract's bound for a change notice.
const NOTICE: Duration = Duration::from_secs(2);
/// How long to listen before concluding that no notice is coming.
const QUIET: Duration = Duration::from_millis(600);

/// A folder for the test's files inside the daemon's root, and a file in it.
fn file(daemon: &Daemon, name: &str, content: &str) -> PathBuf {
    let dir = root_of(daemon).join("w");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn s(path: &Path) -> String {
    path.display().to_string()
}

fn session(daemon: &Daemon, extra: Value) -> (Raw, Value) {
    let mut params = json!({"roots": [root_of(daemon)], "clientInfo": {"name": "owners-test"}});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let mut raw = Raw::connect(&daemon.socket);
    let result = raw.call("initialize", Some(params));
    (raw, result)
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn read_tool(raw: &mut Raw, owner: Option<&str>, path: &Path, window: Value) -> String {
    let mut arguments = json!({"file_path": s(path)});
    if let (Some(arguments), Some(window)) = (arguments.as_object_mut(), window.as_object()) {
        arguments.extend(window.clone());
    }
    let result = tool_as(raw, owner, "read", arguments);
    assert_eq!(result["isError"], false, "{result}");
    text(&result)
}

fn edit_tool(raw: &mut Raw, owner: Option<&str>, path: &Path, old: &str, new: &str) -> Value {
    tool_as(raw, owner, "edit", json!({"file_path": s(path), "old_string": old, "new_string": new}))
}

/// `file/*` params with an optional owner.
fn with_owner(mut params: Value, owner: Option<&str>) -> Value {
    if let Some(owner) = owner {
        params["owner"] = json!(owner);
    }
    params
}

fn file_edit(raw: &mut Raw, owner: Option<&str>, path: &Path, old: &str, new: &str) -> Value {
    rpc(raw, "file/edit", with_owner(json!({"path": s(path), "oldString": old, "newString": new}), owner))
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i} of the file, long enough to be worth not repeating\n")).collect()
}

// ---------------------------------------------------------------------------------------------
// Owners
// ---------------------------------------------------------------------------------------------

#[test]
fn initialize_announces_the_features() {
    let daemon = Daemon::start(&[]);
    let (_raw, result) = session(&daemon, json!({}));
    assert_eq!(result["protocolVersion"], 2);
    let features = result["capabilities"]["features"].as_array().unwrap();
    for feature in ["owners", "dedupReads", "contextReset", "resume"] {
        assert!(features.contains(&json!(feature)), "{feature} missing: {result}");
    }
    assert!(result["capabilities"]["methods"].as_array().unwrap().contains(&json!("session/contextReset")));
    assert!(result.get("resumeToken").is_none(), "only when asked: {result}");
}

#[test]
fn a_refusal_that_shows_an_unread_file_counts_for_its_owner_alone() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "small.txt", "alpha\nbeta\n");
    let (mut raw, _) = session(&daemon, json!({}));

    let refused = edit_tool(&mut raw, Some("planner"), &f, "alpha", "ALPHA");
    assert_eq!(refused["error"]["code"], "FS_NOT_OBSERVED", "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("now counted as read") && text.ends_with(":\n1\talpha\n2\tbeta"), "{text}");
    // The coder and the connection's default owner were shown nothing: still refused at every
    // layer (file/* first: the tools' refusal would show them the file in turn).
    for owner in [Some("coder"), None] {
        assert_eq!(
            fs_error(&file_edit(&mut raw, owner, &f, "alpha", "ALPHA")),
            "FS_NOT_OBSERVED",
            "{owner:?}"
        );
    }
    assert_eq!(ok(&mut raw, "file/stat", json!({"path": s(&f), "owner": "coder"}))["fresh"], false);
    // The planner's retry goes through.
    let edited = edit_tool(&mut raw, Some("planner"), &f, "alpha", "ALPHA");
    assert_eq!(edited["isError"], false, "{edited}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "ALPHA\nbeta\n");
}

#[test]
fn two_owners_of_one_session_do_not_authorize_each_other() {
    let daemon = Daemon::start(&[]);
    // Over 200 lines, so that the tools' refusal of an unread file does not show it (showing it
    // would count as that owner's own read).
    let body = format!("alpha\nbeta\n{}", "filler\n".repeat(200));
    let f = file(&daemon, "a.txt", &body);
    let (mut raw, _) = session(&daemon, json!({}));

    read_tool(&mut raw, Some("planner"), &f, json!({}));
    for owner in [Some("coder"), None] {
        let result = edit_tool(&mut raw, owner, &f, "alpha", "ALPHA");
        assert_eq!(result["isError"], true, "{owner:?}: {result}");
        assert_eq!(result["error"]["code"], "FS_NOT_OBSERVED", "{owner:?}: {result}");
        assert_eq!(fs_error(&file_edit(&mut raw, owner, &f, "alpha", "ALPHA")), "FS_NOT_OBSERVED");
        let write = rpc(&mut raw, "file/write", with_owner(json!({"path": s(&f), "content": "x"}), owner));
        assert_eq!(fs_error(&write), "FS_NOT_OBSERVED", "{owner:?}");
    }
    let stat = ok(&mut raw, "file/stat", json!({"path": s(&f), "owner": "coder"}));
    assert_eq!((stat["fresh"].clone(), stat.get("observedVersion")), (json!(false), None), "{stat}");
    let stat = ok(&mut raw, "file/stat", json!({"path": s(&f), "owner": "planner"}));
    assert_eq!(stat["fresh"], true, "{stat}");

    // file/read records for its owner only, too.
    ok(&mut raw, "file/read", json!({"path": s(&f), "owner": "coder"}));
    assert_eq!(fs_error(&file_edit(&mut raw, None, &f, "alpha", "ALPHA")), "FS_NOT_OBSERVED");
    let result = edit_tool(&mut raw, Some("coder"), &f, "alpha", "ALPHA");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), body.replacen("alpha", "ALPHA", 1));
    // fs/readText records nothing, and so takes no owner.
    let refused = rpc(&mut raw, "fs/readText", json!({"path": s(&f), "owner": "coder"}));
    assert_eq!(error_code(&refused), -32602, "{refused}");
}

#[test]
fn own_writes_refresh_only_the_writer_and_the_stale_owners_are_told() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "b.txt", "one\ntwo\nthree\n");
    let (mut raw, _) = session(&daemon, json!({}));
    ok(&mut raw, "file/read", json!({"path": s(&f), "owner": "a"}));
    ok(&mut raw, "file/read", json!({"path": s(&f), "owner": "b"}));
    ok(&mut raw, "file/read", json!({"path": s(&f)}));

    // a writes: b and the default owner are told, each once, by name...
    let mut notes = Vec::new();
    let params = json!({"path": s(&f), "oldString": "one", "newString": "1", "owner": "a"});
    let edited = raw.request_collecting_notifications("file/edit", Some(params), &mut notes);
    assert!(edited.get("error").is_none(), "{edited}");
    let mut notices: Vec<Value> = notes.into_iter().map(|n| n["params"].clone()).collect();
    while notices.len() < 2 {
        notices.push(raw.expect_notification(DID_CHANGE, NOTICE));
    }
    let mut told: Vec<Option<String>> = notices
        .into_iter()
        .map(|n| {
            assert_eq!(n["path"], json!(s(&f.canonicalize().unwrap())), "{n}");
            n.get("owner").and_then(Value::as_str).map(str::to_owned)
        })
        .collect();
    told.sort();
    assert_eq!(told, [None, Some("b".to_owned())]);
    // ...while its own record is refreshed: it edits again without reading, and is told nothing.
    assert!(file_edit(&mut raw, Some("a"), &f, "two", "2").get("error").is_none());
    raw.assert_no_notification(DID_CHANGE, QUIET);
    assert_eq!(fs_error(&file_edit(&mut raw, Some("b"), &f, "three", "3")), "FS_STALE_VERSION");
    let result = edit_tool(&mut raw, None, &f, "three", "3");
    assert_eq!(result["error"]["code"], "FS_STALE_VERSION", "{result}");

    // Those refusals showed the whole change, which re-authorized b and the default owner
    // (staleDiffs): all three hold the current version now, so an outside change tells each of
    // them, once, by name.
    std::fs::write(&f, "outside\n").unwrap();
    let mut told: Vec<Option<String>> = (0..3)
        .map(|_| {
            raw.expect_notification(DID_CHANGE, NOTICE)
                .get("owner")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    told.sort();
    assert_eq!(told, [None, Some("a".to_owned()), Some("b".to_owned())]);
    raw.assert_no_notification(DID_CHANGE, QUIET);
}

#[test]
fn owner_names_and_counts_are_bounded() {
    let daemon = Daemon::start(&["--max-owners", "2"]);
    let f = file(&daemon, "c.txt", "x\n");
    let (mut raw, _) = session(&daemon, json!({}));
    let long = "o".repeat(129);
    for bad in [long.as_str(), ""] {
        let result = tool_as(&mut raw, Some(bad), "read", json!({"file_path": s(&f)}));
        assert_eq!(
            (result["isError"].clone(), result["error"]["code"].clone()),
            (json!(true), json!("FS_INVALID_ARGUMENT"))
        );
        assert!(text(&result).contains("owner"), "{result}");
        let refused = rpc(&mut raw, "file/read", json!({"path": s(&f), "owner": bad}));
        assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT", "{refused}");
    }
    read_tool(&mut raw, Some(&"o".repeat(128)), &f, json!({}));
    read_tool(&mut raw, Some("second"), &f, json!({}));
    let result = tool_as(&mut raw, Some("third"), "read", json!({"file_path": s(&f)}));
    assert_eq!(result["error"]["code"], "FS_INVALID_ARGUMENT", "{result}");
    assert!(text(&result).contains("2 owners"), "{result}");
    assert_eq!(
        fs_error(&rpc(&mut raw, "file/stat", json!({"path": s(&f), "owner": "third"}))),
        "FS_INVALID_ARGUMENT"
    );
    // Known owners and the default owner still work.
    read_tool(&mut raw, Some("second"), &f, json!({}));
    read_tool(&mut raw, None, &f, json!({}));
    assert_eq!(raw.call("daemon/status", None)["owners"], 2);
}

// ---------------------------------------------------------------------------------------------
// Deduplicated re-reads
// ---------------------------------------------------------------------------------------------

fn is_short(text: &str) -> bool {
    text.starts_with("(Unchanged:") && !text.contains('\t')
}

#[test]
fn dedup_answers_short_only_for_the_same_lines_of_the_same_version() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "d.txt", &lines(50));
    let (mut raw, _) = session(&daemon, json!({"dedupReads": true}));

    let full = read_tool(&mut raw, None, &f, json!({}));
    assert!(full.contains("1\tline 1 of"), "{full}");
    let short = read_tool(&mut raw, None, &f, json!({}));
    assert!(is_short(&short), "{short}");
    assert!(short.contains("d.txt") && short.contains("read again"), "{short}");
    assert_eq!(read_tool(&mut raw, None, &f, json!({})), full, "the next identical ask gets the text");
    assert!(is_short(&read_tool(&mut raw, None, &f, json!({}))));

    // A different window is sent in full (then deduplicated on its own).
    let window = read_tool(&mut raw, None, &f, json!({"offset": 10, "limit": 5}));
    assert!(window.contains("10\tline 10 of") && !window.contains("line 15 of"), "{window}");
    assert!(is_short(&read_tool(&mut raw, None, &f, json!({"offset": 10, "limit": 5}))));
    let wider = read_tool(&mut raw, None, &f, json!({"offset": 10, "limit": 6}));
    assert!(wider.contains("line 15 of"), "{wider}");

    // Any outside change (a new version) sends the text.
    read_tool(&mut raw, None, &f, json!({"offset": 20, "limit": 3}));
    std::fs::write(&f, lines(51)).unwrap();
    let again = read_tool(&mut raw, None, &f, json!({"offset": 20, "limit": 3}));
    assert!(again.contains("20\tline 20 of"), "{again}");

    // An owner's own edit is a new version too.
    read_tool(&mut raw, None, &f, json!({"offset": 1, "limit": 3}));
    assert_eq!(edit_tool(&mut raw, None, &f, "line 40 of", "line forty of")["isError"], false);
    assert!(!is_short(&read_tool(&mut raw, None, &f, json!({"offset": 1, "limit": 3}))));

    // Each owner has its own record.
    read_tool(&mut raw, Some("sub"), &f, json!({"offset": 1, "limit": 3}));
    assert!(is_short(&read_tool(&mut raw, Some("sub"), &f, json!({"offset": 1, "limit": 3}))));
    assert!(is_short(&read_tool(&mut raw, None, &f, json!({"offset": 1, "limit": 3}))));
}

#[test]
fn dedup_is_off_by_default_and_never_on_file_read() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "e.txt", &lines(20));
    let (mut plain, _) = session(&daemon, json!({}));
    let first = read_tool(&mut plain, None, &f, json!({}));
    assert_eq!(read_tool(&mut plain, None, &f, json!({})), first);
    assert_eq!(read_tool(&mut plain, None, &f, json!({})), first);

    let (mut dedup, _) = session(&daemon, json!({"dedupReads": true}));
    let a = ok(&mut dedup, "file/read", json!({"path": s(&f)}));
    let b = ok(&mut dedup, "file/read", json!({"path": s(&f)}));
    assert_eq!(a, b);
    assert_eq!(b["lines"].as_array().map(Vec::len), Some(20));
    // file/read delivered nothing to the model: the read tool still sends the text first.
    assert!(!is_short(&read_tool(&mut dedup, None, &f, json!({}))));
}

#[test]
fn context_reset_sends_everything_again_for_one_owner_or_all() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "g.txt", &lines(30));
    let (mut raw, _) = session(&daemon, json!({"dedupReads": true}));
    for owner in [None, Some("a"), Some("b")] {
        read_tool(&mut raw, owner, &f, json!({}));
    }
    assert_eq!(ok(&mut raw, "session/contextReset", json!({"owner": "a"})), Value::Null);
    assert!(!is_short(&read_tool(&mut raw, Some("a"), &f, json!({}))), "a was reset");
    assert!(is_short(&read_tool(&mut raw, Some("b"), &f, json!({}))), "b was not");
    read_tool(&mut raw, Some("b"), &f, json!({}));
    // No owner: every owner, the default one included; params may be left out.
    assert_eq!(raw.call("session/contextReset", None), Value::Null);
    for owner in [None, Some("a"), Some("b")] {
        assert!(!is_short(&read_tool(&mut raw, owner, &f, json!({}))), "{owner:?}");
    }
    let refused = rpc(&mut raw, "session/contextReset", json!({"owner": "x".repeat(200)}));
    assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT");
    let refused = rpc(&mut raw, "session/contextReset", json!({"owners": "a"}));
    assert_eq!(error_code(&refused), -32602, "{refused}");
}

// ---------------------------------------------------------------------------------------------
// Resume
// ---------------------------------------------------------------------------------------------

fn resumable(daemon: &Daemon) -> (Raw, String) {
    let (raw, result) = session(daemon, json!({"resumable": true}));
    let token =
        result["resumeToken"].as_str().unwrap_or_else(|| panic!("no resumeToken: {result}")).to_owned();
    assert!(token.len() >= 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    (raw, token)
}

fn resume_refused(daemon: &Daemon, token: &str) {
    let mut raw = Raw::connect(&daemon.socket);
    let params = json!({"roots": [root_of(daemon)], "resume": token});
    let refused = raw.request("initialize", Some(params));
    assert_eq!(error_code(&refused), -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["resume"], "refused", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("cannot be resumed"), "{refused}");
    // The session is still uninitialized: a fresh initialize works on the same connection.
    raw.call("initialize", Some(json!({"roots": [root_of(daemon)]})));
}

#[test]
fn a_resumed_session_keeps_its_observations_but_not_stale_ones() {
    let daemon = Daemon::start(&[]);
    let kept = file(&daemon, "kept.txt", "keep me\n");
    let theirs = file(&daemon, "theirs.txt", "sub-agent's\n");
    let changed = file(&daemon, "changed.txt", "before\n");
    let (mut first, token) = resumable(&daemon);
    ok(&mut first, "file/read", json!({"path": s(&kept)}));
    ok(&mut first, "file/read", json!({"path": s(&theirs), "owner": "sub"}));
    ok(&mut first, "file/read", json!({"path": s(&changed)}));
    assert!(raw_status(&daemon)["watchedPaths"].as_u64() >= Some(1));
    drop(first);
    std::fs::write(&changed, "after\n").unwrap();

    // Reconnect at once: the daemon may not have seen the old connection close yet.
    let (mut second, result) = session(&daemon, json!({"resume": token, "resumable": true}));
    let next = result["resumeToken"].as_str().expect("resumable again: a new token").to_owned();
    assert_ne!(next, token);
    // The notice about `changed` may come while these edits are answered: kept, not skipped.
    let mut notes = Vec::new();
    let mut edit = |owner: Option<&str>, path: &Path, old: &str, new: &str| {
        let params = with_owner(json!({"path": s(path), "oldString": old, "newString": new}), owner);
        second.request_collecting_notifications("file/edit", Some(params), &mut notes)
    };
    assert!(edit(None, &kept, "keep", "kept").get("error").is_none());
    assert!(edit(Some("sub"), &theirs, "sub", "SUB").get("error").is_none());
    assert_eq!(fs_error(&edit(None, &theirs, "SUB", "x")), "FS_NOT_OBSERVED");

    // Changed while nobody was connected: told, and refused as stale.
    let mut told: Vec<Value> =
        notes.into_iter().filter(|n| n["method"] == DID_CHANGE).map(|n| n["params"].clone()).collect();
    if told.is_empty() {
        told.push(second.expect_notification(DID_CHANGE, NOTICE));
    }
    assert_eq!(told.len(), 1, "{told:?}");
    let notice = &told[0];
    assert_eq!(notice["path"], json!(s(&changed.canonicalize().unwrap())), "{notice}");
    assert_eq!(fs_error(&file_edit(&mut second, None, &changed, "after", "x")), "FS_STALE_VERSION");

    // A token works once.
    resume_refused(&daemon, &token);
    drop(second);
    // The new token takes over what the second session had.
    let (mut third, _) = session(&daemon, json!({"resume": next}));
    assert!(file_edit(&mut third, None, &kept, "kept", "kept again").get("error").is_none());
}

fn raw_status(daemon: &Daemon) -> Value {
    daemon.status()
}

#[test]
fn a_changed_file_is_stale_even_when_its_folder_is_watched_by_others() {
    let daemon = Daemon::start(&[]);
    let f = file(&daemon, "h.txt", "v1\n");
    let (mut other, _) = session(&daemon, json!({}));
    ok(&mut other, "file/read", json!({"path": s(&f)}));
    let (mut first, token) = resumable(&daemon);
    ok(&mut first, "file/read", json!({"path": s(&f)}));
    first.call("shutdown", None);
    drop(first);
    std::fs::write(&f, "v2\n").unwrap();
    other.expect_notification(DID_CHANGE, NOTICE);
    let (mut second, _) = session(&daemon, json!({"resume": token}));
    assert_eq!(fs_error(&file_edit(&mut second, None, &f, "v2", "v3")), "FS_STALE_VERSION");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v2\n");
}

#[test]
fn unknown_and_expired_tokens_are_refused() {
    let daemon = Daemon::start(&["--resume-grace", "0.3"]);
    resume_refused(&daemon, "no-such-token");
    resume_refused(&daemon, &"0".repeat(64));
    let (first, token) = resumable(&daemon);
    drop(first);
    std::thread::sleep(Duration::from_millis(800));
    resume_refused(&daemon, &token);
    assert_eq!(daemon.status()["parkedSessions"], 0);
}

#[test]
fn parked_sessions_are_bounded_and_hold_no_watches() {
    let daemon = Daemon::start(&["--max-parked-sessions", "2", "--max-parked-bytes", "65536"]);
    let f = file(&daemon, "p.txt", "x\n");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let (mut raw, token) = resumable(&daemon);
        ok(&mut raw, "file/read", json!({"path": s(&f)}));
        raw.call("shutdown", None);
        drop(raw);
        tokens.push(token);
        // Parked in order (the oldest is dropped first).
        let parked = tokens.len().min(2) as u64;
        wait_for(&daemon, |status| status["parkedSessions"] == parked);
    }
    // Parked sessions keep their observations, not their watches.
    wait_for(&daemon, |status| status["watchedPaths"] == 0);
    let status = daemon.status();
    assert!(status["parkedBytes"].as_u64().unwrap() <= 65536, "{status}");
    resume_refused(&daemon, &tokens[0]);
    let (mut resumed, _) = session(&daemon, json!({"resume": tokens[2]}));
    assert!(daemon.status()["watchedPaths"].as_u64() >= Some(1), "watched again once resumed");
    assert!(file_edit(&mut resumed, None, &f, "x", "y").get("error").is_none());

    // A session too big for the byte budget is not kept at all.
    let (mut big, token) = resumable(&daemon);
    for n in 0..600 {
        let path = file(&daemon, &format!("many-{n:04}-with-a-rather-long-name-to-take-room.txt"), "z\n");
        ok(&mut big, "file/read", json!({"path": s(&path)}));
    }
    drop(big);
    wait_for(&daemon, |status| status["parkedSessions"] == 1);
    resume_refused(&daemon, &token);
}

/// Waits (bounded) until `daemon/status` satisfies `check`.
fn wait_for(daemon: &Daemon, check: impl Fn(&Value) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = daemon.status();
        if check(&status) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "status never matched: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
