//! The scripted language server `fake-lsp` (tests/src/bin/fake_lsp), driven over its pipes by a
//! plain LSP client without the daemon: what the daemon's language-server tests rely on it to
//! do, flag by flag — diagnostics from ERROR/WARN lines and DEF/USE across documents, with
//! versions; pull and on-save servers; crashes; late, stale, versionless, flooding, garbled and
//! huge output; the log of what it received; a grandchild that stands polite signals.

use std::path::Path;
use std::process::Command;

use filectx_tests::lsp::{Frame, LspClient, uri};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};

/// The binary under test.
const FAKE: &str = env!("CARGO_BIN_EXE_fake-lsp");

/// A fake started with `args` and initialized with `root` as its workspace folder.
fn start(root: &Path, args: &[&str]) -> (LspClient, Value) {
    let mut command = Command::new(FAKE);
    command.args(args);
    let mut server = LspClient::spawn(command);
    let result = server.initialize(root, Value::Null);
    (server, result)
}

/// Asserts that the server sends nothing before the answer to a request sent now (it handles
/// messages in order and answers at once, so anything it meant to send earlier comes first).
fn assert_quiet(server: &mut LspClient) {
    let id = server.ask("fake/ping", Value::Null);
    let next = server.next_message();
    assert_eq!(next["id"], id, "expected nothing before the ping's answer, got {next}");
    assert_eq!(next["error"]["code"], -32601, "{next}");
}

/// One diagnostic as the fake makes it, on one line from `start` to `end` (UTF-16 columns).
fn diagnostic(line: u32, start: u32, end: u32, severity: u8, code: Option<&str>, message: &str) -> Value {
    let mut d = json!({
        "range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
        "severity": severity,
        "source": "fake",
        "message": message,
    });
    if let Some(code) = code {
        d["code"] = json!(code);
    }
    d
}

/// The lines of the `--log` file, parsed.
fn log_lines(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn an_error_line_is_published_with_its_version_and_a_fix_clears_it() {
    let root = tempfile::tempdir().unwrap();
    let (mut server, result) = start(root.path(), &["--stdio", "--name", "fake-py"]);
    assert_eq!(
        result,
        json!({
            "capabilities": {"textDocumentSync": {"openClose": true, "change": 1, "save": {"includeText": false}}},
            "serverInfo": {"name": "fake-py", "version": env!("CARGO_PKG_VERSION")},
        })
    );
    let a = uri(&root.path().join("a.py"));
    // The astral 𝒳 is 2 UTF-16 units: ERROR starts at column 10, the line (without \r\n) ends at 30.
    server.open(&a, "python", 1, "ok = 1\r\n𝒳 = 1  # ERROR[E1]: bad type \r\n  WARN: careful\n");
    let published = server.publish();
    assert_eq!(
        published,
        json!({"uri": a, "version": 1, "diagnostics": [
            diagnostic(1, 10, 30, 1, Some("E1"), "bad type"),
            diagnostic(2, 2, 15, 2, None, "careful"),
        ]})
    );
    server.change(&a, 2, "ok = 1\n𝒳 = 1\n");
    assert_eq!(server.publish(), json!({"uri": a, "version": 2, "diagnostics": []}));
    assert_quiet(&mut server);
    assert_eq!(server.shut_down().code(), Some(0));
}

#[test]
fn a_use_is_an_error_while_no_open_document_defines_the_name() {
    let root = tempfile::tempdir().unwrap();
    let (mut server, _) = start(root.path(), &[]);
    let (a, b) = (uri(&root.path().join("a.txt")), uri(&root.path().join("b.txt")));
    let unknown = diagnostic(1, 2, 9, 1, Some("E-USE"), "unknown name 'foo'");
    server.open(&a, "plaintext", 1, "x\n  USE foo\n");
    assert_eq!(server.publish(), json!({"uri": a, "version": 1, "diagnostics": [unknown]}));
    // Defining it in another document clears the first one's error: both are published, the
    // changed one first.
    server.open(&b, "plaintext", 7, "DEF foo\n");
    assert_eq!(server.publish(), json!({"uri": b, "version": 7, "diagnostics": []}));
    assert_eq!(server.publish(), json!({"uri": a, "version": 1, "diagnostics": []}));
    // An edit of b that keeps the name changes nothing in a: only b is published.
    server.change(&b, 8, "DEF foo\nDEF bar\n");
    assert_eq!(server.publish(), json!({"uri": b, "version": 8, "diagnostics": []}));
    assert_quiet(&mut server);
    // Closing b brings the error back in a; b had none, so it gets no empty publish.
    server.close(&b);
    assert_eq!(server.publish(), json!({"uri": a, "version": 1, "diagnostics": [unknown]}));
    assert_quiet(&mut server);
}

#[test]
fn pull_answers_diagnostic_requests_and_pushes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (mut server, result) = start(root.path(), &["--pull"]);
    assert_eq!(
        result["capabilities"]["diagnosticProvider"],
        json!({"interFileDependencies": true, "workspaceDiagnostics": false})
    );
    let a = uri(&root.path().join("a.ts"));
    server.open(&a, "typescript", 1, "ERROR: no\n");
    assert_quiet(&mut server);
    let answer = server.request("textDocument/diagnostic", json!({"textDocument": {"uri": a}}));
    assert_eq!(answer["result"], json!({"kind": "full", "items": [diagnostic(0, 0, 9, 1, None, "no")]}));
    server.change(&a, 2, "fine\n");
    assert_quiet(&mut server);
    let answer = server.request("textDocument/diagnostic", json!({"textDocument": {"uri": a}}));
    assert_eq!(answer["result"], json!({"kind": "full", "items": []}));
}

