//! Conversions from the daemon's typed errors to JSON-RPC error objects: an `FS_*` identifier
//! in `data.code`, its number in `code`, and a message a person can act on.

use filectx_protocol::error::{INVALID_PARAMS, INVALID_REQUEST, SERVER_NOT_INITIALIZED};
use filectx_protocol::{FsErrorCode, FsErrorData, GateOutcome, GateRefusalData};
use jsonrpsee::types::ErrorObjectOwned;

use crate::context::gate::RefusalKind;
use crate::context::{ContextError, InvalidEdit, NulAt, ProviderError};
use crate::gate::GateError;
use crate::session::SessionError;
use crate::session::owners::OwnerError;

/// A JSON-RPC error carrying an `FS_*` code.
pub fn fs_error(code: FsErrorCode, message: impl Into<String>, path: Option<&str>) -> ErrorObjectOwned {
    let data = FsErrorData { code, path: path.map(str::to_owned), details: serde_json::Map::new() };
    ErrorObjectOwned::owned(code.rpc_code(), message.into(), Some(data))
}

/// The wire identifier of a session failure.
fn session_code(err: &SessionError) -> FsErrorCode {
    match err {
        SessionError::NoRoots | SessionError::NotAbsolute { .. } | SessionError::NotAFolder { .. } => {
            FsErrorCode::InvalidArgument
        }
        SessionError::AlreadyInitialized
        | SessionError::BadRule(_)
        | SessionError::ReadMaxBytes { .. }
        | SessionError::TooManyRoots { .. } => FsErrorCode::InvalidArgument,
        SessionError::NoDescriptors { .. } => FsErrorCode::Busy,
        SessionError::RootNotAllowed { .. } => FsErrorCode::PermissionDenied,
        SessionError::NotFound { .. } => FsErrorCode::NotFound,
        SessionError::CwdOutsideRoots { .. } => FsErrorCode::OutsideRoot,
        SessionError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            FsErrorCode::PermissionDenied
        }
        SessionError::Io { .. } => FsErrorCode::Io,
    }
}

impl From<SessionError> for ErrorObjectOwned {
    fn from(err: SessionError) -> Self {
        fs_error(session_code(&err), err.to_string(), err.path())
    }
}

/// -32602: parameters that do not fit the method.
pub fn invalid_params(message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(INVALID_PARAMS, message.into(), None::<()>)
}

/// -32002: anything but `initialize` first.
pub fn not_initialized() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        SERVER_NOT_INITIALIZED,
        "session not initialized: send `initialize` (with your roots) as the first request",
        None::<()>,
    )
}

/// -32600: a request after `shutdown`.
pub fn shut_down() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        INVALID_REQUEST,
        "this session was shut down; only the `exit` notification may follow",
        None::<()>,
    )
}

/// A JSON-RPC error for a failure that carries an `FS_*` code, a path and details.
fn fs_error_with(
    code: FsErrorCode,
    message: String,
    path: Option<&str>,
    details: serde_json::Map<String, serde_json::Value>,
) -> ErrorObjectOwned {
    let data = FsErrorData { code, path: path.map(str::to_owned), details };
    ErrorObjectOwned::owned(code.rpc_code(), message, Some(data))
}

/// The wire identifier of a file-context failure: the one place typed failures meet `FS_*`.
pub fn code(err: &ContextError) -> FsErrorCode {
    match err {
        ContextError::File(e) => match e {
            ProviderError::InvalidPath { .. } => FsErrorCode::InvalidArgument,
            ProviderError::OutsideRoot { .. } => FsErrorCode::OutsideRoot,
            ProviderError::NotFound { .. } | ProviderError::OffsetPastEnd { .. } => FsErrorCode::NotFound,
            ProviderError::IsDirectory { .. } => FsErrorCode::NotRegularFile,
            ProviderError::NotRegularFile { .. } => FsErrorCode::NotRegularFile,
            ProviderError::Refused { .. }
            | ProviderError::PermissionDenied { .. }
            | ProviderError::Fenced { .. }
            | ProviderError::Private { .. }
            | ProviderError::Linked { .. } => FsErrorCode::PermissionDenied,
            ProviderError::NotText { .. } => FsErrorCode::NotText,
            ProviderError::TooLarge { .. } | ProviderError::LineTooLarge { .. } => FsErrorCode::TooLarge,
            ProviderError::StaleVersion { .. } => FsErrorCode::StaleVersion,
            ProviderError::NoMatch { .. } => FsErrorCode::EditNotFound,
            ProviderError::AmbiguousMatch { .. } => FsErrorCode::AmbiguousEdit,
            ProviderError::AlreadyExists { .. } => FsErrorCode::AlreadyExists,
            ProviderError::NulInContent { .. } => FsErrorCode::InvalidArgument,
            ProviderError::Busy { .. } => FsErrorCode::Busy,
            ProviderError::Io { .. } => FsErrorCode::Io,
        },
        ContextError::NotObserved { .. } | ContextError::Exists { .. } => FsErrorCode::NotObserved,
        ContextError::Stale { .. } | ContextError::Changed { .. } => FsErrorCode::StaleVersion,
        ContextError::JournalOff => FsErrorCode::InvalidArgument,
        ContextError::NoEntry { .. } | ContextError::NothingToUndo { .. } => FsErrorCode::NotFound,
        ContextError::NotRestorable { .. } => FsErrorCode::TooLarge,
        ContextError::ReadOnly { .. }
        | ContextError::Denied { .. }
        | ContextError::Linked { .. }
        | ContextError::Hidden { .. }
        | ContextError::GateRefused { .. } => FsErrorCode::PermissionDenied,
        ContextError::Cancelled { .. } => FsErrorCode::Aborted,
    }
}

