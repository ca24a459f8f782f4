//! Wire types (serde) of the session and daemon methods: `initialize`, `daemon/status`,
//! `tools/list`. Field names are camelCase on the wire, as in LSP and MCP.

use serde::{Deserialize, Serialize};

use crate::tools::{ToolDescriptor, ToolName};

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

/// Result of `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Bytes of those files' line indexes (checkpoints, and the line ends of warm files of 64
    /// to 512 KiB), at most `--max-cache-bytes`.
    #[serde(default)]
    pub index_bytes: u64,
    /// Bytes of files currently memory-mapped.
    pub mapped_bytes: u64,
    /// Cached files the provider keeps open (so warm reads need no `open`); released with
    /// their cache entries (least recently used, or idle for a while).
    #[serde(default)]
    pub open_files: u64,
    /// Paths the watcher watches.
    pub watched_paths: u64,
    /// Requests served since start (batch entries count one each).
    pub requests: u64,
    /// Server→client notifications dropped because a client did not read them.
    pub notifications_dropped: u64,
    /// Bytes of file content hashed to learn versions since start (reads, stats and version
    /// checks that missed the cache). A read that the first chunk of a file shows to be binary
    /// hashes nothing.
    #[serde(default)]
    pub hashed_bytes: u64,
    /// File operations that may run at once (shared fairly between sessions).
    #[serde(default)]
    pub file_slots: u64,
    /// File operations running now.
    #[serde(default)]
    pub file_slots_busy: u64,
    /// File operations waiting for a slot now.
    #[serde(default)]
    pub file_slots_waiting: u64,
    /// Named owners of the sessions open now (each session's default owner not counted).
    #[serde(default)]
    pub owners: u64,
    /// Ended resumable sessions kept for a `resume`.
    #[serde(default)]
    pub parked_sessions: u64,
    /// Estimated bytes those ended sessions hold.
    #[serde(default)]
    pub parked_bytes: u64,
    /// File versions whose bytes are kept for stale refusals' diffs.
    #[serde(default)]
    pub snapshots: u64,
    /// Bytes those versions hold (at most `--max-snapshot-bytes`).
    #[serde(default)]
    pub snapshot_bytes: u64,
    /// Searched folders whose file lists are kept warm (a repeated `glob`/`grep` skips the walk).
    #[serde(default)]
    pub cached_listings: u64,
    /// Bytes those lists hold (at most `--max-search-cache-bytes`).
    #[serde(default)]
    pub cached_listing_bytes: u64,
    /// The write-intent gates registered now, in registration order.
    #[serde(default)]
    pub gates: Vec<GateInfo>,
    /// Responses from clients that matched no request of the daemon (a late answer to a
    /// withdrawn or timed-out `gate/writeIntent`, say): dropped.
    #[serde(default)]
    pub unmatched_responses: u64,
    /// Gates registered by other sessions, which `gates` does not list (it lists only the
    /// asking session's, unless `daemon/status` carried the daemon's gate token).
    #[serde(default)]
    pub other_gates: u64,
    /// Bytes (estimated) the open sessions' records of what they read hold: their owners'
    /// observations (each path twice: the record and the watcher's copy) and dedup records.
    #[serde(default)]
    pub observed_bytes: u64,
    /// The most `observed_bytes` may reach (`max_observed_bytes`): past it the session holding
    /// the most forgets its least recently used observations.
    #[serde(default)]
    pub max_observed_bytes: u64,
    /// The most one session's records may hold (`max_session_observed_bytes`): past it its
    /// largest owners forget their least recently used observations.
    #[serde(default)]
    pub max_session_observed_bytes: u64,
    /// Observations forgotten to stay within those caps since the daemon started (each such
    /// file must be read again before it is written).
    #[serde(default)]
    pub observations_evicted: u64,
    /// File descriptors the daemon has open now (counted when asked).
    #[serde(default)]
    pub open_descriptors: u64,
    /// Its open-file limit (`RLIMIT_NOFILE`: the soft limit, raised to the hard one at start).
    #[serde(default)]
    pub descriptor_limit: u64,
    /// Descriptors never handed to connections, roots or cached files: kept for accepting,
    /// answering and the work in flight.
    #[serde(default)]
    pub descriptor_reserve: u64,
    /// Root handles the open sessions hold (one descriptor each).
    #[serde(default)]
    pub roots_held: u64,
    /// Searches (`glob`, `grep`) that may run at once (`--search-slots`), in slots of their
    /// own, apart from the file slots, shared fairly between sessions.
    #[serde(default)]
    pub search_slots: u64,
    /// Searches running now.
    #[serde(default)]
    pub search_slots_busy: u64,
    /// Searches waiting for a search slot now.
    #[serde(default)]
    pub search_slots_waiting: u64,
    /// Most memory one search's regular expression may use (`--search-regex-bytes`).
    #[serde(default)]
    pub search_regex_bytes: u64,
    /// Most memory all searches at once may hold: search slots × (the regex bound + the file
    /// bytes one search holds at most).
    #[serde(default)]
    pub search_memory_bytes: u64,
    /// inotify watches the daemon holds now: warm search listings and the file watcher together.
    #[serde(default)]
    pub watches_held: u64,
    /// The most inotify watches the daemon holds at once (`--max-watches`; search listings take
    /// at most three quarters of them, the rest is the file watcher's).
    #[serde(default)]
    pub watches_cap: u64,
}

