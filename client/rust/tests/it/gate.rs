//! The write gate against a fake daemon that speaks its wire (`initialize` with the `gate`
//! feature, `gate/register`, then `gate/writeIntent` requests and `$/cancelRequest`
//! withdrawals): the library's [`Gate`], `filectx gate --json` driven as a program through pipes,
//! and the interactive `filectx gate` through a pseudo-terminal. The fake is synchronous (a
//! blocking Unix socket on its own thread), so every step is in script order; every wait is
//! bounded.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use filectx_client::ClientError;
use filectx_client::gate::{
    Decision, Gate, GateError, GateEvent, GateOnTimeout as OnTimeout, GateOperation as Operation,
    GateOptions, IntentWithdrawal,
};
use serde_json::{Value, json};

use crate::support::{TestResult, initialize_result};

const BIN: &str = env!("CARGO_BIN_EXE_filectx");

/// The longest any one step may take.
const PATIENCE: Duration = Duration::from_secs(10);

/// A fake daemon's socket in a private temporary folder (which the client's trust check wants).
struct Fake {
    listener: UnixListener,
    socket: PathBuf,
    /// A folder to gate, canonical.
    folder: PathBuf,
    _dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("fake.sock");
        let listener = UnixListener::bind(&socket)?;
        let folder = dir.path().join("project");
        std::fs::create_dir(&folder)?;
        let folder = folder.canonicalize()?;
        Ok(Self { listener, socket, folder, _dir: dir })
    }

    /// The folder as the wire carries it.
    fn folder(&self) -> String {
        self.folder.display().to_string()
    }

    /// Accepts the next connection (within [`PATIENCE`]).
    fn accept(&self) -> TestResult<Conn> {
        self.listener.set_nonblocking(true)?;
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false)?;
                    stream.set_read_timeout(Some(PATIENCE))?;
                    return Ok(Conn { stream, next_id: 100 });
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// One connection of the fake daemon, framed by hand.
struct Conn {
    stream: UnixStream,
    next_id: u64,
}

impl Conn {
    fn send(&mut self, message: &Value) -> TestResult {
        let body = message.to_string();
        write!(self.stream, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        Ok(())
    }

    /// The next message; an error when none comes within [`PATIENCE`] or the client hung up.
    fn recv(&mut self) -> TestResult<Value> {
        let mut header = Vec::new();
        let mut byte = [0_u8; 1];
        while !header.ends_with(b"\r\n\r\n") {
            if self.stream.read(&mut byte)? == 0 {
                return Err("the client hung up".into());
            }
            header.push(byte[0]);
        }
        let header = String::from_utf8(header)?;
        let length: usize = header
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .ok_or("no Content-Length")?
            .trim()
            .parse()?;
        let mut body = vec![0_u8; length];
        self.stream.read_exact(&mut body)?;
        Ok(serde_json::from_slice(&body)?)
    }

    /// Whether the client hangs up (end of stream) before sending anything more.
    fn hung_up(&mut self) -> bool {
        let mut byte = [0_u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0))
    }

    fn answer(&mut self, request: &Value, result: Value) -> TestResult {
        self.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
    }

    /// Serves `initialize` (announcing `features`) and, when `gate` is among them, `gate/register`
    /// (answered with gate id `g-1`); returns both requests' params.
    fn register(&mut self, features: &[&str]) -> TestResult<(Value, Value)> {
        let initialize = self.recv()?;
        assert_eq!(initialize["method"], "initialize", "{initialize}");
        let mut result = serde_json::to_value(initialize_result())?;
        result["capabilities"]["features"] = json!(features);
        self.answer(&initialize, result)?;
        if !features.contains(&"gate") {
            return Ok((initialize["params"].clone(), Value::Null));
        }
        let register = self.recv()?;
        assert_eq!(register["method"], "gate/register", "{register}");
        self.answer(&register, json!({"gateId": "g-1"}))?;
        Ok((initialize["params"].clone(), register["params"].clone()))
    }

