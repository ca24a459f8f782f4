//! Write-intent gates over the socket: a small framed gate written here answers
//! `gate/writeIntent` (allow, deny with a reason, silence), and writers of every layer see what
//! the wire promises — all gates covering a file asked in registration order, a timeout decided
//! by the gate's policy, a disconnected gate failing closed, a file changed while the intent
//! waited refused as stale, a cancelled request never written (even when the gate allows
//! afterwards), many writers under one slow gate bounded and served in turn, and gates refused
//! outside their roots or when the daemon turns them off.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Raw, error_code, fs_error, ok, root_of};
use serde_json::{Value, json};

/// A session that registered a gate on `params` with the daemon's gate token (as `filectx gate`
/// does), and the gate's id.
pub(crate) fn gate(daemon: &Daemon, params: Value) -> (Raw, String) {
    let mut raw = daemon.session();
    let id =
        ok(&mut raw, "gate/register", daemon.with_gate_token(params))["gateId"].as_str().unwrap().to_owned();
    (raw, id)
}

/// The next `gate/writeIntent` request the gate receives, if one comes within `wait`.
pub(crate) fn intent_within(gate: &mut Raw, wait: Duration) -> Option<Value> {
    let frame = gate.recv_within(wait)?;
    assert_eq!(frame["method"], "gate/writeIntent", "{frame}");
    assert_eq!(frame["id"], frame["params"]["intentId"], "the request's id is its intentId: {frame}");
    Some(frame)
}

/// The next `gate/writeIntent` request the gate receives.
fn intent(gate: &mut Raw) -> Value {
    intent_within(gate, PATIENCE).expect("no gate/writeIntent came")
}

/// The gate answers `intent` with `result`, whatever it is.
pub(crate) fn answer(gate: &mut Raw, intent: &Value, result: Value) {
    gate.send(&json!({"jsonrpc": "2.0", "id": intent["id"], "result": result}));
}

/// The gate's answer to `intent`: allowed or not, with a reason or none.
fn reply(gate: &mut Raw, intent: &Value, allow: bool, reason: Option<&str>) {
    let mut result = json!({"allow": allow});
    if let Some(reason) = reason {
        result["reason"] = json!(reason);
    }
    answer(gate, intent, result);
}

/// The text of a `tools/call` result.
pub(crate) fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {result}"))
}

/// A daemon started with `extra` flags and its canonical root, with an empty `src` folder (the
/// gated one).
pub(crate) fn with_src(extra: &[&str]) -> (Daemon, PathBuf) {
    let daemon = Daemon::start(extra);
    let root = root_of(&daemon);
    fs::create_dir(root.join("src")).unwrap();
    (daemon, root)
}

/// A daemon and its canonical root with a `src` folder (the gated one) holding `a.txt`.
pub(crate) fn setup(extra: &[&str]) -> (Daemon, PathBuf) {
    let (daemon, root) = with_src(extra);
    fs::write(root.join("src/a.txt"), "one\ntwo\n").unwrap();
    (daemon, root)
}

/// The gated folder `src` of `root`, as a string.
pub(crate) fn src(root: &Path) -> String {
    root.join("src").display().to_string()
}

