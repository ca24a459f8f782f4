//! `filectx mcp`: a Model Context Protocol server on stdin/stdout that gives an MCP client
//! (Claude Code, Codex, Cursor, …) the daemon's `read`, `write` and `edit` tools through one
//! daemon session.
//!
//! **Transport.** MCP's stdio transport: one JSON-RPC 2.0 message per line (UTF-8, no embedded
//! newlines) on stdin and stdout. Nothing but those messages is written to stdout; diagnostics go
//! to stderr. A line longer than [`MAX_LINE_BYTES`] is skipped unbuffered and answered with
//! -32600 (id null); a line that is not JSON with -32700 (id null); blank lines are ignored.
//!
//! **Lifecycle.** `initialize` negotiates the version: the client's when it is one of
//! [`PROTOCOL_VERSIONS`], else the newest of them. Before `initialize` only `ping` is served
//! (everything else: -32600 "not initialized"); a second `initialize` is -32600. Requests are
//! served as soon as `initialize` is answered, but notifications to the client start only after
//! `notifications/initialized`. Stdin reaching its end stops the server: requests still running
//! get a few seconds to finish, the daemon session is closed politely, and [`serve`] returns.
//!
//! **Batches** (a JSON array of messages) exist only in MCP 2025-03-26; in every other version,
//! and before `initialize`, a batch is refused as a whole with -32600 (id null). `initialize`
//! inside a batch is refused.
//!
//! **Methods.** `ping`; `tools/list` and `tools/call`, forwarded to the daemon session
//! (`tools/call` results become MCP `CallToolResult`s: the daemon's text content and `isError`,
//! plus `structuredContent` `{text, error?}` from 2025-06-18, whose `outputSchema` `tools/list`
//! then declares); `logging/setLevel`; `notifications/cancelled` (the call is dropped and not
//! answered). Anything else is -32601.
//!
//! **Change notices.** Each `file/didChange` of the daemon session becomes a
//! `notifications/message` (level `warning`, logger `filectx`, `data` with the path and a
//! sentence telling the model to read the file again), unless `logging/setLevel` asked for a
//! level above `warning`.
//!
//! **A lost daemon connection** does not end the server: the client would only see a dead
//! server. Instead, every `tools/call` still running or made later is answered with an
//! `isError` result saying the daemon connection was lost and that the MCP server must be
//! restarted, `tools/list` with -32603, one `notifications/message` of level `error` is sent,
//! and stderr says why. When stdin ends, [`serve`] then returns the error, so the process exits
//! non-zero (3).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use filectx_client::{Client, ClientError, Notifications};
use filectx_protocol::{DEFAULT_MAX_FRAME_BYTES, FileDidChange, InitializeResult, methods};
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

/// The MCP protocol versions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// Longest stdin line (one message) accepted, in bytes: the daemon's default frame cap.
pub const MAX_LINE_BYTES: usize = DEFAULT_MAX_FRAME_BYTES;

/// The only version that allows JSON-RPC batches (added in 2025-03-26, removed in 2025-06-18).
const BATCH_VERSION: &str = "2025-03-26";
/// First version with tool `annotations`.
const ANNOTATIONS_SINCE: &str = "2025-03-26";
/// First version with `structuredContent`, `outputSchema` and `title`.
const STRUCTURED_SINCE: &str = "2025-06-18";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// The `logger` of every `notifications/message`.
const LOGGER: &str = "filectx";
/// MCP (syslog) log levels, least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
/// Level of a change notice.
const CHANGE_LEVEL: &str = "warning";
/// Level of the notice that the daemon connection was lost.
const LOST_LEVEL: &str = "error";