/// Params of `daemon/status` (optional, as is every field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DaemonStatusParams {
    /// The daemon's gate token (the file `<socket>.gate-token`): with it, `gates` lists every
    /// session's gates, as the daemon's owner may see them; without it (or with a wrong one),
    /// only the asking session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_token: Option<String>,
}

/// What a gate watches for: a new file, a whole-file write over an existing one, an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum GateOperation {
    /// A write that creates the file.
    Create,
    /// A write that replaces an existing file whole.
    Update,
    /// An edit (literal replacement) of an existing file.
    Edit,
}

impl GateOperation {
    /// Every operation, in wire order.
    pub const ALL: [GateOperation; 3] = [GateOperation::Create, GateOperation::Update, GateOperation::Edit];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Edit => "edit",
        }
    }
}

/// What happens to a write whose gate did not answer in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum GateOnTimeout {
    /// The write is refused (`FS_PERMISSION_DENIED`).
    #[default]
    Deny,
    /// The write goes ahead.
    Allow,
}

/// Params of `gate/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateRegisterParams {
    /// Existing folders (or files) inside the session's roots, absolute or relative to its cwd.
    pub paths: Vec<String>,
    /// Which writes the gate sees (default: all three).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<GateOperation>>,
    /// A name for people and models (1 to 128 bytes), shown in refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How long one intent waits for the gate's answer, in milliseconds (default 50000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What an unanswered intent becomes (default `deny`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<GateOnTimeout>,
    /// The daemon's gate token, read from the file `<socket>.gate-token` (mode 0600, the
    /// daemon's user's): needed unless the daemon lets any session be a gate
    /// (`gate_sessions = "any"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_token: Option<String>,
}

/// Result of `gate/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GateRegisterResult {
    /// The gate's id, unique in this daemon (`gate-N`).
    pub gate_id: String,
}

/// Params of `gate/unregister`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateUnregisterParams {
    /// A gate this session registered.
    pub gate_id: String,
}

