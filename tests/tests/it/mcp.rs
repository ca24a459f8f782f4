//! `filectx mcp`, the MCP stdio server, against the real daemon: the built `filectx` binary is
//! spawned with piped stdio and scripted line by line, as an MCP client would (every wait is
//! bounded, so a broken server fails the test instead of hanging it).

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Piped, bin};
use serde_json::{Value, json};

/// One `filectx mcp` process, killed when dropped if it is still running (also driven by
/// `gate_cli`'s tests).
pub(crate) struct Bridge {
    io: Piped,
    /// Every stdout line so far, to check that stdout holds nothing but JSON-RPC.
    seen: Vec<String>,
    /// Messages read while waiting for something else.
    pub(crate) pending: VecDeque<Value>,
    next_id: u64,
}

impl Bridge {
    /// `filectx --socket SOCK --no-autostart mcp --root ROOT EXTRA…`
    pub(crate) fn start(socket: &Path, root: &Path, extra: &[&str]) -> Bridge {
        let io = Piped::spawn(
            Command::new(bin("filectx"))
                .arg("--socket")
                .arg(socket)
                .arg("--no-autostart")
                .arg("mcp")
                .arg("--root")
                .arg(root)
                .args(extra)
                .current_dir(root),
        );
        Bridge { io, seen: Vec::new(), pending: VecDeque::new(), next_id: 1 }
    }

