//! A tiny fake daemon for the client's tests: it accepts one connection on a tempdir Unix socket,
//! speaks the LSP codec, records every message it receives and answers through a script; a test
//! can also push messages (e.g. the chunks of a stream) at a moment of its choosing. Also the
//! helpers several test modules share: the real daemon binary, scripts, output as text, and
//! [`skip`], the workspace's one way a test is skipped (and the decision on the tests that play
//! another local user): the file of `filectx_tests`, compiled here too.

#![allow(dead_code, missing_docs)]

#[path = "../../../../../tests/src/skip.rs"]
pub mod skip;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use filectx_protocol::{
    CallToolParams, CallToolResult, Capabilities, ChunkError, DaemonStatus, EditParams, EditResult, FileKind,
    FileStatParams, FileStatResult, Frame, FsEditParams, FsErrorCode, FsInfo, FsType, FsWriteParams,
    InitializeResult, Limits, LspCodec, PathParams, ReadParams, ReadResult, ResolveResult,
    STREAM_CHUNK_LINES, ServerInfo, StreamTextParams, TextChunk, ToolContent, ToolName, ToolsListResult,
    WriteOperation, WriteParams, WriteResult, methods, tools,
};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The real daemon binary: `$FILECTX_FILECTXD_BIN`, else `filectxd` next to the folder of this
/// test executable (`target/<profile>/deps/<test>` → `target/<profile>/filectxd`).
pub fn daemon_bin() -> TestResult<PathBuf> {
    if let Some(path) = std::env::var_os("FILECTX_FILECTXD_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().and_then(Path::parent).ok_or("the test executable has no grandparent folder")?;
    let path = dir.join("filectxd");
    if !path.is_file() {
        return Err(format!(
            "{} not found: run the tests with `cargo test --workspace` (which builds it), build it with \
             `cargo build -p filectx-daemon --bin filectxd`, or set FILECTX_FILECTXD_BIN",
            path.display()
        )
        .into());
    }
    Ok(path)
}

/// Writes an executable shell script. The file is written by a separate `sh`, so no descriptor
/// of it is ever open in this process, where a concurrent fork (another test's) could inherit it
/// and make its exec fail with ETXTBSY.
pub fn write_script(path: &Path, body: &str) -> TestResult {
    let status = Command::new("sh")
        .args(["-c", "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"", "sh"])
        .arg(format!("#!/bin/sh\n{body}\n"))
        .arg(path)
        .status()?;
    if !status.success() {
        return Err(format!("cannot write {}: {status}", path.display()).into());
    }
    Ok(())
}

/// Output bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the fake daemon sends for one received message: whole JSON-RPC messages, or raw bytes.
pub enum Out {
    Json(Value),
    Raw(Vec<u8>),
    /// Close the connection without answering.
    HangUp,
}

/// A fake daemon serving one connection.
pub struct FakeDaemon {
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
    task: JoinHandle<TestResult<Vec<Value>>>,
}

impl FakeDaemon {
    /// Binds the socket and serves the first connection with `script`, which gets every
    /// received message and returns what to send back. `exit` ends the connection.
    pub fn start(script: impl FnMut(&Value) -> Vec<Out> + Send + 'static) -> TestResult<Self> {
        Self::start_with_push(script).map(|(daemon, _)| daemon)
    }

    /// [`FakeDaemon::start`], plus a sender: whatever goes into it is sent to the client as soon
    /// as it comes, between the script's answers.
    pub fn start_with_push(
        mut script: impl FnMut(&Value) -> Vec<Out> + Send + 'static,
    ) -> TestResult<(Self, mpsc::UnboundedSender<Out>)> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("fake.sock");
        let listener = UnixListener::bind(&socket)?;
        let (push, mut pushed) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await?;
            let (read, write) = stream.into_split();
            let mut reader = FramedRead::new(read, LspCodec::default());
            let mut writer = FramedWrite::new(write, LspCodec::default());
            let mut seen = Vec::new();
            loop {
                let outs = tokio::select! {
                    frame = reader.next() => {
                        let Some(frame) = frame else { break };
                        let Frame::Message(body) = frame? else {
                            return Err("oversized frame from the client".into());
                        };
                        let message: Value = serde_json::from_slice(&body)?;
                        seen.push(message.clone());
                        if message["method"] == "exit" {
                            break;
                        }
                        script(&message)
                    }
                    Some(out) = pushed.recv() => vec![out],
                };
                for out in outs {
                    match out {
                        Out::Json(value) => writer.send(serde_json::to_string(&value)?).await?,
                        Out::Raw(bytes) => {
                            use tokio::io::AsyncWriteExt;
                            writer.get_mut().write_all(&bytes).await?;
                        }
                        Out::HangUp => return Ok(seen),
                    }
                }
            }
            Ok(seen)
        });
        Ok((Self { socket, _dir: dir, task }, push))
    }

    /// Every message the fake daemon received, once its connection ended.
    pub async fn received(self) -> TestResult<Vec<Value>> {
        tokio::time::timeout(Duration::from_secs(20), self.task).await??
    }
}