/// Messages waiting to be written to stdout; when full, requests wait and change notices are
/// dropped (and counted on stderr).
const OUTGOING_QUEUE: usize = 1024;
/// How long requests still running at the end of stdin may take, and how long closing the daemon
/// session may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves MCP on `input`/`output` until `input` ends, over the daemon session `client`, opened
/// with the result `session` (whose `instructions` become the MCP server's).
///
/// # Errors
/// [`ClientError::Transport`] when the daemon connection was lost while serving (the server
/// answered tool calls with errors until stdin ended); an IO error when reading `input` fails.
/// A closed `output` (the MCP client went away) ends the server without error.
pub async fn serve<R, W>(client: Client, session: InitializeResult, input: R, output: W) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Subscribed before anything is read, so no change notice can be missed.
    let changes = client.notifications(methods::FILE_DID_CHANGE).await?;
    let (sender, receiver) = mpsc::channel(OUTGOING_QUEUE);
    let mut writer = tokio::spawn(write_lines(receiver, output));
    let shared = Arc::new(Shared {
        client,
        instructions: session.instructions,
        out: sender,
        state: Mutex::new(State::default()),
        running: Mutex::new(HashMap::new()),
    });
    let relay = tokio::spawn(relay_changes(Arc::clone(&shared), changes));

    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let mut tasks = JoinSet::new();
    let read_result = loop {
        while tasks.try_join_next().is_some() {}
        let next = tokio::select! {
            next = read_line(&mut reader, &mut line, MAX_LINE_BYTES) => next,
            // The writer ends only when stdout is closed: nobody reads the answers any more.
            _ = &mut writer => break Ok(()),
        };
        match next {
            Ok(Line::Eof) => break Ok(()),
            Ok(Line::TooLong) => {
                let message = format!("Invalid Request: the message is longer than {MAX_LINE_BYTES} bytes");
                shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
            }
            Ok(Line::Complete) => handle_line(&shared, &line, &mut tasks).await,
            Err(error) => break Err(anyhow::Error::new(error).context("cannot read stdin")),
        }
    };

    // Let the requests already running answer, within bounds.
    if tokio::time::timeout(DRAIN_TIMEOUT, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        eprintln!("filectx mcp: stdin ended; requests still running after {DRAIN_TIMEOUT:?} were dropped");
        tasks.abort_all();
    }
    relay.abort();
    let lost = shared.lock_state().lost.clone();
    if lost.is_none() && shared.client.is_connected() {
        // Best effort, bounded: the daemon ends the session on hang-up anyway.
        shared.lock_state().closing = true;
        let close = async {
            let _ = shared.client.shutdown().await;
            let _ = shared.client.exit().await;
        };
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, close).await;
    }
    // Dropping the last sender lets the writer flush what is queued and stop.
    drop(shared);
    if !writer.is_finished() {
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, writer).await;
    }
    read_result?;
    match lost {
        Some(reason) => Err(ClientError::Transport(reason).into()),
        None => Ok(()),
    }
}

/// What the request handlers share.
struct Shared {
    client: Client,
    /// The daemon session's `instructions`.
    instructions: String,
    /// Serialized messages for stdout.
    out: mpsc::Sender<String>,
    state: Mutex<State>,
    /// Running `tools/call`s by their request id (as JSON text), for `notifications/cancelled`.
    running: Mutex<HashMap<String, AbortHandle>>,
}

/// The MCP session's state.
#[derive(Debug, Default)]
struct State {
    /// The negotiated protocol version, once `initialize` was answered.
    version: Option<&'static str>,
    /// Whether `notifications/initialized` arrived: notifications may be sent.
    initialized: bool,
    /// Index into [`LEVELS`] of the least severe level the client wants (`logging/setLevel`).
    min_level: usize,
    /// Why the daemon connection was lost, once it was.
    lost: Option<String>,
    /// Set while closing the session at the end: the hang-up that follows is no loss.
    closing: bool,
    /// Change notices dropped because stdout was not read fast enough.
    dropped: u64,
}