/// Machine-readable details of a file-context failure for `error.data` (counts, versions,
/// limits, the rule that denied).
fn details(err: &ContextError) -> serde_json::Map<String, serde_json::Value> {
    let mut map = serde_json::Map::new();
    match err {
        ContextError::File(ProviderError::OffsetPastEnd { offset, total_lines, .. }) => {
            map.insert("offset".into(), (*offset).into());
            map.insert("totalLines".into(), (*total_lines).into());
        }
        ContextError::File(ProviderError::AmbiguousMatch { matches, .. }) => {
            map.insert("matches".into(), (*matches).into());
        }
        ContextError::File(ProviderError::StaleVersion { current, .. }) => {
            map.insert("currentVersion".into(), current.map(|v| v.to_string()).into());
            map.insert("reauthorized".into(), false.into());
        }
        ContextError::Stale { current, change, .. } => {
            map.insert("currentVersion".into(), current.map(|v| v.to_string()).into());
            if let Some(diff) = change.diff() {
                map.insert("diff".into(), diff.into());
            }
            map.insert("reauthorized".into(), change.reauthorized().into());
        }
        ContextError::Changed { current, change, entry, .. } => {
            map.insert("entry".into(), entry.to_string().into());
            map.insert("currentVersion".into(), current.map(|v| v.to_string()).into());
            if let Some(diff) = change.diff() {
                map.insert("diff".into(), diff.into());
            }
        }
        ContextError::File(ProviderError::NulInContent { at, .. }) => nul_details(&mut map, at),
        ContextError::File(ProviderError::TooLarge { size, limit, .. }) => {
            map.insert("size".into(), (*size).into());
            map.insert("limit".into(), (*limit).into());
        }
        ContextError::File(ProviderError::LineTooLarge { line, size, limit, .. }) => {
            map.insert("line".into(), (*line).into());
            map.insert("size".into(), (*size).into());
            map.insert("limit".into(), (*limit).into());
        }
        ContextError::File(ProviderError::NoMatch { hint: Some(hint), .. }) => {
            map.insert("hint".into(), hint.clone().into());
        }
        ContextError::Denied { denial, .. } => {
            map.insert("rule".into(), denial.rule.clone().into());
            map.insert("access".into(), denial.access.as_str().into());
        }
        ContextError::Linked { links, access, .. } => {
            map.insert("links".into(), (*links).into());
            map.insert("access".into(), access.as_str().into());
        }
        ContextError::Hidden { entry, .. } => {
            map.insert("entry".into(), entry.to_string().into());
            map.insert("access".into(), "read".into());
        }
        ContextError::GateRefused { refusal, .. } => {
            let outcome = match refusal.kind {
                RefusalKind::Denied => GateOutcome::Denied,
                RefusalKind::TimedOut => GateOutcome::Timeout,
                RefusalKind::Disconnected => GateOutcome::Disconnected,
            };
            let gate = GateRefusalData {
                gate_id: refusal.gate_id.clone(),
                name: refusal.name.clone(),
                reason: refusal.reason.clone(),
                outcome,
            };
            if let Ok(gate) = serde_json::to_value(gate) {
                map.insert("gate".into(), gate);
            }
        }
        _ => {}
    }
    map
}

/// Where a NUL byte is, for `error.data`.
fn nul_details(map: &mut serde_json::Map<String, serde_json::Value>, at: &NulAt) {
    map.insert("line".into(), at.line.into());
    map.insert("column".into(), at.column.into());
    map.insert("offset".into(), at.offset.into());
}

impl From<ContextError> for ErrorObjectOwned {
    fn from(err: ContextError) -> Self {
        fs_error_with(code(&err), err.to_string(), Some(err.path()), details(&err))
    }
}

impl From<OwnerError> for ErrorObjectOwned {
    fn from(err: OwnerError) -> Self {
        fs_error(FsErrorCode::InvalidArgument, format!("{err}."), None)
    }
}

/// -32602 for an `initialize` whose `resume` token names no ended session (unknown, already
/// used, or past the grace period); `data.resume` is `"refused"` so clients can tell it apart
/// and start a fresh session.
pub fn cannot_resume() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        INVALID_PARAMS,
        "this session cannot be resumed: the resume token is unknown, was already used, or its \
         session ended too long ago (resume_grace) or has not ended. Start a fresh session: initialize \
         without `resume`, and read files again before editing them",
        Some(serde_json::json!({"resume": "refused"})),
    )
}

impl From<InvalidEdit> for ErrorObjectOwned {
    fn from(err: InvalidEdit) -> Self {
        let mut details = serde_json::Map::new();
        if let InvalidEdit::Nul(at) = &err {
            nul_details(&mut details, at);
        }
        fs_error_with(FsErrorCode::InvalidArgument, err.to_string(), None, details)
    }
}

impl From<GateError> for ErrorObjectOwned {
    fn from(err: GateError) -> Self {
        let code = match err {
            GateError::Disabled | GateError::ReadOnly | GateError::Token(_) | GateError::NoToken => {
                FsErrorCode::PermissionDenied
            }
            GateError::TooMany | GateError::TooManyForSession => FsErrorCode::Busy,
            GateError::Missing(_) => FsErrorCode::NotFound,
            GateError::Paths
            | GateError::NoOperations
            | GateError::Name
            | GateError::Timeout
            | GateError::Unknown(_) => FsErrorCode::InvalidArgument,
        };
        let path = match &err {
            GateError::Missing(path) => Some(path.as_str()),
            _ => None,
        };
        fs_error(code, format!("{err}"), path)
    }
}