/// Params of the server → client request `gate/writeIntent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteIntentParams {
    /// The gate asked.
    pub gate_id: String,
    /// This intent, unique in the daemon (`intent-N`); also the request's id.
    pub intent_id: String,
    /// The writing session.
    pub session_id: String,
    /// The writing session's `clientInfo.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// The writing owner (`owner` of `tools/call` and `file/*`), if one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The file, absolute and canonical (inside the writer's roots).
    pub path: String,
    /// What the write does.
    pub operation: GateOperation,
    /// A unified diff from the current content to the bytes that would be written, or one of
    /// `"too large"`, `"not text"`, `"hidden"` (a deny rule of the gate's session covers the
    /// file) when none is shown.
    pub diff: String,
    /// The version replaced (absent for a create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_version: Option<String>,
    /// The version the file will have.
    pub new_version: String,
    /// Size of the new content in bytes.
    pub bytes: u64,
    /// The file's hard links, when it has more than one: the write changes the file under
    /// every one of its names, and is asked of every gate whose paths are on its device, as
    /// the other names may lie under them (absent for a file of one link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<u64>,
}

/// `WriteIntentParams::diff` when the change is over the diff bounds (200 lines, 16 KiB, or a
/// version larger than `--max-snapshot-file-bytes`).
pub const INTENT_DIFF_TOO_LARGE: &str = "too large";
/// `WriteIntentParams::diff` when the current content is not text.
pub const INTENT_DIFF_NOT_TEXT: &str = "not text";
/// `WriteIntentParams::diff` when the gate's own session may not read the file (its deny rules).
pub const INTENT_DIFF_HIDDEN: &str = "hidden";

/// Why the daemon withdrew an intent: the `reason` of the `$/cancelRequest` it sends a gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum IntentWithdrawal {
    /// The writer cancelled its request, or its connection ended: nothing is written.
    #[default]
    Cancelled,
    /// The gate did not answer within its `timeoutMs`: the daemon settled the write as the
    /// gate's `onTimeout` says.
    Timeout,
}

/// Params of the `$/cancelRequest` notification the daemon sends a gate to withdraw an intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GateCancelParams {
    /// The intent's request id (its `intentId`).
    pub id: String,
    /// Why it was withdrawn (absent from daemons before this field: read as `cancelled`).
    #[serde(default)]
    pub reason: IntentWithdrawal,
}

/// How a gate's refusal came about (`outcome` of [`GateRefusalData`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum GateOutcome {
    /// The gate answered `allow: false` (or an error, or a result that is not a decision).
    Denied,
    /// The gate did not answer within its `timeoutMs`, and its `onTimeout` is `deny`.
    Timeout,
    /// The gate disconnected or was unregistered before it answered.
    Disconnected,
}

/// `error.data.gate` of the `FS_PERMISSION_DENIED` a write or edit refused by a gate answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GateRefusalData {
    /// The refusing gate.
    pub gate_id: String,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The gate's reason (`no reason given` without one), or what happened.
    pub reason: String,
    /// How the refusal came about.
    pub outcome: GateOutcome,
}

/// The gate's answer to `gate/writeIntent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteIntentResult {
    /// Whether the write may land.
    pub allow: bool,
    /// Why not (shown to the writing model), or any note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One gate, as `daemon/status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GateInfo {
    /// Its id.
    pub gate_id: String,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The session that registered it.
    pub session_id: String,
    /// The canonical paths it covers.
    pub paths: Vec<String>,
    /// The operations it sees.
    pub operations: Vec<GateOperation>,
    /// Its answer timeout, in milliseconds.
    pub timeout_ms: u64,
    /// What an unanswered intent becomes.
    pub on_timeout: GateOnTimeout,
    /// Intents sent to it and not answered yet.
    pub in_flight: u64,
    /// Writes waiting for one of its places in flight.
    pub waiting: u64,
}

/// Result of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// The session's tools, in the order read, write, edit.
    pub tools: Vec<ToolDescriptor>,
}

/// `tools/call` parameters (the MCP `CallToolRequest` params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool's name: `read`, `write` or `edit`.
    pub name: String,
    /// The tool's arguments (validated by the daemon against the tool's schema).
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// Whose observations this call uses and records (a sub-agent's name, at most
    /// [`MAX_OWNER_BYTES`] bytes); absent: the session's default owner. Feature `owners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Longest `owner` accepted, in bytes.
pub const MAX_OWNER_BYTES: usize = 128;