impl Shared {
    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message for stdout (waiting while the queue is full). A closed stdout drops it.
    async fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string()).await;
    }

    /// Queues a `notifications/message` of `level` when the client is initialized and wants that
    /// level; drops it (counting) when the queue is full.
    fn log(&self, level: &str, data: Value) {
        let severity = LEVELS.iter().position(|l| *l == level).unwrap_or(0);
        let mut state = self.lock_state();
        if !state.initialized || severity < state.min_level {
            return;
        }
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": level, "logger": LOGGER, "data": data},
        });
        if self.out.try_send(message.to_string()).is_err() {
            state.dropped += 1;
            if state.dropped.is_power_of_two() {
                eprintln!(
                    "filectx mcp: {} change notices dropped: the MCP client does not read stdout fast enough",
                    state.dropped
                );
            }
        }
    }

    /// Records that the daemon connection is gone (once), and says so on stderr and to the client.
    fn connection_lost(&self, reason: String) {
        {
            let mut state = self.lock_state();
            if state.closing || state.lost.is_some() {
                return;
            }
            state.lost = Some(reason.clone());
        }
        eprintln!(
            "filectx mcp: the connection to the daemon at {} was lost: {reason}; tool calls now fail \
             until this MCP server is restarted",
            self.client.socket().display()
        );
        self.log(LOST_LEVEL, json!({"message": lost_text(&reason)}));
    }
}

/// The sentence a model reads when the daemon connection is gone.
fn lost_text(reason: &str) -> String {
    format!(
        "The filectx daemon connection was lost ({reason}), so the file tools are unavailable until \
         the filectx MCP server is restarted. If a write or edit was under way, its outcome is \
         unknown: read the file again once the tools are back."
    )
}

/// Writes each queued message and a newline to `output`, flushing after each; ends when every
/// sender is gone or `output` fails (closed).
async fn write_lines<W: AsyncWrite + Unpin>(mut receiver: mpsc::Receiver<String>, mut output: W) {
    while let Some(message) = receiver.recv().await {
        let written = async {
            output.write_all(message.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await
        };
        if let Err(error) = written.await {
            if error.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("filectx mcp: cannot write to stdout: {error}");
            }
            return;
        }
    }
}

/// Forwards the daemon's `file/didChange` notifications as `notifications/message`; when the
/// stream ends because the connection broke, records the loss.
async fn relay_changes(shared: Arc<Shared>, mut changes: Notifications) {
    while let Some(params) = changes.next().await {
        match serde_json::from_value::<FileDidChange>(params) {
            Ok(change) => shared.log(CHANGE_LEVEL, change_data(&change)),
            Err(error) => eprintln!("filectx mcp: ignoring a malformed file/didChange: {error}"),
        }
    }
    if changes.lagged() {
        eprintln!(
            "filectx mcp: change notices arrived faster than they could be relayed; later ones are lost"
        );
        return;
    }
    let reason = match shared.client.disconnected().await {
        ClientError::Transport(reason) => reason,
        other => other.to_string(),
    };
    shared.connection_lost(reason);
}

/// The `data` of a change notice: the paths, the new version, and what the model should do.
fn change_data(change: &FileDidChange) -> Value {
    let shown = &change.display_path;
    let message = match &change.version {
        Some(_) => format!(
            "{shown} changed on disk since you read it (another program or agent wrote it). Read it \
             again before editing or overwriting it: a change based on what you read before will be \
             refused."
        ),
        None => format!(
            "{shown} was deleted (or is no longer a regular file) since you read it. Read it again \
             before relying on its content; writing it creates it anew."
        ),
    };
    json!({
        "path": change.path,
        "displayPath": change.display_path,
        "version": change.version,
        "message": message,
    })
}

/// How a line read from stdin ended.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// `buf` holds one line, without its `\n`.
    Complete,
    /// The line was longer than the cap; it was skipped.
    TooLong,
    /// The input ended (with no partial line left).
    Eof,
}

/// Reads one line into `buf` (cleared first), without its newline. A line longer than `cap`
/// bytes is consumed without being kept. A last line without a newline counts as a line.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut seen = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (seen, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Complete,
            });
        }
        seen = true;
        let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (&available[..end], end + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > cap {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Complete });
        }
    }
}

/// One parsed message from the client.
#[derive(Debug, PartialEq)]
enum Incoming {
    /// A request: it gets exactly one response.
    Request { id: Value, method: String, params: Value },
    /// A notification: no response.
    Notification { method: String, params: Value },
    /// A response to a request of ours; this server sends none, so it is ignored.
    Response,
    /// Not a valid message: answered with this error (`id` null when it could not be read).
    Invalid { id: Value, message: String },
}