    /// Writes one raw line (a newline is added).
    fn send_line(&mut self, line: &str) {
        let stdin = self.io.stdin.as_mut().expect("stdin already closed");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// The next stdout message within `wait` (each must be one JSON-RPC 2.0 object or array).
    pub(crate) fn recv_within(&mut self, wait: Duration) -> Option<Value> {
        match self.io.lines.recv_timeout(wait) {
            Ok(line) => {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
                let ok = match &value {
                    Value::Array(items) => items.iter().all(|m| m["jsonrpc"] == "2.0"),
                    message => message["jsonrpc"] == "2.0",
                };
                assert!(ok, "stdout line is not JSON-RPC 2.0: {line}");
                self.seen.push(line);
                Some(value)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The response with `id`, keeping whatever else arrives first.
    pub(crate) fn response(&mut self, id: &Value) -> Value {
        if let Some(index) = self.pending.iter().position(|m| &m["id"] == id && m.get("method").is_none()) {
            return self.pending.remove(index).unwrap();
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.recv_within(left).unwrap_or_else(|| {
                panic!("no response to id {id} within {PATIENCE:?}; stderr: {}", self.stderr_text())
            });
            if &message["id"] == id && message.get("method").is_none() {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    /// Sends a request and returns its whole response.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id)
    }

    /// The result of a request that must succeed.
    pub(crate) fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params);
        assert!(response.get("error").is_none(), "{method} failed: {response}");
        response["result"].clone()
    }

    /// The error code of a request that must fail.
    fn err(&mut self, method: &str, params: Value) -> i64 {
        let response = self.call(method, params);
        response["error"]["code"].as_i64().unwrap_or_else(|| panic!("{method} did not fail: {response}"))
    }

    /// `initialize` with `version`, then `notifications/initialized`; returns the result.
    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        let result = self.ok(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "mcp-test", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    /// `tools/call`; returns the `CallToolResult`.
    pub(crate) fn tool(&mut self, name: &str, arguments: Value) -> Value {
        self.ok("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// The next server notification named `method` within `wait`.
    pub(crate) fn notification(&mut self, method: &str, wait: Duration) -> Option<Value> {
        if let Some(index) = self.pending.iter().position(|m| m["method"] == method) {
            return self.pending.remove(index);
        }
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.recv_within(left)?;
            if message["method"] == method {
                return Some(message);
            }
            self.pending.push_back(message);
        }
    }

    fn stderr_text(&self) -> String {
        self.io.stderr()
    }

    /// Closes stdin and waits (bounded) for the process to exit; checks that stdout held only
    /// JSON-RPC lines to the end.
    pub(crate) fn finish(mut self) -> (ExitStatus, String) {
        drop(self.io.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.io.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "filectx mcp did not exit after stdin closed");
            std::thread::sleep(Duration::from_millis(10));
        };
        // The rest of stdout (the reader thread ends with the process's stdout).
        while self.recv_within(Duration::from_secs(2)).is_some() {}
        assert!(self.seen.iter().all(|line| !line.trim().is_empty()));
        // The stderr thread ends once the process is gone.
        (status, self.io.stderr_to_end())
    }

    /// [`Bridge::finish`], which must exit 0.
    pub(crate) fn finish_ok(self) {
        let (status, stderr) = self.finish();
        assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    }
}

/// The text of a `CallToolResult`.
pub(crate) fn text(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|block| block["text"].as_str()).collect()
}

/// The `FS_*` code of a failed `CallToolResult`, checked to be flagged, in `_meta` and first in
/// its text (`Error (FS_CODE): `), with no `structuredContent`.
pub(crate) fn error_code(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.get("structuredContent").is_none(), "{result}");
    let code = result["_meta"]["filectx"]["code"].as_str().unwrap_or_else(|| panic!("no code: {result}"));
    assert!(text(result).starts_with(&format!("Error ({code}): ")), "{result}");
    code.to_owned()
}

/// A daemon and a project folder inside its temp folder.
fn project() -> (Daemon, std::path::PathBuf) {
    let daemon = Daemon::start(&[]);
    let root = daemon.dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    (daemon, root)
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn initialize_negotiates_the_version_and_lists_the_tools() {
    let (daemon, root) = project();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    // Before initialize: ping is served, anything else refused.
    assert_eq!(bridge.ok("ping", json!({})), json!({}));
    assert_eq!(bridge.err("tools/list", json!({})), -32600);

    let init = bridge.initialize("2025-06-18");
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "filectx");
    assert!(
        init["capabilities"]["tools"].is_object() && init["capabilities"]["logging"].is_object(),
        "{init}"
    );
    let instructions = init["instructions"].as_str().unwrap();
    assert!(instructions.contains("read") && instructions.contains(root.to_str().unwrap()), "{instructions}");
    assert_eq!(bridge.err("initialize", json!({"protocolVersion": "2025-06-18"})), -32600);
    assert_eq!(bridge.ok("ping", json!({})), json!({}));

    let list = bridge.ok("tools/list", json!({}));
    // `filectx mcp` offers all five tools unless --tools says otherwise.
    assert_eq!(tool_names(&list), ["read", "write", "edit", "glob", "grep"]);
    let tools = list["tools"].as_array().unwrap();
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["file_path"]));
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["file_path", "content"]));
    assert_eq!(tools[2]["inputSchema"]["required"], json!(["file_path", "old_string", "new_string"]));
    assert_eq!(tools[2]["inputSchema"]["properties"]["replace_all"]["type"], "boolean");
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    for tool in tools {
        assert!(tool["description"].as_str().unwrap().contains("read"), "{tool}");
        // Text results, and schemas that let a harness add arguments of its own.
        assert!(tool.get("outputSchema").is_none(), "{tool}");
        assert!(tool["inputSchema"].get("additionalProperties").is_none(), "{tool}");
    }
    // An unknown method, and a tool this server does not have.
    assert_eq!(bridge.err("resources/list", json!({})), -32601);
    assert_eq!(bridge.err("tools/call", json!({"name": "delete", "arguments": {}})), -32602);
    bridge.finish_ok();

    // A version this server does not know: it answers with its newest.
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    assert_eq!(bridge.initialize("2099-12-31")["protocolVersion"], "2025-06-18");
    bridge.finish_ok();

    // 2024-11-05: no annotations, titles, output schemas or structured content.
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    assert_eq!(bridge.initialize("2024-11-05")["protocolVersion"], "2024-11-05");
    let list = bridge.ok("tools/list", json!({}));
    for tool in list["tools"].as_array().unwrap() {
        assert!(tool.get("outputSchema").is_none() && tool.get("annotations").is_none(), "{tool}");
    }
    let read = bridge.tool("read", json!({"file_path": "a.txt"}));
    assert!(read.get("structuredContent").is_none(), "{read}");
    assert_eq!(read["isError"], false);
    bridge.finish_ok();

    // --structured: output schemas and structured content, as before the text default.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--structured"]);
    bridge.initialize("2025-06-18");
    let list = bridge.ok("tools/list", json!({}));
    for tool in list["tools"].as_array().unwrap() {
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
    }
    let read = bridge.tool("read", json!({"file_path": "a.txt"}));
    assert_eq!(read["structuredContent"]["text"], text(&read).as_str(), "{read}");
    let missing = bridge.tool("read", json!({"file_path": "missing.txt"}));
    assert_eq!(missing["structuredContent"]["error"]["code"], "FS_NOT_FOUND", "{missing}");
    assert!(text(&missing).starts_with("Error (FS_NOT_FOUND): "), "{missing}");
    bridge.finish_ok();
}

