//! Language servers for the tests: [`LspClient`], a plain LSP client of one server process over
//! its stdin/stdout (the tests of `fake-lsp` and of the real servers drive a server with it,
//! without the daemon), and where the real servers that `tests/run` installs under `target/`
//! are: [`basedpyright`], [`typescript_language_server`]. A test that needs one and finds none is
//! [`skip`]ped, never passed in silence.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::PATIENCE;
use crate::skip::skip;

/// Names basedpyright's `basedpyright-langserver` (default: `target/lsp-venv/bin/…`).
pub const BASEDPYRIGHT_ENV: &str = "FILECTX_TEST_BASEDPYRIGHT";
/// Names typescript-language-server's program (default: `target/lsp-npm/node_modules/.bin/…`).
pub const TSLS_ENV: &str = "FILECTX_TEST_TSLS";
/// Names the `lib` folder of the TypeScript 5 it is given (default:
/// `target/lsp-npm/node_modules/typescript/lib`).
pub const TSSERVER_ENV: &str = "FILECTX_TEST_TSSERVER";

/// The workspace's `target/` folder (the default `CARGO_TARGET_DIR`).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// `env` when set, else `default` under `target/`, when that exists.
fn installed(env: &str, default: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os(env).map_or_else(|| target_dir().join(default), PathBuf::from);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} is missing (set by {env}; tests/run installs it under target/)", path.display()))
    }
}

/// basedpyright's language server as `tests/run` installs it (PyPI, in `target/lsp-venv`), or
/// the one [`BASEDPYRIGHT_ENV`] names; `None` after [`skip`] when it is not there.
pub fn basedpyright() -> Option<PathBuf> {
    installed(BASEDPYRIGHT_ENV, "lsp-venv/bin/basedpyright-langserver").map_err(|e| skip(&e)).ok()
}

/// typescript-language-server and the `lib` folder of its TypeScript 5 as `tsconfig` would give
/// them (`tests/run` installs both from npm in `target/lsp-npm`), or those [`TSLS_ENV`] and
/// [`TSSERVER_ENV`] name; `None` after [`skip`] when one is not there.
pub fn typescript_language_server() -> Option<(PathBuf, PathBuf)> {
    let server = installed(TSLS_ENV, "lsp-npm/node_modules/.bin/typescript-language-server");
    let lib = installed(TSSERVER_ENV, "lsp-npm/node_modules/typescript/lib");
    match (server, lib) {
        (Ok(server), Ok(lib)) => Some((server, lib)),
        (Err(e), _) | (_, Err(e)) => {
            skip(&e);
            None
        }
    }
}

/// `file://` URI of an absolute path (test paths hold no character that needs escaping).
pub fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// One frame from the server.
#[derive(Debug)]
pub enum Frame {
    /// A JSON message.
    Message(Value),
    /// A frame that is not one: its header block (no `Content-Length`) or its body (not JSON).
    Invalid(String),
}

/// A plain LSP client of one server process; the process is killed when this is dropped.
pub struct LspClient {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Frame>,
    /// Messages read while waiting for something else.
    backlog: VecDeque<Value>,
    next_id: u64,
    /// Answer the server's requests (`workspace/configuration` with one null per item, any other
    /// with null) instead of handing them out; real servers wait for some of them.
    pub answer_requests: bool,
}

impl LspClient {
    /// Starts `command` with piped stdin and stdout (stderr goes to the test's).
    pub fn spawn(mut command: Command) -> LspClient {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(frame) = read_frame(&mut reader) {
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        LspClient { child, stdin, frames, backlog: VecDeque::new(), next_id: 1, answer_requests: false }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one message.
    pub fn send(&mut self, message: &Value) {
        let body = message.to_string();
        let stdin = self.stdin.as_mut().expect("stdin is open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("the server reads its stdin");
        stdin.flush().expect("the server reads its stdin");
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id.
    pub fn ask(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its answer (the whole response message); what comes
    /// before it is kept for [`LspClient::next_message`].
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_within(method, params, PATIENCE)
            .unwrap_or_else(|| panic!("no answer to {method} in time"))
    }

    /// Sends a request and waits at most `patience` for its answer (the whole response
    /// message); `None` when none came. What comes before it is kept for
    /// [`LspClient::next_message`].
    pub fn request_within(&mut self, method: &str, params: Value, patience: Duration) -> Option<Value> {
        let id = self.ask(method, params);
        let deadline = Instant::now() + patience;
        let mut skipped = VecDeque::new();
        let answer = loop {
            let Some(message) = self.read_until(deadline) else { break None };
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                break Some(message);
            }
            skipped.push_back(message);
        };
        skipped.extend(self.backlog.drain(..));
        self.backlog = skipped;
        answer
    }

    /// `initialize` with `root` as the one workspace folder, the client capabilities a
    /// diagnostics client declares, and `options` as `initializationOptions`; then
    /// `initialized`. Returns the result.
    pub fn initialize(&mut self, root: &Path, options: Value) -> Value {
        let root = uri(root);
        let params = json!({
            "processId": std::process::id(),
            "rootUri": root,
            "workspaceFolders": [{"uri": root, "name": "root"}],
            "capabilities": {
                "textDocument": {
                    "synchronization": {"didSave": true},
                    "publishDiagnostics": {"versionSupport": true},
                    "diagnostic": {},
                },
                "workspace": {"configuration": true, "workspaceFolders": true},
                "window": {"workDoneProgress": true},
            },
            "initializationOptions": options,
        });
        let answer = self.request("initialize", params);
        let result = answer.get("result").cloned().unwrap_or_else(|| panic!("initialize failed: {answer}"));
        self.notify("initialized", json!({}));
        result
    }

    /// `textDocument/didOpen`.
    pub fn open(&mut self, uri: &str, language: &str, version: i64, text: &str) {
        let document = json!({"uri": uri, "languageId": language, "version": version, "text": text});
        self.notify("textDocument/didOpen", json!({"textDocument": document}));
    }

    /// `textDocument/didChange` with the whole new text.
    pub fn change(&mut self, uri: &str, version: i64, text: &str) {
        let params =
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]});
        self.notify("textDocument/didChange", params);
    }

