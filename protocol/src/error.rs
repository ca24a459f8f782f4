//! Error codes of the wire contract: the `FS_*` identifiers with their numeric JSON-RPC codes,
//! the JSON-RPC codes the daemon itself answers with, and the shape of an error's `data`.
//!
//! Numeric table (application codes live outside the reserved -32768..-32000 range; jsonrpsee
//! itself uses -32000..-32011):
//!
//! | `data.code`            | JSON-RPC `code` |
//! |------------------------|-----------------|
//! | `FS_INVALID_ARGUMENT`  | -31001 |
//! | `FS_NOT_FOUND`         | -31002 |
//! | `FS_IS_DIRECTORY`      | -31003 |
//! | `FS_NOT_TEXT`          | -31004 |
//! | `FS_TOO_LARGE`         | -31005 |
//! | `FS_PERMISSION_DENIED` | -31006 |
//! | `FS_OUTSIDE_ROOT`      | -31007 |
//! | `FS_NOT_OBSERVED`      | -31008 |
//! | `FS_STALE_VERSION`     | -31009 |
//! | `FS_NO_MATCH`          | -31010 |
//! | `FS_AMBIGUOUS_MATCH`   | -31011 |
//! | `FS_ALREADY_EXISTS`    | -31012 |
//! | `FS_BUSY`              | -31013 |
//! | `FS_IO`                | -31014 |
//! | `FS_NOT_REGULAR_FILE`  | -31015 |

use serde::{Deserialize, Serialize};

/// JSON-RPC: the body is not valid JSON (or not UTF-8).
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC: valid JSON that is not a request (wrong `jsonrpc`, no `method`, empty batch, …).
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC: parameters of the wrong shape or type; also an unknown tool name.
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC: the daemon failed internally while serving this one request.
pub const INTERNAL_ERROR: i32 = -32603;
/// LSP: a request other than `initialize` arrived before `initialize`.
pub const SERVER_NOT_INITIALIZED: i32 = -32002;
/// LSP: the request was cancelled (`$/cancelRequest`) before it produced a result.
pub const REQUEST_CANCELLED: i32 = -32800;
/// jsonrpsee: a frame (request) larger than the daemon's maximum frame size.
pub const REQUEST_TOO_BIG: i32 = -32007;
/// jsonrpsee: a response larger than the maximum frame size.
pub const RESPONSE_TOO_BIG: i32 = -32008;
/// jsonrpsee: the daemon refuses this connection or request for load (connection cap reached).
pub const SERVER_BUSY: i32 = -32009;
/// jsonrpsee: a batch with more entries than the daemon accepts.
pub const BATCH_TOO_BIG: i32 = -32010;

/// The stable identifier of a filesystem-level failure (`error.data.code` on the wire,
/// `error.code` in a tool result). Clients match on this, never on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub enum FsErrorCode {
    /// An argument is missing, of the wrong type, or out of range.
    #[serde(rename = "FS_INVALID_ARGUMENT")]
    InvalidArgument,
    /// The path does not exist.
    #[serde(rename = "FS_NOT_FOUND")]
    NotFound,
    /// The file is binary or not valid UTF-8.
    #[serde(rename = "FS_NOT_TEXT")]
    NotText,
    /// The file or the content is over a configured size cap.
    #[serde(rename = "FS_TOO_LARGE")]
    TooLarge,
    /// The OS refused access, or the session is read-only.
    #[serde(rename = "FS_PERMISSION_DENIED")]
    PermissionDenied,
    /// The path resolves outside every root of the session.
    #[serde(rename = "FS_OUTSIDE_ROOT")]
    OutsideRoot,
    /// The session has not read this file, so it may not overwrite or edit it.
    #[serde(rename = "FS_NOT_OBSERVED")]
    NotObserved,
    /// The file changed since the session (or the caller's expectation) last saw it.
    #[serde(rename = "FS_STALE_VERSION")]
    StaleVersion,
    /// The text to replace does not occur in the file.
    #[serde(rename = "FS_EDIT_NOT_FOUND")]
    EditNotFound,
    /// The text to replace occurs more than once and `replace_all` was not set.
    #[serde(rename = "FS_AMBIGUOUS_EDIT")]
    AmbiguousEdit,
    /// The file exists where the caller expected none.
    #[serde(rename = "FS_ALREADY_EXISTS")]
    AlreadyExists,
    /// The file is locked by someone else for longer than the daemon waits.
    #[serde(rename = "FS_BUSY")]
    Busy,
    /// Any other input/output failure.
    #[serde(rename = "FS_IO")]
    Io,
    /// The path is a folder, FIFO, socket or device: only regular files are read or written.
    #[serde(rename = "FS_NOT_REGULAR_FILE")]
    NotRegularFile,
    /// The request was cancelled (`$/cancelRequest`) before it finished.
    #[serde(rename = "FS_ABORTED")]
    Aborted,
}

