//! A Model Context Protocol server that gives an MCP client (Claude Code, Codex, Cursor, …) the
//! daemon's `read`, `write` and `edit` tools through one daemon session; `filectx mcp` runs it on
//! stdin and stdout. [`serve`] takes any buffered reader and writer, so it can be embedded or
//! driven in-process.
//!
//! **Transport.** MCP's stdio transport: one JSON-RPC 2.0 message per line (UTF-8, no embedded
//! newlines) on the input and the output. Nothing but those messages is written to the output;
//! diagnostics go to [`McpOptions::diagnostics`] (stderr by default). A line longer than
//! [`McpOptions::max_line_bytes`] ([`MAX_LINE_BYTES`] by default) is skipped unbuffered and
//! answered with -32600 (id null); a line that is not JSON with -32700 (id null); blank lines
//! are ignored.
//!
//! **Lifecycle.** `initialize` negotiates the version: the client's when it is one of
//! [`PROTOCOL_VERSIONS`], else the newest of them. With [`McpOptions::open_session`] it also
//! opens the daemon session, shaped by the client's `clientInfo` (the agent's name, and the read
//! budget of a client known to cut long results), on the connection made at the start or, when
//! the daemon closed that one (its `--initialize-timeout`), on a new one; a session the daemon
//! refuses answers `initialize` with the daemon's error and stops the server. Before `initialize` only `ping`
//! is served (everything else: -32600 "not initialized"); a second `initialize` is -32600.
//! Requests are served as soon as `initialize` is answered, but notifications to the client
//! start only after `notifications/initialized`. The input reaching its end stops the server:
//! requests still running get a few seconds to finish, the daemon session is closed politely,
//! and [`serve`] returns.
//!
//! **Batches** (a JSON array of messages) exist only in MCP 2025-03-26; in every other version,
//! and before `initialize`, a batch is refused as a whole with -32600 (id null). `initialize`
//! inside a batch is refused.
//!
//! **Methods.** `ping`; `tools/list` and `tools/call`, forwarded to the daemon session.
//! `tools/list` publishes the daemon's input schemas without `additionalProperties: false`, and
//! `tools/call` drops the arguments a tool's schema does not name before forwarding (harnesses
//! add their own, e.g. Gemini CLI's `wait_for_previous`; the daemon itself refuses unknown
//! arguments). `tools/call` results become MCP `CallToolResult`s: the daemon's text content and
//! `isError`, an error's text starting with `Error (FS_CODE): ` (or `Error: ` for one made here,
//! e.g. a lost daemon) and its code in `_meta.filectx.code`; with [`McpOptions::structured`],
//! from 2025-06-18 also `structuredContent` `{text, error?}`, whose `outputSchema` `tools/list`
//! then declares. `logging/setLevel`; `notifications/cancelled` (the call is cancelled at the
//! daemon with `$/cancelRequest`, see [`Client::request_cancellable`], and never answered).
//! Anything else is -32601.
//!
//! **Progress.** A `tools/call` whose `_meta` carries a `progressToken` and that the daemon has
//! not answered within a second (a write gate may be reviewing the change) gets
//! `notifications/progress` `{progressToken, progress, message}` (`message` from 2025-03-26)
//! every three seconds until the answer comes; none after a cancellation.
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
//! and the diagnostics say why. When the input ends, [`serve`] then returns the error (for
//! `filectx mcp`, exit code 3).
//!
//! The code: `lines.rs` is the line-framed transport, `jsonrpc.rs` the JSON-RPC message shapes,
//! `dispatch.rs` routes each message (tasks, batches, cancellation), `methods.rs` serves the MCP
//! methods, `open.rs` opens the daemon session at `initialize` (the budget by client, what an
//! older daemon refuses), `notices.rs` sends `notifications/message` (change relay, lost
//! daemon), and `session.rs` holds the state they share.

mod dispatch;
mod jsonrpc;
mod lines;
mod methods;
mod notices;
mod open;
mod session;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use filectx_protocol::error::INVALID_REQUEST;
use filectx_protocol::{DEFAULT_MAX_FRAME_BYTES, InitializeParams, methods as wire};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::{Client, ClientError};

use self::jsonrpc::error_response;
use self::lines::{Line, read_line, write_lines};
pub use self::open::MIN_MAX_OUTPUT;
use self::open::Plan;
use self::session::Shared;

/// The MCP protocol versions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// Default longest input line (one message) accepted, in bytes: the daemon's default frame cap.
pub const MAX_LINE_BYTES: usize = DEFAULT_MAX_FRAME_BYTES;

