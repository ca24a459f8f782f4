//! [`ClientError`]: everything that can go wrong talking to the daemon, and its mapping from
//! jsonrpsee's client errors.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use filectx_protocol::{FsErrorCode, GateRefusalData};
use jsonrpsee::core::client::Error as RpcClientError;

/// Why a call to the daemon failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The daemon is not reachable: nothing listens at the socket path, or connecting failed.
    #[error("cannot connect to the daemon at {}: {source}", path.display())]
    Connect {
        /// The socket path that was tried.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The socket, or its folder, may be controlled by another user, so the client refused it
    /// before sending anything: the folder is not ours or others may write in it (then
    /// autostart starts nothing there either), or the process serving the socket does not run
    /// as our effective uid. Retrying does not help; the [`crate::Untrusted`] reason says what
    /// to fix.
    #[error("refusing the socket {}: {reason}", socket.display())]
    UntrustedSocket {
        /// The socket path that was refused.
        socket: PathBuf,
        /// What is wrong with it, and how to fix it.
        #[source]
        reason: crate::Untrusted,
    },
    /// Autostart ([`crate::Client::connect_or_spawn`]) found no daemon and could not start one:
    /// the binary was not found or could not be run, or its log file could not be opened.
    #[error("{}", spawn_message(daemon, socket, log.as_deref(), source))]
    Spawn {
        /// The daemon binary that was to be started (as requested, when it was not found).
        daemon: PathBuf,
        /// The socket it was to serve.
        socket: PathBuf,
        /// The log file its stderr was to go to, when one was chosen.
        log: Option<PathBuf>,
        /// What went wrong (the message names the log file when that was the problem).
        #[source]
        source: std::io::Error,
    },
    /// Autostart ([`crate::Client::connect_or_spawn`]) started the daemon, but nothing answered
    /// at the socket before the deadline. Its log usually says why.
    #[error(
        "started the daemon {} for the socket {}, but nothing answered there within {:.1} s ({}); \
         see its log {}",
        daemon.display(),
        socket.display(),
        waited.as_secs_f64(),
        match exit {
            Some(status) => format!("it exited, {status}"),
            None => format!("it is still running as pid {pid}"),
        },
        log.display()
    )]
    AutostartTimeout {
        /// The daemon binary that was started.
        daemon: PathBuf,
        /// The socket it was to serve.
        socket: PathBuf,
        /// The log file its stderr goes to.
        log: PathBuf,
        /// How long the client waited.
        waited: Duration,
        /// How the started daemon ended, if it has (e.g. exit status 1 when it could not bind);
        /// `None` while it still runs.
        exit: Option<ExitStatus>,
        /// The started daemon's process id.
        pid: u32,
    },
    /// The daemon answered with a JSON-RPC error.
    #[error("the daemon answered error {code}: {message}")]
    Rpc {
        /// The JSON-RPC `error.code`.
        code: i32,
        /// The JSON-RPC `error.message`.
        message: String,
        /// The JSON-RPC `error.data`; for filesystem failures `{"code": "FS_...", ...}`.
        data: Option<serde_json::Value>,
    },
    /// The connection broke (closed by the daemon, a socket error, or framing the client cannot
    /// follow); every later call on this client fails the same way.
    #[error("the connection to the daemon broke: {0}")]
    Transport(String),
    /// The daemon did not answer within the client's request timeout.
    #[error("the daemon did not answer within {} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The daemon's result does not have the expected shape.
    #[error("unexpected result from the daemon: {0}")]
    Decode(#[source] serde_json::Error),
    /// The parameters could not be serialized as a JSON object or array.
    #[error("cannot encode the request parameters: {0}")]
    Encode(#[source] serde_json::Error),
    /// The daemon's messages broke the JSON-RPC contract in a way that is not a broken
    /// connection, or the client was used in a way jsonrpsee refuses (e.g. subscribing twice to
    /// the same notification method). Also an `fs/streamText` stream whose chunks are out of
    /// order or mix versions, or that the daemon ended without its last chunk.
    #[error("JSON-RPC protocol error: {0}")]
    Protocol(String),
    /// An `fs/streamText` stream ended with an error item: its last chunk carried `error`
    /// (`FS_STALE_VERSION` when the file changed while it was streamed). The chunks delivered
    /// before it are complete and all of `version`; to get the rest, stream the file again.
    #[error("the stream ended early: {code}: {message}")]
    StreamFailed {
        /// The stable identifier from the chunk's `error.code`.
        code: FsErrorCode,
        /// The chunk's `error.message`, for people.
        message: String,
        /// The version the delivered chunks came from.
        version: String,
        /// 1-based number of the first line that was not delivered.
        next_line: u64,
    },
    /// An `fs/streamText` stream was read too slowly: more than `buffer` chunks arrived unread
    /// (see [`crate::ConnectOptions::notification_buffer`]), so the client dropped the
    /// subscription and cancelled it at the daemon. The chunks delivered before are complete.
    #[error("the stream was read too slowly: more than {buffer} chunks went unread, so it was dropped")]
    StreamLagged {
        /// The client's per-subscription buffer, in chunks.
        buffer: usize,
    },
    /// The caller called the request off ([`crate::Client::request_cancellable`]) before the
    /// daemon answered; the daemon was asked to cancel it.
    #[error("the request was cancelled before the daemon answered")]
    Cancelled,
    /// The caller asked for a protocol-2 feature (a name of [`filectx_protocol::features`]) the
    /// daemon does not announce in `capabilities.features` — typically an older `filectxd` kept
    /// alive by socket activation. Nothing that relies on it was sent; when `initialize` was
    /// refused for it, the session is still uninitialized and `initialize` may be sent again
    /// without it.
    #[error(
        "the daemon does not support `{feature}` (it is not in its capabilities.features; an older \
         filectxd?): restart the daemon to get a newer one, or do without it"
    )]
    Unsupported {
        /// The feature's name, e.g. `"owners"`.
        feature: String,
    },
}

