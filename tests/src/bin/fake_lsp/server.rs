//! The server loop of `fake-lsp`: reads the client's messages, keeps the open documents, checks
//! them and publishes (or answers pulls), with the misbehaviour its flags script (main.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::args::Options;
use crate::frame::{self, Incoming, Out};
use crate::{check, log};

/// An open document.
struct Doc {
    version: i64,
    /// The version before the last didChange, for `--out-of-order`.
    previous: Option<i64>,
    text: String,
}

/// The server's state.
struct Server {
    opts: Options,
    out: Out,
    /// `initialize` was answered.
    initialized: bool,
    /// `shutdown` was received.
    shut_down: bool,
    /// The workspace root URI, without a trailing `/`.
    root: String,
    docs: BTreeMap<String, Doc>,
    /// The last check's diagnostics of each open document (what was pushed, or what a pull gets).
    checked: BTreeMap<String, Vec<Value>>,
    /// didChange notifications received.
    changes: u64,
    /// Checks done, for `--flood`'s made-up names.
    checks: u64,
    /// The id of the next request to the client.
    next_id: u64,
}

/// Serves stdin/stdout until `exit`, the end of stdin, or a scripted crash.
pub fn run(opts: Options) -> ! {
    let mut server = Server {
        opts,
        out: Out::start(),
        initialized: false,
        shut_down: false,
        root: "file:///fake-lsp-root".to_owned(),
        docs: BTreeMap::new(),
        checked: BTreeMap::new(),
        changes: 0,
        checks: 0,
        next_id: 1,
    };
    let mut input = std::io::stdin().lock();
    loop {
        match frame::read(&mut input) {
            Ok(Incoming::Message(message)) => {
                log::message(&message);
                server.handle(&message);
                if server.opts.deaf && server.initialized {
                    // Reads nothing more, alive, until killed (or ten minutes passed).
                    log::event(json!({"event": "deaf"}));
                    std::thread::sleep(Duration::from_secs(600));
                    end(0, "deaf for ten minutes");
                }
            }
            Ok(Incoming::Invalid(what)) => {
                log::violation(format!("received {what}"));
                let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": what}});
                server.out.send(&error, Duration::ZERO);
            }
            Ok(Incoming::Eof) => end(0, "eof"),
            Err(e) => {
                eprintln!("fake-lsp: cannot read stdin: {e}");
                end(0, "eof");
            }
        }
    }
}

/// Ends the process with `code`, logging why.
fn end(code: i32, why: &str) -> ! {
    log::event(json!({"event": "exit", "code": code, "why": why}));
    std::process::exit(code);
}

impl Server {
    fn handle(&mut self, message: &Value) {
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id");
        let params = message.get("params").unwrap_or(&Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => self.request(method, id, params),
            (Some(method), None) => self.notification(method, params),
            // The client's answer to one of our requests: logged, nothing more.
            (None, _) => {}
        }
    }

    fn request(&mut self, method: &str, id: &Value, params: &Value) {
        if method == "initialize" {
            if !self.opts.no_init {
                self.initialize(id, params);
            }
            return;
        }
        if !self.initialized {
            return self.error(id, -32002, "the server is not initialized");
        }
        if self.shut_down {
            return self.error(id, -32600, "the server is shut down");
        }
        match method {
            "shutdown" => {
                self.shut_down = true;
                self.answer(id, Value::Null, Duration::ZERO);
            }
            "textDocument/diagnostic" if self.opts.pull => {
                let uri = params.pointer("/textDocument/uri").and_then(Value::as_str).unwrap_or_default();
                let items = self.checked.get(uri).cloned().unwrap_or_default();
                self.answer(id, json!({"kind": "full", "items": items}), self.opts.late);
            }
            _ => self.error(id, -32601, &format!("method not found: {method}")),
        }
    }

    fn initialize(&mut self, id: &Value, params: &Value) {
        let root = params
            .pointer("/workspaceFolders/0/uri")
            .or_else(|| params.get("rootUri"))
            .and_then(Value::as_str);
        if let Some(root) = root {
            self.root = root.trim_end_matches('/').to_owned();
        }
        let mut capabilities = json!({
            "textDocumentSync": {"openClose": true, "change": 1, "save": {"includeText": false}},
        });
        if self.opts.pull {
            capabilities["diagnosticProvider"] =
                json!({"interFileDependencies": true, "workspaceDiagnostics": false});
        }
        let server_info = json!({"name": self.opts.name, "version": env!("CARGO_PKG_VERSION")});
        self.answer(id, json!({"capabilities": capabilities, "serverInfo": server_info}), Duration::ZERO);
        self.initialized = true;
    }