/// Messages waiting to be written to the output; when full, requests wait and change notices
/// are dropped (and counted in the diagnostics).
const OUTGOING_QUEUE: usize = 1024;
/// How long requests still running at the end of the input may take, and how long closing the
/// daemon session may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the server's diagnostics go: one sentence per call, without a trailing newline.
type Diagnostics = Arc<dyn Fn(&str) + Send + Sync>;

/// Where the daemon session comes from.
#[derive(Debug, Clone)]
enum Setup {
    /// The caller opened it: these are its instructions.
    Opened(String),
    /// The server opens it when the MCP client's `initialize` arrives.
    Deferred(Box<Plan>),
}

/// How [`serve`] runs: where its daemon session comes from, what its results carry, the
/// longest line it accepts, and where its diagnostics go.
#[derive(Clone)]
pub struct McpOptions {
    setup: Setup,
    structured: bool,
    max_line_bytes: usize,
    diagnostics: Diagnostics,
}

impl McpOptions {
    /// Options for a daemon session the caller already opened ([`Client::connect_session`]),
    /// whose `instructions` ([`filectx_protocol::InitializeResult::instructions`]) become the
    /// MCP server's (given to the client in the `initialize` result). Lines are capped at
    /// [`MAX_LINE_BYTES`] and diagnostics go to stderr, each prefixed with `filectx mcp: `.
    pub fn new(instructions: impl Into<String>) -> Self {
        Self::with_setup(Setup::Opened(instructions.into()))
    }

    /// Options for a server that opens its daemon session itself, with `params`, when the MCP
    /// client's `initialize` arrives (the [`Client`] given to [`serve`] is then only connected).
    /// The session is shaped by who the client is: unless `params` set them, its
    /// `clientInfo` is the MCP client's (the agent's name a write gate shows), and its
    /// `readMaxBytes` (the read, glob and grep budget) fits what the client keeps of a tool
    /// result ([`McpOptions::max_output`], else the cut of a client known by its `clientInfo.name`
    /// to cut results: Codex, Gemini CLI). An option a daemon of an older build refuses
    /// (`dedupReads`, `readMaxBytes`, the `glob` and `grep` tools) is dropped with a diagnostic;
    /// any other refusal answers the client's `initialize` with the daemon's error and ends
    /// [`serve`] with it. The server's instructions are the session's.
    pub fn open_session(params: InitializeParams) -> Self {
        Self::with_setup(Setup::Deferred(Box::new(Plan { params, fixed_tools: false, max_output: None })))
    }

    fn with_setup(setup: Setup) -> Self {
        Self {
            setup,
            structured: false,
            max_line_bytes: MAX_LINE_BYTES,
            diagnostics: Arc::new(|message: &str| eprintln!("filectx mcp: {message}")),
        }
    }

    /// With [`McpOptions::open_session`]: the session's tools are the user's choice, never
    /// trimmed for an older daemon (default: `glob` and `grep` are dropped when the daemon does
    /// not offer them).
    pub fn fixed_tools(mut self, fixed: bool) -> Self {
        if let Setup::Deferred(plan) = &mut self.setup {
            plan.fixed_tools = fixed;
        }
        self
    }

    /// With [`McpOptions::open_session`]: the most characters of one tool result the MCP client
    /// keeps for its model (at least [`MIN_MAX_OUTPUT`]); read, glob and grep answers are sized
    /// to fit, footer included, less what the client adds (for Codex, which keeps a result's
    /// JSON, its escapes). Default: a known client's own cut (Codex 10,000, Gemini CLI 40,000),
    /// else the daemon's budget.
    pub fn max_output(mut self, chars: Option<u64>) -> Self {
        if let Setup::Deferred(plan) = &mut self.setup {
            plan.max_output = chars.map(|chars| chars.max(MIN_MAX_OUTPUT));
        }
        self
    }

    /// Whether `tools/call` results also carry `structuredContent` `{text, error?}` and
    /// `tools/list` declares its `outputSchema`, from MCP 2025-06-18 (default: no; results are
    /// `content` text, which is what clients show their model: Claude Code and Codex show a
    /// result's `structuredContent` as JSON instead of its text).
    pub fn structured(mut self, structured: bool) -> Self {
        self.structured = structured;
        self
    }

    /// Longest input line (one message) accepted, in bytes (default [`MAX_LINE_BYTES`]); a
    /// longer one is skipped without being buffered and answered with -32600.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// Where diagnostics go (default: stderr, prefixed with `filectx mcp: `): e.g. why the daemon
    /// connection was lost, change notices dropped for a slow client, requests dropped at the
    /// end of the input, an output that cannot be written, an option an older daemon refused,
    /// an argument a client added that no schema names (at most 64 names, each cut to its first
    /// 64 bytes, escaped). They never go to the MCP output,
    /// which carries only JSON-RPC messages. Each call gets one sentence, without a newline; the
    /// texts call the input "stdin" and the output "stdout", as for `filectx mcp`.
    pub fn diagnostics(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.diagnostics = Arc::new(sink);
        self
    }
}

