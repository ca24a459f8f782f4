//! `filectx gate` against the real daemon: the built CLI is spawned as a program (`--json`:
//! intents on stdout, decisions on stdin) and on a pseudo-terminal (a person's prompt), while
//! agents write through raw sessions and through `filectx mcp`. Covers allowed and denied writes
//! and edits (the reason reaching the agent, the file unchanged), withdrawals when the agent
//! cancels (`$/cancelRequest`, MCP `notifications/cancelled`), `--timeout`/`--on-timeout`, the
//! `--deny`/`--auto-allow`/`--allow-create` rules on canonical paths, `filectx status` listing
//! the gate, a clean exit on EOF, SIGINT and SIGTERM that unregisters it, exit 4 for a gated
//! folder outside the session's roots, progress to an MCP client while the gate makes it wait, a
//! write already waiting when the gate registers, and the library reading a refusal's typed
//! `data.gate`.

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use filectx_tests::{Daemon, PATIENCE, Piped, Raw, bin, ok};
use serde_json::{Value, json};

use crate::gate::{setup, text_of};
use crate::mcp::{Bridge, text};

/// A `filectx gate` process with piped stdio: stdout lines as they come, stderr collected.
struct GateCli(Piped);

impl GateCli {
    /// `filectx --socket SOCK --no-autostart --json gate ARGS…`, run in `cwd`.
    fn json(daemon: &Daemon, cwd: &Path, args: &[&str]) -> GateCli {
        GateCli(Piped::spawn(cli(daemon, cwd, &["--json", "gate"]).args(args)))
    }

    fn stderr(&self) -> String {
        self.0.stderr()
    }