#[test]
fn read_edit_then_an_outside_change_is_announced_and_a_stale_edit_refused() {
    let (daemon, root) = project();
    let file = root.join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\ngamma\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");

    // An edit before any read is refused with a text the model can act on.
    let early =
        bridge.tool("edit", json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "B"}));
    assert_eq!(early["isError"], true, "{early}");
    assert_eq!(error_code(&early), "FS_NOT_OBSERVED", "{early}");

    let read = bridge.tool("read", json!({"file_path": "notes.txt"}));
    assert_eq!(read["isError"], false, "{read}");
    let shown = text(&read);
    assert!(shown.starts_with("1\talpha\n2\tbeta\n3\tgamma\n"), "{shown:?}");
    assert_eq!(read["content"][0]["type"], "text");
    assert!(read.get("structuredContent").is_none(), "{read}");

    let edit =
        bridge.tool("edit", json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "BETA"}));
    assert_eq!(edit["isError"], false, "{edit}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "alpha\nBETA\ngamma\n");
    // Its own edit keeps the session's record fresh: a second edit needs no new read.
    let again =
        bridge.tool("edit", json!({"file_path": "notes.txt", "old_string": "gamma", "new_string": "G"}));
    assert_eq!(again["isError"], false, "{again}");

    // Another program changes the file: a notice arrives, and the next edit is refused.
    std::fs::write(&file, "alpha\nBETA\nG\ndelta\n").unwrap();
    let notice = bridge
        .notification("notifications/message", PATIENCE)
        .unwrap_or_else(|| panic!("no change notice; stderr: {}", bridge.stderr_text()));
    let params = &notice["params"];
    assert_eq!(params["level"], "warning");
    assert_eq!(params["logger"], "filectx");
    assert_eq!(params["data"]["path"], file.to_str().unwrap());
    assert_eq!(params["data"]["displayPath"], "notes.txt");
    let message = params["data"]["message"].as_str().unwrap();
    assert!(message.contains("notes.txt") && message.contains("Read it again"), "{message}");

    let stale =
        bridge.tool("edit", json!({"file_path": "notes.txt", "old_string": "alpha", "new_string": "A"}));
    assert_eq!(stale["isError"], true, "{stale}");
    assert_eq!(error_code(&stale), "FS_STALE_VERSION", "{stale}");
    // The refusal shows what changed (a diff), so no read is needed before the retry.
    assert!(text(&stale).contains("changed since you last read it"), "{stale}");
    assert!(text(&stale).contains("+delta\n"), "{stale}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "alpha\nBETA\nG\ndelta\n");

    let fresh =
        bridge.tool("edit", json!({"file_path": "notes.txt", "old_string": "alpha", "new_string": "A"}));
    assert_eq!(fresh["isError"], false, "{fresh}");

    // A new file needs no read; a file outside the roots is refused.
    let created = bridge.tool("write", json!({"file_path": "new/file.txt", "content": "hi\n"}));
    assert_eq!(created["isError"], false, "{created}");
    assert_eq!(std::fs::read_to_string(root.join("new/file.txt")).unwrap(), "hi\n");
    let outside = daemon.dir.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    let refused = bridge.tool("read", json!({"file_path": outside.to_str().unwrap()}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(error_code(&refused), "FS_OUTSIDE_ROOT", "{refused}");
    assert!(!text(&refused).contains("secret"));
    let escape = bridge.tool("write", json!({"file_path": "../outside.txt", "content": "x"}));
    assert_eq!(error_code(&escape), "FS_OUTSIDE_ROOT", "{escape}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    bridge.finish_ok();
}

#[test]
fn set_level_above_warning_silences_change_notices() {
    let (daemon, root) = project();
    let file = root.join("a.txt");
    std::fs::write(&file, "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    assert_eq!(bridge.err("logging/setLevel", json!({"level": "loud"})), -32602);
    assert_eq!(bridge.ok("logging/setLevel", json!({"level": "error"})), json!({}));
    bridge.tool("read", json!({"file_path": "a.txt"}));
    std::fs::write(&file, "two\n").unwrap();
    // The daemon coalesces changes for ~50 ms; a second is plenty to see a notice if one came.
    assert!(bridge.notification("notifications/message", Duration::from_millis(1500)).is_none());
    // The change is still enforced.
    let stale = bridge.tool("edit", json!({"file_path": "a.txt", "old_string": "one", "new_string": "1"}));
    assert_eq!(error_code(&stale), "FS_STALE_VERSION", "{stale}");
    bridge.finish_ok();
}

#[test]
fn read_only_and_tools_options_shape_the_session() {
    let (daemon, root) = project();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();

    // --read-only alone: only read and the searches are offered; write and edit are unknown tools.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--read-only"]);
    let init = bridge.initialize("2025-06-18");
    assert!(init["instructions"].as_str().unwrap().contains("read-only"), "{init}");
    assert_eq!(tool_names(&bridge.ok("tools/list", json!({}))), ["read", "glob", "grep"]);
    let found = bridge.tool("grep", json!({"pattern": "one", "output_mode": "content"}));
    assert_eq!(found["content"][0]["text"], "a.txt\n1\tone", "{found}");
    assert_eq!(bridge.tool("read", json!({"file_path": "a.txt"}))["isError"], false);
    let refused = bridge
        .call("tools/call", json!({"name": "write", "arguments": {"file_path": "b.txt", "content": "x"}}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(!root.join("b.txt").exists());
    bridge.finish_ok();

    // --read-only with every tool listed: write and edit are refused by the daemon.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--read-only", "--tools", "read,write,edit"]);
    bridge.initialize("2025-06-18");
    assert_eq!(tool_names(&bridge.ok("tools/list", json!({}))), ["read", "write", "edit"]);
    bridge.tool("read", json!({"file_path": "a.txt"}));
    let edit = bridge.tool("edit", json!({"file_path": "a.txt", "old_string": "one", "new_string": "1"}));
    assert_eq!(error_code(&edit), "FS_PERMISSION_DENIED", "{edit}");
    let write = bridge.tool("write", json!({"file_path": "b.txt", "content": "x"}));
    assert_eq!(error_code(&write), "FS_PERMISSION_DENIED", "{write}");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one\n");
    assert!(!root.join("b.txt").exists());
    bridge.finish_ok();

    // --tools read: edit is not there at all.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--tools", "read"]);
    bridge.initialize("2025-06-18");
    assert_eq!(tool_names(&bridge.ok("tools/list", json!({}))), ["read"]);
    assert_eq!(bridge.err("tools/call", json!({"name": "edit", "arguments": {}})), -32602);
    bridge.finish_ok();

    // --tools read,edit.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--tools", "read,edit"]);
    bridge.initialize("2025-06-18");
    assert_eq!(tool_names(&bridge.ok("tools/list", json!({}))), ["read", "edit"]);
    bridge.finish_ok();

    // An unknown tool name is a usage error, before anything is served.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--tools", "read,delete"]);
    drop(bridge.io.stdin.take());
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("delete"), "{stderr}");
}

#[test]
fn undo_is_offered_with_the_undo_flag_and_puts_the_models_change_back() {
    let (daemon, root) = project();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--undo"]);
    bridge.initialize("2025-06-18");
    let list = bridge.ok("tools/list", json!({}));
    assert_eq!(tool_names(&list), ["read", "write", "edit", "glob", "grep", "undo"]);
    let undo = &list["tools"][5];
    assert_eq!(
        (&undo["title"], &undo["annotations"]["destructiveHint"]),
        (&json!("Undo last change"), &json!(true))
    );
    bridge.tool("read", json!({"file_path": "a.txt"}));
    let edit = bridge.tool("edit", json!({"file_path": "a.txt", "old_string": "one", "new_string": "two"}));
    assert_eq!(edit["isError"], false, "{edit}");
    let undone = bridge.tool("undo", json!({"file_path": "a.txt"}));
    assert_eq!(undone["isError"], false, "{undone}");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one\n");
    // The file counts as read again: the model edits on without a read.
    let again =
        bridge.tool("edit", json!({"file_path": "a.txt", "old_string": "one", "new_string": "three"}));
    assert_eq!(again["isError"], false, "{again}");
    bridge.finish_ok();
    // --undo with --tools or --read-only is a usage error: say what you want once.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--undo", "--tools", "read"]);
    drop(bridge.io.stdin.take());
    assert_eq!(bridge.finish().0.code(), Some(2));
}

#[test]
fn malformed_input_gets_json_rpc_errors_and_batches_follow_the_version() {
    let (daemon, root) = project();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    // Before initialize a batch is refused.
    bridge.send_line(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    let refused = bridge.recv_within(PATIENCE).unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    bridge.initialize("2025-06-18");

    bridge.send_line("this is not json");
    let parse = bridge.recv_within(PATIENCE).unwrap();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);
    bridge.send_line(r#"{"jsonrpc":"2.0","id":5,"method":"ping""#);
    assert_eq!(bridge.recv_within(PATIENCE).unwrap()["error"]["code"], -32700);
    // Blank lines are ignored; a wrong jsonrpc or a null id is an invalid request.
    bridge.send_line("");
    bridge.send_line(r#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#);
    let invalid = bridge.recv_within(PATIENCE).unwrap();
    assert_eq!((invalid["id"].clone(), invalid["error"]["code"].clone()), (json!(6), json!(-32600)));
    bridge.send_line(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(bridge.recv_within(PATIENCE).unwrap()["error"]["code"], -32600);
    // 2025-06-18 has no batches.
    bridge.send_line(r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#);
    let refused = bridge.recv_within(PATIENCE).unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("batch"), "{refused}");
    // String ids are echoed; unknown notifications are ignored.
    bridge.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever"}));
    bridge.send(&json!({"jsonrpc": "2.0", "id": "s-1", "method": "ping"}));
    assert_eq!(bridge.response(&json!("s-1"))["result"], json!({}));
    bridge.finish_ok();

    // 2025-03-26 has batches: each request answered in one array, notifications not.
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    assert_eq!(bridge.initialize("2025-03-26")["protocolVersion"], "2025-03-26");
    let batch = json!([
        {"jsonrpc": "2.0", "id": 10, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
        {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "read", "arguments": {"file_path": "a.txt"}}},
        {"jsonrpc": "2.0", "id": 12, "method": "nope"},
        {"jsonrpc": "2.0", "id": 13, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
    ]);
    bridge.send(&batch);
    let answers = bridge.recv_within(PATIENCE).unwrap();
    let answers = answers.as_array().unwrap_or_else(|| panic!("not an array: {answers}"));
    assert_eq!(answers.len(), 4, "{answers:?}");
    let by_id = |id: u64| answers.iter().find(|a| a["id"] == id).unwrap().clone();
    assert_eq!(by_id(10)["result"], json!({}));
    assert!(text(&by_id(11)["result"]).starts_with("1\tone"), "{answers:?}");
    // 2025-03-26 has annotations but no structured content.
    assert!(by_id(11)["result"].get("structuredContent").is_none());
    assert_eq!(by_id(12)["error"]["code"], -32601);
    assert_eq!(by_id(13)["error"]["code"], -32600);
    bridge.send_line("[]");
    assert_eq!(bridge.recv_within(PATIENCE).unwrap()["error"]["code"], -32600);
    bridge.finish_ok();
}

#[test]
fn two_bridges_are_isolated_sessions() {
    let (daemon, root) = project();
    let file = root.join("shared.txt");
    std::fs::write(&file, "one\ntwo\n").unwrap();
    let mut a = Bridge::start(&daemon.socket, &root, &[]);
    let mut b = Bridge::start(&daemon.socket, &root, &[]);
    a.initialize("2025-06-18");
    b.initialize("2025-06-18");

    // A's read does not let B overwrite (B's refusal shows B the file, which then counts as
    // B's own read; a file it cannot show stays refused: `files::` tests that).
    assert_eq!(a.tool("read", json!({"file_path": "shared.txt"}))["isError"], false);
    let overwrite = b.tool("write", json!({"file_path": "shared.txt", "content": "gone\n"}));
    assert_eq!(error_code(&overwrite), "FS_NOT_OBSERVED", "{overwrite}");
    let shown = overwrite["content"][0]["text"].as_str().unwrap_or_default();
    assert!(shown.contains("now counted as read") && shown.ends_with(":\n1\tone\n2\ttwo"), "{overwrite}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");

    // B reads and edits; A hears of it and its own edit is refused as stale.
    b.tool("read", json!({"file_path": "shared.txt"}));
    let edit = b.tool("edit", json!({"file_path": "shared.txt", "old_string": "two", "new_string": "2"}));
    assert_eq!(edit["isError"], false, "{edit}");
    let notice = a.notification("notifications/message", PATIENCE).expect("A hears of B's edit");
    assert_eq!(notice["params"]["data"]["displayPath"], "shared.txt");
    let stale = a.tool("edit", json!({"file_path": "shared.txt", "old_string": "one", "new_string": "1"}));
    assert_eq!(error_code(&stale), "FS_STALE_VERSION", "{stale}");
    // B is not told of its own change.
    assert!(b.notification("notifications/message", Duration::from_millis(500)).is_none());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n2\n");
    a.finish_ok();
    b.finish_ok();
}

#[test]
fn a_lost_daemon_is_reported_on_each_call_and_in_the_exit_code() {
    let (mut daemon, root) = project();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    assert_eq!(bridge.tool("read", json!({"file_path": "a.txt"}))["isError"], false);

    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    let notice = bridge.notification("notifications/message", PATIENCE).expect("a notice of the loss");
    assert_eq!(notice["params"]["level"], "error", "{notice}");
    let failed = bridge.tool("read", json!({"file_path": "a.txt"}));
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(text(&failed).contains("connection was lost"), "{failed}");
    assert_eq!(bridge.err("tools/list", json!({})), -32603);
    assert_eq!(bridge.ok("ping", json!({})), json!({}));
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("lost"), "{stderr}");
}

#[test]
fn a_client_slower_to_initialize_than_the_daemon_waits_still_gets_its_session() {
    // The bridge connects at start but opens its session only at the client's initialize; the
    // daemon closes a connection that opens none in time, so the bridge connects again.
    let daemon = Daemon::start(&["--initialize-timeout", "1"]);
    let root = daemon.dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    std::thread::sleep(Duration::from_millis(1800));
    bridge.initialize("2025-06-18");
    let read = bridge.tool("read", json!({"file_path": "a.txt"}));
    assert_eq!(read["isError"], false, "{read}");
    assert!(text(&read).contains("\tone"), "{read}");
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("lost"), "{stderr}");
}

#[test]
fn no_daemon_at_start_is_exit_3_with_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = Bridge::start(&dir.path().join("none.sock"), dir.path(), &[]);
    drop(bridge.io.stdin.take());
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no daemon is listening"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn dedup_reads_is_on_unless_no_dedup_reads_turns_it_off() {
    let (daemon, root) = project();
    let content: String =
        (1..=40).map(|i| format!("line {i} with enough text to be worth a short answer\n")).collect();
    std::fs::write(root.join("long.txt"), content).unwrap();
    let read = json!({"file_path": "long.txt"});

    let mut plain = Bridge::start(&daemon.socket, &root, &["--no-dedup-reads"]);
    plain.initialize("2025-06-18");
    let first = text(&plain.tool("read", read.clone()));
    assert_eq!(text(&plain.tool("read", read.clone())), first, "off with --no-dedup-reads");
    plain.finish_ok();

    // On by default; --dedup-reads, of old command lines, is accepted (and the last flag wins).
    for extra in [&[][..], &["--dedup-reads"], &["--no-dedup-reads", "--dedup-reads"]] {
        let mut dedup = Bridge::start(&daemon.socket, &root, extra);
        dedup.initialize("2025-06-18");
        assert_eq!(text(&dedup.tool("read", read.clone())), first);
        let short = text(&dedup.tool("read", read.clone()));
        assert!(short.starts_with("(Unchanged:") && short.contains("long.txt"), "{extra:?}: {short}");
        assert_eq!(text(&dedup.tool("read", read.clone())), first, "asked again: the text");
        let (status, stderr) = dedup.finish();
        assert_eq!(status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains("dedup"), "a daemon with dedupReads draws no note: {stderr}");
    }
}

#[test]
fn arguments_no_schema_names_are_ignored() {
    let (daemon, root) = project();
    std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    // Gemini CLI adds wait_for_previous to every call it makes.
    let read = bridge.tool("read", json!({"file_path": "a.txt", "wait_for_previous": true}));
    assert_eq!(read["isError"], false, "{read}");
    assert!(text(&read).contains("\tone\n"), "{read}");
    let edit = bridge.tool(
        "edit",
        json!({"file_path": "a.txt", "old_string": "two", "new_string": "2", "wait_for_previous": true}),
    );
    assert_eq!(edit["isError"], false, "{edit}");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one\n2\n");
    // A known argument of the wrong type is still the daemon's to refuse.
    let wrong = bridge.tool("read", json!({"file_path": "a.txt", "offset": "two"}));
    assert_eq!(error_code(&wrong), "FS_INVALID_ARGUMENT");
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    // Said once per tool, on stderr.
    assert_eq!(stderr.matches("wait_for_previous").count(), 2, "{stderr}");

    // The daemon itself still refuses an unknown argument.
    let mut raw = filectx_tests::Raw::connect(&daemon.socket);
    raw.initialize(&root);
    let refused = raw.call(
        "tools/call",
        Some(json!({"name": "read", "arguments": {"file_path": "a.txt", "wait_for_previous": true}})),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["error"]["code"], "FS_INVALID_ARGUMENT", "{refused}");
    assert!(refused["content"][0]["text"].as_str().unwrap().contains("wait_for_previous"), "{refused}");
}

#[test]
fn a_client_that_cuts_results_gets_answers_within_its_budget() {
    let (daemon, root) = project();
    let content: String = (1..=1200).map(|i| format!("    let value_{i} = compute(\"{i}\");\n")).collect();
    std::fs::write(root.join("big.rs"), &content).unwrap();
    // Codex keeps 10,000 bytes of a result's JSON, escapes included.
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.ok(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"}}),
    );
    let read = bridge.tool("read", json!({"file_path": "big.rs"}));
    let shown = text(&read);
    let as_codex_sees_it = serde_json::to_string(&read["content"]).unwrap();
    assert!(as_codex_sees_it.len() <= 10_000, "{} bytes", as_codex_sees_it.len());
    let next = shown.rsplit_once("offset=").map(|(_, rest)| rest).unwrap_or_else(|| panic!("{shown}"));
    let next: u64 = next.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
    assert!(next > 100, "{shown}");
    // The footer's offset continues right after the last line shown.
    let last = shown.lines().rfind(|line| line.contains('\t')).unwrap();
    assert!(last.contains(&format!("value_{} ", next - 1)), "{last}");
    let grep = bridge.tool("grep", json!({"pattern": "compute", "output_mode": "content"}));
    assert!(serde_json::to_string(&grep["content"]).unwrap().len() <= 10_000);
    bridge.finish_ok();

    // --max-output for a client filectx does not know; Claude Code keeps far more by default.
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--max-output", "4000"]);
    bridge.initialize("2025-06-18");
    let read = text(&bridge.tool("read", json!({"file_path": "big.rs"})));
    assert!(read.len() <= 3800 && read.contains("offset="), "{} bytes", read.len());
    bridge.finish_ok();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    assert!(text(&bridge.tool("read", json!({"file_path": "big.rs"}))).len() > 40_000);
    bridge.finish_ok();
}

/// The length of a result's `content` as JSON, in characters (as a client that keeps the
/// result's JSON counts it, escapes included).
fn json_chars(result: &Value) -> usize {
    serde_json::to_string(&result["content"]).unwrap().chars().count()
}

/// The `offset=N` a text's footer says to continue with, if any.
fn next_offset(text: &str) -> Option<u64> {
    let (_, rest) = text.rsplit_once("offset=")?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[test]
fn a_budget_counts_the_results_json_and_the_model_reads_on_past_each_cut() {
    let (daemon, root) = project();
    // Lines of control characters: one byte each in the file and the daemon's budget, six in the
    // JSON a client keeps. Line 50 alone escapes to more than the whole budget.
    let line = |n: usize| {
        let run = if n == 50 { 1900 } else { 20 + n % 7 };
        format!("{n}:{}", "\u{1}\u{1b}\u{2}".repeat(run / 3 + 1))
    };
    let lines: Vec<String> = (1..=300).map(line).collect();
    std::fs::write(root.join("ctl.txt"), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let plain: String = (1..=1200).map(|i| format!("    let value_{i} = compute(\"{i}\");\n")).collect();
    std::fs::write(root.join("plain.rs"), &plain).unwrap();
    for i in 0..200 {
        std::fs::write(root.join(format!("f{i}{}.txt", "\u{1}".repeat(40))), "x\n").unwrap();
    }
    let mut bridge = Bridge::start(&daemon.socket, &root, &["--max-output", "10000"]);
    bridge.initialize("2025-06-18");

    // Read page by page from each footer's offset: every line comes once, whole, but line 50,
    // which is cut to fit and counted as shown.
    let mut offset = 1;
    let mut pages = 0;
    loop {
        let read = bridge.tool("read", json!({"file_path": "ctl.txt", "offset": offset}));
        assert!(json_chars(&read) <= 10_000, "{} chars at offset {offset}", json_chars(&read));
        let shown = text(&read);
        for (number, got) in (offset..).zip(shown.lines().take_while(|l| !l.is_empty())) {
            let (n, got) = got.split_once('\t').unwrap();
            assert_eq!(n, number.to_string(), "{shown:?}");
            let want = &lines[usize::try_from(number).unwrap() - 1];
            if number == 50 {
                let (kept, _) =
                    got.split_once("... (line truncated to ").unwrap_or_else(|| panic!("{got:?}"));
                assert!(want.starts_with(kept) && kept.len() > 1000, "{got:?}");
            } else {
                assert_eq!(got, want);
            }
            offset = number + 1;
        }
        pages += 1;
        match next_offset(&shown) {
            Some(next) => assert_eq!(next, offset, "{shown:?}"),
            None => {
                assert!(shown.ends_with("(End of file - total 300 lines)"), "{shown:?}");
                break;
            }
        }
        assert!(pages < 100, "no end");
    }
    assert_eq!(offset, 301);
    assert!(pages > 6, "cut to the budget: {pages} pages");

    // Ordinary text still gets the whole budget.
    let read = bridge.tool("read", json!({"file_path": "plain.rs"}));
    let chars = json_chars(&read);
    assert!((9_000..=10_000).contains(&chars), "{chars}");

    // grep pages on from its footers' offsets and shows every matching line once.
    let mut offset = 0;
    let mut numbers: Vec<u64> = Vec::new();
    for _ in 0..100 {
        let grep = bridge.tool(
            "grep",
            json!({"pattern": ":", "path": "ctl.txt", "output_mode": "content", "offset": offset}),
        );
        assert!(json_chars(&grep) <= 10_000, "{} chars at offset {offset}", json_chars(&grep));
        let shown = text(&grep);
        let page: Vec<u64> =
            shown.lines().filter_map(|l| l.split_once('\t')).filter_map(|(n, _)| n.parse().ok()).collect();
        numbers.extend(&page);
        match next_offset(&shown) {
            Some(next) => {
                assert_eq!(next, offset + page.len() as u64, "{shown:?}");
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(numbers, (1..=300).collect::<Vec<u64>>());

    // glob: as many names as fit, and what to do about the rest.
    let glob = bridge.tool("glob", json!({"pattern": "*.txt"}));
    assert!(json_chars(&glob) <= 10_000, "{}", json_chars(&glob));
    let shown = text(&glob);
    assert!(shown.lines().count() > 20, "{shown:?}");
    assert!(shown.ends_with("Narrow the pattern or path.)"), "{shown:?}");
    bridge.finish_ok();
}

#[test]
fn a_flood_of_huge_argument_names_is_said_briefly_and_once() {
    let (daemon, root) = project();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    // Six names of 4 MB each, each sent twice, then 100 more of every call's names.
    let huge = "é".repeat(2 << 20);
    for i in 0..12 {
        let mut arguments = json!({"file_path": "a.txt"});
        arguments[format!("{}\u{1b}]0;x\u{7}{huge}", i % 6)] = json!(true);
        let read = bridge.tool("read", arguments);
        assert_eq!(read["isError"], false, "{}", text(&read));
    }
    let mut arguments = json!({"file_path": "a.txt"});
    for i in 0..100 {
        arguments[format!("extra_{i}")] = json!(i);
    }
    let read = bridge.tool("read", arguments);
    assert_eq!(read["isError"], false, "{}", text(&read));
    let (status, stderr) = bridge.finish();
    assert_eq!(status.code(), Some(0));
    assert!(stderr.len() < 16 * 1024, "{} bytes on stderr", stderr.len());
    assert!(!stderr.contains('\u{1b}') && !stderr.contains('\u{7}'), "raw controls on stderr");
    let said: Vec<&str> = stderr.lines().filter(|line| line.contains("ignoring the argument")).collect();
    assert_eq!(said.len(), 64, "{stderr}");
    // Each huge name once, cut to its first 64 bytes and escaped.
    let first =
        format!("\"0\\x1b]0;x\\x07{}\" (the first 64 bytes of a 4194311-byte name) of read", "é".repeat(28));
    assert_eq!(said.iter().filter(|line| line.contains(&first)).count(), 1, "{stderr}");
    assert_eq!(stderr.matches("past 64 names they are not said").count(), 1, "{stderr}");
}

/// A daemon with test hooks and one file-work slot (so a `debug/hold` of another session makes
/// every tool call wait), and a project folder inside its temp folder.
fn held_project() -> (Daemon, std::path::PathBuf) {
    let daemon = Daemon::start_configured(&["--file-slots", "1"], |_, mut command| {
        command.env("FILECTX_TEST_HOOKS", "1");
        command
    });
    let root = daemon.dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    (daemon, root)
}

/// Waits (bounded) until the daemon has `count` requests waiting for a file-work slot.
fn until_waiting(daemon: &Daemon, count: u64) {
    let deadline = Instant::now() + PATIENCE;
    while daemon.status()["fileSlotsWaiting"].as_u64() != Some(count) {
        assert!(Instant::now() < deadline, "never {count} requests waiting: {}", daemon.status());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_daemon_and_a_slow_one_reports_progress() {
    let (daemon, root) = held_project();
    let gates = daemon.dir.path().join("holds");
    std::fs::create_dir(&gates).unwrap();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let mut holder = filectx_tests::Raw::connect(&daemon.socket);
    holder.initialize(&root);
    let hold = holder.send_request("debug/hold", Some(json!({"dir": gates, "name": "h"})));
    let deadline = Instant::now() + PATIENCE;
    while !gates.join("h.started").exists() {
        assert!(Instant::now() < deadline, "the hold never started");
        std::thread::sleep(Duration::from_millis(5));
    }

    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    let write = json!({
        "name": "write",
        "arguments": {"file_path": "new.txt", "content": "x\n"},
        "_meta": {"progressToken": "w-1"},
    });
    bridge.send(&json!({"jsonrpc": "2.0", "id": 70, "method": "tools/call", "params": write}));
    until_waiting(&daemon, 1);

    // Held past a second: progress says why it takes long, and counts up.
    let first = bridge.notification("notifications/progress", PATIENCE).expect("a progress notification");
    assert_eq!(first["params"]["progressToken"], "w-1", "{first}");
    assert_eq!(first["params"]["progress"], 1, "{first}");
    let message = first["params"]["message"].as_str().unwrap();
    assert!(message.contains("waiting for the daemon") && message.contains("write gate"), "{message}");
    let second = bridge.notification("notifications/progress", PATIENCE).expect("a second one");
    assert_eq!(second["params"]["progress"], 2, "{second}");

    // Cancelled through MCP: the daemon drops it from the slot queue while the hold still runs.
    bridge.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 70, "reason": "user"}}));
    until_waiting(&daemon, 0);
    std::fs::write(gates.join("h.go"), "").unwrap();
    let held = holder.recv();
    assert_eq!(held["id"].as_u64(), Some(hold), "{held}");

    // Never answered, no progress after the cancellation, and nothing written.
    assert_eq!(bridge.ok("ping", json!({})), json!({}));
    while let Some(message) = bridge.recv_within(Duration::from_millis(1500)) {
        bridge.pending.push_back(message);
    }
    assert!(bridge.pending.iter().all(|m| m["id"] != 70), "{:?}", bridge.pending);
    let late = bridge.pending.iter().filter(|m| m["method"] == "notifications/progress").count();
    assert_eq!(late, 0, "{:?}", bridge.pending);
    assert!(!root.join("new.txt").exists(), "a cancelled write never lands");

    // The session goes on: a call with a progress token answered at once gets no progress.
    let read = bridge.ok(
        "tools/call",
        json!({"name": "read", "arguments": {"file_path": "a.txt"}, "_meta": {"progressToken": 5}}),
    );
    assert_eq!(read["isError"], false, "{read}");
    assert!(bridge.pending.iter().all(|m| m["method"] != "notifications/progress"), "{:?}", bridge.pending);
    bridge.finish_ok();
}