impl FsErrorCode {
    /// Every code, in table order.
    pub const ALL: [FsErrorCode; 15] = [
        Self::InvalidArgument,
        Self::NotFound,
        Self::NotText,
        Self::TooLarge,
        Self::PermissionDenied,
        Self::OutsideRoot,
        Self::NotObserved,
        Self::StaleVersion,
        Self::EditNotFound,
        Self::AmbiguousEdit,
        Self::AlreadyExists,
        Self::Busy,
        Self::Io,
        Self::NotRegularFile,
        Self::Aborted,
    ];

    /// The wire identifier, e.g. `"FS_NOT_FOUND"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "FS_INVALID_ARGUMENT",
            Self::NotFound => "FS_NOT_FOUND",
            Self::NotText => "FS_NOT_TEXT",
            Self::TooLarge => "FS_TOO_LARGE",
            Self::PermissionDenied => "FS_PERMISSION_DENIED",
            Self::OutsideRoot => "FS_OUTSIDE_ROOT",
            Self::NotObserved => "FS_NOT_OBSERVED",
            Self::StaleVersion => "FS_STALE_VERSION",
            Self::EditNotFound => "FS_EDIT_NOT_FOUND",
            Self::AmbiguousEdit => "FS_AMBIGUOUS_EDIT",
            Self::AlreadyExists => "FS_ALREADY_EXISTS",
            Self::Busy => "FS_BUSY",
            Self::Io => "FS_IO",
            Self::NotRegularFile => "FS_NOT_REGULAR_FILE",
            Self::Aborted => "FS_ABORTED",
        }
    }

    /// The numeric JSON-RPC `error.code` this identifier travels with.
    pub const fn rpc_code(self) -> i32 {
        match self {
            Self::InvalidArgument => -31001,
            Self::NotFound => -31002,
            Self::NotText => -31004,
            Self::TooLarge => -31005,
            Self::PermissionDenied => -31006,
            Self::OutsideRoot => -31007,
            Self::NotObserved => -31008,
            Self::StaleVersion => -31009,
            Self::EditNotFound => -31010,
            Self::AmbiguousEdit => -31011,
            Self::AlreadyExists => -31012,
            Self::Busy => -31013,
            Self::Io => -31014,
            Self::NotRegularFile => -31015,
            Self::Aborted => -31016,
        }
    }

    /// The identifier for a numeric JSON-RPC code, if it is one of ours.
    pub fn from_rpc_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.rpc_code() == code)
    }
}

impl std::fmt::Display for FsErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `error.data` of every `FS_*` JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FsErrorData {
    /// The stable identifier clients match on.
    pub code: FsErrorCode,
    /// The path the failure concerns, as the client gave it or as resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Further machine-readable details, specific to the code (counts, versions, limits).
    #[serde(flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_numbers_are_unique_and_outside_the_reserved_range() {
        let mut seen = std::collections::HashSet::new();
        for code in FsErrorCode::ALL {
            assert!(!(-32768..=-32000).contains(&code.rpc_code()), "{code}");
            assert!(seen.insert(code.rpc_code()), "{code}");
            assert_eq!(FsErrorCode::from_rpc_code(code.rpc_code()), Some(code));
            let json = serde_json::to_value(code).ok();
            assert_eq!(json, Some(serde_json::Value::String(code.as_str().to_owned())));
        }
    }

    #[test]
    fn data_round_trips_with_details() {
        let raw = r#"{"code":"FS_AMBIGUOUS_EDIT","path":"/a","matches":3}"#;
        let data: FsErrorData = serde_json::from_str(raw).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(data.code, FsErrorCode::AmbiguousEdit);
        assert_eq!(data.details.get("matches"), Some(&serde_json::json!(3)));
        assert_eq!(serde_json::to_string(&data).ok().as_deref(), Some(raw));
    }
}