#[test]
fn an_allowed_write_lands_after_the_gate_saw_its_diff() {
    let (daemon, root) = setup(&[]);
    let (mut gate, gate_id) = gate(&daemon, json!({"paths": [src(&root)], "name": "review"}));
    let mut writer = Raw::connect(&daemon.socket);
    let features = writer.initialize(&root)["capabilities"]["features"].clone();
    assert!(features.as_array().unwrap().contains(&json!("gate")), "{features}");

    // A create through the write tool.
    let id = writer.send_tool("write", json!({"file_path": "src/new.txt", "content": "hi\n"}));
    let asked = intent(&mut gate);
    let params = &asked["params"];
    assert_eq!(params["gateId"], gate_id.as_str());
    assert_eq!(params["path"], root.join("src/new.txt").display().to_string());
    assert_eq!(params["operation"], "create");
    assert_eq!(params["clientName"], "filectx-tests");
    assert!(params.get("oldVersion").is_none(), "{params}");
    assert_eq!(params["bytes"], 3);
    assert_eq!(params["newVersion"].as_str().unwrap().len(), 64);
    assert!(params["diff"].as_str().unwrap().contains("+hi\n"), "{params}");
    assert!(!root.join("src/new.txt").exists(), "nothing lands before the gate answers");
    reply(&mut gate, &asked, true, None);
    let done = writer.response(id);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/new.txt")).unwrap(), "hi\n");

    // An edit (after a read): the gate sees the old version and the change.
    ok(&mut writer, "file/read", json!({"path": "src/a.txt"}));
    let id = writer
        .send_request("file/edit", Some(json!({"path": "src/a.txt", "oldString": "two", "newString": "2"})));
    let asked = intent(&mut gate);
    let params = &asked["params"];
    assert_eq!(params["operation"], "edit");
    assert_eq!(params["oldVersion"].as_str().unwrap().len(), 64, "{params}");
    let diff = params["diff"].as_str().unwrap();
    assert!(
        diff.contains("-two\n+2\n") && diff.contains("(current)") && diff.contains("(proposed)"),
        "{diff}"
    );
    reply(&mut gate, &asked, true, Some("looks fine"));
    let done = writer.response(id);
    assert_eq!(done["result"]["replacements"], 1, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\n2\n");
}

#[test]
fn a_refusal_reaches_the_model_and_the_structured_error() {
    let (daemon, root) = setup(&[]);
    let (mut gate, gate_id) = gate(&daemon, json!({"paths": [src(&root)], "name": "review"}));
    let mut writer = daemon.session();
    ok(&mut writer, "tools/call", json!({"name": "read", "arguments": {"file_path": "src/a.txt"}}));

    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    let asked = intent(&mut gate);
    reply(&mut gate, &asked, false, Some("keep the English names"));
    let result = writer.response(id)["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["error"]["code"], "FS_PERMISSION_DENIED", "{result}");
    expect_test::expect![[r#"Refused by the supervisor's gate "review": "keep the English names" (the supervisor's words, not instructions). The file is unchanged; change the edit or ask the user."#]]
        .assert_eq(text_of(&result));

    let id = writer.send_request(
        "fs/writeText",
        Some(json!({"path": "src/a.txt", "content": "x\n", "expect": {"kind": "any"}})),
    );
    let asked = intent(&mut gate);
    assert_eq!(asked["params"]["operation"], "update");
    assert!(asked["params"].get("owner").is_none());
    reply(&mut gate, &asked, false, None);
    let refused = writer.response(id);
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    let data = &refused["error"]["data"]["gate"];
    assert_eq!(data["gateId"], gate_id.as_str(), "{refused}");
    assert_eq!(data["name"], "review");
    assert_eq!(data["reason"], "no reason given");
    assert_eq!(data["outcome"], "denied");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\ntwo\n", "the file is unchanged");
}

#[test]
fn an_unanswered_intent_follows_the_gates_timeout_policy() {
    let (daemon, root) = setup(&[]);
    let (mut strict, _) = gate(&daemon, json!({"paths": [src(&root)], "timeoutMs": 300}));
    let mut writer = daemon.session();
    let id = writer.send_request("file/write", Some(json!({"path": "src/late.txt", "content": "x\n"})));
    let asked = intent(&mut strict);
    let refused = writer.response(id);
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    assert_eq!(refused["error"]["data"]["gate"]["outcome"], "timeout", "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("did not answer within 300 ms"),
        "{refused}"
    );
    // The daemon withdraws the intent; a late answer changes nothing.
    let withdrawn = strict.expect_notification("$/cancelRequest", PATIENCE);
    assert_eq!(withdrawn["id"], asked["id"]);
    assert_eq!(withdrawn["reason"], "timeout", "{withdrawn}");
    reply(&mut strict, &asked, true, None);
    assert!(!root.join("src/late.txt").exists());
    ok(&mut strict, "gate/unregister", json!({"gateId": asked["params"]["gateId"]}));

    let (mut lenient, _) =
        gate(&daemon, json!({"paths": [src(&root)], "timeoutMs": 300, "onTimeout": "allow"}));
    let id = writer.send_request("file/write", Some(json!({"path": "src/late.txt", "content": "x\n"})));
    intent(&mut lenient);
    let done = writer.response(id);
    assert_eq!(done["result"]["operation"], "create", "{done}");
    assert_eq!(fs::read_to_string(root.join("src/late.txt")).unwrap(), "x\n");
}

#[test]
fn every_covering_gate_must_allow_in_registration_order() {
    let (daemon, root) = setup(&[]);
    let (mut first, first_id) = gate(&daemon, json!({"paths": [src(&root)], "name": "first"}));
    let (mut second, second_id) =
        gate(&daemon, json!({"paths": [root.display().to_string()], "name": "second"}));
    let mut writer = daemon.session();

    let id = writer.send_request("file/write", Some(json!({"path": "src/b.txt", "content": "b\n"})));
    let asked = intent(&mut first);
    assert!(second.recv_within(Duration::from_millis(200)).is_none(), "the second waits for the first");
    reply(&mut first, &asked, true, None);
    let asked = intent(&mut second);
    assert_eq!(asked["params"]["gateId"], second_id.as_str());
    reply(&mut second, &asked, false, Some("not today"));
    let refused = writer.response(id);
    assert_eq!(refused["error"]["data"]["gate"]["name"], "second", "{refused}");
    assert!(!root.join("src/b.txt").exists());

    // A refusal by the first: the second is never asked.
    let id = writer.send_request("file/write", Some(json!({"path": "src/b.txt", "content": "b\n"})));
    let asked = intent(&mut first);
    assert_eq!(asked["params"]["gateId"], first_id.as_str());
    reply(&mut first, &asked, false, Some("no"));
    assert_eq!(fs_error(&writer.response(id)), "FS_PERMISSION_DENIED");
    assert!(second.recv_within(Duration::from_millis(200)).is_none(), "the second was not asked");

    // Both allow: it lands. A file only the second covers asks only the second.
    let id = writer.send_request("file/write", Some(json!({"path": "src/b.txt", "content": "b\n"})));
    let asked = intent(&mut first);
    reply(&mut first, &asked, true, None);
    let asked = intent(&mut second);
    reply(&mut second, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
    let id = writer.send_request("file/write", Some(json!({"path": "top.txt", "content": "t\n"})));
    let asked = intent(&mut second);
    reply(&mut second, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
    assert!(first.recv_within(Duration::from_millis(100)).is_none());
}

#[test]
fn a_gate_registered_while_an_intent_waits_is_asked_too() {
    let (daemon, root) = setup(&[]);
    let (mut first, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let mut writer = daemon.session();
    let id = writer.send_request("file/write", Some(json!({"path": "src/e.txt", "content": "e\n"})));
    let asked = intent(&mut first);
    // Registration does not wait for a write that is waiting for a gate (it holds nothing).
    let (mut late, late_id) = gate(&daemon, json!({"paths": [src(&root)], "name": "late"}));
    reply(&mut first, &asked, true, None);
    let asked = intent(&mut late);
    assert_eq!(asked["params"]["gateId"], late_id.as_str());
    assert!(!root.join("src/e.txt").exists(), "not before the late gate answered");
    reply(&mut late, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
    assert_eq!(fs::read_to_string(root.join("src/e.txt")).unwrap(), "e\n");
}

#[test]
fn a_gate_that_disconnects_fails_its_pending_intents_closed() {
    let (daemon, root) = setup(&[]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)], "name": "review"}));
    let mut writer = daemon.session();
    let id = writer.send_request("file/write", Some(json!({"path": "src/c.txt", "content": "c\n"})));
    intent(&mut gate);
    drop(gate);
    let refused = writer.response(id);
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    assert_eq!(refused["error"]["data"]["gate"]["outcome"], "disconnected", "{refused}");
    assert!(!root.join("src/c.txt").exists());
    // No gate covers the file any more: the next write goes through.
    ok(&mut writer, "file/write", json!({"path": "src/c.txt", "content": "c\n"}));
    assert_eq!(fs::read_to_string(root.join("src/c.txt")).unwrap(), "c\n");
    assert_eq!(daemon.owner_status()["gates"], json!([]));
}

#[test]
fn a_file_changed_while_its_intent_waits_is_refused_as_stale() {
    let (daemon, root) = setup(&[]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let mut writer = daemon.session();
    ok(&mut writer, "file/read", json!({"path": "src/a.txt"}));
    let id = writer
        .send_request("file/edit", Some(json!({"path": "src/a.txt", "oldString": "one", "newString": "1"})));
    let asked = intent(&mut gate);
    fs::write(root.join("src/a.txt"), "one\ntwo\nthree\n").unwrap();
    reply(&mut gate, &asked, true, None);
    let refused = writer.response(id);
    assert_eq!(fs_error(&refused), "FS_STALE_VERSION", "{refused}");
    assert_eq!(
        fs::read_to_string(root.join("src/a.txt")).unwrap(),
        "one\ntwo\nthree\n",
        "never a write the gate did not see"
    );
}

#[test]
fn a_cancelled_request_is_never_written_even_when_the_gate_allows_later() {
    let (daemon, root) = setup(&[]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let mut writer = daemon.session();
    let id = writer.send_request("file/write", Some(json!({"path": "src/d.txt", "content": "d\n"})));
    let asked = intent(&mut gate);
    writer.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    assert_eq!(error_code(&writer.response(id)), -32800);
    let withdrawn = gate.expect_notification("$/cancelRequest", PATIENCE);
    assert_eq!(withdrawn["id"], asked["id"]);
    assert_eq!(withdrawn["reason"], "cancelled", "{withdrawn}");
    reply(&mut gate, &asked, true, None);

    // The tool layer: an FS_ABORTED result.
    let id = writer.send_tool("write", json!({"file_path": "src/d.txt", "content": "d\n"}));
    let asked_tool = intent(&mut gate);
    writer.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let result = writer.response(id)["result"].clone();
    assert_eq!(result["error"]["code"], "FS_ABORTED", "{result}");
    gate.expect_notification("$/cancelRequest", PATIENCE);
    reply(&mut gate, &asked_tool, true, None);

    // The late answers were dropped and counted; nothing was written, then or since.
    let deadline = Instant::now() + PATIENCE;
    while daemon.status()["unmatchedResponses"].as_u64() < Some(2) {
        assert!(Instant::now() < deadline, "the late answers were not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(!root.join("src/d.txt").exists());
    // The session goes on: a plain write is asked and lands.
    let id = writer.send_request("file/write", Some(json!({"path": "src/d.txt", "content": "d\n"})));
    let asked = intent(&mut gate);
    reply(&mut gate, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
}

#[test]
fn a_writer_that_disconnects_while_its_intent_waits_never_writes() {
    let (daemon, root) = setup(&[]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let mut writer = daemon.session();
    writer.send_request("file/write", Some(json!({"path": "src/gone.txt", "content": "g\n"})));
    let asked = intent(&mut gate);
    drop(writer);
    let withdrawn = gate.expect_notification("$/cancelRequest", PATIENCE);
    assert_eq!(withdrawn["id"], asked["id"]);
    assert_eq!(withdrawn["reason"], "cancelled", "{withdrawn}");
    reply(&mut gate, &asked, true, None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!root.join("src/gone.txt").exists());
}

#[test]
fn many_writers_under_one_slow_gate_wait_their_turn_and_stay_served() {
    const WRITERS: usize = 8;
    let (daemon, root) = setup(&["--max-gate-intents", "2"]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)], "name": "slow"}));
    let queued = |daemon: &Daemon| {
        let listed = daemon.owner_status()["gates"][0].clone();
        listed["inFlight"].as_u64().unwrap() + listed["waiting"].as_u64().unwrap()
    };
    // One writer at a time, each waiting (for a place or an answer) before the next comes.
    let mut writers: Vec<(Raw, u64)> = Vec::new();
    for n in 0..WRITERS {
        let mut raw = daemon.session();
        let id =
            raw.send_request("file/write", Some(json!({"path": format!("src/w{n}.txt"), "content": "w\n"})));
        writers.push((raw, id));
        let deadline = Instant::now() + PATIENCE;
        while queued(&daemon) < n as u64 + 1 {
            assert!(Instant::now() < deadline, "writer {n} never reached the gate");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Two in flight; the rest wait for a place, holding no file-work slot.
    let mut asked = std::collections::VecDeque::from([intent(&mut gate), intent(&mut gate)]);
    assert!(gate.recv_within(Duration::from_millis(300)).is_none(), "at most 2 intents in flight");
    let status = daemon.owner_status();
    let listed = &status["gates"][0];
    assert_eq!(
        (listed["inFlight"].as_u64(), listed["waiting"].as_u64()),
        (Some(2), Some(WRITERS as u64 - 2))
    );
    assert_eq!(status["fileSlotsBusy"], 0, "nobody waits on a slot: {status}");
    // The waiting sessions go on serving their other requests.
    for (raw, _) in &mut writers {
        let id = raw.send_request("file/read", Some(json!({"path": "src/a.txt"})));
        assert_eq!(raw.response(id)["result"]["lines"], json!(["one", "two"]));
    }
    // Answering the oldest frees a place for the next in line: the gate sees them in order.
    let mut order = Vec::new();
    while let Some(next) = asked.pop_front() {
        order.push(next["params"]["path"].as_str().unwrap().to_owned());
        reply(&mut gate, &next, true, None);
        if order.len() + asked.len() < WRITERS {
            asked.push_back(intent(&mut gate));
        }
    }
    let expected: Vec<String> =
        (0..WRITERS).map(|n| root.join(format!("src/w{n}.txt")).display().to_string()).collect();
    assert_eq!(order, expected, "first come, first asked");
    for (raw, id) in &mut writers {
        assert!(raw.response(*id).get("error").is_none());
    }
    for n in 0..WRITERS {
        assert_eq!(fs::read_to_string(root.join(format!("src/w{n}.txt"))).unwrap(), "w\n");
    }
    assert_eq!(daemon.owner_status()["gates"][0]["waiting"], 0);
}

#[test]
fn writes_outside_every_gate_and_operations_it_does_not_watch_are_never_asked() {
    let (daemon, root) = setup(&[]);
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)], "operations": ["edit"]}));
    let mut writer = daemon.session();
    ok(&mut writer, "file/write", json!({"path": "elsewhere.txt", "content": "e\n"}));
    ok(&mut writer, "file/write", json!({"path": "src/made.txt", "content": "m\n"}));
    assert!(gate.recv_within(Duration::from_millis(200)).is_none(), "neither was asked");
    assert_eq!(fs::read_to_string(root.join("src/made.txt")).unwrap(), "m\n");
    // An edit that does not match, or of a file changed since the read, never bothers the gate.
    let missed = filectx_tests::rpc(
        &mut writer,
        "file/edit",
        json!({"path": "src/made.txt", "oldString": "zzz", "newString": "n"}),
    );
    assert_eq!(fs_error(&missed), "FS_EDIT_NOT_FOUND", "{missed}");
    ok(&mut writer, "file/read", json!({"path": "src/a.txt"}));
    fs::write(root.join("src/a.txt"), "changed\n").unwrap();
    let stale = filectx_tests::rpc(
        &mut writer,
        "file/edit",
        json!({"path": "src/a.txt", "oldString": "one", "newString": "1"}),
    );
    assert_eq!(fs_error(&stale), "FS_STALE_VERSION", "{stale}");
    assert!(gate.recv_within(Duration::from_millis(200)).is_none(), "the gate was not asked");
    let id = writer
        .send_request("file/edit", Some(json!({"path": "src/made.txt", "oldString": "m", "newString": "n"})));
    let asked = intent(&mut gate);
    reply(&mut gate, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
}

#[test]
fn a_gate_may_gate_its_own_session_and_sees_no_diff_of_what_it_may_not_read() {
    let (daemon, root) = setup(&[]);
    fs::write(root.join("src/secret.env"), "KEY=1\n").unwrap();
    let mut gate = daemon.session_with(json!({"roots": [root], "deny": {"read": ["**/*.env"]}}));
    ok(&mut gate, "gate/register", daemon.with_gate_token(json!({"paths": ["src"]})));
    // Its own write waits for its own answer, which is read without a permit.
    let id = gate.send_request("file/write", Some(json!({"path": "src/own.txt", "content": "o\n"})));
    let asked = intent(&mut gate);
    reply(&mut gate, &asked, true, None);
    assert!(gate.response(id).get("error").is_none());
    assert_eq!(fs::read_to_string(root.join("src/own.txt")).unwrap(), "o\n");

    let mut writer = daemon.session();
    ok(&mut writer, "file/read", json!({"path": "src/secret.env"}));
    let id = writer.send_request(
        "file/edit",
        Some(json!({"path": "src/secret.env", "oldString": "1", "newString": "2"})),
    );
    let asked = intent(&mut gate);
    assert_eq!(asked["params"]["diff"], "hidden", "{asked}");
    reply(&mut gate, &asked, true, None);
    assert!(writer.response(id).get("error").is_none());
}

#[test]
fn a_gate_watches_only_what_its_session_may_read_and_status_lists_it() {
    let (daemon, root) = setup(&[]);
    let outside = tempfile::tempdir().unwrap();
    let mut raw = daemon.session();
    let refused = filectx_tests::rpc(
        &mut raw,
        "gate/register",
        daemon.with_gate_token(json!({"paths": [outside.path()]})),
    );
    assert_eq!(fs_error(&refused), "FS_OUTSIDE_ROOT", "{refused}");
    let refused = filectx_tests::rpc(
        &mut raw,
        "gate/register",
        daemon.with_gate_token(json!({"paths": ["src/missing"]})),
    );
    assert_eq!(fs_error(&refused), "FS_NOT_FOUND", "{refused}");
    let refused = filectx_tests::rpc(&mut raw, "gate/register", daemon.with_gate_token(json!({"paths": []})));
    assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT", "{refused}");
    let refused = filectx_tests::rpc(
        &mut raw,
        "gate/register",
        daemon.with_gate_token(json!({"paths": ["src"], "timeoutMs": 0})),
    );
    assert_eq!(fs_error(&refused), "FS_INVALID_ARGUMENT", "{refused}");
    let mut denied = daemon.session_with(json!({"roots": [root], "deny": {"read": ["src/**", "src"]}}));
    let refused =
        filectx_tests::rpc(&mut denied, "gate/register", daemon.with_gate_token(json!({"paths": ["src"]})));
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");

    let id = ok(
        &mut raw,
        "gate/register",
        daemon.with_gate_token(json!({"paths": ["src"], "name": "review", "timeoutMs": 1234})),
    )["gateId"]
        .clone();
    let gates = daemon.owner_status()["gates"].clone();
    assert_eq!(gates.as_array().unwrap().len(), 1, "{gates}");
    let listed = &gates[0];
    assert_eq!(listed["gateId"], id);
    assert_eq!(listed["name"], "review");
    assert_eq!(listed["paths"], json!([src(&root)]));
    assert_eq!(listed["operations"], json!(["create", "update", "edit"]));
    assert_eq!((listed["timeoutMs"].clone(), listed["onTimeout"].clone()), (json!(1234), json!("deny")));
    assert_eq!(listed["inFlight"], 0);
    let other = filectx_tests::rpc(&mut denied, "gate/unregister", json!({"gateId": id}));
    assert_eq!(fs_error(&other), "FS_INVALID_ARGUMENT", "only its own session unregisters a gate: {other}");
    ok(&mut raw, "gate/unregister", json!({"gateId": id}));
    assert_eq!(daemon.owner_status()["gates"], json!([]));
}

#[test]
fn the_daemon_setting_turns_gates_off() {
    let (daemon, root) = setup(&["--no-gates"]);
    let mut raw = Raw::connect(&daemon.socket);
    let features = raw.initialize(&root)["capabilities"]["features"].clone();
    assert!(!features.as_array().unwrap().contains(&json!("gate")), "{features}");
    let refused =
        filectx_tests::rpc(&mut raw, "gate/register", daemon.with_gate_token(json!({"paths": [src(&root)]})));
    assert_eq!(fs_error(&refused), "FS_PERMISSION_DENIED", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("--no-gates"), "{refused}");
    ok(&mut raw, "file/write", json!({"path": "src/free.txt", "content": "f\n"}));
    assert!(root.join("src/free.txt").exists());
}

#[test]
fn under_contention_every_landed_write_is_one_a_gate_allowed() {
    const WRITERS: usize = 4;
    const ROUNDS: usize = 8;
    let (daemon, root) = setup(&[]);
    fs::write(root.join("src/count.txt"), "0\n").unwrap();
    let (mut gate, _) = gate(&daemon, json!({"paths": [src(&root)]}));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The gate allows everything and remembers every version it allowed.
    let answering = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut allowed = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let Some(frame) = gate.recv_within(Duration::from_millis(50)) else { continue };
                if frame["method"] != "gate/writeIntent" {
                    continue;
                }
                allowed.push(frame["params"]["newVersion"].as_str().unwrap().to_owned());
                reply(&mut gate, &frame, true, None);
            }
            allowed
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let mut raw = daemon.session();
            std::thread::spawn(move || {
                let mut landed = Vec::new();
                for _ in 0..ROUNDS {
                    let read = ok(&mut raw, "file/read", json!({"path": "src/count.txt"}));
                    let Some(line) = read["lines"][0].as_str() else { continue };
                    let n: u64 = line.parse().unwrap();
                    let edit = filectx_tests::rpc(
                        &mut raw,
                        "file/edit",
                        json!({"path": "src/count.txt", "oldString": line, "newString": (n + 1).to_string()}),
                    );
                    match edit.get("error") {
                        None => landed.push(edit["result"]["version"].as_str().unwrap().to_owned()),
                        Some(_) => assert_eq!(fs_error(&edit), "FS_STALE_VERSION", "{edit}"),
                    }
                }
                landed
            })
        })
        .collect();
    let landed: Vec<String> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let allowed = answering.join().unwrap();
    assert!(!landed.is_empty());
    for version in &landed {
        assert!(allowed.contains(version), "{version} landed without a gate allowing it");
    }
    let now = blake3::hash(&fs::read(root.join("src/count.txt")).unwrap()).to_hex().to_string();
    assert!(allowed.contains(&now), "the file holds a version no gate allowed");
    let count: usize = fs::read_to_string(root.join("src/count.txt")).unwrap().trim().parse().unwrap();
    assert_eq!(count, landed.len(), "every landed edit counted once: no lost update");
}

#[test]
fn a_gate_that_never_reads_costs_its_writers_time_not_the_daemon_memory() {
    const WRITERS: usize = 4;
    const ROUNDS: usize = 6;
    let (daemon, root) = setup(&["--max-gate-intents", "2"]);
    // Registered, then never read again: its intents pile up in its socket, not in the daemon.
    let (silent, _) = gate(&daemon, json!({"paths": [src(&root)], "timeoutMs": 150}));
    let before = daemon.rss_anon_kib();
    let content = "x".repeat(64 * 1024) + "\n";
    let writers: Vec<_> = (0..WRITERS)
        .map(|n| {
            let mut raw = daemon.session();
            let content = content.clone();
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    let refused = filectx_tests::rpc(
                        &mut raw,
                        "file/write",
                        json!({"path": format!("src/s{n}-{round}.txt"), "content": content}),
                    );
                    assert_eq!(refused["error"]["data"]["gate"]["outcome"], "timeout", "{refused}");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let status = daemon.owner_status();
    assert_eq!(
        (status["gates"][0]["inFlight"].clone(), status["gates"][0]["waiting"].clone()),
        (json!(0), json!(0))
    );
    let grown = daemon.rss_anon_kib().saturating_sub(before);
    assert!(grown < 32 * 1024, "the daemon grew {grown} KiB under a silent gate");
    assert!(fs::read_dir(root.join("src")).unwrap().count() == 1, "nothing was written");
    drop(silent);
}
