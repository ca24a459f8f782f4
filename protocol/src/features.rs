//! Names of the protocol-2 features a daemon announces in `capabilities.features` of
//! `initialize`. A client checks for a name before relying on the feature, so a daemon of an
//! older build (kept alive by socket activation) is never silently misused.

/// `$/cancelRequest` is honoured: the cancelled request answers -32800 (`tools/call`: an
/// `FS_ABORTED` result).
pub const CANCEL_REQUEST: &str = "cancelRequest";

/// The `read` tool's text is the design's projection: capped at the session's `readMaxBytes`
/// (`initialize`; `limits.readMaxBytes` says what the session got), three footers, cut lines
/// marked `... (line truncated to 2000 chars)`, an offset past the end `FS_NOT_FOUND`.
pub const READ_MAX_BYTES: &str = "readMaxBytes";

/// `file/read`, `fs/readText` and `fs/streamText` return lines whole, bounded in bytes
/// (`limits.maxWindowBytes`: a window stops before it, a single longer line is `FS_TOO_LARGE`);
/// `file/read` cuts only when given `maxLineChars`.
pub const WHOLE_LINES: &str = "wholeLines";
/// `tools/call` and `file/*` take an optional `owner`: observations (and the dedup record) are
/// kept per (session, owner), and `file/didChange` names the owner whose record went stale.
pub const OWNERS: &str = "owners";

/// `initialize` takes `dedupReads: true`: the `read` tool then answers one short line when this
/// owner already received exactly the same lines of the same version.
pub const DEDUP_READS: &str = "dedupReads";

/// `session/contextReset` (optional `owner`) forgets what was delivered, so everything is sent
/// again (after a compaction or a rewind).
pub const CONTEXT_RESET: &str = "contextReset";

/// `initialize` takes `resumable: true` (the result then carries a `resumeToken`) and
/// `resume: token` (take over the observations of an ended session within a grace period).
pub const RESUME: &str = "resume";
/// Stale refusals of tool and `file/*` writes and edits carry `data.diff` (what changed since
/// the session's last look, numbered as the current version) and `data.reauthorized`.
pub const STALE_DIFFS: &str = "staleDiffs";

/// Overwrites through the tools and `file/write` keep the file's BOM and CRLF endings;
/// `fs/writeText` does when given `keepConventions: true`.
pub const KEEP_CONVENTIONS: &str = "keepConventions";

/// The edit tool's text shows the edited lines, numbered as `read` numbers them.
pub const EDIT_REGIONS: &str = "editRegions";

/// The `glob` and `grep` tools exist (a session gets them when `initialize.tools` names them).
pub const SEARCH: &str = "search";

/// Write-intent gates: `gate/register`, `gate/unregister`, and the server → client request
/// `gate/writeIntent` every write or edit under a gate's paths waits for. Absent when the
/// daemon runs with gates turned off (`--no-gates`).
pub const GATE: &str = "gate";

/// `initialize` takes `staleEdits: "refuse" | "merge"`: with `merge`, an `edit` tool call whose
/// observation is stale is applied over the outside change when that change does not touch or
/// adjoin what it replaces (docs/protocol.md, "Merged stale edits").
pub const STALE_EDITS: &str = "staleEdits";

/// The journal: every change the daemon makes (and the outside changes its watcher sees in
/// observed files) is recorded; `journal/list`, `journal/diff`, `journal/restore`, and the
/// opt-in `undo` tool. Absent when the daemon runs with `journal = false`.
pub const JOURNAL: &str = "journal";

/// `initialize` takes `jsonBudget: true`: `readMaxBytes` then counts the text of the read, glob
/// and grep answers as JSON escapes it, the unit of a client that keeps a result's JSON.
pub const JSON_BUDGET: &str = "jsonBudget";

/// Language servers: writes and edits wait for their diagnostics and say what they introduced
/// (`initialize` `diagnostics`), `lsp/diagnostics`, and the `diagnostics` tool.
pub const DIAGNOSTICS: &str = "diagnostics";
