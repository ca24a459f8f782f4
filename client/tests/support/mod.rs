//! A tiny fake daemon for the client's tests: it accepts one connection on a tempdir Unix socket,
//! speaks the LSP codec, records every message it receives and answers through a script.

#![allow(dead_code, missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use filectx_protocol::{
    Capabilities, DaemonStatus, Frame, InitializeResult, Limits, LspCodec, ServerInfo, ToolName,
    ToolsListResult, tools,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

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
    pub fn start(mut script: impl FnMut(&Value) -> Vec<Out> + Send + 'static) -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("fake.sock");
        let listener = UnixListener::bind(&socket)?;
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await?;
            let (read, write) = stream.into_split();
            let mut reader = FramedRead::new(read, LspCodec::default());
            let mut writer = FramedWrite::new(write, LspCodec::default());
            let mut seen = Vec::new();
            while let Some(frame) = reader.next().await {
                let Frame::Message(body) = frame? else {
                    return Err("oversized frame from the client".into());
                };
                let message: Value = serde_json::from_slice(&body)?;
                seen.push(message.clone());
                if message["method"] == "exit" {
                    break;
                }
                for out in script(&message) {
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
        Ok(Self { socket, _dir: dir, task })
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
            tools: ToolName::ALL.to_vec(),
            read_only: false,
            methods: vec!["daemon/status".to_owned(), "initialize".to_owned()],
            batches: true,
        },
        limits: Limits {
            read_line_limit: 2000,
            read_line_max_chars: 2000,
            max_frame_bytes: 64 << 20,
            max_batch_len: 100,
            max_concurrent_requests: 16,
        },
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
        mapped_bytes: 1536,
        watched_paths: 5,
        requests: 17,
        notifications_dropped: 0,
    }
}

/// Answers like a well-behaved daemon: initialize, daemon/status, tools/list, shutdown; anything
/// else is -32601.
pub fn standard(request: &Value) -> Vec<Out> {
    let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let out = match request["method"].as_str() {
        Some("initialize") => result(request, value(serde_json::to_value(initialize_result()))),
        Some("daemon/status") => result(request, value(serde_json::to_value(status()))),
        Some("tools/list") => {
            let list = ToolsListResult { tools: ToolName::ALL.into_iter().map(tools::descriptor).collect() };
            result(request, value(serde_json::to_value(list)))
        }
        Some("shutdown") => result(request, Value::Null),
        _ if request.get("id").is_none() => return Vec::new(),
        _ => error(request, -32601, "Method not found", None),
    };
    vec![out]
}