/// Classifies one JSON value (not an array) as a JSON-RPC 2.0 message.
fn classify(value: Value) -> Incoming {
    let Value::Object(mut object) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            message: "Invalid Request: not a JSON object".to_owned(),
        };
    };
    let id = object.remove("id");
    // MCP ids are strings or integers, never null.
    let valid_id = match &id {
        Some(Value::String(_)) => true,
        Some(Value::Number(number)) => number.is_i64() || number.is_u64(),
        _ => false,
    };
    let reply_id = if valid_id { id.clone().unwrap_or(Value::Null) } else { Value::Null };
    if object.get("jsonrpc") != Some(&Value::String("2.0".to_owned())) {
        let message = "Invalid Request: \"jsonrpc\" must be \"2.0\"".to_owned();
        return Incoming::Invalid { id: reply_id, message };
    }
    let params = object.remove("params").unwrap_or_else(|| Value::Object(Map::new()));
    match (object.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(_)) if valid_id => {
            Incoming::Request { id: reply_id, method, params }
        }
        (Some(Value::String(_)), Some(_)) => Incoming::Invalid {
            id: Value::Null,
            message: "Invalid Request: \"id\" must be a string or an integer".to_owned(),
        },
        (Some(_), _) => Incoming::Invalid {
            id: reply_id,
            message: "Invalid Request: \"method\" must be a string".to_owned(),
        },
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Incoming::Response
        }
        (None, _) => Incoming::Invalid { id: reply_id, message: "Invalid Request: no \"method\"".to_owned() },
    }
}

/// Parses and serves one stdin line. `tools/*` requests run as tasks in `tasks`; the rest is
/// answered before the next line is read, so `initialize` takes effect in order.
async fn handle_line(shared: &Arc<Shared>, line: &[u8], tasks: &mut JoinSet<()>) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(error) => {
            let message = format!("Parse error: {error}");
            return shared.send(error_response(Value::Null, PARSE_ERROR, message)).await;
        }
    };
    let Value::Array(batch) = value else {
        match classify(value) {
            Incoming::Request { id, method, params } if is_tool_method(&method) => {
                let key = id.to_string();
                let task_shared = Arc::clone(shared);
                let task_key = key.clone();
                let handle = tasks.spawn(async move {
                    let response = request(&task_shared, id, &method, params, false).await;
                    // Once answered, a cancellation no longer applies.
                    task_shared.lock_running().remove(&task_key);
                    task_shared.send(response).await;
                });
                shared.lock_running().insert(key, handle);
            }
            incoming => {
                if let Some(response) = message(shared, incoming, false).await {
                    shared.send(response).await;
                }
            }
        }
        return;
    };
    let version = shared.lock_state().version;
    if version != Some(BATCH_VERSION) {
        let message = match version {
            Some(version) => format!("Invalid Request: MCP {version} has no JSON-RPC batches"),
            None => "Invalid Request: a batch before initialize (initialize cannot be batched)".to_owned(),
        };
        return shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
    }
    if batch.is_empty() {
        let message = "Invalid Request: an empty batch".to_owned();
        return shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
    }
    let task_shared = Arc::clone(shared);
    tasks.spawn(async move {
        let answers = batch.into_iter().map(|entry| message(&task_shared, classify(entry), true));
        let responses: Vec<Value> = futures::future::join_all(answers).await.into_iter().flatten().collect();
        if !responses.is_empty() {
            task_shared.send(Value::Array(responses)).await;
        }
    });
}

/// Whether `method` is forwarded to the daemon (and so may take a while).
fn is_tool_method(method: &str) -> bool {
    matches!(method, "tools/list" | "tools/call")
}

/// Serves one message; returns the response to send, if any.
async fn message(shared: &Shared, incoming: Incoming, in_batch: bool) -> Option<Value> {
    match incoming {
        Incoming::Request { id, method, params } => {
            Some(request(shared, id, &method, params, in_batch).await)
        }
        Incoming::Notification { method, params } => {
            notification(shared, &method, &params);
            None
        }
        Incoming::Response => None,
        Incoming::Invalid { id, message } => Some(error_response(id, INVALID_REQUEST, message)),
    }
}