    fn notification(&mut self, method: &str, params: &Value) {
        let uri = params.pointer("/textDocument/uri").and_then(Value::as_str).unwrap_or_default().to_owned();
        let version = params.pointer("/textDocument/version").and_then(Value::as_i64);
        match method {
            "initialized" => self.after_initialized(),
            "exit" => end(if self.shut_down { 0 } else { 1 }, "exit"),
            "textDocument/didOpen" => {
                let text = params.pointer("/textDocument/text").and_then(Value::as_str).unwrap_or_default();
                if self.docs.contains_key(&uri) {
                    log::violation(format!("didOpen of {uri}, which is open"));
                }
                let version = version.unwrap_or_else(|| {
                    log::violation(format!("didOpen of {uri} without a version"));
                    0
                });
                self.docs.insert(uri.clone(), Doc { version, previous: None, text: text.to_owned() });
                if !self.opts.on_save {
                    self.check(Some(&uri));
                }
            }
            "textDocument/didChange" => {
                self.changes += 1;
                if self.opts.crash_at == Some(self.changes) && self.crash_now() {
                    end(3, "crash");
                }
                self.change(&uri, version, params);
                if !self.opts.on_save && self.docs.contains_key(&uri) {
                    self.check(Some(&uri));
                }
            }
            "textDocument/didSave" => {
                if !self.docs.contains_key(&uri) {
                    log::violation(format!("didSave of {uri}, which is not open"));
                } else if self.opts.on_save {
                    self.check(Some(&uri));
                }
            }
            "textDocument/didClose" => {
                if self.docs.remove(&uri).is_none() {
                    log::violation(format!("didClose of {uri}, which is not open"));
                }
                let last = self.checked.remove(&uri);
                if !self.opts.pull && last.is_some_and(|d| !d.is_empty()) {
                    self.publish(&uri, None, &[]);
                }
                if !self.opts.on_save {
                    self.check(None);
                }
            }
            // Logged; the fake reads no file from disk.
            _ => {}
        }
    }

    /// Whether the `--crash-at` didChange crashes: always, or with `--crash-once FILE` only when
    /// FILE is not there yet (it is made first).
    fn crash_now(&self) -> bool {
        let Some(marker) = &self.opts.crash_once else { return true };
        if marker.exists() {
            return false;
        }
        if let Err(e) = std::fs::write(marker, b"crashed once\n") {
            eprintln!("fake-lsp: cannot write {}: {e}", marker.display());
        }
        true
    }

    /// Applies a didChange: its last content change is the whole text.
    fn change(&mut self, uri: &str, version: Option<i64>, params: &Value) {
        let changes =
            params.get("contentChanges").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        if changes.iter().any(|c| c.get("range").is_some()) {
            log::violation(format!("didChange of {uri} with a range, but sync is full"));
        }
        let Some(doc) = self.docs.get_mut(uri) else {
            return log::violation(format!("didChange of {uri}, which is not open"));
        };
        let Some(text) = changes.last().and_then(|c| c.get("text")).and_then(Value::as_str) else {
            return log::violation(format!("didChange of {uri} without a text"));
        };
        let version = version.unwrap_or_else(|| {
            log::violation(format!("didChange of {uri} without a version"));
            doc.version
        });
        if version <= doc.version {
            log::violation(format!("didChange of {uri} to version {version}, after {}", doc.version));
        }
        doc.previous = Some(doc.version);
        doc.version = version;
        text.clone_into(&mut doc.text);
    }

    /// Checks every open document and publishes as main.rs says: `changed`'s always, the others'
    /// when they changed; then the `--out-of-order` stale set and the `--flood`.
    fn check(&mut self, changed: Option<&str>) {
        let docs = self.docs.iter().map(|(uri, doc)| (uri.as_str(), doc.text.as_str()));
        let now = check::diagnostics(docs, self.opts.control_bytes);
        let before = std::mem::replace(&mut self.checked, now);
        self.checks += 1;
        if self.opts.pull {
            return;
        }
        // `--partial`: work begun, the changed document published empty, the rest later.
        let hold = match (self.opts.partial, changed) {
            (Some(hold), Some(uri)) => {
                let version = self.docs.get(uri).map(|d| d.version);
                self.request_client("window/workDoneProgress/create", json!({"token": self.token()}));
                self.progress("begin", Duration::ZERO);
                self.publish_after(uri, version, &[], Duration::ZERO);
                hold
            }
            _ => Duration::ZERO,
        };
        // The changed document first, then the others whose diagnostics changed.
        let first = changed.and_then(|uri| self.checked.get_key_value(uri));
        let others = self
            .checked
            .iter()
            .filter(|(uri, d)| changed != Some(uri.as_str()) && before.get(*uri) != Some(*d));
        for (uri, diagnostics) in first.into_iter().chain(others) {
            let version = self.docs.get(uri).map(|d| d.version);
            self.publish_after(uri, version, diagnostics, self.opts.late.max(hold));
        }
        if hold > Duration::ZERO {
            self.progress("end", self.opts.late.max(hold));
        }
        if self.opts.out_of_order
            && let Some(uri) = changed
            && let Some(previous) = self.docs.get(uri).and_then(|d| d.previous)
        {
            let stale = before.get(uri).cloned().unwrap_or_default();
            self.publish(uri, Some(previous), &stale);
        }
        self.flood();
    }