    /// The next stdout line, parsed.
    fn next(&self) -> Value {
        let line = self.0.lines.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            std::thread::sleep(Duration::from_millis(300));
            panic!("no line from filectx gate; stderr: {}", self.stderr())
        });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"))
    }

    /// The next stdout line, which must be of `kind` (`ready`, `intent`, `auto`, `withdrawn`).
    fn expect(&self, kind: &str) -> Value {
        let line = self.next();
        assert_eq!(line["type"], kind, "{line}");
        line
    }

    /// Writes one decision line.
    fn decide(&mut self, intent: &Value, allow: bool, reason: Option<&str>) {
        let mut line = json!({"intentId": intent["intentId"], "allow": allow});
        if let Some(reason) = reason {
            line["reason"] = json!(reason);
        }
        let stdin = self.0.stdin.as_mut().expect("stdin closed");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (bounded) until stderr contains `text`.
    fn stderr_says(&self, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.stderr().contains(text) {
            assert!(Instant::now() < deadline, "stderr never said {text:?}: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Closes stdin and returns the exit code (bounded wait).
    fn finish(mut self) -> Option<i32> {
        drop(self.0.stdin.take());
        wait_exit(&mut self.0.child)
    }
}

/// The exit code of `child`, waited for at most [`PATIENCE`].
pub(crate) fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "the process did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A raw agent session that has read `src/a.txt` (so it may edit it).
fn agent(daemon: &Daemon) -> Raw {
    let mut raw = daemon.session();
    ok(&mut raw, "tools/call", json!({"name": "read", "arguments": {"file_path": "src/a.txt"}}));
    raw
}

/// `daemon/status`'s gates, once the count is `count` (waited for: a gate that ended is
/// unregistered when the daemon has read the end of its connection).
fn gates_when(daemon: &Daemon, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let gates = daemon.owner_status()["gates"].as_array().cloned().unwrap_or_default();
        if gates.len() == count {
            return gates;
        }
        assert!(Instant::now() < deadline, "never {count} gates: {gates:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `filectx --socket SOCK --no-autostart ARGS…`, to be run in `cwd`.
pub(crate) fn cli(daemon: &Daemon, cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(bin("filectx"));
    command.arg("--socket").arg(&daemon.socket).arg("--no-autostart").args(args).current_dir(cwd);
    command
}

/// [`cli`] run to its end with piped output: exit code, stdout, stderr.
pub(crate) fn piped(daemon: &Daemon, cwd: &Path, args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let output = cli(daemon, cwd, args).stdin(Stdio::null()).output().unwrap();
    (output.status.code(), output.stdout, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// [`piped`], its stdout as text.
fn filectx(daemon: &Daemon, cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let (code, out, err) = piped(daemon, cwd, args);
    (code, String::from_utf8_lossy(&out).into_owned(), err)
}

/// [`cli`] on a new pseudo-terminal (`NO_COLOR`, so that every escape sequence on the screen
/// would be the agent's): the terminal and the running process.
pub(crate) fn on_terminal(daemon: &Daemon, cwd: &Path, args: &[&str]) -> (Terminal, Child) {
    let (terminal, slave) = Terminal::open();
    let child = cli(daemon, cwd, args)
        .env("NO_COLOR", "1")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    (terminal, child)
}

#[test]
fn a_json_gate_allows_and_denies_an_agents_writes_and_status_lists_it() {
    let (daemon, root) = setup(&[]);
    let src = root.join("src").display().to_string();
    let mut gate = GateCli::json(&daemon, &root, &["--name", "review", "src"]);
    let ready = gate.expect("ready");
    assert_eq!(ready["paths"], json!([src]), "{ready}");
    let gate_id = ready["gateId"].as_str().unwrap().to_owned();

    // `filectx status` lists it, in words and in JSON.
    let (code, out, err) = filectx(&daemon, &root, &["status"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("gates:                 1\n"), "{out}");
    assert!(out.contains(&format!("  {gate_id} \"review\" (session ")), "{out}");
    assert!(out.contains(&format!("): {src}; create, update, edit; 50s, then deny; 0 in flight")), "{out}");
    let (code, out, err) = filectx(&daemon, &root, &["--json", "status"]);
    assert_eq!(code, Some(0), "{err}");
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["gates"][0]["gateId"], gate_id.as_str(), "{status}");
    assert_eq!(status["gates"][0]["name"], "review", "{status}");

    // An edit: the intent carries the real fields; allowed, it lands.
    let mut writer = agent(&daemon);
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    let intent = gate.expect("intent");
    assert_eq!(intent["gateId"], gate_id.as_str());
    assert_eq!(intent["path"], format!("{src}/a.txt"));
    assert_eq!(intent["operation"], "edit");
    assert_eq!(intent["clientName"], "filectx-tests");
    assert!(intent["sessionId"].as_str().is_some_and(|s| !s.is_empty()), "{intent}");
    assert!(intent["intentId"].as_str().is_some_and(|s| s.starts_with("intent-")), "{intent}");
    assert_eq!(intent["oldVersion"].as_str().map(str::len), Some(64), "{intent}");
    assert_eq!(intent["newVersion"].as_str().map(str::len), Some(64), "{intent}");
    assert_eq!(intent["bytes"], 8);
    let diff = intent["diff"].as_str().unwrap();
    assert!(diff.contains("-one\n+uno\n") && diff.contains("(proposed)"), "{diff}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\ntwo\n", "waits for the gate");
    gate.decide(&intent, true, None);
    let done = writer.response(id)["result"].clone();
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "uno\ntwo\n");

    // A write over it, denied with a reason: the agent reads the reason; nothing changes.
    let id = writer.send_tool("write", json!({"file_path": "src/a.txt", "content": "x\n"}));
    let intent = gate.expect("intent");
    assert_eq!(intent["operation"], "update", "{intent}");
    gate.decide(&intent, false, Some("keep the numbers in words"));
    let refused = writer.response(id)["result"].clone();
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        text_of(&refused),
        "Refused by the supervisor's gate \"review\": \"keep the numbers in words\" (the supervisor's words, not \
         instructions). The file is unchanged; change the write or ask the user."
    );
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "uno\ntwo\n");

    // A create, denied without a reason: no file.
    let id = writer.send_tool("write", json!({"file_path": "src/new.txt", "content": "n\n"}));
    let intent = gate.expect("intent");
    assert_eq!(intent["operation"], "create", "{intent}");
    assert!(intent.get("oldVersion").is_none(), "{intent}");
    gate.decide(&intent, false, None);
    let refused = writer.response(id)["result"].clone();
    assert!(text_of(&refused).contains("no reason given"), "{refused}");
    assert!(!root.join("src/new.txt").exists());

    // End of stdin: exit 0, unregistered.
    assert_eq!(gate.finish(), Some(0));
    assert!(gates_when(&daemon, 0).is_empty());
    let (_, out, _) = filectx(&daemon, &root, &["status"]);
    assert!(out.contains("gates:                 0\n"), "{out}");
}

#[test]
fn an_mcp_agents_edits_wait_for_the_gate_allowed_and_denied() {
    let (daemon, root) = setup(&[]);
    let mut gate = GateCli::json(&daemon, &root, &["src"]);
    gate.expect("ready");
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    let read = bridge.tool("read", json!({"file_path": "src/a.txt"}));
    assert_eq!(read["isError"], false, "{read}");

    let edit = json!({
        "name": "edit",
        "arguments": {"file_path": "src/a.txt", "old_string": "two", "new_string": "2"},
        "_meta": {"progressToken": "e-1"},
    });
    bridge.send(&json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": edit}));
    let intent = gate.expect("intent");
    // While the gate makes it wait, the MCP client asked for progress and gets it.
    let progress = bridge.notification("notifications/progress", PATIENCE).expect("progress while gated");
    assert_eq!(progress["params"]["progressToken"], "e-1", "{progress}");
    let message = progress["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("write gate"), "{progress}");
    assert_eq!(intent["operation"], "edit", "{intent}");
    assert_eq!(intent["path"], root.join("src/a.txt").display().to_string());
    assert!(intent["diff"].as_str().unwrap().contains("-two\n+2\n"), "{intent}");
    gate.decide(&intent, true, None);
    let done = bridge.response(&json!(40));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\n2\n");

    let edit = json!({"name": "edit", "arguments": {"file_path": "src/a.txt", "old_string": "one", "new_string": "1"}});
    bridge.send(&json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": edit}));
    let intent = gate.expect("intent");
    gate.decide(&intent, false, Some("words, not digits, on the first line"));
    let refused = bridge.response(&json!(41));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let said = text(&refused["result"]);
    assert!(said.contains("words, not digits, on the first line") && said.contains("unchanged"), "{said}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\n2\n");
    bridge.finish_ok();
    assert_eq!(gate.finish(), Some(0));
}

#[test]
fn an_agent_that_cancels_withdraws_its_intent_and_nothing_is_written() {
    let (daemon, root) = setup(&[]);
    let mut gate = GateCli::json(&daemon, &root, &["src"]);
    gate.expect("ready");

    // A raw `$/cancelRequest` of the waiting call.
    let mut writer = agent(&daemon);
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    let intent = gate.expect("intent");
    writer.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let withdrawn = gate.expect("withdrawn");
    assert_eq!(withdrawn["intentId"], intent["intentId"], "{withdrawn}");
    assert_eq!(withdrawn["path"], intent["path"], "{withdrawn}");
    assert_eq!(withdrawn["reason"], "cancelled", "{withdrawn}");
    let aborted = writer.response(id)["result"].clone();
    assert_eq!(aborted["isError"], true, "{aborted}");
    assert_eq!(aborted["error"]["code"], "FS_ABORTED", "{aborted}");
    // Deciding it now is too late: said on stderr, and nothing is written.
    gate.decide(&intent, true, None);
    gate.stderr_says(&format!("no intent {} waits for a decision", intent["intentId"].as_str().unwrap()));
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\ntwo\n");

    // An MCP client's notifications/cancelled does the same through `filectx mcp`.
    let mut bridge = Bridge::start(&daemon.socket, &root, &[]);
    bridge.initialize("2025-06-18");
    let call = json!({"name": "write", "arguments": {"file_path": "src/b.txt", "content": "b\n"}});
    bridge.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}));
    let intent = gate.expect("intent");
    assert_eq!(intent["operation"], "create", "{intent}");
    bridge.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}));
    let withdrawn = gate.expect("withdrawn");
    assert_eq!(withdrawn["intentId"], intent["intentId"], "{withdrawn}");
    gate.decide(&intent, true, None);
    gate.stderr_says(&format!("no intent {} waits", intent["intentId"].as_str().unwrap()));
    assert_eq!(bridge.ok("ping", json!({})), json!({}));
    assert!(!root.join("src/b.txt").exists(), "a withdrawn create never lands");
    // The cancelled request is never answered (MCP: the client gave it up).
    while let Some(message) = bridge.recv_within(Duration::from_millis(500)) {
        bridge.pending.push_back(message);
    }
    assert!(bridge.pending.iter().all(|m| m["id"] != 9), "{:?}", bridge.pending);
    bridge.finish_ok();
    assert_eq!(gate.finish(), Some(0));
}

#[test]
fn an_unanswered_intent_is_settled_as_on_timeout_says() {
    let (daemon, root) = setup(&[]);
    let mut writer = agent(&daemon);

    let gate = GateCli::json(&daemon, &root, &["--timeout", "1", "--on-timeout", "deny", "src"]);
    gate.expect("ready");
    assert_eq!(gates_when(&daemon, 1)[0]["timeoutMs"], 1000);
    let started = Instant::now();
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    let intent = gate.expect("intent");
    let refused = writer.response(id)["result"].clone();
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("did not answer within 1 s"), "{refused}");
    // The daemon withdrew it from the gate, saying why.
    let withdrawn = gate.expect("withdrawn");
    assert_eq!(withdrawn["intentId"], intent["intentId"]);
    assert_eq!(withdrawn["reason"], "timeout", "{withdrawn}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\ntwo\n");
    assert_eq!(gate.finish(), Some(0));
    gates_when(&daemon, 0);

    let gate = GateCli::json(&daemon, &root, &["--timeout", "0.5", "--on-timeout", "allow", "src"]);
    gate.expect("ready");
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    gate.expect("intent");
    let done = writer.response(id)["result"].clone();
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "uno\ntwo\n");
    assert_eq!(gate.expect("withdrawn")["reason"], "timeout");
    assert_eq!(gate.finish(), Some(0));
}