impl std::fmt::Debug for McpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOptions")
            .field("setup", &self.setup)
            .field("structured", &self.structured)
            .field("max_line_bytes", &self.max_line_bytes)
            .finish_non_exhaustive()
    }
}

/// Why [`serve`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// Reading the input failed (for `filectx mcp`, stdin).
    #[error("cannot read the MCP input: {0}")]
    Input(#[source] std::io::Error),
    /// The daemon session failed: [`ClientError::Transport`] when the connection was lost while
    /// serving (the server answered tool calls with errors until the input ended); the daemon's
    /// refusal of the session the server opened at `initialize` ([`McpOptions::open_session`]:
    /// the client's `initialize` was answered with it, and the server stopped); or any error of
    /// [`Client::notifications`] when the change notices could not be subscribed to at the
    /// start.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Serves MCP on `input`/`output` until `input` ends, over the daemon connection `client`: a
/// session already opened ([`McpOptions::new`], see [`Client::connect_session`]) or one the
/// server opens when the MCP client's `initialize` arrives ([`McpOptions::open_session`]). At
/// the end, an open session is closed politely (`shutdown`, then `exit`, bounded in time).
///
/// Requests are read from `input` one line at a time; `tools/*` calls run concurrently, and
/// their answers are written to `output` as they complete, each as one line, flushed. Must run
/// inside a tokio runtime: the writer and the change relay are spawned on it.
///
/// # Errors
/// [`McpError::Client`] with [`ClientError::Transport`] when the daemon connection was lost
/// while serving; the daemon's refusal of the session opened at `initialize` (the server stops
/// right after answering it); any error of subscribing to the session's change notices at the
/// start. [`McpError::Input`] when reading `input` fails. A closed `output` (the MCP client went
/// away) ends the server without error.
pub async fn serve<R, W>(client: Client, options: McpOptions, input: R, output: W) -> Result<(), McpError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let McpOptions { setup, structured, max_line_bytes, diagnostics } = options;
    // A session already opened: subscribed before anything is read, so no change notice can be
    // missed. (A session opened at `initialize` is subscribed to there.)
    let changes = match setup {
        Setup::Opened(_) => Some(client.notifications(wire::FILE_DID_CHANGE).await?),
        Setup::Deferred(_) => None,
    };
    let (sender, receiver) = mpsc::channel(OUTGOING_QUEUE);
    let mut writer = tokio::spawn(write_lines(receiver, output, Arc::clone(&diagnostics)));
    let shared = Arc::new(Shared::new(client, setup, structured, sender, diagnostics));
    let mut relay = changes.map(|changes| tokio::spawn(notices::relay_changes(Arc::clone(&shared), changes)));

    let mut input = input;
    let mut line = Vec::new();
    let mut tasks = JoinSet::new();
    let read_result = loop {
        while tasks.try_join_next().is_some() {}
        let next = tokio::select! {
            next = read_line(&mut input, &mut line, max_line_bytes) => next,
            // The writer ends only when the output is closed: nobody reads the answers any more.
            _ = &mut writer => break Ok(()),
        };
        match next {
            Ok(Line::Eof) => break Ok(()),
            Ok(Line::TooLong) => {
                let message = format!("Invalid Request: the message is longer than {max_line_bytes} bytes");
                shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
            }
            Ok(Line::Complete) => dispatch::handle_line(&shared, &line, &mut tasks).await,
            Err(error) => break Err(McpError::Input(error)),
        }
        // The session could not be opened: nothing can be served.
        if let Some(refused) = shared.take_refusal() {
            break Err(McpError::Client(refused));
        }
        // The session was just opened at `initialize`: relay its change notices.
        if let Some(changes) = shared.take_pending_changes() {
            relay = Some(tokio::spawn(notices::relay_changes(Arc::clone(&shared), changes)));
        }
    };

    // Let the requests already running answer, within bounds.
    if tokio::time::timeout(DRAIN_TIMEOUT, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        shared.diagnose(&format!("stdin ended; requests still running after {DRAIN_TIMEOUT:?} were dropped"));
        tasks.abort_all();
    }
    if let Some(relay) = &relay {
        relay.abort();
    }
    let (lost, open) = {
        let state = shared.lock_state();
        (state.lost.clone(), state.session_open)
    };
    if let Some(client) = shared.client().filter(|client| open && lost.is_none() && client.is_connected()) {
        // Best effort, bounded: the daemon ends the session on hang-up anyway.
        shared.lock_state().closing = true;
        let close = async {
            let _ = client.shutdown().await;
            let _ = client.exit().await;
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