/// Serves a notification from the client.
fn notification(shared: &Shared, method: &str, params: &Value) {
    match method {
        "notifications/initialized" => {
            let mut state = shared.lock_state();
            if state.version.is_some() {
                state.initialized = true;
            } else {
                eprintln!("filectx mcp: ignoring notifications/initialized before initialize");
            }
        }
        "notifications/cancelled" => {
            let running =
                params.get("requestId").and_then(|id| shared.lock_running().remove(&id.to_string()));
            if let Some(handle) = running {
                handle.abort();
            }
        }
        // Other notifications (roots/list_changed, progress, …) concern nothing this server does.
        _ => {}
    }
}

/// Serves a request and returns its response.
async fn request(shared: &Shared, id: Value, method: &str, params: Value, in_batch: bool) -> Value {
    let version = shared.lock_state().version;
    let outcome = match (method, version) {
        ("ping", _) => Ok(json!({})),
        ("initialize", _) if in_batch => {
            Err((INVALID_REQUEST, "Invalid Request: initialize cannot be part of a batch".to_owned()))
        }
        ("initialize", None) => initialize(shared, &params),
        ("initialize", Some(_)) => Err((INVALID_REQUEST, "Invalid Request: already initialized".to_owned())),
        (_, None) => Err((
            INVALID_REQUEST,
            format!("Invalid Request: the server is not initialized; send initialize before {method}"),
        )),
        ("tools/list", Some(version)) => tools_list(shared, version).await,
        ("tools/call", Some(version)) => tools_call(shared, version, params).await,
        ("logging/setLevel", Some(_)) => set_level(shared, &params),
        (_, Some(_)) => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
    };
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error_response(id, code, message),
    }
}

/// A JSON-RPC error response.
fn error_response(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A request's result, or its error code and message.
type Outcome = Result<Value, (i64, String)>;

/// The version to answer with: the client's when supported, else the newest supported.
fn negotiate(requested: &str) -> &'static str {
    PROTOCOL_VERSIONS.into_iter().find(|v| *v == requested).unwrap_or(PROTOCOL_VERSIONS[0])
}

/// Whether the negotiated `version` is `since` or later (versions are dates: they sort as text).
fn at_least(version: &str, since: &str) -> bool {
    version >= since
}

fn initialize(shared: &Shared, params: &Value) -> Outcome {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion".to_owned()));
    };
    let version = negotiate(requested);
    shared.lock_state().version = Some(version);
    let mut server_info = json!({"name": "filectx", "version": env!("CARGO_PKG_VERSION")});
    if at_least(version, STRUCTURED_SINCE) {
        server_info["title"] = json!("filectx file tools");
    }
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": server_info,
        "instructions": shared.instructions,
    }))
}

fn set_level(shared: &Shared, params: &Value) -> Outcome {
    let level = params.get("level").and_then(Value::as_str);
    let Some(index) = level.and_then(|level| LEVELS.iter().position(|l| *l == level)) else {
        let message = format!("Invalid params: level must be one of {}", LEVELS.join(", "));
        return Err((INVALID_PARAMS, message));
    };
    shared.lock_state().min_level = index;
    Ok(json!({}))
}

/// `tools/list`: the daemon session's tools, with what the negotiated version adds.
async fn tools_list(shared: &Shared, version: &str) -> Outcome {
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Err((INTERNAL_ERROR, lost_text(&reason)));
    }
    let result: Value = shared.client.request(methods::TOOLS_LIST, ()).await.map_err(|error| {
        let error = rpc_error(shared, error);
        (error.0, error.1)
    })?;
    let tools = result.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
    let tools: Vec<Value> = tools.into_iter().map(|tool| mcp_tool(tool, version)).collect();
    Ok(json!({"tools": tools}))
}