pub fn result(request: &Value, result: Value) -> Out {
    Out::Json(json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": result}))
}

pub fn error(request: &Value, code: i32, message: &str, data: Option<Value>) -> Out {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    Out::Json(json!({"jsonrpc": "2.0", "id": request["id"].clone(), "error": error}))
}

pub fn notification(method: &str, params: Value) -> Out {
    Out::Json(json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

pub fn initialize_result() -> InitializeResult {
    InitializeResult {
        server_info: ServerInfo { name: "filectxd".to_owned(), version: "9.9.9".to_owned() },
        protocol_version: 1,
        session_id: "s-1".to_owned(),
        instructions: "Read before editing.".to_owned(),
        capabilities: Capabilities {
            tools: ToolName::DEFAULT.to_vec(),
            read_only: false,
            methods: vec!["daemon/status".to_owned(), "initialize".to_owned()],
            batches: true,
            features: Vec::new(),
            diagnostics: false,
        },
        limits: Limits {
            read_line_limit: 2000,
            read_line_max_chars: 2000,
            read_max_bytes: 51_200,
            max_window_bytes: 8 << 20,
            max_frame_bytes: 64 << 20,
            max_batch_len: 100,
            max_concurrent_requests: 16,
        },
        resume_token: None,
    }
}

pub fn status() -> DaemonStatus {
    DaemonStatus {
        version: "9.9.9".to_owned(),
        pid: 4242,
        uptime_ms: 7_384_000,
        sessions: 2,
        max_sessions: 64,
        refused_connections: 1,
        cached_files: 3,
        index_bytes: 0,
        mapped_bytes: 1536,
        open_files: 2,
        watched_paths: 5,
        requests: 17,
        notifications_dropped: 0,
        hashed_bytes: 0,
        file_slots: 8,
        file_slots_busy: 0,
        file_slots_waiting: 0,
        owners: 0,
        parked_sessions: 0,
        parked_bytes: 0,
        snapshots: 0,
        snapshot_bytes: 0,
        cached_listings: 0,
        cached_listing_bytes: 0,
        cached_listed_files: 0,
        cached_filter_bytes: 0,
        cached_filters_building: false,
        search_indexes: Vec::new(),
        gates: Vec::new(),
        unmatched_responses: 0,
        other_gates: 0,
        observed_bytes: 0,
        max_observed_bytes: 0,
        max_session_observed_bytes: 0,
        observations_evicted: 0,
        open_descriptors: 21,
        descriptor_limit: 1024,
        descriptor_reserve: 128,
        roots_held: 2,
        search_slots: 2,
        search_slots_busy: 0,
        search_slots_waiting: 0,
        search_regex_bytes: 16 << 20,
        search_memory_bytes: 96 << 20,
        watches_held: 0,
        watches_cap: 0,
        journal: true,
        journal_entries: 12,
        journal_bytes: 40_960,
        journal_problem: None,
        language_servers: Vec::new(),
        language_servers_missing: Vec::new(),
        language_server_path: None,
    }
}

/// The version every canned file result reports.
pub const VERSION: &str = "b3-0123abcd";
/// The version a canned write or edit result reports.
pub const NEW_VERSION: &str = "b3-4567ef01";
/// The canned text of the `read` tool.
/// (As the daemon renders it: numbered lines, a blank line, a footer without a final newline.)
pub const READ_TEXT: &str = "1\tfn main() {}\n2\t\n\n(End of file - total 2 lines)";

/// `file/read` / `fs/readText` of `path`: one line of two.
pub fn read_result(path: &str) -> ReadResult {
    ReadResult {
        display_path: path.to_owned(),
        version: VERSION.to_owned(),
        start_line: 1,
        lines: vec!["fn main() {}".to_owned()],
        total_lines: 2,
        partial: true,
        truncated_lines: Vec::new(),
        truncated_by_bytes: false,
    }
}

/// `file/write` / `fs/writeText` of `path`.
pub fn write_result(path: &str, operation: WriteOperation) -> WriteResult {
    WriteResult {
        operation,
        display_path: path.to_owned(),
        version: NEW_VERSION.to_owned(),
        diagnostics: None,
    }
}

/// `file/edit` / `fs/editText` of `path`.
pub fn edit_result(path: &str, replacements: u64, replace_all: bool) -> EditResult {
    EditResult {
        replacements,
        replace_all,
        display_path: path.to_owned(),
        version: NEW_VERSION.to_owned(),
        diagnostics: None,
    }
}

/// `file/stat` of `path`: a 1536-byte file not observed yet, or nothing.
pub fn file_stat(path: &str, exists: bool) -> FileStatResult {
    FileStatResult {
        exists,
        kind: if exists { FileKind::File } else { FileKind::None },
        display_path: path.to_owned(),
        size: exists.then_some(1536),
        version: exists.then(|| VERSION.to_owned()),
        observed_version: None,
        fresh: false,
    }
}

/// `fs/stat` of `path`: a 1536-byte file.
pub fn fs_stat(_path: &str) -> Option<FsInfo> {
    Some(FsInfo { version: Some(VERSION.to_owned()), kind: FsType::File, size: Some(1536) })
}

/// `fs/resolve` of `path` inside the root `/tmp/project`.
pub fn resolve_result(path: &str) -> ResolveResult {
    ResolveResult {
        path: format!("/tmp/project/{path}"),
        display_path: path.to_owned(),
        exists: true,
        root: "/tmp/project".to_owned(),
    }
}

/// A successful tool result with `text`.
pub fn tool_result(text: &str) -> CallToolResult {
    CallToolResult {
        content: vec![ToolContent::Text { text: text.to_owned() }],
        is_error: false,
        error: None,
    }
}

/// An FS error answer: the numeric code of `code`, and `data: {code, path}`.
pub fn fs_error(request: &Value, code: filectx_protocol::FsErrorCode, message: &str) -> Out {
    let path = request["params"]["path"].clone();
    error(request, code.rpc_code(), message, Some(json!({"code": code.as_str(), "path": path})))
}

/// Answers `request` with `f` of its params decoded as `T` (which refuses unknown fields for the
/// file methods), so a client that sends the wrong shape gets -32602 instead of a canned result.
fn with<T: DeserializeOwned>(request: &Value, f: impl FnOnce(T) -> Out) -> Out {
    match serde_json::from_value(request["params"].clone()) {
        Ok(params) => f(params),
        Err(e) => error(request, -32602, &format!("invalid params: {e}"), None),
    }
}

/// `value` as the result of `request`.
pub fn answer(request: &Value, value: impl Serialize) -> Out {
    match serde_json::to_value(value) {
        Ok(value) => result(request, value),
        Err(e) => error(request, -32603, &e.to_string(), None),
    }
}

/// The canned file `fs/streamText` streams: an empty line, trailing blanks and non-ASCII
/// included.
pub const STREAM_LINES: [&str; 5] = ["alpha", "", "gamma  ", "δέλτα", "last"];

/// The subscription id the standard daemon gives the stream started by `request`.
pub fn subscription_id(request: &Value) -> String {
    format!("sub-{}", request["id"])
}

/// The answer to `fs/streamText`: the subscription id.
pub fn subscribed(request: &Value, subscription: &str) -> Out {
    result(request, json!(subscription))
}

/// A chunk of a stream of [`VERSION`].
pub fn chunk(start_line: u64, lines: &[&str], total_lines: u64, done: bool) -> TextChunk {
    TextChunk {
        version: VERSION.to_owned(),
        start_line,
        lines: lines.iter().map(|line| (*line).to_owned()).collect(),
        total_lines,
        done,
        error: None,
    }
}

/// The error item that ends a stream because the file changed, at `start_line`.
pub fn stale_item(start_line: u64, total_lines: u64) -> TextChunk {
    TextChunk {
        error: Some(ChunkError {
            code: FsErrorCode::StaleVersion,
            message: "the file changed while it was being streamed; start again".to_owned(),
        }),
        ..chunk(start_line, &[], total_lines, true)
    }
}

/// The `fs/textChunk` notification carrying `chunk` for `subscription`.
pub fn chunk_out(subscription: &str, chunk: &TextChunk) -> Out {
    notification(methods::FS_TEXT_CHUNK, json!({"subscription": subscription, "result": chunk}))
}

/// The chunks of [`STREAM_LINES`] as the daemon cuts them for `params`.
pub fn stream_chunks(params: &StreamTextParams) -> Vec<TextChunk> {
    let total = STREAM_LINES.len() as u64;
    let size = params.chunk_lines.unwrap_or(STREAM_CHUNK_LINES);
    let mut line = params.offset.unwrap_or(1);
    let mut chunks = Vec::new();
    loop {
        let from = usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX).min(STREAM_LINES.len());
        let to = usize::try_from(line.saturating_sub(1) + size).unwrap_or(usize::MAX).min(STREAM_LINES.len());
        let next = line + (to - from) as u64;
        let done = next > total;
        chunks.push(chunk(line, &STREAM_LINES[from..to], total, done));
        if done {
            return chunks;
        }
        line = next;
    }
}

/// Answers `fs/streamText` like the daemon: the subscription id, then every chunk of
/// [`STREAM_LINES`].
pub fn stream(request: &Value) -> Vec<Out> {
    let params: StreamTextParams = match serde_json::from_value(request["params"].clone()) {
        Ok(params) => params,
        Err(e) => return vec![error(request, -32602, &format!("invalid params: {e}"), None)],
    };
    let subscription = subscription_id(request);
    let mut out = vec![subscribed(request, &subscription)];
    out.extend(stream_chunks(&params).iter().map(|chunk| chunk_out(&subscription, chunk)));
    out
}

/// Answers like a well-behaved daemon: initialize, daemon/status, tools/list, shutdown, and
/// canned results for tools/call, file/* and fs/* (whose params must decode as their wire
/// types; `fs/streamText` streams [`STREAM_LINES`], `fs/streamCancel` answers `false` as for a
/// stream that already ended); anything else is -32601.
pub fn standard(request: &Value) -> Vec<Out> {
    let out = match request["method"].as_str() {
        Some("fs/streamText") => return stream(request),
        Some("fs/streamCancel") => result(request, json!(false)),
        Some("initialize") => answer(request, initialize_result()),
        Some("daemon/status") => answer(request, status()),
        Some("tools/list") => answer(
            request,
            ToolsListResult { tools: ToolName::DEFAULT.into_iter().map(tools::descriptor).collect() },
        ),
        Some("shutdown") => result(request, Value::Null),
        Some("tools/call") => with::<CallToolParams>(request, |_| answer(request, tool_result(READ_TEXT))),
        Some("file/read" | "fs/readText") => {
            with::<ReadParams>(request, |p| answer(request, read_result(&p.path)))
        }
        Some("file/write") => {
            with::<WriteParams>(request, |p| answer(request, write_result(&p.path, WriteOperation::Update)))
        }
        Some("fs/writeText") => {
            with::<FsWriteParams>(request, |p| answer(request, write_result(&p.path, WriteOperation::Create)))
        }
        Some("file/edit") => with::<EditParams>(request, |p| {
            let all = p.replace_all.unwrap_or(false);
            answer(request, edit_result(&p.path, if all { 2 } else { 1 }, all))
        }),
        Some("fs/editText") => with::<FsEditParams>(request, |p| {
            let all = p.replace_all.unwrap_or(false);
            answer(request, edit_result(&p.path, if all { 2 } else { 1 }, all))
        }),
        Some("file/stat") => with::<FileStatParams>(request, |p| answer(request, file_stat(&p.path, true))),
        Some("fs/stat") => with::<PathParams>(request, |p| answer(request, fs_stat(&p.path))),
        Some("fs/resolve") => with::<PathParams>(request, |p| answer(request, resolve_result(&p.path))),
        _ if request.get("id").is_none() => return Vec::new(),
        _ => error(request, -32601, "Method not found", None),
    };
    vec![out]
}

/// A `file/didChange` notice for `/tmp/project/{name}` (as [`resolve_result`] resolves `name`),
/// shown as `name`; `version` `None` for a deleted file.
pub fn did_change(name: &str, version: Option<&str>) -> Out {
    notification(
        methods::FILE_DID_CHANGE,
        json!({"path": format!("/tmp/project/{name}"), "displayPath": name, "version": version}),
    )
}

/// The names of the received messages, in order.
pub fn method_names(received: &[Value]) -> Vec<&str> {
    received.iter().filter_map(|m| m["method"].as_str()).collect()
}