    /// Sends a `gate/writeIntent` request; returns its JSON-RPC id.
    fn intent(&mut self, params: &Value) -> TestResult<u64> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "gate/writeIntent", "params": params}))?;
        Ok(id)
    }

    /// Withdraws the intent sent with JSON-RPC id `id`.
    fn cancel(&mut self, id: u64) -> TestResult {
        self.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}))
    }

    /// The answer to the request `id`: its result.
    fn decision(&mut self, id: u64) -> TestResult<Value> {
        let answer = self.recv()?;
        assert_eq!(answer["id"], id, "{answer}");
        assert!(answer.get("method").is_none(), "{answer}");
        Ok(answer["result"].clone())
    }

    /// Serves the gate's goodbye: `gate/unregister` (checked to name `g-1`), `shutdown`, `exit`,
    /// then the hang-up.
    fn goodbye(&mut self) -> TestResult {
        let unregister = self.recv()?;
        assert_eq!(unregister["method"], "gate/unregister", "{unregister}");
        assert_eq!(unregister["params"], json!({"gateId": "g-1"}));
        self.answer(&unregister, json!({}))?;
        let shutdown = self.recv()?;
        assert_eq!(shutdown["method"], "shutdown", "{shutdown}");
        self.answer(&shutdown, Value::Null)?;
        let exit = self.recv()?;
        assert_eq!(exit["method"], "exit", "{exit}");
        assert!(self.hung_up(), "the gate hangs up after exit");
        Ok(())
    }
}

/// The params of an intent from `claude-code`, session `s-7`.
fn intent(intent_id: &str, path: &Path, operation: &str, diff: &str) -> Value {
    json!({
        "gateId": "g-1",
        "intentId": intent_id,
        "sessionId": "s-7",
        "clientName": "claude-code",
        "path": path,
        "operation": operation,
        "diff": diff,
        "oldVersion": "v-old",
        "newVersion": "v-new",
        "bytes": 42,
    })
}

const DIFF: &str =
    "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn main() {\n-    old();\n+    new();\n";

/// Runs `script` on its own thread against the next connection.
fn serve(
    fake: &Arc<Fake>,
    script: impl FnOnce(&mut Conn) -> TestResult + Send + 'static,
) -> std::thread::JoinHandle<TestResult> {
    let fake = Arc::clone(fake);
    std::thread::spawn(move || {
        let mut conn = fake.accept()?;
        script(&mut conn)
    })
}

fn joined(handle: std::thread::JoinHandle<TestResult>) -> TestResult {
    handle.join().map_err(|_| "the fake daemon panicked")?
}

// Multi-threaded: the fake daemon's answers are awaited on blocking channels, while the gate's
// reader task must keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_gate_registers_yields_intents_and_answers_them() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let (seen, heard) = mpsc::channel();
    let daemon = serve(&fake, move |conn| {
        let (init, register) = conn.register(&["cancelRequest", "gate"])?;
        seen.send(json!({"init": init, "register": register}))?;
        let first = conn.intent(&intent("i-1", &folder.join("src/lib.rs"), "edit", DIFF))?;
        let second = conn.intent(&intent("i-2", &folder.join("new.rs"), "create", "too large"))?;
        seen.send(conn.decision(second)?)?;
        seen.send(conn.decision(first)?)?;
        // A request a gate does not serve is refused; a withdrawal is passed on.
        conn.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "fs/readText", "params": {}}))?;
        seen.send(conn.recv()?)?;
        let third = conn.intent(&intent("i-3", &folder.join("x.rs"), "update", "-a\n+b\n"))?;
        conn.cancel(third)?;
        conn.goodbye()
    });
    let options = GateOptions::new([fake.folder()])
        .operations([Operation::Update, Operation::Edit, Operation::Create])
        .name("review")
        .timeout(Duration::from_secs(20))
        .on_timeout(OnTimeout::Allow);
    let mut gate = Gate::connect(&fake.socket, options).await?;
    assert_eq!(gate.gate_id(), "g-1");
    let opened = heard.recv_timeout(PATIENCE)?;
    assert_eq!(opened["init"]["roots"], json!([fake.folder()]));
    assert_eq!(opened["init"]["clientInfo"]["name"], "filectx gate");
    assert_eq!(
        opened["register"],
        json!({
            "paths": [fake.folder()],
            "operations": ["update", "edit", "create"],
            "name": "review",
            "timeoutMs": 20000,
            "onTimeout": "allow",
        })
    );

    let GateEvent::Intent(first) = gate.next().await? else { return Err("an intent first".into()) };
    assert_eq!(
        (first.intent_id.as_str(), first.operation, first.diff.as_str()),
        ("i-1", Operation::Edit, DIFF)
    );
    assert_eq!(first.client_name.as_deref(), Some("claude-code"));
    let GateEvent::Intent(second) = gate.next().await? else { return Err("a second intent".into()) };
    // Decided out of order: each answer goes to its own request.
    gate.decide(&second.intent_id, Decision::deny("not now")).await?;
    gate.decide(&first.intent_id, Decision::allow()).await?;
    assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": false, "reason": "not now"}));
    assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": true}));
    // Deciding twice is refused locally: nothing more is sent.
    let twice = gate.decide(&first.intent_id, Decision::allow()).await;
    assert!(matches!(twice, Err(GateError::UnknownIntent { .. })), "{twice:?}");
    let refused = heard.recv_timeout(PATIENCE)?;
    assert_eq!(
        (refused["id"].as_u64(), refused["error"]["code"].as_i64()),
        (Some(7), Some(-32601)),
        "{refused}"
    );

    let GateEvent::Intent(third) = gate.next().await? else { return Err("a third intent".into()) };
    let withdrawn = gate.next().await?;
    let path = fake.folder.join("x.rs").display().to_string();
    // A `$/cancelRequest` without `reason` (older daemons) reads as a cancellation.
    assert_eq!(
        withdrawn,
        GateEvent::Withdrawn { intent_id: "i-3".to_owned(), path, reason: IntentWithdrawal::Cancelled }
    );
    assert!(!gate.is_pending(&third.intent_id));
    let late = gate.decide(&third.intent_id, Decision::allow()).await;
    assert!(matches!(late, Err(GateError::UnknownIntent { .. })), "{late:?}");
    gate.close().await?;
    joined(daemon)
}

