//! Wire types of `initialize`: who connects, what the session asks for (roots, tools, deny
//! rules, budgets) and what it gets (capabilities, limits).

use serde::{Deserialize, Serialize};

use crate::tools::ToolName;

/// The protocol version this crate speaks (`protocolVersion` in the `initialize` result).
pub const PROTOCOL_VERSION: u32 = 2;

/// Who is connecting (informational; shows up in the daemon's logs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Deny rules of this session, added to the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<DenyParams>,
    /// Most bytes of text one `read` tool answer holds (numbered lines and footer); default the
    /// daemon's `--read-max-bytes` (51200), at least 1024, at most the daemon's
    /// `maxWindowBytes`. `limits.readMaxBytes` reports what the session got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_max_bytes: Option<u64>,
    /// When true, the result carries a `resumeToken` with which a later `initialize` (after
    /// this session ended) may take over this session's observations (feature `resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumable: Option<bool>,
    /// A `resumeToken` of an ended session: this session takes over its observations (all
    /// owners). Single use; refused (-32602) when unknown, already used or past the grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// When true, the `read` tool answers one short line instead of the text when this owner
    /// already received exactly those lines of the same version (feature `dedupReads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_reads: Option<bool>,
    /// What an `edit` tool call whose observation is stale does: `refuse` (the default) answers
    /// `FS_STALE_VERSION`; `merge` applies it to the current version when the outside change
    /// does not touch what it replaces (feature `staleEdits`; docs/protocol.md, "Merged stale
    /// edits"). Never for `write`, `file/*` or `fs/*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_edits: Option<StaleEdits>,
    /// When true, `readMaxBytes` counts the text of the `read`, `glob` and `grep` answers as JSON
    /// escapes it (a control character as 6 bytes, `\n`, `\t`, `"` and `\` as 2), for a client
    /// that keeps a tool result's JSON up to a number of characters, such as the MCP bridge for
    /// a client that cuts results (feature `jsonBudget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_budget: Option<bool>,
    /// Whether writes and edits wait for their file's language server and say what they
    /// introduced (`"wait"`, the default) or not (`"off"`) (feature `diagnostics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<DiagnosticsMode>,
}

/// Whether writes and edits wait for diagnostics (`initialize` `diagnostics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticsMode {
    /// They wait, up to the daemon's deadline, and say what the change introduced.
    #[default]
    Wait,
    /// They do not.
    Off,
}

/// What an `edit` tool call whose observation is stale does (`initialize` `staleEdits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum StaleEdits {
    /// Refused with `FS_STALE_VERSION` (and the change shown, as always).
    #[default]
    Refuse,
    /// Applied to the current version when its `old_string` matches there as many times as in
    /// the version last seen and no changed line touches or adjoins a match; else refused.
    Merge,
}

impl InitializeParams {
    /// A session over `roots` with every option left to the daemon's default; set the ones you
    /// need with struct update syntax (`InitializeParams { read_only: Some(true),
    /// ..InitializeParams::new(roots) }`).
    pub fn new(roots: Vec<String>) -> Self {
        Self {
            client_info: None,
            roots,
            cwd: None,
            tools: None,
            read_only: None,
            deny: None,
            read_max_bytes: None,
            resumable: None,
            resume: None,
            dedup_reads: None,
            stale_edits: None,
            json_budget: None,
            diagnostics: None,
        }
    }
}

/// Glob patterns (relative to the root that contains a path) a session may not read or write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DenyParams {
    /// Paths whose content may not be read (read, stat, streams).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Paths that may not be written or edited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

/// Who answered `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    /// Always `"filectxd"`.
    pub name: String,
    /// The daemon's version.
    pub version: String,
}

/// What this session can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// What this daemon supports beyond protocol 1 (names in [`crate::features`]); clients
    /// check a name here before relying on it.
    #[serde(default)]
    pub features: Vec<String>,
    /// Whether at least one language server is configured and found, so writes and edits can
    /// say what they introduced.
    #[serde(default)]
    pub diagnostics: bool,
}

/// Limits the daemon enforces, so clients can stay inside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Most lines one read returns (and the default window).
    pub read_line_limit: u32,
    /// Longest line (in characters) the `read` tool shows before cutting it.
    pub read_line_max_chars: u32,
    /// Most bytes of text one `read` tool answer holds (this session's `readMaxBytes`).
    #[serde(default)]
    pub read_max_bytes: u64,
    /// Most bytes of line text one `file/read`, `fs/readText` or `fs/textChunk` holds: a window
    /// stops before it (`partial`), a single longer line is `FS_TOO_LARGE`.
    #[serde(default)]
    pub max_window_bytes: u64,
    /// Largest frame body, in bytes, either direction.
    pub max_frame_bytes: u64,
    /// Most entries in one batch.
    pub max_batch_len: u32,
    /// Most requests of one connection served at once; further ones wait.
    pub max_concurrent_requests: u32,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Present when `initialize` asked for `resumable`: give it as `resume` to a later
    /// `initialize` (once this session has ended) to take its observations over. A secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
}
