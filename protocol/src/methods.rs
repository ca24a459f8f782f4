//! Method and notification names of the wire contract, in one place so that the daemon, the
//! client library and the tests cannot drift apart.

/// Request: must come first on every connection; opens the session.
pub const INITIALIZE: &str = "initialize";
/// Request (result `null`): the client is about to leave; only `exit` may follow.
pub const SHUTDOWN: &str = "shutdown";
/// Notification: close this connection now.
pub const EXIT: &str = "exit";
/// Request: daemon-wide counters.
pub const DAEMON_STATUS: &str = "daemon/status";
/// Request: the model-facing tools this session may call.
pub const TOOLS_LIST: &str = "tools/list";
/// Request: call one model-facing tool.
pub const TOOLS_CALL: &str = "tools/call";

/// Request: session-aware windowed read (records the observed version).
pub const FILE_READ: &str = "file/read";
/// Request: session-aware write (needs a current observation unless the file is new).
pub const FILE_WRITE: &str = "file/write";
/// Request: session-aware literal edit (needs a current observation).
pub const FILE_EDIT: &str = "file/edit";
/// Request: stat plus the session's observation of the file.
pub const FILE_STAT: &str = "file/stat";
/// Notification (server → client): a file this session observed has changed.
pub const FILE_DID_CHANGE: &str = "file/didChange";

/// Request: resolve a path inside the session's roots (provider layer; records nothing).
pub const FS_RESOLVE: &str = "fs/resolve";
/// Request: stat (provider layer).
pub const FS_STAT: &str = "fs/stat";
/// Request: windowed read (provider layer; records nothing).
pub const FS_READ_TEXT: &str = "fs/readText";
/// Request: write with an explicit expectation (provider layer).
pub const FS_WRITE_TEXT: &str = "fs/writeText";
/// Request: edit with an explicit expected version (provider layer).
pub const FS_EDIT_TEXT: &str = "fs/editText";
/// Subscription: stream a whole file in chunks from one version.
pub const FS_STREAM_TEXT: &str = "fs/streamText";
/// Notification (server → client): one chunk of an `fs/streamText` subscription.
pub const FS_TEXT_CHUNK: &str = "fs/textChunk";
/// Request: cancel an `fs/streamText` subscription.
pub const FS_STREAM_CANCEL: &str = "fs/streamCancel";
/// Client → server notification `{id}`: cancel a request still waiting to run (LSP's).
pub const CANCEL_REQUEST: &str = "$/cancelRequest";

/// Request (result `null`): the client's context was reset (a compaction, a rewind): forget what
/// was delivered to one owner (`owner`) or to every owner (no `owner`), so the `read` tool sends
/// everything again.
pub const SESSION_CONTEXT_RESET: &str = "session/contextReset";

/// Request: this session becomes a gate that must allow writes and edits under its `paths`
/// before they land (result `{gateId}`).
pub const GATE_REGISTER: &str = "gate/register";
/// Request `{gateId}` (result `null`): the gate stops; its pending intents are refused.
pub const GATE_UNREGISTER: &str = "gate/unregister";
/// Request (server → client, to a gate): a write or edit is about to land; answer
/// `{allow, reason?}`. The request's `id` is its `intentId` (a string); `$/cancelRequest` with
/// that id withdraws it.
pub const GATE_WRITE_INTENT: &str = "gate/writeIntent";

/// Every method and notification name above, in this file's order. The schema test
/// (`protocol/tests/schema.rs`) checks that each one has an entry in the checked-in schema's
/// method table, and that this list names every constant of the file.
pub const ALL: &[&str] = &[
    INITIALIZE,
    SHUTDOWN,
    EXIT,
    DAEMON_STATUS,
    TOOLS_LIST,
    TOOLS_CALL,
    FILE_READ,
    FILE_WRITE,
    FILE_EDIT,
    FILE_STAT,
    FILE_DID_CHANGE,
    FS_RESOLVE,
    FS_STAT,
    FS_READ_TEXT,
    FS_WRITE_TEXT,
    FS_EDIT_TEXT,
    FS_STREAM_TEXT,
    FS_TEXT_CHUNK,
    FS_STREAM_CANCEL,
    CANCEL_REQUEST,
    SESSION_CONTEXT_RESET,
    GATE_REGISTER,
    GATE_UNREGISTER,
    GATE_WRITE_INTENT,
    JOURNAL_LIST,
    JOURNAL_DIFF,
    JOURNAL_RESTORE,
    LSP_DIAGNOSTICS,
];

/// Request `{path}`: the file's diagnostics under its current version, from its language server
/// (`{status, server?, version, diagnostics, elapsedMs}`).
pub const LSP_DIAGNOSTICS: &str = "lsp/diagnostics";

/// Request: the journal's entries, newest first (`{entries, cursor?}`).
pub const JOURNAL_LIST: &str = "journal/list";
/// Request `{entry}`: one entry's unified diff (`{diff, truncated}`).
pub const JOURNAL_DIFF: &str = "journal/diff";
/// Request `{entry, force?}`: put back the content before an entry, guarded like a write.
pub const JOURNAL_RESTORE: &str = "journal/restore";
