//! Wire types of diagnostics: the report a write, an edit or a restore carries of what the change
//! introduced, and `lsp/diagnostics`, a file's diagnostics as they are now.

use serde::{Deserialize, Serialize};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticSeverity {
    /// An error.
    Error,
    /// A warning.
    Warning,
    /// Information.
    Information,
    /// A hint.
    Hint,
}

/// One diagnostic of a language server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// The file, as shown to this session.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (UTF-16 units, as the server counts them).
    pub column: u32,
    /// How bad.
    pub severity: DiagnosticSeverity,
    /// What it says (at most 400 characters; control characters as the server sent them).
    pub message: String,
    /// Who said it (`typescript`, `basedpyright`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Its code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// How fresh diagnostics are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticsStatus {
    /// Of the version asked about.
    Fresh,
    /// None came in time from a ready server: still running.
    Pending,
    /// None came in time from a server still starting.
    Starting,
    /// The server failed or was refused (`reason` says why).
    Failed,
    /// No server applies to the file (`lsp/diagnostics` only).
    None,
}

/// Another file a change broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OtherFile {
    /// The file, as shown to this session.
    pub path: String,
    /// Diagnostics the change introduced there.
    pub introduced: u64,
}

/// What a write, an edit or a restore introduced, by its file's language server (on
/// `file/write`, `file/edit` and `journal/restore` results of a session whose `diagnostics` is
/// `"wait"`, when a server applies to the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsReport {
    /// How fresh: `fresh` is the version written; else `introduced` is empty.
    pub status: DiagnosticsStatus,
    /// The server's short name.
    pub server: String,
    /// How long the answer waited for it.
    pub elapsed_ms: u64,
    /// The diagnostics the change introduced in the file (errors; warnings too when the daemon
    /// shows them), at most 100.
    pub introduced: Vec<Diagnostic>,
    /// Those of the file that were there before the change.
    pub remaining: u64,
    /// Other files the change introduced diagnostics in (that this session may read), at most 20.
    pub other_files: Vec<OtherFile>,
    /// Why there is nothing (`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of `lsp/diagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LspDiagnosticsParams {
    /// Absolute, or relative to the session's cwd.
    pub path: String,
}

/// Result of `lsp/diagnostics`: the file's diagnostics under its current version (waited for up
/// to the daemon's deadline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LspDiagnosticsResult {
    /// How fresh (`none`: no server applies to the file).
    pub status: DiagnosticsStatus,
    /// The server's short name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The file's version the diagnostics are of.
    pub version: String,
    /// Its diagnostics (errors; warnings too when the daemon shows them).
    pub diagnostics: Vec<Diagnostic>,
    /// How long the answer waited.
    pub elapsed_ms: u64,
    /// Why there is nothing (`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