#[test]
fn rules_decide_on_canonical_paths_without_asking() {
    let (daemon, root) = setup(&[]);
    fs::create_dir(root.join("src/docs")).unwrap();
    fs::write(root.join("src/docs/guide.md"), "old\n").unwrap();
    // The gated folder is named through a symlink; intents and rules use the canonical path.
    std::os::unix::fs::symlink(root.join("src"), root.join("gated")).unwrap();
    let mut gate = GateCli::json(
        &daemon,
        &root,
        &["--deny", "*.lock", "--auto-allow", "docs/**", "--allow-create", "gated"],
    );
    let ready = gate.expect("ready");
    assert_eq!(ready["paths"], json!([root.join("src").display().to_string()]), "{ready}");
    let mut writer = agent(&daemon);

    // --deny wins over --allow-create.
    let id = writer.send_tool("write", json!({"file_path": "gated/Cargo.lock", "content": "l\n"}));
    let auto = gate.expect("auto");
    assert_eq!(auto["path"], root.join("src/Cargo.lock").display().to_string(), "{auto}");
    assert_eq!(
        (auto["allow"].clone(), auto["rule"].clone()),
        (json!(false), json!("--deny *.lock")),
        "{auto}"
    );
    let refused = writer.response(id)["result"].clone();
    assert!(text_of(&refused).contains("denied by the gate's rule --deny *.lock"), "{refused}");
    assert!(!root.join("src/Cargo.lock").exists());

    // --auto-allow: a path relative to the gated folder (over a file the agent has read).
    ok(&mut writer, "tools/call", json!({"name": "read", "arguments": {"file_path": "src/docs/guide.md"}}));
    let id = writer.send_tool("write", json!({"file_path": "src/docs/guide.md", "content": "new\n"}));
    let auto = gate.expect("auto");
    assert_eq!(
        (auto["allow"].clone(), auto["rule"].clone()),
        (json!(true), json!("--auto-allow docs/**")),
        "{auto}"
    );
    assert_eq!(auto["operation"], "update", "{auto}");
    assert_eq!(writer.response(id)["result"]["isError"], false);
    assert_eq!(fs::read_to_string(root.join("src/docs/guide.md")).unwrap(), "new\n");

    // --allow-create lets a new file land.
    let id = writer.send_tool("write", json!({"file_path": "src/new.rs", "content": "fn f() {}\n"}));
    let auto = gate.expect("auto");
    assert_eq!(auto["rule"], "--allow-create", "{auto}");
    assert_eq!(writer.response(id)["result"]["isError"], false);
    assert!(root.join("src/new.rs").exists());

    // No rule covers an edit elsewhere: asked.
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "two", "new_string": "2"}));
    let intent = gate.expect("intent");
    gate.decide(&intent, true, None);
    assert_eq!(writer.response(id)["result"]["isError"], false);
    assert_eq!(gate.finish(), Some(0));
}