#[test]
fn on_save_checks_only_when_a_document_is_saved() {
    let root = tempfile::tempdir().unwrap();
    let (mut server, _) = start(root.path(), &["--on-save"]);
    let lib = uri(&root.path().join("lib.rs"));
    server.open(&lib, "rust", 1, "fn a() {}\n");
    server.change(&lib, 2, "fn a() { ERROR[E0308]: mismatched types }\n");
    assert_quiet(&mut server);
    server.save(&lib);
    let published = server.publish();
    assert_eq!(published["version"], 2);
    assert_eq!(
        published["diagnostics"],
        json!([diagnostic(0, 9, 41, 1, Some("E0308"), "mismatched types }")])
    );
}

#[test]
fn crash_at_ends_the_nth_change_and_crash_once_only_the_first_server() {
    let root = tempfile::tempdir().unwrap();
    let once = root.path().join("crashed");
    let a = uri(&root.path().join("a.go"));
    let args = ["--crash-at", "2", "--crash-once", once.to_str().unwrap()];
    let (mut first, _) = start(root.path(), &args);
    first.open(&a, "go", 1, "package a\n");
    first.change(&a, 2, "package a\n// 2\n");
    assert_eq!(first.publish()["version"], 1);
    assert_eq!(first.publish()["version"], 2);
    first.change(&a, 3, "package a\n// 3\n");
    assert_eq!(first.wait().code(), Some(3));
    assert!(once.exists());
    // The restarted server finds the file and goes on past its second change.
    let (mut second, _) = start(root.path(), &args);
    second.open(&a, "go", 3, "package a\n// 3\n");
    second.change(&a, 4, "package a\n// 4\n");
    second.change(&a, 5, "package a\nERROR: 5\n");
    let versions: Vec<Value> = (0..3).map(|_| second.publish()["version"].clone()).collect();
    assert_eq!(versions, [json!(3), json!(4), json!(5)]);
    assert_eq!(second.shut_down().code(), Some(0));
}

