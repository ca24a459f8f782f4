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
//! It talks to a real `filectxd` (by default `target/release/filectxd`; `FILECTX_FILECTXD_BIN`
//! picks another build, e.g. an older one for a before/after comparison):
//! `cargo build --release -p filectx-daemon && cargo bench -p filectx-tests --bench agent_loop`.
//! Prints every call with the characters it cost, then the totals. Also checks that every outside
//! change was noticed (refused or shown) and that the file ends with every change in it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

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

/// The model's side: every call, and what it cost.
struct Agent {
    raw: Raw,
    calls: usize,
    sent: usize,
    received: usize,
    noticed: usize,
    log: Vec<String>,
    /// Whether the agent looks at the lines it edited after each edit.
    verify: bool,
}

impl Agent {
    fn call(&mut self, what: &str, tool: &str, arguments: Value) -> Value {
        let args = arguments.to_string();
        let response = self.raw.call("tools/call", Some(json!({"name": tool, "arguments": arguments})));
        let text: String = response["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap_or(""))
            .collect();
        self.calls += 1;
        self.sent += args.chars().count();
        self.received += text.chars().count();
        let first = text.lines().next().unwrap_or("");
        self.log.push(format!(
            "{:>2}. {what:<34} {tool:<5} in {:>6} out {:>6}  {}",
            self.calls,
            args.chars().count(),
            text.chars().count(),
            first.chars().take(70).collect::<String>()
        ));
        response
    }

    fn read_all(&mut self, what: &str, path: &str) {
        let mut offset = 1;
        loop {
            let response = self.call(what, "read", json!({"file_path": path, "offset": offset}));
            let text = response["content"][0]["text"].as_str().unwrap().to_owned();
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
            let response =
                self.call(what, "edit", json!({"file_path": path, "old_string": old, "new_string": new}));
            if response["isError"] != true {
                let text = response["content"][0]["text"].as_str().unwrap_or("");
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
            let text = response["content"][0]["text"].as_str().unwrap().to_owned();
            assert_eq!(response["error"]["code"], "FS_STALE_VERSION", "{text}");
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
    for (verify, merge) in [(false, false), (true, false), (false, true)] {
        run(verify, merge);
    }
}

fn run(verify: bool, merge: bool) {
    let daemon = Daemon::start(&["--no-fsync"]);
    let root = daemon.dir.path().canonicalize().unwrap();
    let file = root.join("src.rs");
    let body: String = (1..=LINES).map(|n| line(n) + "\n").collect();
    std::fs::write(&file, &body).unwrap();
    // Past the racy window, as a repository's files are.
    std::thread::sleep(std::time::Duration::from_millis(2100));

    let (raw, init) = session(&daemon, &root, true, merge);
    let features: Vec<String> = init["capabilities"]["features"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut agent = Agent { raw, calls: 0, sent: 0, received: 0, noticed: 0, log: Vec::new(), verify };
    let path = "src.rs";

    agent.read_all("read the file", path);
    agent.edit("edit", path, 7, "    let y = x + 7;", "    let y = x + 7 + 1;");
    outside_change(&file, "    let y = x + 301;", "    let y = x.wrapping_add(301);");
    agent.edit("edit again (after a formatter)", path, 13, "    let y = x + 13;", "    let y = x + 13 + 1;");
    {
        let (mut mate, _) = session(&daemon, &root, false, false);
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
        assert_eq!(window["isError"], false);
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
        "daemon: {}; agent {}",
        filectx_tests::bin("filectxd").display(),
        if verify { "looks at the lines of each edit" } else { "does not check its edits" }
    );
    if merge {
        println!("session with staleEdits \"merge\" (if the daemon offers it)");
    }
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
