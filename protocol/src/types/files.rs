//! Wire types of the direct file methods: `file/*` (session-checked reads, writes, edits,
//! stats), `fs/*` (the provider's view) and the `fs/streamText` chunks, and `file/didChange`.

use serde::{Deserialize, Serialize};

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
    /// What the write introduced, by the file's language server (`file/write` of a session
    /// whose `diagnostics` is `"wait"`, when a server applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::DiagnosticsReport>,
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
    /// What the edit introduced, by the file's language server (`file/edit` of a session whose
    /// `diagnostics` is `"wait"`, when a server applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::DiagnosticsReport>,
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