// As the real daemon does it: an intent (string id = intentId) may come before the answer to
// `gate/register`, and a withdrawal says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_before_the_register_answer_is_queued_and_a_timeout_is_told_apart() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let (seen, heard) = mpsc::channel();
    let daemon = serve(&fake, move |conn| {
        let initialize = conn.recv()?;
        let mut result = serde_json::to_value(initialize_result())?;
        result["capabilities"]["features"] = json!(["gate"]);
        conn.answer(&initialize, result)?;
        let register = conn.recv()?;
        assert_eq!(register["method"], "gate/register", "{register}");
        let early = intent("intent-1", &folder.join("a.rs"), "edit", DIFF);
        conn.send(
            &json!({"jsonrpc": "2.0", "id": "intent-1", "method": "gate/writeIntent", "params": early}),
        )?;
        conn.answer(&register, json!({"gateId": "g-1"}))?;
        let answer = conn.recv()?;
        assert_eq!(answer["id"], "intent-1", "{answer}");
        seen.send(answer["result"].clone())?;
        let late = intent("intent-2", &folder.join("b.rs"), "update", "not text");
        conn.send(
            &json!({"jsonrpc": "2.0", "id": "intent-2", "method": "gate/writeIntent", "params": late}),
        )?;
        let params = json!({"id": "intent-2", "reason": "timeout"});
        conn.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": params}))?;
        conn.goodbye()
    });
    let mut gate = Gate::connect(&fake.socket, GateOptions::new([fake.folder()])).await?;
    assert_eq!(gate.gate_id(), "g-1");
    let GateEvent::Intent(early) = gate.next().await? else { return Err("the early intent".into()) };
    assert_eq!(early.intent_id, "intent-1");
    gate.decide(&early.intent_id, Decision::allow()).await?;
    assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": true}));
    let GateEvent::Intent(late) = gate.next().await? else { return Err("the second intent".into()) };
    assert!(filectx_client::gate::diff_withheld(&late.diff), "{late:?}");
    let withdrawn = gate.next().await?;
    let path = fake.folder.join("b.rs").display().to_string();
    assert_eq!(
        withdrawn,
        GateEvent::Withdrawn { intent_id: "intent-2".to_owned(), path, reason: IntentWithdrawal::Timeout }
    );
    gate.close().await?;
    joined(daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_the_gate_feature_is_refused_before_registering() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let daemon = serve(&fake, |conn| {
        conn.register(&["cancelRequest"])?;
        // Nothing else is sent: no gate/register.
        assert!(conn.hung_up(), "the gate hangs up without registering");
        Ok(())
    });
    let refused = Gate::connect(&fake.socket, GateOptions::new([fake.folder()])).await;
    assert!(
        matches!(&refused, Err(ClientError::Unsupported { feature }) if feature == "gate"),
        "{refused:?}"
    );
    joined(daemon)
}