#[test]
fn versionless_and_out_of_order_publishes() {
    let root = tempfile::tempdir().unwrap();
    let a = uri(&root.path().join("a.py"));
    let (mut versionless, _) = start(root.path(), &["--versionless"]);
    versionless.open(&a, "python", 1, "ERROR: x\n");
    assert_eq!(versionless.publish(), json!({"uri": a, "diagnostics": [diagnostic(0, 0, 8, 1, None, "x")]}));

    // The fresh set of version 2, then the stale set of version 1 after it.
    let (mut stale, _) = start(root.path(), &["--out-of-order"]);
    stale.open(&a, "python", 1, "ERROR: old\n");
    assert_eq!(stale.publish()["version"], 1);
    stale.change(&a, 2, "WARN: new\n");
    assert_eq!(
        stale.publish(),
        json!({"uri": a, "version": 2, "diagnostics": [diagnostic(0, 0, 9, 2, None, "new")]})
    );
    assert_eq!(
        stale.publish(),
        json!({"uri": a, "version": 1, "diagnostics": [diagnostic(0, 0, 10, 1, None, "old")]})
    );
}

#[test]
fn the_log_records_each_message_received_and_the_exit() {
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("fake.log");
    let (mut server, _) = start(root.path(), &["--log", log.to_str().unwrap()]);
    let a = uri(&root.path().join("a.py"));
    server.open(&a, "python", 4, "x = 1\n");
    server.change(&a, 5, "x = 2\n");
    server.save(&a);
    server.close(&a);
    let changes = json!({"changes": [{"uri": uri(&root.path().join("new.py")), "type": 1}]});
    server.notify("workspace/didChangeWatchedFiles", changes.clone());
    let pid = server.pid();
    assert_eq!(server.shut_down().code(), Some(0));

    let lines = log_lines(&log);
    assert_eq!(lines[0], json!({"event": "start", "pid": pid, "ppid": std::process::id()}));
    let said: Vec<&str> =
        lines[1..].iter().map(|l| l["method"].as_str().or(l["event"].as_str()).unwrap()).collect();
    assert_eq!(
        said,
        [
            "initialize",
            "initialized",
            "textDocument/didOpen",
            "textDocument/didChange",
            "textDocument/didSave",
            "textDocument/didClose",
            "workspace/didChangeWatchedFiles",
            "shutdown",
            "exit",
            "exit"
        ]
    );
    assert_eq!(lines[3]["params"]["textDocument"]["version"], 4);
    assert_eq!(lines[4]["params"]["textDocument"]["version"], 5);
    assert_eq!(lines[7]["params"], changes);
    assert_eq!(lines[10], json!({"event": "exit", "code": 0, "why": "exit"}));
}

#[test]
fn late_publishes_come_after_what_is_answered_at_once() {
    let root = tempfile::tempdir().unwrap();
    let (mut server, _) = start(root.path(), &["--late", "200"]);
    let a = uri(&root.path().join("a.py"));
    server.open(&a, "python", 1, "ERROR: late\n");
    let id = server.ask("fake/ping", Value::Null);
    assert_eq!(server.next_message()["id"], id);
    assert_eq!(server.publish()["version"], 1);
}

#[test]
fn flood_control_bytes_huge_and_garbage() {
    let root = tempfile::tempdir().unwrap();
    let root_uri = uri(root.path());
    let huge = 1 << 20;
    let args = ["--flood", "3", "--control-bytes", "--huge", &huge.to_string(), "--garbage"];
    let (mut server, _) = start(root.path(), &args);
    let message = server.publish();
    assert_eq!(message["uri"], format!("{root_uri}/fake-lsp-huge.txt"));
    assert_eq!(message["diagnostics"][0]["message"].as_str().unwrap().len(), huge);
    let log = server.next_message();
    assert_eq!(log["method"], "window/logMessage");
    assert_eq!(log.to_string().len(), huge, "the frame's body is exactly --huge bytes");
    match server.frame(filectx_tests::PATIENCE) {
        Some(Frame::Invalid(body)) => assert_eq!(body, "{not json at}"),
        other => panic!("{other:?}"),
    }
    match server.frame(filectx_tests::PATIENCE) {
        Some(Frame::Invalid(headers)) => assert!(!headers.contains("Content-Length"), "{headers}"),
        other => panic!("{other:?}"),
    }
    // Then it behaves, with every message wrapped in control bytes, and floods after the check.
    let a = uri(&root.path().join("a.py"));
    server.open(&a, "python", 1, "ERROR: boom\n");
    assert_eq!(server.publish()["diagnostics"][0]["message"], "\x1b[31mboom\r\u{202E}\x07");
    for k in 0..3 {
        let log = server.next_message();
        assert_eq!(log["params"]["message"], format!("\x1b[31mfake-lsp flood 1-{k}\r\u{202E}\x07"), "{log}");
    }
    let flooded: Vec<Value> = (0..3).map(|_| server.publish()["uri"].clone()).collect();
    let outside = "file:///fake-lsp-outside/1-1.txt";
    assert_eq!(
        flooded,
        [
            json!(format!("{root_uri}/fake-lsp-flood/1-0.txt")),
            json!(outside),
            json!(format!("{root_uri}/fake-lsp-flood/1-2.txt"))
        ]
    );
}

