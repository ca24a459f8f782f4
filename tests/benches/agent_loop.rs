//! What a scripted agent loop costs a model in characters and tool calls: read a 1,200-line
//! file, edit it, an outside formatter change, edit again, a teammate's change, re-read a window
//! twice, another outside change, edit. The agent follows the tools' own texts: after a stale
//! refusal it reads the whole file again when the refusal asks for that, and retries at once
//! otherwise. It turns `dedupReads` on where the daemon offers it. The loop runs
//! twice: as is, and with an agent that checks each edit by looking at the edited lines (from the
//! edit's own answer when it shows them, else by reading a few lines around the edit).
//!
//! It talks to a real `filectxd` (by default `target/release/filectxd`; `FILECTX_FILECTXD_BIN`
//! picks another build, e.g. an older one for a before/after comparison):
//! `cargo build --release -p filectx-daemon && cargo bench -p filectx-tests --bench agent_loop`.
//! Each agent runs twice: on a daemon session of its own (`tools/call`), and through `filectx
//! mcp` started as its README registration line starts it, for a client named like Claude Code
//! (`target/release/filectx`, or `FILECTX_FILECTX_BIN`): there the model gets what Claude Code
//! hands it, `JSON.stringify(structuredContent)` when a result carries it, else its text.
//! Prints every call with the characters it cost, then the totals. Also checks that every outside
//! change was noticed (refused or shown) and that the file ends with every change in it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use filectx_tests::{Daemon, Raw};
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

/// `filectx mcp` as a harness runs it: one JSON-RPC message a line on its stdin and stdout.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Mcp {
    /// Starts `filectx --socket SOCK mcp --root ROOT` and initializes it as Claude Code does.
    fn start(daemon: &Daemon, root: &Path) -> Mcp {
        let mut child = Command::new(filectx_tests::bin("filectx"))
            .arg("--socket")
            .arg(&daemon.socket)
            .args(["--no-autostart", "mcp", "--root"])
            .arg(root)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Mcp { child, stdin, stdout, next_id: 1 };
        let client = json!({"name": "claude-code", "version": "2.1.332"});
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}),
        );
        assert!(init.get("result").is_some(), "{init}");
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The response to one request (notifications in between are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "filectx mcp ended");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the agent reaches the tools.
enum Tools {
    /// The daemon's own `tools/call`, on a session of its own.
    Daemon(Raw),
    /// Through `filectx mcp`.
    Mcp(Box<Mcp>),
}

/// A tool result as the agent reads it: its text, whether it failed and with what code, and
/// how many characters of it the model got.
struct Answer {
    text: String,
    is_error: bool,
    code: Option<String>,
    shown: usize,
}

impl Tools {
    fn call(&mut self, tool: &str, arguments: Value) -> Answer {
        let params = json!({"name": tool, "arguments": arguments});
        let result = match self {
            Tools::Daemon(raw) => raw.call("tools/call", Some(params)),
            Tools::Mcp(mcp) => {
                let response = mcp.request("tools/call", params);
                response.get("result").cloned().unwrap_or_else(|| panic!("{response}"))
            }
        };
        let text: String =
            result["content"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap_or("")).collect();
        let code = [
            &result["error"]["code"],
            &result["_meta"]["filectx"]["code"],
            &result["structuredContent"]["error"]["code"],
        ]
        .into_iter()
        .find_map(|code| code.as_str().map(str::to_owned));
        // What Claude Code hands its model: structuredContent as JSON when there is some.
        let shown = match result.get("structuredContent") {
            Some(structured) => structured.to_string().chars().count(),
            None => text.chars().count(),
        };
        Answer { text, is_error: result["isError"] == true, code, shown }
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
        self.received += answer.shown;
        let first = answer.text.lines().next().unwrap_or("");
        self.log.push(format!(
            "{:>2}. {what:<34} {tool:<5} in {:>6} out {:>6}  {}",
            self.calls,
            args.chars().count(),
            answer.shown,
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
            let text = answer.text;
            if !answer.is_error {
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

fn session(daemon: &Daemon, root: &Path, dedup: bool) -> (Raw, Value) {
    let mut raw = Raw::connect(&daemon.socket);
    let mut params = json!({"roots": [root], "clientInfo": {"name": "agent-loop"}});
    if dedup {
        params["dedupReads"] = json!(true);
    }
    let answer = raw.request("initialize", Some(params.clone()));
    if answer.get("error").is_some() {
        // An older daemon refuses the unknown field: the session starts without it.
        params.as_object_mut().unwrap().remove("dedupReads");
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
    for verify in [false, true] {
        for mcp in [false, true] {
            run(verify, mcp);
        }
    }
}

fn run(verify: bool, mcp: bool) {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = daemon.dir.path().canonicalize().unwrap();
    let file = root.join("src.rs");
    let body: String = (1..=LINES).map(|n| line(n) + "\n").collect();
    std::fs::write(&file, &body).unwrap();
    // Past the racy window, as a repository's files are.
    std::thread::sleep(std::time::Duration::from_millis(2100));

    let (raw, init) = session(&daemon, &root, true);
    let features: Vec<String> = init["capabilities"]["features"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let tools = if mcp {
        drop(raw);
        Tools::Mcp(Box::new(Mcp::start(&daemon, &root)))
    } else {
        Tools::Daemon(raw)
    };
    let mut agent = Agent { tools, calls: 0, sent: 0, received: 0, noticed: 0, log: Vec::new(), verify };
    let path = "src.rs";

    agent.read_all("read the file", path);
    agent.edit("edit", path, 7, "    let y = x + 7;", "    let y = x + 7 + 1;");
    outside_change(&file, "    let y = x + 301;", "    let y = x.wrapping_add(301);");
    agent.edit("edit again (after a formatter)", path, 13, "    let y = x + 13;", "    let y = x + 13 + 1;");
    {
        let (mut mate, _) = session(&daemon, &root, false);
        mate.call(
            "tools/call",
            Some(json!({"name": "read", "arguments": {"file_path": path, "offset": 600, "limit": 5}})),
        );
        let done = mate.call(
            "tools/call",
            Some(json!({"name": "edit", "arguments": {"file_path": path, "old_string": "    let y = x + 601;", "new_string": "    let y = x + 601; // mate"}})),
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
    let through = if mcp {
        format!(
            "through {} mcp (defaults; the model gets what Claude Code shows)",
            filectx_tests::bin("filectx").display()
        )
    } else {
        "through the daemon's tools/call".to_owned()
    };
    println!(
        "daemon: {}; agent {}; {through}",
        filectx_tests::bin("filectxd").display(),
        if verify { "looks at the lines of each edit" } else { "does not check its edits" }
    );
    println!("protocol {} features {:?}", init["protocolVersion"], features);
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
