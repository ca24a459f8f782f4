//! What a scripted agent loop costs a model in characters and tool calls: read a 1,200-line
//! file, edit it, an outside formatter change, edit again, a teammate's change, re-read a window
//! twice, another outside change, edit. The agent follows the tools' own texts: after a stale
//! refusal it reads the whole file again when the refusal asks for that, and retries at once
//! otherwise. It turns `dedupReads` on where the daemon offers it. The loop runs
//! three times: as is; with an agent that checks each edit by looking at the edited lines (from
//! the edit's own answer when it shows them, else by reading a few lines around the edit); and
//! as is in a session that merges stale edits (`staleEdits: "merge"`, where the daemon offers
//! it: an edit over an outside change elsewhere is applied, and its answer shows that change).
//!
//! The first two run twice more through `filectx mcp` (the MCP bridge) in its default
//! configuration (`--root` only), counting the characters as Claude Code hands them to its
//! model: a successful result that carries `structuredContent` reaches the model as
//! `JSON.stringify(structuredContent)` (its `content` dropped), anything else as its `content`
//! text. An agent given JSON un-escapes it to copy its next `old_string`.
//!
//! It talks to a real `filectxd` (by default `target/release/filectxd`; `FILECTX_FILECTXD_BIN`
//! picks another build, e.g. an older one for a before/after comparison) and, for the bridge
//! rows, a real `filectx` (`target/release/filectx`; `FILECTX_FILECTX_BIN`):
//! `cargo build --release -p filectx-daemon -p filectx-client && cargo bench -p filectx-tests --bench agent_loop`.
//! Prints every call with the characters it cost, then the totals. Also checks that every outside
//! change was noticed (refused or shown) and that the file ends with every change in it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use filectx_tests::{Daemon, PATIENCE, Piped, Raw};
use serde_json::{Value, json};

const LINES: usize = 1200;

/// One line of the generated source file (about 30 characters on average).
fn line(n: usize) -> String {
    match n % 6 {
        0 => format!("fn step_{n}(x: u32) -> u32 {{"),
        1 => format!("    let y = x + {n};"),
        2 => "    if y % 2 == 0 {".to_owned(),
        3 => format!("        return y / {};", n % 7 + 1),
        4 => "    }".to_owned(),
        _ => "    y }".to_owned(),
    }
}

/// How the agent reaches the tools: the daemon's own `tools/call`, or `filectx mcp`.
enum Tools {
    Daemon(Raw),
    Bridge(Bridge),
}

/// One `filectx mcp` process, spoken to as an MCP client does (newline-delimited JSON-RPC).
struct Bridge {
    io: Piped,
    next_id: u64,
}

impl Bridge {
    /// `filectx --socket SOCK --no-autostart mcp --root ROOT`, then `initialize` (MCP
    /// 2025-06-18, as Claude Code asks) and `notifications/initialized`; returns it and the
    /// `initialize` result.
    fn start(socket: &Path, root: &Path) -> (Bridge, Value) {
        let io = Piped::spawn(
            Command::new(filectx_tests::bin("filectx"))
                .arg("--socket")
                .arg(socket)
                .arg("--no-autostart")
                .arg("mcp")
                .arg("--root")
                .arg(root)
                .current_dir(root),
        );
        let mut bridge = Bridge { io, next_id: 1 };
        let init = bridge.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "agent-loop", "version": "0"}}),
        );
        bridge.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (bridge, init)
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.io.stdin.as_mut().unwrap();
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its `result` (skipping the server's notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.io.lines.recv_timeout(PATIENCE).expect("filectx mcp answered in time");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "{method} failed: {message}");
                return message["result"].clone();
            }
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Closing stdin ends the server (exit 0); kill it if it lingers.
        drop(self.io.stdin.take());
        let deadline = std::time::Instant::now() + PATIENCE;
        while self.io.child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.io.child.kill();
        let _ = self.io.child.wait();
    }
}

/// One tool result as the model got it.
struct Answer {
    /// The characters the harness handed the model.
    seen: String,
    /// What the model reads in them (`seen`, or the `text` of the JSON it was given).
    text: String,
    is_error: bool,
    /// The error's `FS_*` code, where the result names one.
    code: Option<String>,
}