impl ClientError {
    /// The stable `FS_*` identifier of a filesystem failure: `error.data.code` of an
    /// [`ClientError::Rpc`], when it is one of ours, or the code of a
    /// [`ClientError::StreamFailed`].
    pub fn fs_code(&self) -> Option<FsErrorCode> {
        match self {
            Self::Rpc { data: Some(data), .. } => {
                data.get("code").and_then(|code| serde_json::from_value(code.clone()).ok())
            }
            Self::StreamFailed { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Why a gate refused a write or edit: `error.data.gate` of an `FS_PERMISSION_DENIED`
    /// [`ClientError::Rpc`] (`file/*`, `fs/*`); `None` for any other error.
    pub fn gate_refusal(&self) -> Option<GateRefusalData> {
        match self {
            Self::Rpc { data: Some(data), .. } => {
                data.get("gate").and_then(|gate| serde_json::from_value(gate.clone()).ok())
            }
            _ => None,
        }
    }

    /// The change that made a restore stale: `error.data.diff` of an `FS_STALE_VERSION`
    /// [`ClientError::Rpc`] (`journal/restore`), the unified diff from the entry's after
    /// version to the file now. `None` for any other error, or when the daemon left the diff out
    /// (too large to send).
    pub fn stale_diff(&self) -> Option<&str> {
        match self {
            Self::Rpc { data: Some(data), .. } if self.fs_code() == Some(FsErrorCode::StaleVersion) => {
                data.get("diff").and_then(serde_json::Value::as_str)
            }
            _ => None,
        }
    }

    /// Whether `initialize` was refused because its `resume` token names no ended session
    /// (unknown, already used, or past the daemon's grace period): start a fresh session.
    pub fn is_resume_refused(&self) -> bool {
        matches!(self, Self::Rpc { data: Some(data), .. } if data.get("resume").and_then(|v| v.as_str()) == Some("refused"))
    }

    /// Whether this error means the daemon could not be reached or the connection is gone
    /// ([`ClientError::Connect`] or [`ClientError::Transport`], or a failed autostart:
    /// [`ClientError::Spawn`] or [`ClientError::AutostartTimeout`]). A refused socket
    /// ([`ClientError::UntrustedSocket`]) is not: a daemon may well answer there, just not ours.
    pub fn is_disconnected(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. } | Self::Transport(_) | Self::Spawn { .. } | Self::AutostartTimeout { .. }
        )
    }

    /// Maps a jsonrpsee client error, `timeout` being the client's configured request timeout.
    pub(crate) fn from_rpc(error: RpcClientError, timeout: Duration) -> Self {
        match error {
            RpcClientError::Call(object) => Self::Rpc {
                code: object.code(),
                message: object.message().to_owned(),
                data: object.data().and_then(|raw| serde_json::from_str(raw.get()).ok()),
            },
            RpcClientError::Transport(error) => Self::Transport(error.to_string()),
            // The background task ended: the reason is the error that ended it.
            RpcClientError::RestartNeeded(reason) => match reason.as_ref() {
                RpcClientError::Transport(error) => Self::Transport(error.to_string()),
                other => Self::Transport(other.to_string()),
            },
            RpcClientError::ParseError(error) => Self::Decode(error),
            RpcClientError::RequestTimeout => Self::Timeout(timeout),
            RpcClientError::ServiceDisconnect => Self::Transport("the connection is closed".to_owned()),
            other => Self::Protocol(other.to_string()),
        }
    }
}

/// The message of [`ClientError::Spawn`].
fn spawn_message(daemon: &Path, socket: &Path, log: Option<&Path>, source: &std::io::Error) -> String {
    let log = log.map(|log| format!(" (its log: {})", log.display())).unwrap_or_default();
    format!("cannot start the daemon {} for the socket {}{log}: {source}", daemon.display(), socket.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonrpsee::types::ErrorObject;
    use serde_json::json;
    use std::sync::Arc;

    const TIMEOUT: Duration = Duration::from_secs(7);

    #[test]
    fn call_errors_keep_code_message_and_data() {
        let object = ErrorObject::owned(
            FsErrorCode::NotFound.rpc_code(),
            "no such file: /r/x",
            Some(json!({"code": "FS_NOT_FOUND", "path": "/r/x"})),
        );
        let error = ClientError::from_rpc(RpcClientError::Call(object), TIMEOUT);
        match &error {
            ClientError::Rpc { code, message, data } => {
                assert_eq!(*code, -31002);
                assert_eq!(message, "no such file: /r/x");
                assert_eq!(data.as_ref(), Some(&json!({"code": "FS_NOT_FOUND", "path": "/r/x"})));
            }
            other => panic!("expected Rpc, got {other:?}"),
        }
        assert_eq!(error.fs_code(), Some(FsErrorCode::NotFound));
        assert!(!error.is_disconnected());
        assert_eq!(error.to_string(), "the daemon answered error -31002: no such file: /r/x");
    }

    #[test]
    fn fs_code_is_none_without_our_data() {
        let plain = ErrorObject::owned(-32002, "not initialized", None::<()>);
        let error = ClientError::from_rpc(RpcClientError::Call(plain), TIMEOUT);
        assert!(matches!(error, ClientError::Rpc { code: -32002, data: None, .. }));
        assert_eq!(error.fs_code(), None);
        let foreign = ErrorObject::owned(-31000, "x", Some(json!({"code": "SOMETHING_ELSE"})));
        assert_eq!(ClientError::from_rpc(RpcClientError::Call(foreign), TIMEOUT).fs_code(), None);
        let not_an_object = ErrorObject::owned(-31000, "x", Some(json!([1])));
        assert_eq!(ClientError::from_rpc(RpcClientError::Call(not_an_object), TIMEOUT).fs_code(), None);
    }

    #[test]
    fn a_stale_restore_carries_its_diff() {
        let diff = "--- a.rs (entry 3 after)\n+++ a.rs (now)\n@@ -1 +1 @@\n-x\n+y\n";
        let stale = ErrorObject::owned(
            FsErrorCode::StaleVersion.rpc_code(),
            "a.rs changed since entry 3",
            Some(json!({"code": "FS_STALE_VERSION", "path": "/r/a.rs", "diff": diff})),
        );
        assert_eq!(ClientError::from_rpc(RpcClientError::Call(stale), TIMEOUT).stale_diff(), Some(diff));
        let other = ErrorObject::owned(-31002, "x", Some(json!({"code": "FS_NOT_FOUND", "diff": diff})));
        assert_eq!(ClientError::from_rpc(RpcClientError::Call(other), TIMEOUT).stale_diff(), None);
        let without = ErrorObject::owned(-31009, "x", Some(json!({"code": "FS_STALE_VERSION"})));
        assert_eq!(ClientError::from_rpc(RpcClientError::Call(without), TIMEOUT).stale_diff(), None);
    }

    #[test]
    fn other_errors_map_to_their_kind() {
        let closed = || RpcClientError::Transport(Box::new(crate::TransportError::Closed));
        let error = ClientError::from_rpc(closed(), TIMEOUT);
        assert!(matches!(&error, ClientError::Transport(m) if m == "the daemon closed the connection"));
        assert!(error.is_disconnected());

        let error = ClientError::from_rpc(RpcClientError::RestartNeeded(Arc::new(closed())), TIMEOUT);
        assert!(matches!(&error, ClientError::Transport(m) if m == "the daemon closed the connection"));

        let error = ClientError::from_rpc(RpcClientError::RequestTimeout, TIMEOUT);
        assert!(matches!(error, ClientError::Timeout(t) if t == TIMEOUT));

        let parse = serde_json::from_str::<u8>("\"x\"").err();
        if let Some(parse) = parse {
            let error = ClientError::from_rpc(RpcClientError::ParseError(parse), TIMEOUT);
            assert!(matches!(error, ClientError::Decode(_)));
        }

        let error = ClientError::from_rpc(RpcClientError::InvalidSubscriptionId, TIMEOUT);
        assert!(matches!(error, ClientError::Protocol(_)));
    }
}