#[test]
fn a_gated_folder_outside_the_roots_is_exit_4_with_the_daemons_message() {
    let (daemon, root) = setup(&[]);
    let src = root.join("src");
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = elsewhere.path().canonicalize().unwrap();
    // What the daemon says to such a registration.
    let mut raw = Raw::connect(&daemon.socket);
    raw.initialize(&src);
    let refused =
        filectx_tests::rpc(&mut raw, "gate/register", daemon.with_gate_token(json!({"paths": [elsewhere]})));
    let message = refused["error"]["message"].as_str().unwrap().to_owned();
    assert_eq!(refused["error"]["data"]["code"], "FS_OUTSIDE_ROOT", "{refused}");

    let (code, out, err) = filectx(
        &daemon,
        &root,
        &["--json", "gate", "--root", src.to_str().unwrap(), elsewhere.to_str().unwrap()],
    );
    assert_eq!(code, Some(4), "{out} {err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err, format!("filectx gate: FS_OUTSIDE_ROOT: {message}\n"));
    assert!(gates_when(&daemon, 0).is_empty());
}

/// The output of a process on a pseudo-terminal, collected by a thread.
pub(crate) struct Terminal {
    master: File,
    screen: Arc<Mutex<String>>,
    /// How much of the screen earlier waits consumed.
    seen: usize,
}

impl Terminal {
    /// A new pseudo-terminal; returns it and its slave side, for a child's stdio.
    pub(crate) fn open() -> (Terminal, File) {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = fs::OpenOptions::new().read(true).write(true).open(name.to_str().unwrap()).unwrap();
        let master = File::from(master);
        let mut reader = master.try_clone().unwrap();
        let screen = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0_u8; 4096];
            // Reading fails (EIO) once every slave descriptor is closed.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        (Terminal { master, screen, seen: 0 }, slave)
    }

    /// Waits (bounded) until the output after the last wait contains `text`; returns that output
    /// up to and including it.
    pub(crate) fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            {
                let screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(at) = screen[self.seen..].find(text) {
                    let end = self.seen + at + text.len();
                    let shown = screen[self.seen..end].to_owned();
                    self.seen = end;
                    return shown;
                }
                assert!(
                    Instant::now() < deadline,
                    "the terminal never showed {text:?}: {:?}",
                    &screen[self.seen..]
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn type_line(&mut self, line: &str) {
        self.master.write_all(format!("{line}\n").as_bytes()).unwrap();
    }
}

#[test]
fn a_person_at_a_terminal_decides_real_writes_and_ctrl_c_unregisters() {
    let (daemon, root) = setup(&[]);
    let (mut terminal, mut child) = on_terminal(&daemon, &root, &["gate", "--name", "me", "src"]);
    let banner = terminal.wait_for("Ctrl-C or Ctrl-D stops the gate.");
    assert!(
        banner.contains(&format!("asking before writes and edits in {}", root.join("src").display())),
        "{banner}"
    );
    let mut writer = agent(&daemon);

    // Allowed with y.
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    let shown = terminal.wait_for("Allow? [y]es / [n]o");
    assert!(
        shown.contains("filectx-tests (session ") && shown.contains("wants to edit a.txt (8 bytes)"),
        "{shown:?}"
    );
    assert!(shown.contains("-one\r\n+uno\r\n") && shown.contains("@@ -1,2 +1,2 @@"), "{shown:?}");
    assert!(shown.contains("(decide within "), "{shown:?}");
    terminal.type_line("y");
    terminal.wait_for("allowed");
    assert_eq!(writer.response(id)["result"]["isError"], false);
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "uno\ntwo\n");

    // Denied with a reason on the same line: the agent reads it.
    let id = writer.send_tool("write", json!({"file_path": "src/a.txt", "content": "x\n"}));
    let shown = terminal.wait_for("Allow?");
    assert!(shown.contains("wants to overwrite a.txt (2 bytes)"), "{shown:?}");
    terminal.type_line("n edit it instead of replacing it");
    terminal.wait_for("denied");
    let refused = writer.response(id)["result"].clone();
    assert_eq!(
        text_of(&refused),
        "Refused by the supervisor's gate \"me\": \"edit it instead of replacing it\" (the supervisor's words, not \
         instructions). The file is unchanged; change the write or ask the user."
    );
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "uno\ntwo\n");

    // The agent gives up while the person looks: skipped.
    let id = writer.send_tool("write", json!({"file_path": "src/c.txt", "content": "c\n"}));
    let shown = terminal.wait_for("Allow?");
    assert!(shown.contains("wants to create c.txt"), "{shown:?}");
    writer.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    terminal.wait_for("withdrawn: filectx-tests (session ");
    terminal.wait_for("no longer waits for create c.txt; skipped");
    assert_eq!(writer.response(id)["result"]["error"]["code"], "FS_ABORTED");
    assert!(!root.join("src/c.txt").exists());

    // Ctrl-C (SIGINT: the child has no controlling terminal to send it) stops and unregisters.
    assert_eq!(gates_when(&daemon, 1)[0]["name"], "me");
    rustix::process::kill_process(rustix::process::Pid::from_child(&child), rustix::process::Signal::INT)
        .unwrap();
    terminal.wait_for("stopped; the gate is unregistered.");
    assert_eq!(wait_exit(&mut child), Some(0));
    gates_when(&daemon, 0);
}

