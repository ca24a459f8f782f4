//! Conversions from the daemon's typed errors to JSON-RPC error objects: an `FS_*` identifier
//! in `data.code`, its number in `code`, and a message a person can act on.

use filectx_protocol::error::{INVALID_PARAMS, INVALID_REQUEST, SERVER_NOT_INITIALIZED};
use filectx_protocol::{FsErrorCode, FsErrorData};
use jsonrpsee::types::ErrorObjectOwned;

use crate::context::ContextError;
use crate::session::SessionError;

/// A JSON-RPC error carrying an `FS_*` code.
pub fn fs_error(code: FsErrorCode, message: impl Into<String>, path: Option<&str>) -> ErrorObjectOwned {
    let data = FsErrorData { code, path: path.map(str::to_owned), details: serde_json::Map::new() };
    ErrorObjectOwned::owned(code.rpc_code(), message.into(), Some(data))
}

impl From<SessionError> for ErrorObjectOwned {
    fn from(err: SessionError) -> Self {
        fs_error(err.code(), err.to_string(), err.path())
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

impl From<ContextError> for ErrorObjectOwned {
    fn from(err: ContextError) -> Self {
        fs_error_with(err.code(), err.to_string(), err.path(), err.details())
    }
}
