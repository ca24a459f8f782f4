//! Wire types (serde) of the session and daemon methods: `initialize`, `daemon/status`,
//! `tools/list`. Field names are camelCase on the wire, as in LSP and MCP.

use serde::{Deserialize, Serialize};

use crate::tools::{ToolDescriptor, ToolName};

/// The protocol version this crate speaks (`protocolVersion` in the `initialize` result).
pub const PROTOCOL_VERSION: u32 = 1;

/// Who is connecting (informational; shows up in the daemon's logs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientInfo {
    /// The client's name, e.g. `"my-harness"`.
    pub name: String,
    /// The client's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Parameters of `initialize`. Unknown fields are refused, so that a misspelt `readOnly` can never
/// silently give a session write access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitializeParams {
    /// Who is connecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<ClientInfo>,
    /// Absolute folders the session may touch; at least one.
    pub roots: Vec<String>,
    /// Absolute folder that relative paths resolve against; defaults to `roots[0]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The tools this session gets; all three when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolName>>,
    /// When true, every write path in every layer is refused with `FS_PERMISSION_DENIED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

/// Who answered `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    /// Always `"filectxd"`.
    pub name: String,
    /// The daemon's version.
    pub version: String,
}

/// What this session can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// The model-facing tools this session may call (what `tools/list` lists).
    pub tools: Vec<ToolName>,
    /// Whether every write path is refused.
    pub read_only: bool,
    /// Every request method the daemon serves, sorted.
    pub methods: Vec<String>,
    /// Whether JSON-RPC batches are accepted.
    pub batches: bool,
}

/// Limits the daemon enforces, so clients can stay inside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Most lines one read returns (and the default window).
    pub read_line_limit: u32,
    /// Longest line (in characters) a read shows before cutting it.
    pub read_line_max_chars: u32,
    /// Largest frame body, in bytes, either direction.
    pub max_frame_bytes: u64,
    /// Most entries in one batch.
    pub max_batch_len: u32,
    /// Most requests of one connection served at once; further ones wait.
    pub max_concurrent_requests: u32,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// Who answered.
    pub server_info: ServerInfo,
    /// [`PROTOCOL_VERSION`].
    pub protocol_version: u32,
    /// Identifies the session in the daemon's logs.
    pub session_id: String,
    /// Short prose for the agent's system prompt: how to use the tools well.
    pub instructions: String,
    /// What this session can do.
    pub capabilities: Capabilities,
    /// Limits the daemon enforces.
    pub limits: Limits,
}

/// Result of `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// The daemon's version.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Milliseconds since the daemon started serving.
    pub uptime_ms: u64,
    /// Connections (sessions) open now.
    pub sessions: u64,
    /// The cap on concurrent connections.
    pub max_sessions: u64,
    /// Connections refused so far (over the cap, or a peer of another uid).
    pub refused_connections: u64,
    /// Files the provider holds cached state for.
    pub cached_files: u64,
    /// Bytes of files currently memory-mapped.
    pub mapped_bytes: u64,
    /// Paths the watcher watches.
    pub watched_paths: u64,
    /// Requests served since start (batch entries count one each).
    pub requests: u64,
    /// Server→client notifications dropped because a client did not read them.
    pub notifications_dropped: u64,
}

/// Result of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// The session's tools, in the order read, write, edit.
    pub tools: Vec<ToolDescriptor>,
}
