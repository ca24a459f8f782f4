//! Wire types of the write gates: `gate/register`, `gate/unregister`, the `gate/writeIntent`
//! a gate is asked, its answer, and how a refusal or a withdrawn intent is reported.

use serde::{Deserialize, Serialize};

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