/// A `filectx gate` process: its stdout lines as they come, its stderr collected.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// The thread reading stderr: done once the process exited and the pipe is drained.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// `filectx --socket SOCK --no-autostart ARGS…` with piped stdio.
    fn start(fake: &Fake, args: &[&str]) -> TestResult<Self> {
        let mut child = Command::new(BIN)
            .arg("--socket")
            .arg(&fake.socket)
            .arg("--no-autostart")
            .args(args)
            .current_dir(&fake.folder)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr_pipe = child.stderr.take().ok_or("no stderr")?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0_u8; 1024];
            while let Ok(n @ 1..) = stderr_pipe.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Ok(Self { child, stdin, lines, stderr, stderr_reader: Some(stderr_reader) })
    }

    fn line(&self) -> TestResult<String> {
        self.lines.recv_timeout(PATIENCE).map_err(|_| {
            // Let stderr's last words arrive.
            std::thread::sleep(Duration::from_millis(300));
            format!("no stdout line; stderr: {}", self.stderr()).into()
        })
    }

    fn json(&self) -> TestResult<Value> {
        Ok(serde_json::from_str(&self.line()?)?)
    }

    fn write(&mut self, line: &str) -> TestResult {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits (bounded) until stderr contains `text`.
    fn stderr_says(&self, text: &str) -> TestResult {
        let deadline = Instant::now() + PATIENCE;
        while !self.stderr().contains(text) {
            if Instant::now() > deadline {
                return Err(format!("stderr never said {text:?}: {}", self.stderr()).into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Waits (bounded) for the exit code.
    fn exit_code(&mut self) -> TestResult<Option<i32>> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                // Everything it wrote to stderr is read before the exit is reported.
                while self.stderr_reader.as_ref().is_some_and(|reader| !reader.is_finished()) {
                    if Instant::now() > deadline {
                        return Err("filectx gate's stderr stayed open after it exited".into());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Ok(status.code());
            }
            if Instant::now() > deadline {
                return Err("filectx gate did not exit".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn json_mode_is_one_intent_per_line_out_and_one_decision_per_line_in() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let (seen, heard) = mpsc::channel();
    let (go, proceed) = mpsc::channel::<()>();
    let daemon = serve(&fake, move |conn| {
        let (init, register) = conn.register(&["gate"])?;
        seen.send(json!({"init": init, "register": register}))?;
        let edit = conn.intent(&intent("i-1", &folder.join("src/lib.rs"), "edit", DIFF))?;
        let lock = conn.intent(&intent("i-2", &folder.join("Cargo.lock"), "update", "-a\n+b\n"))?;
        // The rule's answer comes at once, before the program's.
        seen.send(conn.decision(lock)?)?;
        seen.send(conn.decision(edit)?)?;
        let cancelled = conn.intent(&intent("i-3", &folder.join("x.rs"), "create", "+x\n"))?;
        conn.cancel(cancelled)?;
        proceed.recv_timeout(PATIENCE)?;
        conn.goodbye()
    });
    let mut gate =
        Running::start(&fake, &["--json", "gate", "--deny", "*.lock", "--name", "ci", "--timeout", "30"])?;
    let opened = heard.recv_timeout(PATIENCE)?;
    assert_eq!(opened["init"]["roots"], json!([fake.folder()]));
    assert_eq!(opened["register"], json!({"paths": [fake.folder()], "name": "ci", "timeoutMs": 30000}));
    assert_eq!(gate.json()?, json!({"type": "ready", "gateId": "g-1", "paths": [fake.folder()]}));

    let mut shown = gate.json()?;
    let expected = intent("i-1", &fake.folder.join("src/lib.rs"), "edit", DIFF);
    assert_eq!(shown.as_object_mut().and_then(|line| line.remove("type")), Some(json!("intent")));
    assert_eq!(shown, expected);
    let auto = gate.json()?;
    assert_eq!(
        auto,
        json!({
            "type": "auto",
            "intentId": "i-2",
            "path": fake.folder.join("Cargo.lock"),
            "operation": "update",
            "allow": false,
            "reason": "denied by the gate's rule --deny *.lock",
            "rule": "--deny *.lock",
        })
    );
    assert_eq!(
        heard.recv_timeout(PATIENCE)?,
        json!({"allow": false, "reason": "denied by the gate's rule --deny *.lock"})
    );
    // A line that is not a decision, and one for an intent already decided, are reported and
    // skipped; the good one is sent.
    gate.write("allow it please")?;
    gate.stderr_says("ignoring the stdin line")?;
    gate.write(r#"{"intentId": "i-2", "allow": true}"#)?;
    gate.stderr_says("no intent i-2 waits for a decision")?;
    gate.write(r#"{"intentId": "i-1", "allow": false, "reason": "use the helper"}"#)?;
    assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": false, "reason": "use the helper"}));

    let shown = gate.json()?;
    assert_eq!((&shown["type"], &shown["intentId"]), (&json!("intent"), &json!("i-3")));
    let withdrawn = gate.json()?;
    assert_eq!(
        withdrawn,
        json!({"type": "withdrawn", "intentId": "i-3", "path": fake.folder.join("x.rs"), "reason": "cancelled"})
    );
    // The end of stdin unregisters and exits 0.
    go.send(())?;
    drop(gate.stdin.take());
    assert_eq!(gate.exit_code()?, Some(0), "stderr: {}", gate.stderr());
    assert!(gate.lines.recv_timeout(Duration::from_millis(200)).is_err(), "nothing more on stdout");
    joined(daemon)
}

#[test]
fn a_daemon_without_gates_or_a_refused_folder_exits_4_with_one_line() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let daemon = serve(&fake, |conn| {
        conn.register(&["cancelRequest"])?;
        assert!(conn.hung_up());
        Ok(())
    });
    let mut gate = Running::start(&fake, &["gate"])?;
    assert_eq!(gate.exit_code()?, Some(4));
    joined(daemon)?;
    let stderr = gate.stderr();
    assert!(stderr.starts_with("filectx gate: the daemon does not support `gate`"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let fake = Arc::new(Fake::new()?);
    let daemon = serve(&fake, |conn| {
        let initialize = conn.recv()?;
        let mut result = serde_json::to_value(initialize_result())?;
        result["capabilities"]["features"] = json!(["gate"]);
        conn.answer(&initialize, result)?;
        let register = conn.recv()?;
        let error = json!({"code": -31004, "message": "outside the session's roots", "data": {"code": "FS_OUTSIDE_ROOT"}});
        conn.send(&json!({"jsonrpc": "2.0", "id": register["id"], "error": error}))
    });
    let mut gate = Running::start(&fake, &["gate"])?;
    assert_eq!(gate.exit_code()?, Some(4));
    joined(daemon)?;
    assert_eq!(gate.stderr().trim(), "filectx gate: FS_OUTSIDE_ROOT: outside the session's roots");
    Ok(())
}

#[test]
fn piped_answers_work_without_colours_and_an_expired_intent_is_skipped() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let (seen, heard) = mpsc::channel();
    let (step, next_step) = mpsc::channel::<()>();
    let daemon = serve(&fake, move |conn| {
        conn.register(&["gate"])?;
        let slow = conn.intent(&intent("i-1", &folder.join("a.rs"), "edit", DIFF))?;
        next_step.recv_timeout(PATIENCE)?;
        let next = conn.intent(&intent("i-2", &folder.join("b.rs"), "update", "-1\n+2\n"))?;
        seen.send(conn.decision(next)?)?;
        conn.goodbye()?;
        // The expired one was never answered.
        seen.send(json!(slow))?;
        Ok(())
    });
    let mut gate = Running::start(&fake, &["gate", "--timeout", "1"])?;
    let mut screen = String::new();
    let deadline = Instant::now() + PATIENCE;
    while !screen.contains("Undecided after 1 s: denied by the daemon") {
        let line = gate.line().map_err(|e| format!("{e}; so far: {screen}"))?;
        screen.push_str(&line);
        screen.push('\n');
        assert!(Instant::now() < deadline, "{screen}");
    }
    // After a second the first is settled by the daemon: the gate says so, then shows the next.
    let mut rest = String::new();
    while !rest.contains("waited too long") {
        rest.push_str(&gate.line()?);
        rest.push('\n');
    }
    step.send(())?;
    while !rest.contains("wants to overwrite b.rs") {
        rest.push_str(&gate.line()?);
        rest.push('\n');
    }
    assert!(rest.contains("claude-code (session s-7) wants to edit a.rs (42 bytes)"), "{rest}");
    assert!(rest.contains("-    old();\n+    new();\n"), "{rest}");
    assert!(
        rest.contains("timed out: edit a.rs by claude-code (session s-7) waited too long and was denied"),
        "{rest}"
    );
    assert!(!rest.contains('\x1b'), "no colours off a terminal: {rest:?}");
    gate.write("yes")?;
    assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": true}));
    drop(gate.stdin.take());
    assert_eq!(gate.exit_code()?, Some(0), "stderr: {}", gate.stderr());
    joined(daemon)
}

/// The output of a process on a pseudo-terminal, collected by a thread.
struct Terminal {
    master: File,
    screen: Arc<Mutex<String>>,
    /// How much of the screen earlier waits consumed.
    seen: usize,
}

impl Terminal {
    /// A new pseudo-terminal; returns it and its slave side, for a child's stdio.
    fn open() -> TestResult<(Self, File)> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let name = ptsname(&master, Vec::new())?;
        let slave = std::fs::OpenOptions::new().read(true).write(true).open(name.to_str()?)?;
        let master = File::from(master);
        let mut reader = master.try_clone()?;
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
        Ok((Self { master, screen, seen: 0 }, slave))
    }

    /// Waits (bounded) until the output after the last wait contains `text`; returns that output
    /// up to and including it.
    fn wait_for(&mut self, text: &str) -> TestResult<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            {
                let screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(at) = screen[self.seen..].find(text) {
                    let end = self.seen + at + text.len();
                    let shown = screen[self.seen..end].to_owned();
                    self.seen = end;
                    return Ok(shown);
                }
                if Instant::now() > deadline {
                    return Err(
                        format!("the terminal never showed {text:?}: {:?}", &screen[self.seen..]).into()
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Types a line.
    fn type_line(&mut self, line: &str) -> TestResult {
        self.master.write_all(format!("{line}\n").as_bytes())?;
        Ok(())
    }
}

#[test]
fn a_person_at_a_terminal_sees_coloured_diffs_in_order_and_withdrawals() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let (seen, heard) = mpsc::channel();
    let (step, next_step) = mpsc::channel::<()>();
    let daemon = serve(&fake, move |conn| {
        conn.register(&["gate"])?;
        let first = conn.intent(&intent("i-1", &folder.join("src/lib.rs"), "edit", DIFF))?;
        next_step.recv_timeout(PATIENCE)?;
        // While the person looks at the first: one more to queue, one queued then withdrawn, and
        // one created under --allow-create.
        let second = conn.intent(&intent("i-2", &folder.join("README.md"), "update", "-a\n+b\n"))?;
        let third = conn.intent(&intent("i-3", &folder.join("c.rs"), "edit", "-c\n+d\n"))?;
        conn.cancel(third)?;
        let created = conn.intent(&intent("i-4", &folder.join("new.rs"), "create", "+x\n"))?;
        seen.send(conn.decision(created)?)?;
        seen.send(conn.decision(first)?)?;
        seen.send(conn.decision(second)?)?;
        // Shown, then withdrawn while the person thinks.
        let fifth = conn.intent(&intent("i-5", &folder.join("d.rs"), "edit", "-e\n+f\n"))?;
        next_step.recv_timeout(PATIENCE)?;
        conn.cancel(fifth)?;
        conn.goodbye()
    });
    let (mut terminal, slave) = Terminal::open()?;
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&fake.socket)
        .args(["--no-autostart", "gate", "--allow-create"])
        .current_dir(&fake.folder)
        .env_remove("NO_COLOR")
        .stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave)
        .spawn()?;
    let result = (|| -> TestResult {
        terminal.wait_for("Rules: --allow-create")?;
        let shown = terminal.wait_for("Allow? [y]es / [n]o")?;
        assert!(
            shown.contains("\x1b[1mclaude-code (session s-7)\x1b[0m wants to edit \x1b[1msrc/lib.rs\x1b[0m"),
            "{shown:?}"
        );
        assert!(
            shown.contains("\x1b[31m-    old();\x1b[0m") && shown.contains("\x1b[32m+    new();\x1b[0m"),
            "{shown:?}"
        );
        assert!(shown.contains("\x1b[36m@@ -1,2 +1,2 @@\x1b[0m"), "{shown:?}");
        step.send(())?;
        // News clears the open question's line, then asks again below.
        terminal.wait_for(
            "\r\x1b[Kqueued: update README.md by claude-code (session s-7) (1 waiting)\r\nAllow?",
        )?;
        terminal.wait_for(
            "\x1b[33mwithdrawn\x1b[0m: edit c.rs by claude-code (session s-7) before it was shown",
        )?;
        terminal
            .wait_for("\x1b[32mallowed\x1b[0m create new.rs by claude-code (session s-7): --allow-create")?;
        assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": true}));
        // A bare n asks for the reason on the next line.
        terminal.type_line("n")?;
        terminal.wait_for("Reason for the agent (Enter for none): ")?;
        terminal.type_line("please use the helper")?;
        assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": false, "reason": "please use the helper"}));
        terminal.wait_for("\x1b[31mdenied\x1b[0m")?;
        let next = terminal.wait_for("Allow?")?;
        assert!(
            next.contains("wants to overwrite \x1b[1mREADME.md"),
            "{next:?} in {:?}",
            terminal.screen.lock().unwrap_or_else(PoisonError::into_inner)
        );
        terminal.type_line("maybe")?;
        terminal.wait_for("Answer y to allow or n to deny.")?;
        terminal.type_line("y")?;
        assert_eq!(heard.recv_timeout(PATIENCE)?, json!({"allow": true}));
        terminal.wait_for("\x1b[32mallowed\x1b[0m")?;
        let fifth = terminal.wait_for("Allow?")?;
        assert!(fifth.contains("wants to edit \x1b[1md.rs"), "{fifth:?}");
        step.send(())?;
        terminal.wait_for("claude-code (session s-7) no longer waits for edit d.rs; skipped")?;
        // Ctrl-C (SIGINT: the child has no controlling terminal to send it) stops the gate.
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::INT)?;
        terminal.wait_for("stopped; the gate is unregistered.")?;
        Ok(())
    })();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() > deadline || result.is_err() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    result?;
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    joined(daemon)
}

#[test]
fn help_shows_the_rules_the_json_lines_and_examples_and_a_bad_glob_is_a_usage_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let help = Command::new(BIN).args(["gate", "--help"]).current_dir(dir.path()).output()?;
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8(help.stdout)?;
    for needle in [
        "Usage: filectx gate [OPTIONS] [FOLDER]...",
        "--allow-create",
        "--deny <GLOB>",
        "--auto-allow <GLOB>",
        "--on-timeout <WHAT>",
        "--deny is checked first, then --auto-allow, then --allow-create",
        r#"{"type":"intent","gateId":G,"intentId":I"#,
        r#"{"type":"withdrawn","intentId":I,"path":P,"reason":R}"#,
        r#"{"intentId":I,"allow":true|false,"reason":"..."}"#,
        "4  the daemon refused: it has no gate feature",
        "filectx gate ~/src/app --allow-create --deny '*.lock' --auto-allow 'docs/**'",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from gate --help:\n{help}");
    }
    let top = Command::new(BIN).arg("--help").current_dir(dir.path()).output()?;
    assert!(String::from_utf8(top.stdout)?.contains("filectx gate [FOLDER...] [--allow-create]"));

    let bad = Command::new(BIN)
        .args(["--no-autostart", "gate", "--deny", "src/[a"])
        .current_dir(dir.path())
        .output()?;
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8(bad.stderr)?.contains("invalid glob \"src/[a\""));
    Ok(())
}

#[test]
fn a_program_that_stops_reading_ends_the_gate_cleanly() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let daemon = serve(&fake, |conn| {
        conn.register(&["gate"])?;
        conn.goodbye()
    });
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&fake.socket)
        .args(["--no-autostart", "--json", "gate"])
        .current_dir(&fake.folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Nobody reads stdout: writing the ready line fails, and the gate unregisters and leaves.
    drop(child.stdout.take());
    joined(daemon)?;
    let output = child.wait_with_output()?;
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

#[test]
fn a_daemon_that_goes_away_ends_the_gate_with_exit_3() -> TestResult {
    let fake = Arc::new(Fake::new()?);
    let folder = fake.folder.clone();
    let daemon = serve(&fake, move |conn| {
        conn.register(&["gate"])?;
        conn.intent(&intent("i-1", &folder.join("a.rs"), "edit", DIFF))?;
        // Hangs up with the intent undecided.
        Ok(())
    });
    let mut gate = Running::start(&fake, &["--json", "gate"])?;
    assert_eq!(gate.json()?["type"], "ready");
    assert_eq!(gate.json()?["intentId"], "i-1");
    joined(daemon)?;
    assert_eq!(gate.exit_code()?, Some(3), "stderr: {}", gate.stderr());
    gate.stderr_says("broke: the daemon closed the connection")?;
    Ok(())
}