/// Parameters of `session/contextReset`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextResetParams {
    /// The owner whose context was reset; absent: every owner of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// One content block of a tool result. Only text blocks are produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToolContent {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
}

/// The machine-readable error of a failed tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    /// Always `"FsError"`.
    pub name: String,
    /// The stable identifier.
    pub code: crate::FsErrorCode,
}

/// `tools/call` result (the MCP `CallToolResult` shape). Tool failures, invalid arguments
/// included, are results with `isError: true`, never JSON-RPC errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the model reads.
    pub content: Vec<ToolContent>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Present exactly when `isError` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

impl CallToolResult {
    /// The concatenated text of all text blocks.
    pub fn text(&self) -> String {
        self.content.iter().map(|ToolContent::Text { text }| text.as_str()).collect()
    }
}

/// Parameters of `file/read` and `fs/readText`: a window of lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// 1-based first line; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Most lines; default and maximum 2000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// `file/read` only: cut lines longer than this many characters (listed in
    /// `truncatedLines`; only a prefix of such a line is read). Without it lines are whole.
    /// `fs/readText` always returns whole lines and refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_line_chars: Option<u32>,
    /// `file/read` only: whose observation the read records; absent: the session's default
    /// owner. Feature `owners`. (`fs/readText` records nothing and refuses it.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Result of `file/read` and `fs/readText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReadResult {
    /// The path as shown to people: relative to the cwd when inside it, else absolute.
    pub display_path: String,
    /// The version of the file this window was read from.
    pub version: String,
    /// 1-based number of the first line in `lines`.
    pub start_line: u64,
    /// The lines, without line terminators (`\r\n` shown as a line end), a leading BOM
    /// not shown; whole, unless `maxLineChars` asked to cut them (see `truncatedLines`).
    pub lines: Vec<String>,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether lines of the file lie outside this window.
    pub partial: bool,
    /// 1-based numbers of the lines in this window that were cut at `maxLineChars`.
    pub truncated_lines: Vec<u64>,
    /// Whether the window stopped before the asked lines because the next line would have
    /// taken it past `limits.maxWindowBytes` (continue at `startLine` + the lines shown).
    #[serde(default)]
    pub truncated_by_bytes: bool,
}

/// Parameters of `file/write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// The file's complete new content.
    pub content: String,
    /// Whose observation the write needs and refreshes; absent: the session's default owner.
    /// Feature `owners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Whether a write created the file or replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WriteOperation {
    /// The file did not exist.
    Create,
    /// The file existed and was replaced.
    Update,
}

/// Result of `file/write` and `fs/writeText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    /// Created or replaced.
    pub operation: WriteOperation,
    /// The path as shown to people.
    pub display_path: String,
    /// The file's new version.
    pub version: String,
}

/// Parameters of `file/edit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// The exact text to replace (non-empty).
    pub old_string: String,
    /// Its replacement (must differ).
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
    /// Whose observation the edit needs and refreshes; absent: the session's default owner.
    /// Feature `owners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Result of `file/edit` and `fs/editText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EditResult {
    /// How many occurrences were replaced.
    pub replacements: u64,
    /// Whether `replaceAll` was in effect.
    pub replace_all: bool,
    /// The path as shown to people.
    pub display_path: String,
    /// The file's new version.
    pub version: String,
}

/// Parameters of `file/stat`, `fs/stat` and `fs/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
}

/// Parameters of `file/stat`: a path, and whose observation to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileStatParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// Whose observation `observedVersion` and `fresh` report; absent: the session's default
    /// owner. Feature `owners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A regular file.
    File,
    /// A folder.
    Directory,
    /// Anything else (socket, device, fifo).
    Other,
    /// Nothing exists there.
    None,
}