#[test]
fn register_asks_the_client_and_logs_its_answers() {
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("fake.log");
    let (mut server, _) = start(root.path(), &["--register", "--log", log.to_str().unwrap()]);
    let register = server.next_message();
    assert_eq!(register["method"], "client/registerCapability");
    assert_eq!(register["params"]["registrations"][0]["method"], "workspace/didChangeWatchedFiles");
    let configuration = server.next_message();
    assert_eq!(configuration["method"], "workspace/configuration");
    assert_eq!(configuration["params"], json!({"items": [{"section": "fake"}]}));
    server.send(&json!({"jsonrpc": "2.0", "id": register["id"], "result": null}));
    server.send(&json!({"jsonrpc": "2.0", "id": configuration["id"], "result": [{"strict": true}]}));
    assert_eq!(server.shut_down().code(), Some(0));
    let lines = log_lines(&log);
    assert!(lines.contains(&json!({"jsonrpc": "2.0", "id": register["id"], "result": null})), "{lines:?}");
    assert!(
        lines.contains(&json!({"jsonrpc": "2.0", "id": configuration["id"], "result": [{"strict": true}]}))
    );
}

#[test]
fn no_init_never_answers_initialize() {
    let mut command = Command::new(FAKE);
    command.arg("--no-init");
    let mut server = LspClient::spawn(command);
    server.ask("initialize", json!({"capabilities": {}}));
    // Its next answer is the refusal of a later request: initialize got none.
    let id = server.ask("shutdown", Value::Null);
    let next = server.next_message();
    assert_eq!((&next["id"], &next["error"]["code"]), (&json!(id), &json!(-32002)), "{next}");
    // exit without shutdown: code 1, as LSP says.
    server.notify("exit", Value::Null);
    assert_eq!(server.wait().code(), Some(1));
}

#[test]
fn the_grandchild_outlives_the_server_and_polite_signals() {
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("fake.log");
    let (mut server, _) =
        start(root.path(), &["--grandchild", "--rss", "32", "--log", log.to_str().unwrap()]);
    let rss = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let kib: u64 = rss
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    assert!(kib >= 32 * 1024, "--rss 32 holds {kib} KiB");
    assert_eq!(server.shut_down().code(), Some(0));
    let lines = log_lines(&log);
    let pid = lines.iter().find(|l| l["event"] == "grandchild").unwrap()["pid"].as_i64().unwrap();
    let grandchild = Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let mut reap = Reap(Some(grandchild));
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    assert!(alive(), "the grandchild ended with the server");
    for signal in [Signal::TERM, Signal::HUP, Signal::INT] {
        kill_process(grandchild, signal).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(alive(), "the grandchild ended on a polite signal");
    reap.kill();
    let deadline = std::time::Instant::now() + filectx_tests::PATIENCE;
    while alive() {
        assert!(std::time::Instant::now() < deadline, "SIGKILL did not end the grandchild");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// SIGKILLs a grandchild when the test ends before it did (it would live on for 10 minutes).
struct Reap(Option<Pid>);

impl Reap {
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            kill_process(pid, Signal::KILL).unwrap();
        }
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
}