/// A daemon tool descriptor as an MCP `Tool`: annotations from 2025-03-26; a title and the output
/// schema of the `structuredContent` this server adds from 2025-06-18.
fn mcp_tool(mut tool: Value, version: &str) -> Value {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(object) = tool.as_object_mut() else { return tool };
    let (title, read_only, destructive, idempotent) = match name.as_str() {
        "read" => ("Read file", true, false, true),
        "write" => ("Write file", false, true, true),
        "edit" => ("Edit file", false, true, false),
        _ => return tool,
    };
    if at_least(version, ANNOTATIONS_SINCE) {
        let mut annotations = json!({"readOnlyHint": read_only, "openWorldHint": false});
        if !read_only {
            annotations["destructiveHint"] = json!(destructive);
            annotations["idempotentHint"] = json!(idempotent);
        }
        if at_least(version, STRUCTURED_SINCE) {
            annotations["title"] = json!(title);
        }
        object.insert("annotations".to_owned(), annotations);
    }
    if at_least(version, STRUCTURED_SINCE) {
        object.insert("title".to_owned(), json!(title));
        object.insert("outputSchema".to_owned(), output_schema());
    }
    tool
}

/// The schema of the `structuredContent` of every tool result (2025-06-18 and later).
fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The tool's text, as in the text content: for read, the numbered lines and footer; \
                                for a failure, what went wrong and what to do."
            },
            "error": {
                "type": "object",
                "description": "Present when the call failed (isError).",
                "properties": {
                    "name": {"type": "string", "const": "FsError"},
                    "code": {"type": "string", "description": "The stable FS_* identifier, e.g. FS_STALE_VERSION."}
                },
                "required": ["name", "code"]
            }
        },
        "required": ["text"]
    })
}

/// `tools/call`, forwarded; the daemon's result made an MCP `CallToolResult`.
async fn tools_call(shared: &Shared, version: &str, params: Value) -> Outcome {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: tools/call needs a string name".to_owned()));
    };
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Ok(failure_result(&lost_text(&reason), version));
    }
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let call = json!({"name": name, "arguments": arguments});
    match shared.client.request::<Value>(methods::TOOLS_CALL, call).await {
        Ok(result) => Ok(call_result(&result, version)),
        Err(ClientError::Rpc { code, message, .. }) => Err((i64::from(code), message)),
        Err(ClientError::Timeout(waited)) => {
            let text = format!(
                "The filectx daemon did not answer within {} s. The outcome of this call is unknown: \
                 read the file again before changing it.",
                waited.as_secs()
            );
            Ok(failure_result(&text, version))
        }
        Err(error) => {
            let (_, text) = rpc_error(shared, error);
            Ok(failure_result(&text, version))
        }
    }
}

/// A daemon failure as an error code and a message; a broken connection is recorded as lost.
fn rpc_error(shared: &Shared, error: ClientError) -> (i64, String) {
    match error {
        ClientError::Rpc { code, message, .. } => (i64::from(code), message),
        ClientError::Transport(reason) => {
            shared.connection_lost(reason.clone());
            (INTERNAL_ERROR, lost_text(&reason))
        }
        other => (INTERNAL_ERROR, format!("the filectx daemon's answer could not be used: {other}")),
    }
}

/// The daemon's `tools/call` result as an MCP `CallToolResult`: its content blocks and
/// `isError`; from 2025-06-18 also `structuredContent` `{text, error?}`.
fn call_result(daemon: &Value, version: &str) -> Value {
    let content = daemon.get("content").cloned().unwrap_or_else(|| json!([]));
    let is_error = daemon.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut result = json!({"content": content, "isError": is_error});
    if at_least(version, STRUCTURED_SINCE) {
        let text: String = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        let mut structured = json!({"text": text});
        if let Some(error) = daemon.get("error").filter(|_| is_error) {
            structured["error"] = error.clone();
        }
        result["structuredContent"] = structured;
    }
    result
}