impl Tools {
    fn call(&mut self, tool: &str, arguments: Value) -> Answer {
        match self {
            Tools::Daemon(raw) => {
                let response = tool_call(raw, json!({"name": tool, "arguments": arguments}));
                let text: String = response["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["text"].as_str().unwrap_or(""))
                    .collect();
                Answer {
                    seen: text.clone(),
                    text,
                    is_error: response["isError"] == true,
                    code: response["error"]["code"].as_str().map(str::to_owned),
                }
            }
            Tools::Bridge(bridge) => {
                let result = bridge.request("tools/call", json!({"name": tool, "arguments": arguments}));
                let content: String = result["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["text"].as_str().unwrap_or(""))
                    .collect();
                let is_error = result["isError"] == true;
                let structured = result.get("structuredContent").filter(|s| !s.is_null());
                // Claude Code (and Codex) hand a success's structuredContent over as JSON.
                let (seen, text) = match structured {
                    Some(structured) if !is_error => {
                        (structured.to_string(), structured["text"].as_str().unwrap_or(&content).to_owned())
                    }
                    _ => (content.clone(), content),
                };
                // The code: in structuredContent (MCP 2025-06-18 before Protocol 3), in
                // `_meta`, or in the text's own marker `Error (FS_…): ` (Protocol 3).
                let code = structured
                    .and_then(|s| s["error"]["code"].as_str())
                    .or_else(|| result["_meta"]["error"]["code"].as_str())
                    .or_else(|| result["_meta"]["code"].as_str())
                    .map(str::to_owned)
                    .or_else(|| {
                        text.strip_prefix("Error (")
                            .and_then(|rest| rest.split_once(')'))
                            .map(|(code, _)| code.to_owned())
                    });
                Answer { seen, text, is_error, code }
            }
        }
    }
}

/// The model's side: every call, and what it cost.
struct Agent {
    tools: Tools,
    calls: usize,
    sent: usize,
    received: usize,
    noticed: usize,
    log: Vec<String>,
    /// Whether the agent looks at the lines it edited after each edit.
    verify: bool,
}

impl Agent {
    fn call(&mut self, what: &str, tool: &str, arguments: Value) -> Answer {
        let args = arguments.to_string();
        let answer = self.tools.call(tool, arguments);
        self.calls += 1;
        self.sent += args.chars().count();
        self.received += answer.seen.chars().count();
        let first = answer.seen.lines().next().unwrap_or("");
        self.log.push(format!(
            "{:>2}. {what:<34} {tool:<5} in {:>6} out {:>6}  {}",
            self.calls,
            args.chars().count(),
            answer.seen.chars().count(),
            first.chars().take(70).collect::<String>()
        ));
        answer
    }

    fn read_all(&mut self, what: &str, path: &str) {
        let mut offset = 1;
        loop {
            let text = self.call(what, "read", json!({"file_path": path, "offset": offset})).text;
            // Follow the footer's "Use offset=N to continue." until the end of the file.
            match text
                .rsplit_once("offset=")
                .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            {
                Some(next) if !next.is_empty() => offset = next.parse().unwrap(),
                _ => return,
            }
        }
    }

    /// An edit as a model does it: on a stale refusal, read the file again when the refusal says
    /// so, else retry at once. `line` is where the agent knows the
    /// text to be (from its reads), for checking the result.
    fn edit(&mut self, what: &str, path: &str, line: u64, old: &str, new: &str) {
        for attempt in 0..3 {
            let answer =
                self.call(what, "edit", json!({"file_path": path, "old_string": old, "new_string": new}));
            if !answer.is_error {
                let text = &answer.text;
                if attempt == 0 && text.contains("Applied over an outside change") {
                    self.noticed += 1;
                }
                let shows_lines = text
                    .lines()
                    .any(|l| l.trim_start().split_once('\t').is_some_and(|(n, _)| n.parse::<u64>().is_ok()));
                if self.verify && !shows_lines {
                    let offset = line.saturating_sub(3).max(1);
                    self.call(
                        "  look at the edited lines",
                        "read",
                        json!({"file_path": path, "offset": offset, "limit": 7}),
                    );
                }
                return;
            }
            let text = answer.text;
            assert_eq!(answer.code.as_deref(), Some("FS_STALE_VERSION"), "{text}");
            if attempt == 0 {
                self.noticed += 1;
            }
            // Do what the refusal says: read again when it asks for that, else retry at once.
            if text.contains("Read it again") || text.contains("read it again") {
                self.read_all("  read again after the refusal", path);
            }
        }
        panic!("{what}: the edit never went through");
    }
}

/// A `tools/call` on a raw session; returns its result. The session's `file/didChange`
/// notifications (an outside change of a file it read) may come first: they are skipped.
fn tool_call(raw: &mut Raw, params: Value) -> Value {
    let response = raw.request_skipping_notifications("tools/call", Some(params));
    assert!(response.get("error").is_none(), "tools/call failed: {response}");
    response["result"].clone()
}

fn session(daemon: &Daemon, root: &Path, dedup: bool, merge: bool) -> (Raw, Value) {
    let mut raw = Raw::connect(&daemon.socket);
    let mut params = json!({"roots": [root], "clientInfo": {"name": "agent-loop"}});
    if dedup {
        params["dedupReads"] = json!(true);
    }
    if merge {
        params["staleEdits"] = json!("merge");
    }
    let answer = raw.request("initialize", Some(params.clone()));
    if answer.get("error").is_some() {
        // An older daemon refuses the unknown fields: the session starts without them.
        params.as_object_mut().unwrap().remove("dedupReads");
        params.as_object_mut().unwrap().remove("staleEdits");
        let answer = raw.request("initialize", Some(params));
        return (raw, answer["result"].clone());
    }
    (raw, answer["result"].clone())
}

fn outside_change(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in the file");
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn main() {
    // (through filectx mcp, the agent checks its edits, the session merges stale edits)
    for (bridge, verify, merge) in [
        (false, false, false),
        (false, true, false),
        (false, false, true),
        (true, false, false),
        (true, true, false),
    ] {
        run(bridge, verify, merge);
    }
}

fn run(bridge: bool, verify: bool, merge: bool) {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = daemon.dir.path().canonicalize().unwrap();
    let file = root.join("src.rs");
    let body: String = (1..=LINES).map(|n| line(n) + "\n").collect();
    std::fs::write(&file, &body).unwrap();
    // Past the racy window, as a repository's files are.
    std::thread::sleep(std::time::Duration::from_millis(2100));

    let (tools, init) = if bridge {
        let (bridge, init) = Bridge::start(&daemon.socket, &root);
        (Tools::Bridge(bridge), init)
    } else {
        let (raw, init) = session(&daemon, &root, true, merge);
        (Tools::Daemon(raw), init)
    };
    let features: Vec<String> = init["capabilities"]["features"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut agent = Agent { tools, calls: 0, sent: 0, received: 0, noticed: 0, log: Vec::new(), verify };
    let path = "src.rs";

    agent.read_all("read the file", path);
    agent.edit("edit", path, 7, "    let y = x + 7;", "    let y = x + 7 + 1;");
    outside_change(&file, "    let y = x + 301;", "    let y = x.wrapping_add(301);");
    agent.edit("edit again (after a formatter)", path, 13, "    let y = x + 13;", "    let y = x + 13 + 1;");
    {
        let (mut mate, _) = session(&daemon, &root, false, false);
        tool_call(
            &mut mate,
            json!({"name": "read", "arguments": {"file_path": path, "offset": 600, "limit": 5}}),
        );
        let done = tool_call(
            &mut mate,
            json!({"name": "edit", "arguments": {"file_path": path, "old_string": "    let y = x + 601;", "new_string": "    let y = x + 601; // mate"}}),
        );
        assert_eq!(done["isError"], false, "{done}");
    }
    for _ in 0..2 {
        let window =
            agent.call("re-read a window", "read", json!({"file_path": path, "offset": 590, "limit": 30}));
        assert!(!window.is_error, "{}", window.text);
    }
    outside_change(&file, "    let y = x + 901;", "    let y = x + 901; // outside");
    agent.edit(
        "edit (after another outside change)",
        path,
        19,
        "    let y = x + 19;",
        "    let y = x + 19 + 1;",
    );

    let text = std::fs::read_to_string(&file).unwrap();
    for expected in [
        "x + 7 + 1;",
        "x.wrapping_add(301);",
        "x + 13 + 1;",
        "x + 601; // mate",
        "x + 901; // outside",
        "x + 19 + 1;",
    ] {
        assert!(text.contains(expected), "lost: {expected}");
    }
    assert_eq!(agent.noticed, 2, "both outside changes before an edit were noticed");

    println!();
    println!(
        "daemon: {}; {}; agent {}",
        filectx_tests::bin("filectxd").display(),
        if bridge {
            format!(
                "through {} mcp --root ROOT (its defaults; counted as Claude Code hands results over)",
                filectx_tests::bin("filectx").display()
            )
        } else {
            "the daemon's own tools/call (dedupReads on where offered)".to_owned()
        },
        if verify { "looks at the lines of each edit" } else { "does not check its edits" }
    );
    if merge {
        println!("session with staleEdits \"merge\" (if the daemon offers it)");
    }
    if bridge {
        println!(
            "MCP {} server {} {}",
            init["protocolVersion"], init["serverInfo"]["name"], init["serverInfo"]["version"]
        );
    } else {
        println!("protocol {} features {:?}", init["protocolVersion"], features);
    }
    for line in &agent.log {
        println!("{line}");
    }
    println!(
        "total: {} tool calls, {} characters ({} sent in arguments, {} received in results); every outside change noticed, none lost",
        agent.calls,
        agent.sent + agent.received,
        agent.sent,
        agent.received
    );
}