    /// `--flood`: log messages and publishes for made-up, unopened files.
    fn flood(&self) {
        for k in 0..self.opts.flood {
            let text = format!("fake-lsp flood {}-{k}", self.checks);
            let text = if self.opts.control_bytes { check::decorate(&text) } else { text };
            let log = json!({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": text}});
            self.out.send(&log, Duration::ZERO);
        }
        for k in 0..self.opts.flood {
            let uri = if k % 2 == 0 {
                format!("{}/fake-lsp-flood/{}-{k}.txt", self.root, self.checks)
            } else {
                format!("file:///fake-lsp-outside/{}-{k}.txt", self.checks)
            };
            let message = format!("flood {}-{k}", self.checks);
            let message = if self.opts.control_bytes { check::decorate(&message) } else { message };
            let diagnostic = json!({
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                "severity": 1,
                "source": "fake",
                "message": message,
            });
            self.publish(&uri, None, &[diagnostic]);
        }
    }

    /// On `initialized`: what `--huge`, `--register` and `--garbage` send.
    fn after_initialized(&mut self) {
        if let Some(bytes) = self.opts.huge {
            let diagnostic = json!({
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                "severity": 1,
                "source": "fake",
                "message": "x".repeat(bytes),
            });
            self.publish(&format!("{}/fake-lsp-huge.txt", self.root), None, &[diagnostic]);
            let mut log = json!({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 4, "message": ""}});
            let envelope = log.to_string().len();
            log["params"]["message"] = json!("x".repeat(bytes.saturating_sub(envelope)));
            self.out.send(&log, Duration::ZERO);
        }
        if self.opts.register {
            let registration = json!({
                "id": "fake-watch",
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": {"watchers": [{"globPattern": "**/*"}]},
            });
            self.request_client("client/registerCapability", json!({"registrations": [registration]}));
            self.request_client("workspace/configuration", json!({"items": [{"section": "fake"}]}));
        }
        if self.opts.garbage {
            self.out.raw(frame::encode(b"{not json at}"), Duration::ZERO);
            self.out.raw(
                b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n".to_vec(),
                Duration::ZERO,
            );
        }
    }

    /// Publishes `diagnostics` for `uri`, labelled `version` (unless `--versionless`), after
    /// `--late`.
    fn publish(&self, uri: &str, version: Option<i64>, diagnostics: &[Value]) {
        self.publish_after(uri, version, diagnostics, self.opts.late);
    }

    fn publish_after(&self, uri: &str, version: Option<i64>, diagnostics: &[Value], delay: Duration) {
        let mut params = json!({"uri": uri, "diagnostics": diagnostics});
        if let Some(version) = version.filter(|_| !self.opts.versionless) {
            params["version"] = json!(version);
        }
        let message =
            json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params});
        self.out.send(&message, delay);
    }

    /// The progress token of this check (`--partial`): `fake-check-N`, N counting the checks.
    fn token(&self) -> String {
        format!("fake-check-{}", self.checks)
    }

    /// `$/progress` of this check's token (`--partial`): `begin` or `end`.
    fn progress(&self, kind: &str, delay: Duration) {
        let value = if kind == "begin" {
            json!({"kind": "begin", "title": "checking"})
        } else {
            json!({"kind": kind})
        };
        let message = json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": self.token(), "value": value}});
        self.out.send(&message, delay);
    }

    fn request_client(&mut self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.next_id += 1;
        self.out.send(&message, Duration::ZERO);
    }

    fn answer(&self, id: &Value, result: Value, delay: Duration) {
        self.out.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}), delay);
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.out.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
            Duration::ZERO,
        );
    }
}