/// A failed call's result made by this server (no daemon answer to relay).
fn failure_result(text: &str, version: &str) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
    if at_least(version, STRUCTURED_SINCE) {
        result["structuredContent"] = json!({"text": text});
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_negotiate_to_the_clients_or_the_newest() {
        assert_eq!(negotiate("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2099-01-01"), "2025-06-18");
        assert_eq!(negotiate("1.0"), "2025-06-18");
        assert!(at_least("2025-06-18", STRUCTURED_SINCE));
        assert!(!at_least("2025-03-26", STRUCTURED_SINCE));
        assert!(at_least("2025-03-26", ANNOTATIONS_SINCE));
        assert!(!at_least("2024-11-05", ANNOTATIONS_SINCE));
    }

    #[test]
    fn messages_are_classified() {
        let request = classify(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        assert_eq!(request, Incoming::Request { id: json!(7), method: "ping".to_owned(), params: json!({}) });
        let note = classify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(
            matches!(note, Incoming::Notification { method, .. } if method == "notifications/initialized")
        );
        assert_eq!(classify(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), Incoming::Response);
        let bad = |value| match classify(value) {
            Incoming::Invalid { id, .. } => Some(id),
            _ => None,
        };
        assert_eq!(bad(json!(3)), Some(Value::Null));
        assert_eq!(bad(json!({"id": 4, "method": "ping"})), Some(json!(4)));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})), Some(Value::Null));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})), Some(Value::Null));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": "a", "method": 5})), Some(json!("a")));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": "a"})), Some(json!("a")));
    }

    #[tokio::test]
    async fn lines_are_split_and_long_ones_skipped() {
        let input: &[u8] = b"one\n\ntoo long line\nlast";
        let mut reader = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut reader, &mut buf, 8).await.ok();
            let done = line == Some(Line::Eof) || line.is_none();
            lines.push((line, String::from_utf8_lossy(&buf).into_owned()));
            if done {
                break;
            }
        }
        let expected = [
            (Some(Line::Complete), "one"),
            (Some(Line::Complete), ""),
            (Some(Line::TooLong), ""),
            (Some(Line::Complete), "last"),
            (Some(Line::Eof), ""),
        ];
        let lines: Vec<_> = lines.iter().map(|(l, s)| (l.as_ref(), s.as_str())).collect();
        let expected: Vec<_> = expected.iter().map(|(l, s)| (l.as_ref(), *s)).collect();
        assert_eq!(lines, expected);
    }

    #[test]
    fn tool_results_gain_structured_content_from_2025_06_18() {
        let daemon = json!({
            "content": [{"type": "text", "text": "File changed since you read it."}],
            "isError": true,
            "error": {"name": "FsError", "code": "FS_STALE_VERSION"},
        });
        let old = call_result(&daemon, "2025-03-26");
        assert_eq!(old, json!({"content": daemon["content"], "isError": true}));
        let new = call_result(&daemon, "2025-06-18");
        assert_eq!(new["structuredContent"]["text"], "File changed since you read it.");
        assert_eq!(new["structuredContent"]["error"]["code"], "FS_STALE_VERSION");
        let ok = call_result(
            &json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
            "2025-06-18",
        );
        assert_eq!(ok["structuredContent"], json!({"text": "ok"}));
    }

    #[test]
    fn tools_gain_annotations_then_titles_and_output_schemas() {
        let read = json!({"name": "read", "description": "Read.", "inputSchema": {"type": "object"}});
        let old = mcp_tool(read.clone(), "2024-11-05");
        assert_eq!(old, read);
        let mid = mcp_tool(read.clone(), "2025-03-26");
        assert_eq!(mid["annotations"]["readOnlyHint"], true);
        assert!(mid.get("outputSchema").is_none() && mid.get("title").is_none());
        let edit = json!({"name": "edit", "description": "Edit.", "inputSchema": {"type": "object"}});
        let new = mcp_tool(edit, "2025-06-18");
        assert_eq!(new["annotations"]["destructiveHint"], true);
        assert_eq!(new["title"], "Edit file");
        assert_eq!(new["outputSchema"]["required"], json!(["text"]));
    }

    #[test]
    fn change_notices_name_the_file_and_ask_for_a_new_read() {
        let change = FileDidChange {
            path: "/srv/app/src/lib.rs".to_owned(),
            display_path: "src/lib.rs".to_owned(),
            version: Some("abc".to_owned()),
        };
        let data = change_data(&change);
        assert_eq!(data["path"], "/srv/app/src/lib.rs");
        let message = data["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("src/lib.rs changed") && message.contains("Read it again"), "{message}");
        let deleted = change_data(&FileDidChange { version: None, ..change });
        assert!(deleted["message"].as_str().unwrap_or_default().contains("was deleted"));
    }
}