    /// `textDocument/didSave`.
    pub fn save(&mut self, uri: &str) {
        self.notify("textDocument/didSave", json!({"textDocument": {"uri": uri}}));
    }

    /// `textDocument/didClose`.
    pub fn close(&mut self, uri: &str) {
        self.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}));
    }

    /// The next message, within [`PATIENCE`].
    ///
    /// # Panics
    ///
    /// When none comes, or the server sends a frame that is not one.
    pub fn next_message(&mut self) -> Value {
        self.read_until(Instant::now() + PATIENCE).expect("a message from the server in time")
    }

    /// The next message, which must be a `textDocument/publishDiagnostics`: its params.
    pub fn publish(&mut self) -> Value {
        let message = self.next_message();
        assert_eq!(message["method"], "textDocument/publishDiagnostics", "{message}");
        message["params"].clone()
    }

    /// The params of the first `textDocument/publishDiagnostics` for `uri` that `accept`s,
    /// within `patience`; other messages are dropped.
    pub fn publish_for(&mut self, uri: &str, patience: Duration, accept: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + patience;
        loop {
            let message = self
                .read_until(deadline)
                .unwrap_or_else(|| panic!("no accepted diagnostics for {uri} in {patience:?}"));
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
                && accept(&message["params"])
            {
                return message["params"].clone();
            }
        }
    }

    /// The next message within `patience` (answering the server's requests when
    /// [`LspClient::answer_requests`]); `None` when none came, or the server closed its stdout.
    pub fn next_within(&mut self, patience: Duration) -> Option<Value> {
        self.read_until(Instant::now() + patience)
    }

    /// The next frame as it came, valid or not, within `patience`; `None` when none came or the
    /// server closed its stdout.
    pub fn frame(&mut self, patience: Duration) -> Option<Frame> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(Frame::Message(message));
        }
        self.frames.recv_timeout(patience).ok()
    }

    /// The next message before `deadline` (answering the server's requests when
    /// [`LspClient::answer_requests`]); `None` at the deadline or when the server closed its
    /// stdout.
    fn read_until(&mut self, deadline: Instant) -> Option<Value> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(message);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.frames.recv_timeout(left) {
                Ok(Frame::Message(message)) => message,
                Ok(Frame::Invalid(what)) => panic!("the server sent an invalid frame: {what}"),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            };
            let is_request = message.get("method").is_some() && message.get("id").is_some();
            if !(self.answer_requests && is_request) {
                return Some(message);
            }
            let result = match message["method"].as_str() {
                Some("workspace/configuration") => {
                    let items = message["params"]["items"].as_array().map_or(0, Vec::len);
                    json!(vec![Value::Null; items])
                }
                _ => Value::Null,
            };
            self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
        }
    }

    /// Closes the server's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the server to end, within [`PATIENCE`].
    ///
    /// # Panics
    ///
    /// When it is still running then.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the server can be waited for") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not end in time");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `shutdown` then `exit`: the exit status.
    pub fn shut_down(&mut self) -> ExitStatus {
        let answer = self.request("shutdown", Value::Null);
        assert_eq!(answer["result"], Value::Null, "{answer}");
        self.notify("exit", Value::Null);
        self.wait()
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads one frame; `None` at the end of the stream.
fn read_frame(reader: &mut impl BufRead) -> Option<Frame> {
    let mut headers = String::new();
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
        headers.push_str(&line);
    }
    let Some(length) = length else { return Some(Frame::Invalid(headers)) };
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(match serde_json::from_slice(&body) {
        Ok(message) => Frame::Message(message),
        Err(_) => Frame::Invalid(String::from_utf8_lossy(&body).into_owned()),
    })
}
