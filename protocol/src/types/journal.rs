//! Wire types of the journal: `journal/list` (the changes recorded, newest first, paged),
//! `journal/diff` (one entry's unified diff) and `journal/restore` (put back the content before
//! an entry, guarded like any write).

use serde::{Deserialize, Serialize};

/// What a journal entry recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum JournalOperation {
    /// A write that created the file.
    Create,
    /// A write that replaced an existing file whole.
    Write,
    /// An edit of an existing file.
    Edit,
    /// The file was removed (a restore of a creation).
    Delete,
    /// A `journal/restore` (or the `undo` tool) put back an earlier content.
    Restore,
    /// A change made outside the daemon (a shell, an editor) to a file a session had observed.
    Outside,
}

impl JournalOperation {
    /// The wire name (`"create"`, `"write"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Write => "write",
            Self::Edit => "edit",
            Self::Delete => "delete",
            Self::Restore => "restore",
            Self::Outside => "outside",
        }
    }
}

/// The `sessionId` of an [`JournalOperation::Outside`] entry: no session made it.
pub const OUTSIDE_SESSION: &str = "outside";

/// Parameters of `journal/list`: which entries, newest first. Every filter is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalListParams {
    /// A file, or a folder (every file beneath it): absolute, or relative to the session's cwd.
    /// It must lie inside the session's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Only the changes of this session (`"outside"`: only outside changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only the changes of this owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Only changes at or after this time (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Continue after the last page: the `cursor` the previous answer gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Most entries in this page (default 50, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JournalEntry {
    /// The entry's id, for `journal/diff` and `journal/restore` (opaque; today its `seq` in
    /// decimal).
    pub entry: String,
    /// Its sequence number: later changes have larger ones.
    pub seq: u64,
    /// When it was made, in milliseconds since the Unix epoch.
    pub time: u64,
    /// The file, canonical (absolute, symlinks resolved).
    pub path: String,
    /// The path as shown to this session: relative to its cwd when inside it, else absolute.
    pub display_path: String,
    /// The session that made it (`"outside"` for an outside change).
    pub session_id: String,
    /// That session's client (`clientInfo.name`), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// The owner that made it, when one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What it did.
    pub operation: JournalOperation,
    /// The version before (absent: there was no file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The version after (absent: the file was removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Whether the content before it is kept, so that it can be restored (false: a version was
    /// over `journal_max_file_bytes`).
    pub restorable: bool,
    /// Lines added from before to after (absent when unknown: a version not kept, not text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
    /// Lines removed from before to after (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
}

/// Result of `journal/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JournalListResult {
    /// The entries, newest first.
    pub entries: Vec<JournalEntry>,
    /// Present when more entries match: pass it as `cursor` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Parameters of `journal/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalDiffParams {
    /// The entry's id.
    pub entry: String,
}

/// Result of `journal/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JournalDiffResult {
    /// The unified diff from the content before the entry to the content after it (`--- PATH
    /// (before)`, `+++ PATH (after)`, lines as `read` shows them); empty when no line differs.
    pub diff: String,
    /// Whether the diff was cut at the bounds of a stale refusal's (200 lines, 16 KiB).
    pub truncated: bool,
}

/// Parameters of `journal/restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalRestoreParams {
    /// The entry whose change to undo.
    pub entry: String,
    /// Restore even when the file changed since the entry (default false: such a restore is
    /// `FS_STALE_VERSION` with `data.diff`, the change since the entry).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Whose observation the restore refreshes; absent: the session's default owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Result of `journal/restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JournalRestoreResult {
    /// The journal entry the restore itself made (undo it to redo).
    pub entry: String,
    /// The file as shown to this session.
    pub display_path: String,
    /// The version written (absent: the restore removed the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What the restore introduced, by the file's language server (a session whose
    /// `diagnostics` is `"wait"`, when a server applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::DiagnosticsReport>,
}