/// What `fs/stat` finds at a path (provider layer: no session state): the design's `FsInfo`.
/// `fs/stat` answers `null` when nothing is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FsInfo {
    /// The content version of a regular file; `null` for a folder or anything else, and for a
    /// file over the daemon's hash cap (`--max-hash-bytes`), which is not hashed.
    pub version: Option<String>,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: FsType,
    /// Size in bytes (regular files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// What `fs/stat` found: [`FsInfo::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum FsType {
    /// A regular file.
    File,
    /// A folder.
    Directory,
    /// Anything else (socket, device, fifo).
    Other,
}

/// Result of `file/stat`: the provider's stat plus this session's observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileStatResult {
    /// Whether something exists at the path.
    pub exists: bool,
    /// What it is.
    pub kind: FileKind,
    /// The path as shown to people.
    pub display_path: String,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Current content version (regular files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The version this session last read or wrote, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,
    /// Whether the session's observation equals the current version (so a write or edit
    /// would be allowed).
    pub fresh: bool,
}

/// Result of `fs/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResolveResult {
    /// The canonical absolute path (symlinks and `..` resolved).
    pub path: String,
    /// The path as shown to people.
    pub display_path: String,
    /// Whether something exists there.
    pub exists: bool,
    /// The session root that contains it.
    pub root: String,
}

/// What an `fs/writeText` expects to find before writing (the design's kinds, plus `any`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum WriteExpectation {
    /// Only create: an existing file is `FS_NOT_OBSERVED` (the caller has not seen it).
    CreateIfAbsent,
    /// Only replace this exact version: a missing file or another version is
    /// `FS_STALE_VERSION`.
    ReplaceIfVersion {
        /// The expected current version.
        version: String,
    },
    /// Write whatever is there (create or replace); filectx's own, for non-tool consumers.
    Any,
}

/// Parameters of `fs/writeText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsWriteParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// The file's complete new content.
    pub content: String,
    /// What must be there now.
    pub expect: WriteExpectation,
    /// Keep the replaced file's BOM and CRLF endings, as `file/write` does; default false: the
    /// content's bytes exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_conventions: Option<bool>,
}

/// Parameters of `fs/editText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsEditParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// The exact text to replace (non-empty).
    pub old_string: String,
    /// Its replacement (must differ).
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
    /// The version the edit applies to; `FS_STALE_VERSION` if the file is not at it.
    pub expected_version: String,
}

/// Parameters of `fs/streamText`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamTextParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
    /// 1-based first line; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Lines per chunk; default [`STREAM_CHUNK_LINES`], at most [`crate::tools::READ_LINE_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_lines: Option<u64>,
}

/// Default lines per `fs/textChunk`.
pub const STREAM_CHUNK_LINES: u64 = 1000;

/// Why a stream ended early: carried by its last chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChunkError {
    /// The stable identifier (`FS_STALE_VERSION` when the file changed mid-stream).
    pub code: crate::FsErrorCode,
    /// What happened, for people.
    pub message: String,
}

/// One `fs/textChunk` notification's `result`: consecutive lines of one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TextChunk {
    /// The version every chunk of this stream comes from.
    pub version: String,
    /// 1-based number of the first line in `lines`.
    pub start_line: u64,
    /// The lines, whole (as `file/read` shows them: no terminators, no `\r`). A chunk holds
    /// at most `limits.maxWindowBytes` of them: it ends early before a line that would pass
    /// that; a single longer line ends the stream with an `FS_TOO_LARGE` error item.
    pub lines: Vec<String>,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether this is the last chunk.
    pub done: bool,
    /// Present on a last chunk that ends the stream early (the file changed:
    /// `FS_STALE_VERSION`; a line over `limits.maxWindowBytes`: `FS_TOO_LARGE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ChunkError>,
}

/// `file/didChange` notification params: a file this session observed has changed since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileDidChange {
    /// The canonical absolute path.
    pub path: String,
    /// The path as shown to people (relative to the session's cwd when inside it).
    pub display_path: String,
    /// The file's new version; `null` when it was deleted (or is no longer a file).
    pub version: Option<String>,
    /// The owner whose recorded observation went stale; absent for the session's default owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}