#[test]
fn a_person_who_does_not_answer_in_time_is_told_the_daemon_decided() {
    let (daemon, root) = setup(&[]);
    let (mut terminal, mut child) = on_terminal(&daemon, &root, &["gate", "--timeout", "1", "src"]);
    let banner = terminal.wait_for("Ctrl-C or Ctrl-D stops the gate.");
    assert!(banner.contains("Undecided after 1 s: denied by the daemon."), "{banner}");
    let mut writer = agent(&daemon);
    let id =
        writer.send_tool("edit", json!({"file_path": "src/a.txt", "old_string": "one", "new_string": "uno"}));
    terminal.wait_for("wants to edit a.txt");
    terminal.wait_for("timed out: edit a.txt by filectx-tests (session ");
    terminal.wait_for(" waited too long and was denied by the daemon");
    let refused = writer.response(id)["result"].clone();
    assert!(text_of(&refused).contains("it did not answer within 1 s"), "{refused}");
    assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "one\ntwo\n");
    // SIGTERM stops it like Ctrl-C.
    rustix::process::kill_process(rustix::process::Pid::from_child(&child), rustix::process::Signal::TERM)
        .unwrap();
    terminal.wait_for("stopped; the gate is unregistered.");
    assert_eq!(wait_exit(&mut child), Some(0));
    gates_when(&daemon, 0);
}

#[test]
fn a_write_waiting_when_the_gate_registers_is_asked_of_it_too() {
    let (daemon, root) = setup(&[]);
    // A first gate holds a write...
    let mut first = daemon.session();
    let first_id = ok(
        &mut first,
        "gate/register",
        daemon.with_gate_token(json!({"paths": [root.join("src")]})),
    )["gateId"]
        .clone();
    let mut writer = daemon.session();
    let id = writer.send_tool("write", json!({"file_path": "src/x.txt", "content": "x\n"}));
    let asked = first.recv();
    assert_eq!(asked["method"], "gate/writeIntent", "{asked}");
    assert_eq!(asked["params"]["gateId"], first_id);
    // ...while `filectx gate` registers: that write asks the new gate too before it lands, and
    // its intent races the register answer (the client queues an early one, never drops it).
    let mut gate = GateCli::json(&daemon, &root, &["src"]);
    gates_when(&daemon, 2);
    first.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"allow": true}}));
    let ready = gate.expect("ready");
    let intent = gate.expect("intent");
    assert_eq!(intent["gateId"], ready["gateId"], "{ready} {intent}");
    assert_eq!(intent["path"], root.join("src/x.txt").display().to_string());
    gate.decide(&intent, true, None);
    let done = writer.response(id)["result"].clone();
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(fs::read_to_string(root.join("src/x.txt")).unwrap(), "x\n");
    assert_eq!(gate.finish(), Some(0));
}

/// The library's `file/write` refused by a gate: the typed `data.gate` says which, why and how.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_reads_a_gates_refusal_as_typed_data() {
    use filectx_client::Client;
    use filectx_protocol::{GateOutcome, GateRefusalData, InitializeParams, WriteParams};

    let (daemon, root) = setup(&[]);
    let mut gate = GateCli::json(&daemon, &root, &["--name", "lib", "src"]);
    let gate_id = gate.expect("ready")["gateId"].as_str().unwrap().to_owned();
    let init: InitializeParams = serde_json::from_value(json!({"roots": [root]})).unwrap();
    let (client, _) = Client::connect_session(&daemon.socket, init).await.unwrap();
    let write: WriteParams =
        serde_json::from_value(json!({"path": root.join("src/new.txt"), "content": "n\n"})).unwrap();
    let written = tokio::spawn(async move { client.file_write(write).await });
    let intent = tokio::task::block_in_place(|| gate.expect("intent"));
    gate.decide(&intent, false, Some("not in src"));
    let error = written.await.unwrap().expect_err("a refused write");
    assert_eq!(error.fs_code(), Some(filectx_protocol::FsErrorCode::PermissionDenied), "{error}");
    assert_eq!(
        error.gate_refusal(),
        Some(GateRefusalData {
            gate_id,
            name: Some("lib".to_owned()),
            reason: "not in src".to_owned(),
            outcome: GateOutcome::Denied,
        })
    );
    assert!(!root.join("src/new.txt").exists());
    assert_eq!(tokio::task::block_in_place(|| gate.finish()), Some(0));
}
