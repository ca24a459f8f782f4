//! `filectx_client`: a thin async client for the filectx daemon (`filectxd`).
//!
//! It speaks JSON-RPC 2.0 through jsonrpsee's async client over a Unix socket, framed with the
//! LSP `Content-Length` codec of [`filectx_protocol`]. Typed helpers cover the session and daemon
//! methods and the three layers of file access:
//!
//! - the **tools** layer ([`Client::call_tool`]): the model-facing `read`, `write` and `edit`
//!   tools, whose failures are results with `isError: true`;
//! - the **file-context** layer ([`Client::file_read`], [`Client::file_write`],
//!   [`Client::file_edit`], [`Client::file_stat`]): the same policy with structured results; it
//!   records which version of each file the session observed, and refuses to overwrite or edit a
//!   file the session has not read, or that changed since;
//! - the **provider** layer ([`Client::fs_resolve`], [`Client::fs_stat`],
//!   [`Client::fs_read_text`], [`Client::fs_write_text`], [`Client::fs_edit_text`],
//!   [`Client::stream_text`]): the escape hatch that records nothing and takes explicit
//!   expectations instead; [`Client::stream_text`] delivers a file of any size as a
//!   [`TextStream`] of chunks from one version.
//!
//! **Protocol 2.** [`Client::initialize`] keeps what the daemon announces in
//! `capabilities.features` ([`Client::features`]); every method that relies on a feature checks
//! it first and fails with [`ClientError::Unsupported`] instead of misusing an older daemon:
//! `owner` on [`Client::call_tool_as`], [`Client::file_read`], [`Client::file_write`],
//! [`Client::file_edit`] and [`Client::file_stat_as`] (feature `owners`: sub-agents sharing a
//! session keep their own observations), [`Client::context_reset`] (`contextReset`), and the
//! `initialize` options `resumable` / `resume` (`resume`: take an ended session's observations
//! over after a reconnect, see [`Client::resume_token`]), `dedupReads` (`dedupReads`) and
//! `staleEdits` (`staleEdits`).
//!
//! **The journal** (feature `journal`): [`Client::journal_list`] (and
//! [`Client::journal_list_all`]) lists the changes the daemon recorded, whoever made them, newest
//! first; [`Client::journal_diff`] shows one as a unified diff; [`Client::journal_restore`] puts
//! back the content before it, only if the file has not changed since (else `FS_STALE_VERSION`,
//! with the change in [`ClientError::stale_diff`]), guarded like any write and journaled itself.
//!
//! [`Client::request_cancellable`] calls a request off: the daemon (feature `cancelRequest`) is
//! sent `$/cancelRequest` naming it, so a write still waiting for its turn never lands.
//!
//! A failure of a file-context or provider method is a [`ClientError::Rpc`] whose
//! [`ClientError::fs_code`] is the stable `FS_*` identifier; so is that of a
//! [`ClientError::StreamFailed`], a stream that failed midway. [`Client::request`] reaches every other
//! method with the wire types of `filectx_protocol` (or any `Serialize` value),
//! [`Client::subscribe`] starts any jsonrpsee subscription, and [`Client::notifications`]
//! receives server→client notifications such as `file/didChange`.
//!
//! [`Client::connect_or_spawn`] (and [`Client::connect_session_or_spawn`]) start the daemon,
//! detached, when none answers at the socket, and wait for it to answer; clients racing to do
//! so all end up connected to the one daemon that wins the socket's lock. See [`SpawnOptions`].
//!
//! [`gate::Gate`] registers a write gate: the daemon asks it before any session's write or edit
//! lands under the gated folders (`filectx gate` is a person doing so at a terminal).
//!
//! [`mcp::serve`] serves one session's tools to an MCP client (Claude Code, Codex, Cursor, …)
//! over any line-framed reader and writer: the server behind `filectx mcp`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), filectx_client::ClientError> {
//! use filectx_client::{Client, socket_path};
//! use filectx_protocol::InitializeParams;
//!
//! let params = InitializeParams::new(vec!["/home/me/project".to_owned()]);
//! let (client, session) = Client::connect_session(socket_path(None), params).await?;
//! println!("session {}", session.session_id);
//! let status = client.status().await?;
//! println!("{} requests served", status.requests);
//! client.close().await
//! # }
//! ```

mod autostart;
mod cancel;
mod error;
pub mod gate;
mod journal;
pub mod mcp;
mod params;
mod stream;
pub mod terminal;
mod transport;
mod trust;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use filectx_protocol::{
    CallToolParams, CallToolResult, ContextResetParams, DEFAULT_MAX_FRAME_BYTES, DaemonStatus,
    DaemonStatusParams, EditParams, EditResult, FileStatParams, FileStatResult, FsEditParams, FsInfo,
    FsWriteParams, InitializeParams, InitializeResult, PathParams, ReadParams, ReadResult, ResolveResult,
    StreamTextParams, ToolsListResult, WriteParams, WriteResult,
};
use filectx_protocol::{features, methods, socket};
use futures::Stream;
use jsonrpsee::core::client::{ClientBuilder, ClientT, SubscriptionClientT};
use jsonrpsee::core::middleware::RpcServiceBuilder;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use autostart::{DAEMON_ENV, DEFAULT_AUTOSTART_TIMEOUT, SpawnOptions, daemon_binary, default_log_path};
pub use error::ClientError;
pub use journal::JOURNAL_MAX_PAGE;
/// The stream of a jsonrpsee subscription, as returned by [`Client::subscribe`].
pub use jsonrpsee::core::client::Subscription;
pub use params::Params;
pub use stream::TextStream;
pub use transport::TransportError;
pub use trust::Untrusted;

/// Default time a request may take before it fails with [`ClientError::Timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Default number of notifications buffered per [`Notifications`] stream (or subscription, such
/// as a [`TextStream`]'s chunks) that the caller has not read yet. When it overflows, jsonrpsee
/// ends that stream (it lagged).
pub const DEFAULT_NOTIFICATION_BUFFER: usize = 4096;

/// How long [`Client::close`] waits for the daemon to hang up after `exit`.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The socket to connect to: `explicit` when given, else the `FILECTX_SOCKET` environment
/// variable when set and non-empty, else the default path
/// (`$XDG_RUNTIME_DIR/filectx.sock`, or `/tmp/filectx-$UID/filectx.sock`).
pub fn socket_path(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(path) = explicit {
        return path;
    }
    if let Some(path) = std::env::var_os(socket::SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    socket::default_socket_path(runtime_dir.as_deref(), rustix::process::geteuid().as_raw())
}

/// Knobs of a connection; [`ConnectOptions::default`] suits most callers.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    request_timeout: Duration,
    max_frame_bytes: usize,
    notification_buffer: usize,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            notification_buffer: DEFAULT_NOTIFICATION_BUFFER,
        }
    }
}

impl ConnectOptions {
    /// How long one request may take (default [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Largest frame body accepted from the daemon (default 64 MiB, the daemon's default);
    /// a larger one breaks the connection with [`TransportError::Oversized`].
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// Notifications buffered per stream before it is ended as lagged (default
    /// [`DEFAULT_NOTIFICATION_BUFFER`]; at least 1). For a [`TextStream`] this counts chunks,
    /// each up to its `chunkLines` lines.
    pub fn notification_buffer(mut self, count: usize) -> Self {
        self.notification_buffer = count.max(1);
        self
    }
}

/// One connection, and so one session, to the daemon.
///
/// Calls take `&self` and may run concurrently. Dropping the client closes the connection,
/// which ends the session at the daemon (and its unfinished [`TextStream`]s, with
/// [`ClientError::Transport`]); [`Client::close`] ends it politely first.
#[derive(Debug)]
pub struct Client {
    /// Shared only weakly, with the [`TextStream`]s, which never keep the connection open.
    inner: Arc<jsonrpsee::core::client::Client<cancel::Service>>,
    socket: PathBuf,
    request_timeout: Duration,
    notification_buffer: usize,
    /// What the daemon said in the `initialize` answer, once [`Client::initialize`] succeeded.
    session: OnceLock<SessionInfo>,
}

/// What a client keeps of the `initialize` answer.
#[derive(Debug, Clone)]
struct SessionInfo {
    features: Vec<String>,
    resume_token: Option<String>,
}

/// The `initialize` options that need a feature: (field on the wire, feature).
const INITIALIZE_FEATURES: [(&str, &str); 7] = [
    ("resumable", features::RESUME),
    ("resume", features::RESUME),
    ("dedupReads", features::DEDUP_READS),
    ("readMaxBytes", features::READ_MAX_BYTES),
    ("staleEdits", features::STALE_EDITS),
    ("jsonBudget", features::JSON_BUDGET),
    ("diagnostics", features::DIAGNOSTICS),
];

/// The feature `params` relies on, if the daemon refused `initialize` for not knowing one of its
/// fields (an older daemon refuses unknown fields).
fn refused_feature(params: &InitializeParams, error: &ClientError) -> Option<&'static str> {
    let ClientError::Rpc { code: filectx_protocol::error::INVALID_PARAMS, message, .. } = error else {
        return None;
    };
    let asked = |field: &str| match field {
        "resumable" => params.resumable.is_some(),
        "resume" => params.resume.is_some(),
        "readMaxBytes" => params.read_max_bytes.is_some(),
        "staleEdits" => params.stale_edits.is_some(),
        "jsonBudget" => params.json_budget.is_some(),
        "diagnostics" => params.diagnostics.is_some(),
        _ => params.dedup_reads.is_some(),
    };
    INITIALIZE_FEATURES
        .into_iter()
        .find(|(field, _)| asked(field) && message.contains(&format!("unknown field `{field}`")))
        .map(|(_, feature)| feature)
}

impl Client {
    /// Connects to the daemon at `socket_path` with default options. Must run inside a tokio
    /// runtime (the connection's background tasks are spawned on it).
    ///
    /// Only a daemon of this user is trusted: the socket's folder must be owned by the
    /// effective uid and closed to writers other than it, and the process serving the socket
    /// must run as that uid (`SO_PEERCRED`); otherwise nothing is sent (see [`Untrusted`]).
    ///
    /// # Errors
    /// [`ClientError::Connect`] when nothing accepts connections there;
    /// [`ClientError::UntrustedSocket`] when the socket or its folder may be another user's.
    pub async fn connect(socket_path: impl AsRef<Path>) -> Result<Self, ClientError> {
        Self::connect_with(socket_path, ConnectOptions::default()).await
    }

    /// Connects to the daemon at `socket_path` with `options`, trusting only a daemon of this
    /// user, as [`Client::connect`] does.
    ///
    /// # Errors
    /// [`ClientError::Connect`] when nothing accepts connections there;
    /// [`ClientError::UntrustedSocket`] when the socket or its folder may be another user's.
    pub async fn connect_with(
        socket_path: impl AsRef<Path>,
        options: ConnectOptions,
    ) -> Result<Self, ClientError> {
        let path = socket_path.as_ref();
        let (sender, receiver) = transport::connect(path, options.max_frame_bytes).await?;
        let notification_buffer = options.notification_buffer.max(1);
        let inner = ClientBuilder::default()
            .set_rpc_middleware(RpcServiceBuilder::new().layer_fn(cancel::IdTap::new))
            .request_timeout(options.request_timeout)
            .max_buffer_capacity_per_subscription(notification_buffer)
            .build_with_tokio(sender, receiver);
        Ok(Self {
            inner: Arc::new(inner),
            socket: path.to_owned(),
            request_timeout: options.request_timeout,
            notification_buffer,
            session: OnceLock::new(),
        })
    }

    /// Connects and opens the session with `initialize`.
    ///
    /// # Errors
    /// [`ClientError::Connect`] when the daemon is not reachable;
    /// [`ClientError::UntrustedSocket`] as for [`Client::connect`]; any error of
    /// [`Client::initialize`].
    pub async fn connect_session(
        socket_path: impl AsRef<Path>,
        params: InitializeParams,
    ) -> Result<(Self, InitializeResult), ClientError> {
        let client = Self::connect(socket_path).await?;
        let result = client.initialize(params).await?;
        Ok((client, result))
    }

    /// Connects to the daemon at `socket_path`, starting one first when nothing answers there
    /// (no socket file, or a socket nobody listens on), as watchman and sccache do.
    ///
    /// The daemon started is `filectxd --socket PATH` ([`SpawnOptions::daemon`] says which
    /// binary), detached: its own process group, stdin and stdout on `/dev/null`, stderr
    /// appended to a log file ([`default_log_path`] unless [`SpawnOptions::log`]). Then this
    /// retries connecting, with a short backoff, until a daemon answers or
    /// [`SpawnOptions::timeout`] (default 5 s) has passed. A daemon already serving is simply
    /// connected to: nothing is started. Every attempt, the readiness probe included, trusts
    /// only a daemon of this user, as [`Client::connect`] does; in a folder that may be another
    /// user's, nothing is started at all.
    ///
    /// **Race-safe**: clients doing this at once may each start a daemon, but only one of them
    /// gets the socket's lock file; the others exit at once, and every client connects to the
    /// one that won. This waits for no daemon process: a started daemon is reaped in the
    /// background.
    ///
    /// # Errors
    /// [`ClientError::Spawn`] when the daemon binary is not found or cannot be run, or its log
    /// file cannot be opened; [`ClientError::AutostartTimeout`] when nothing answered in time
    /// (the started daemon's log says why); [`ClientError::Connect`] when connecting fails for
    /// another reason than nothing answering (e.g. permission denied);
    /// [`ClientError::UntrustedSocket`] when the socket or its folder may be another user's.
    pub async fn connect_or_spawn(
        socket_path: impl AsRef<Path>,
        options: SpawnOptions,
    ) -> Result<Self, ClientError> {
        autostart::connect_or_spawn(socket_path.as_ref(), options).await
    }

    /// [`Client::connect_or_spawn`], then opens the session with `initialize`.
    ///
    /// # Errors
    /// Any error of [`Client::connect_or_spawn`] or of [`Client::initialize`].
    pub async fn connect_session_or_spawn(
        socket_path: impl AsRef<Path>,
        params: InitializeParams,
        options: SpawnOptions,
    ) -> Result<(Self, InitializeResult), ClientError> {
        let client = Self::connect_or_spawn(socket_path, options).await?;
        let result = client.initialize(params).await?;
        Ok((client, result))
    }

    /// The socket path this client connected to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the connection is still up.
    pub fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    /// `initialize`: opens the session. Must be the first request on a connection. Keeps the
    /// daemon's `capabilities.features` ([`Client::features`]) and `resumeToken`
    /// ([`Client::resume_token`]).
    ///
    /// Protocol-2 options: `resumable: Some(true)` asks for a resume token; `resume:
    /// Some(token)` takes over the observations of the ended session that token belongs to
    /// (within the daemon's grace period; a file changed meanwhile is still refused as stale);
    /// `dedup_reads: Some(true)` makes the `read` tool answer a repeated read of unchanged lines
    /// with one short line; `read_max_bytes: Some(n)` sets the session's `read` tool budget
    /// (the result's `limits.read_max_bytes` says what it got). Protocol 3: `stale_edits:
    /// Some(StaleEdits::Merge)` applies an `edit` tool call whose observation is stale over an
    /// outside change that keeps away from what it replaces (docs/protocol.md, "Merged stale
    /// edits").
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when the daemon refused one of those options because it does
    /// not know it (an older daemon; the session stays uninitialized, so `initialize` may be
    /// sent again without it); [`ClientError::Rpc`] when the daemon refuses the parameters
    /// (e.g. a root that is not an absolute folder; a `resume` token it cannot resume, see
    /// [`ClientError::is_resume_refused`]), or any transport error.
    pub async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, ClientError> {
        let result: InitializeResult = match self.request(methods::INITIALIZE, &params).await {
            Ok(result) => result,
            Err(error) => {
                return Err(match refused_feature(&params, &error) {
                    Some(feature) => ClientError::Unsupported { feature: feature.to_owned() },
                    None => error,
                });
            }
        };
        let _ = self.session.set(SessionInfo {
            features: result.capabilities.features.clone(),
            resume_token: result.resume_token.clone(),
        });
        Ok(result)
    }

    /// The protocol-2 features the daemon announced (`capabilities.features` of the
    /// `initialize` answer); `None` before [`Client::initialize`] succeeded.
    pub fn features(&self) -> Option<&[String]> {
        self.session.get().map(|info| info.features.as_slice())
    }

    /// Whether the daemon announced `feature` (a name of [`filectx_protocol::features`]).
    pub fn has_feature(&self, feature: &str) -> bool {
        self.features().is_some_and(|all| all.iter().any(|f| f == feature))
    }

    /// Fails with [`ClientError::Unsupported`] unless the daemon announced `feature`.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`].
    pub fn require(&self, feature: &str) -> Result<(), ClientError> {
        match self.has_feature(feature) {
            true => Ok(()),
            false => Err(ClientError::Unsupported { feature: feature.to_owned() }),
        }
    }

    /// The token with which a later `initialize` (`resume`) may take this session's
    /// observations over once it has ended; present when it was initialized with `resumable`.
    /// A secret: anyone of this user holding it may resume the session.
    pub fn resume_token(&self) -> Option<&str> {
        self.session.get().and_then(|info| info.resume_token.as_deref())
    }

    fn require_owner(&self, owner: Option<&str>) -> Result<(), ClientError> {
        match owner {
            Some(_) => self.require(features::OWNERS),
            None => Ok(()),
        }
    }

    /// `session/contextReset`: tells the daemon the client's context was reset (a compaction, a
    /// rewind), so the `read` tool sends every text again: for `owner`, or for every owner of
    /// the session when `None`.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when the daemon lacks `contextReset`; [`ClientError::Rpc`]
    /// with `FS_INVALID_ARGUMENT` for an owner name that is empty or too long; any error of
    /// [`Client::request`].
    pub async fn context_reset(&self, owner: Option<&str>) -> Result<(), ClientError> {
        self.require(features::CONTEXT_RESET)?;
        let params = ContextResetParams { owner: owner.map(str::to_owned) };
        let _: serde_json::Value = self.request(methods::SESSION_CONTEXT_RESET, &params).await?;
        Ok(())
    }

    /// `daemon/status`: the daemon's counters.
    ///
    /// # Errors
    /// Any error of [`Client::request`].
    pub async fn status(&self) -> Result<DaemonStatus, ClientError> {
        self.request(methods::DAEMON_STATUS, ()).await
    }

    /// `daemon/status` as the daemon's owner sees it: with the gate token read from the file
    /// next to the socket ([`gate::read_gate_token`]), `gates` lists every session's gates;
    /// without one (none kept there), only this session's, as [`Client::status`].
    ///
    /// # Errors
    /// Any error of [`Client::request`].
    pub async fn owner_status(&self) -> Result<DaemonStatus, ClientError> {
        let params = DaemonStatusParams { gate_token: gate::read_gate_token(&self.socket) };
        self.request(methods::DAEMON_STATUS, params).await
    }

    /// `tools/list`: the model-facing tools of this session.
    ///
    /// # Errors
    /// Any error of [`Client::request`].
    pub async fn tools_list(&self) -> Result<ToolsListResult, ClientError> {
        self.request(methods::TOOLS_LIST, ()).await
    }

    /// `tools/call` (**tools layer**, model-facing): calls the tool `name` (`read`, `write` or
    /// `edit`) with `arguments` (snake_case fields, as in the tool's input schema), exactly as a
    /// model would. The tools keep the file-context layer's record: a `read` records the version
    /// the session observed, and `write` over an existing file or `edit` need such a read.
    ///
    /// A tool that fails, invalid arguments included, still answers `Ok`: a result with
    /// `is_error: true`, a text the model can act on, and `error.code` the `FS_*` identifier
    /// (`FS_NOT_FOUND`, `FS_NOT_OBSERVED`, `FS_STALE_VERSION`, `FS_EDIT_NOT_FOUND`, …).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with code -32602 for a tool name this session does not have; any
    /// error of [`Client::request`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<CallToolResult, ClientError> {
        self.call_tool_as(None, name, arguments).await
    }

    /// [`Client::call_tool`] on behalf of `owner` (a sub-agent sharing this session: its reads
    /// authorize only its own writes and edits); `None` is the session's default owner.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when an owner is given and the daemon lacks `owners`; as
    /// [`Client::call_tool`] otherwise (an owner name that is empty, too long or one too many is
    /// an `isError` result with `FS_INVALID_ARGUMENT`).
    pub async fn call_tool_as(
        &self,
        owner: Option<&str>,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<CallToolResult, ClientError> {
        self.require_owner(owner)?;
        let params = CallToolParams { name: name.to_owned(), arguments, owner: owner.map(str::to_owned) };
        self.request(methods::TOOLS_CALL, params).await
    }

    /// `file/read` (**file-context layer**: records what the session observed): a window of
    /// lines of a text file. Records the file's version for this session, which lets it then
    /// overwrite or edit the file; any window counts. Lines come whole, unless
    /// `params.max_line_chars` asks to cut longer ones (reading only their prefix; listed in
    /// `truncated_lines`); a window stops before it would hold more than the daemon's
    /// `limits.max_window_bytes` (then `truncated_by_bytes`: continue after its last line).
    ///
    /// `params.owner` names the owner whose observation it uses (a sub-agent sharing this
    /// session); absent, the session's default owner.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when `params.owner` is set and the daemon lacks `owners`, or
    /// `params.max_line_chars` and it lacks `wholeLines`;
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_NOT_FOUND` (also an offset past
    /// the end: `data.totalLines` says how many lines the file has), `FS_NOT_REGULAR_FILE`,
    /// `FS_NOT_TEXT` (binary or not UTF-8), `FS_TOO_LARGE` (also a first line longer than
    /// `limits.max_window_bytes`: cut it with `max_line_chars`), `FS_PERMISSION_DENIED`,
    /// `FS_OUTSIDE_ROOT`, `FS_INVALID_ARGUMENT`, `FS_BUSY` or `FS_IO`; any error of
    /// [`Client::request`].
    pub async fn file_read(&self, params: ReadParams) -> Result<ReadResult, ClientError> {
        self.require_owner(params.owner.as_deref())?;
        if params.max_line_chars.is_some() {
            self.require(features::WHOLE_LINES)?;
        }
        self.request(methods::FILE_READ, &params).await
    }

    /// `file/write` (**file-context layer**: records what the session observed): creates the
    /// file, or replaces its whole content atomically. Creating needs nothing; replacing an
    /// existing file needs a read of it in this session, of the version that is still there.
    /// Records the new version, so the session may write or edit it again without re-reading.
    ///
    /// `params.owner` names the owner whose observation it uses (a sub-agent sharing this
    /// session); absent, the session's default owner.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when `params.owner` is set and the daemon lacks `owners`;
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_NOT_OBSERVED` (the file exists
    /// and this session has not read it), `FS_STALE_VERSION` (it changed since that read),
    /// `FS_NOT_REGULAR_FILE`, `FS_TOO_LARGE`, `FS_PERMISSION_DENIED` (also in a read-only session),
    /// `FS_OUTSIDE_ROOT`, `FS_INVALID_ARGUMENT`, `FS_BUSY` or `FS_IO`; any error of
    /// [`Client::request`].
    pub async fn file_write(&self, params: WriteParams) -> Result<WriteResult, ClientError> {
        self.require_owner(params.owner.as_deref())?;
        self.request(methods::FILE_WRITE, &params).await
    }

    /// `file/edit` (**file-context layer**: records what the session observed): replaces an
    /// exact, literal string, once (or every occurrence with `replace_all`). Needs a read of
    /// the file in this session, of the version that is still there; records the new version.
    ///
    /// `params.owner` names the owner whose observation it uses (a sub-agent sharing this
    /// session); absent, the session's default owner.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when `params.owner` is set and the daemon lacks `owners`;
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_NOT_OBSERVED`,
    /// `FS_STALE_VERSION` (checked before matching), `FS_EDIT_NOT_FOUND`, `FS_AMBIGUOUS_EDIT` (more
    /// than one occurrence without `replace_all`), `FS_INVALID_ARGUMENT` (empty `old_string`, or
    /// `new_string` equal to it), `FS_NOT_FOUND`, `FS_NOT_REGULAR_FILE`, `FS_NOT_TEXT`,
    /// `FS_TOO_LARGE`, `FS_PERMISSION_DENIED`, `FS_OUTSIDE_ROOT`, `FS_BUSY` or `FS_IO`; any error
    /// of [`Client::request`].
    pub async fn file_edit(&self, params: EditParams) -> Result<EditResult, ClientError> {
        self.require_owner(params.owner.as_deref())?;
        self.request(methods::FILE_EDIT, &params).await
    }

    /// `file/stat` (**file-context layer**: reports what the session observed, records nothing
    /// itself): what is at `path` (absolute, or
    /// relative to the session's cwd), plus the version this session observed and whether that
    /// observation is still fresh (so a write or edit would be allowed). A path where nothing
    /// exists is a result with `exists: false`, not an error.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_OUTSIDE_ROOT`,
    /// `FS_PERMISSION_DENIED`, `FS_INVALID_ARGUMENT` or `FS_IO`; any error of
    /// [`Client::request`].
    pub async fn file_stat(&self, path: &str) -> Result<FileStatResult, ClientError> {
        self.file_stat_as(None, path).await
    }

    /// [`Client::file_stat`] reporting `owner`'s observation (`None`: the session's default
    /// owner).
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] when an owner is given and the daemon lacks `owners`; as
    /// [`Client::file_stat`] otherwise.
    pub async fn file_stat_as(&self, owner: Option<&str>, path: &str) -> Result<FileStatResult, ClientError> {
        self.require_owner(owner)?;
        let params = FileStatParams { path: path.to_owned(), owner: owner.map(str::to_owned) };
        self.request(methods::FILE_STAT, params).await
    }

    /// `fs/resolve` (**provider layer**: records nothing): the canonical absolute path of
    /// `path` (symlinks and `..` resolved) and the session root that contains it.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_OUTSIDE_ROOT` (also through a
    /// symlink, or for a missing file whose parent resolves outside), `FS_PERMISSION_DENIED`,
    /// `FS_INVALID_ARGUMENT` or `FS_IO`; any error of [`Client::request`].
    pub async fn fs_resolve(&self, path: &str) -> Result<ResolveResult, ClientError> {
        self.request(methods::FS_RESOLVE, PathParams { path: path.to_owned() }).await
    }

    /// `fs/stat` (**provider layer**: records nothing): what is at `path` (file, folder or
    /// other), a file's size, and its content version (`None` for a folder, anything else, or a
    /// file over the daemon's hash cap). `None` when nothing exists there, not an error.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_OUTSIDE_ROOT`,
    /// `FS_PERMISSION_DENIED`, `FS_INVALID_ARGUMENT` or `FS_IO`; any error of
    /// [`Client::request`].
    pub async fn fs_stat(&self, path: &str) -> Result<Option<FsInfo>, ClientError> {
        self.request(methods::FS_STAT, PathParams { path: path.to_owned() }).await
    }

    /// `fs/readText` (**provider layer**: records nothing): a window of whole lines, as
    /// [`Client::file_read`] without `max_line_chars` (which it refuses with
    /// `FS_INVALID_ARGUMENT`), but the session observes nothing, so a later
    /// [`Client::file_edit`] or tool edit of the file still fails with `FS_NOT_OBSERVED`. Use
    /// the result's `version` with [`Client::fs_write_text`] or [`Client::fs_edit_text`].
    ///
    /// # Errors
    /// As [`Client::file_read`].
    pub async fn fs_read_text(&self, params: ReadParams) -> Result<ReadResult, ClientError> {
        self.request(methods::FS_READ_TEXT, &params).await
    }

    /// `fs/writeText` (**provider layer**: records nothing): creates or replaces a file
    /// atomically if it matches `params.expect` (`CreateIfAbsent`: nothing there yet;
    /// `ReplaceIfVersion`: one exact version; `Any`), whatever this session observed. It
    /// writes the content's bytes exactly, unless `params.keep_conventions` asks to keep the
    /// replaced file's BOM and CRLF endings.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_NOT_OBSERVED` (create only,
    /// and a file is there), `FS_STALE_VERSION` (expected a version that is not there, or a
    /// missing file), `FS_NOT_REGULAR_FILE`, `FS_TOO_LARGE`, `FS_PERMISSION_DENIED` (also in a
    /// read-only session), `FS_OUTSIDE_ROOT`, `FS_INVALID_ARGUMENT` (also content with a NUL
    /// byte), `FS_BUSY` or `FS_IO`; any error of [`Client::request`].
    pub async fn fs_write_text(&self, params: FsWriteParams) -> Result<WriteResult, ClientError> {
        self.request(methods::FS_WRITE_TEXT, &params).await
    }

    /// `fs/editText` (**provider layer**: records nothing): a literal replacement, as
    /// [`Client::file_edit`], applied only if the file is at `params.expected_version`,
    /// whatever this session observed.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] whose [`ClientError::fs_code`] is `FS_STALE_VERSION` (checked
    /// before matching), `FS_EDIT_NOT_FOUND`, `FS_AMBIGUOUS_EDIT`, `FS_INVALID_ARGUMENT`,
    /// `FS_NOT_FOUND`, `FS_NOT_REGULAR_FILE`, `FS_NOT_TEXT`, `FS_TOO_LARGE`, `FS_PERMISSION_DENIED`,
    /// `FS_OUTSIDE_ROOT`, `FS_BUSY` or `FS_IO`; any error of [`Client::request`].
    pub async fn fs_edit_text(&self, params: FsEditParams) -> Result<EditResult, ClientError> {
        self.request(methods::FS_EDIT_TEXT, &params).await
    }

    /// `fs/streamText` (**provider layer**: records nothing): streams a text file of any size,
    /// from line `params.offset` (default 1) to its end, as chunks of `params.chunk_lines` lines
    /// (default [`filectx_protocol::STREAM_CHUNK_LINES`], at most 2000), all from the version
    /// the file had when the stream started. Lines are as [`Client::fs_read_text`] shows them:
    /// whole, without terminators; a chunk ends early rather than hold more than the daemon's
    /// `limits.max_window_bytes`, and a single longer line ends the stream with an
    /// `FS_TOO_LARGE` error item ([`ClientError::StreamFailed`]).
    ///
    /// **Order.** The [`TextStream`] yields the chunks in file order, each starting where the
    /// previous one ended (checked), up to the chunk whose `done` is true; then it ends. Every
    /// other ending is a final `Err` item, never a silent end: an error item (the file changed
    /// mid-stream) is [`ClientError::StreamFailed`] with `FS_STALE_VERSION`, a lost connection
    /// [`ClientError::Transport`], a reader that fell too far behind
    /// [`ClientError::StreamLagged`]. See [`TextStream`].
    ///
    /// **Buffering.** The daemon never buffers more than a few chunks of a stream: it produces
    /// them only as fast as the connection carries them. This client, though, reads the socket
    /// eagerly (answers to other requests share it), so chunks the caller has not read yet queue
    /// up here, up to the connection's notification buffer
    /// ([`ConnectOptions::notification_buffer`], default [`DEFAULT_NOTIFICATION_BUFFER`]
    /// chunks). When that overflows the stream fails with [`ClientError::StreamLagged`] and is
    /// cancelled at the daemon: read it promptly, or choose the buffer (and `chunk_lines`) to
    /// bound memory.
    ///
    /// **Cancelling.** Dropping the stream, or [`TextStream::cancel`], sends `fs/streamCancel`
    /// and stops the daemon's producer. Only starting the stream is subject to the request
    /// timeout; no timeout applies between chunks.
    ///
    /// # Errors
    /// Before anything is streamed: [`ClientError::Rpc`] whose [`ClientError::fs_code`] is
    /// `FS_NOT_FOUND` (also an offset past the end), `FS_NOT_REGULAR_FILE`, `FS_NOT_TEXT`,
    /// `FS_TOO_LARGE`, `FS_PERMISSION_DENIED`, `FS_OUTSIDE_ROOT`, `FS_INVALID_ARGUMENT` (e.g. an
    /// offset or `chunk_lines` of 0), `FS_BUSY` or `FS_IO`; any error of [`Client::request`].
    pub async fn stream_text(&self, params: StreamTextParams) -> Result<TextStream, ClientError> {
        let first_line = params.offset.unwrap_or(1);
        let encoded = Params::new(&params).map_err(ClientError::Encode)?;
        let subscription = self
            .inner
            .subscribe(methods::FS_STREAM_TEXT, encoded, methods::FS_STREAM_CANCEL)
            .await
            .map_err(|e| self.map_error(e))?;
        Ok(TextStream::new(
            subscription,
            Arc::downgrade(&self.inner),
            self.request_timeout,
            self.notification_buffer,
            first_line,
        ))
    }

    /// `shutdown`: tells the daemon this session is about to leave (only `exit` may follow).
    ///
    /// # Errors
    /// Any error of [`Client::request`].
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        let _: serde_json::Value = self.request(methods::SHUTDOWN, ()).await?;
        Ok(())
    }

    /// `exit` (notification): asks the daemon to close this connection. The notification is
    /// queued for sending; [`Client::close`] also waits for the daemon to hang up.
    ///
    /// # Errors
    /// A transport error when the connection is already gone.
    pub async fn exit(&self) -> Result<(), ClientError> {
        self.notify(methods::EXIT, ()).await
    }

    /// Ends the session politely: `shutdown`, then `exit`, then waits (briefly) for the daemon
    /// to close the connection, so that `exit` is known to have been sent.
    ///
    /// # Errors
    /// The error of `shutdown`, or of `exit` unless the connection is already gone.
    pub async fn close(self) -> Result<(), ClientError> {
        let shutdown = self.shutdown().await;
        // `exit` follows even when `shutdown` was refused; a daemon that already hung up is fine.
        let exit = match self.exit().await {
            Err(error) if error.is_disconnected() => Ok(()),
            other => other,
        };
        // The daemon hangs up on `exit`; the wait ends then, or after a short grace period.
        let _ = tokio::time::timeout(CLOSE_GRACE, self.inner.on_disconnect()).await;
        shutdown.and(exit)
    }

    /// Sends a request and decodes its result as `R`. `params` goes on the wire as it
    /// serializes (an object or an array; see [`Params`]); pass `()` for no params.
    ///
    /// # Errors
    /// [`ClientError::Encode`] when `params` is not an object or array, [`ClientError::Rpc`]
    /// when the daemon answers with an error, [`ClientError::Decode`] when the result is not an
    /// `R`, [`ClientError::Timeout`], or [`ClientError::Transport`] when the connection broke.
    pub async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, ClientError> {
        let params = Params::new(&params).map_err(ClientError::Encode)?;
        self.inner.request(method, params).await.map_err(|e| self.map_error(e))
    }

    /// [`Client::request`] that `cancel` can call off. When `cancel` completes before the
    /// answer, the daemon is sent `$/cancelRequest` naming this request (if it announced the
    /// feature `cancelRequest`) and this returns [`ClientError::Cancelled`] at once; the
    /// daemon's answer, when it comes, is discarded.
    ///
    /// At the daemon, a request still waiting for a file-work slot gives up its place (it
    /// answers -32800, or an `FS_ABORTED` result for `tools/call`): a cancelled write or edit
    /// that had not started never lands. One that already started runs to its end, so its
    /// outcome is unknown: read the file again before relying on it.
    ///
    /// # Errors
    /// [`ClientError::Cancelled`] when `cancel` came first; any error of [`Client::request`].
    pub async fn request_cancellable<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        cancel: impl Future<Output = ()>,
    ) -> Result<R, ClientError> {
        let params = Params::new(&params).map_err(ClientError::Encode)?;
        let (id, call) = cancel::tapped(self.inner.request::<R, _>(method, params));
        let mut call = std::pin::pin!(call);
        tokio::select! {
            // The call goes first, so its request has an id before `cancel` can win.
            biased;
            answer = &mut call => return answer.map_err(|e| self.map_error(e)),
            () = cancel => {}
        }
        if let Some(id) = id.get()
            && self.has_feature(features::CANCEL_REQUEST)
        {
            // A connection that is gone has no request left to cancel.
            let _ = self.notify(methods::CANCEL_REQUEST, serde_json::json!({"id": id})).await;
        }
        Err(ClientError::Cancelled)
    }

    /// Sends a notification (no answer). `params` as for [`Client::request`].
    ///
    /// # Errors
    /// [`ClientError::Encode`], or a transport error when the connection is gone.
    pub async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), ClientError> {
        let params = Params::new(&params).map_err(ClientError::Encode)?;
        self.inner.notification(method, params).await.map_err(|e| self.map_error(e))
    }

    /// Receives the `params` of every server→client notification named `method` (e.g.
    /// [`methods::FILE_DID_CHANGE`]) from now on. Notifications that arrive before this call, or
    /// for a method nobody listens to, are dropped. One stream per method at a time.
    ///
    /// # Errors
    /// [`ClientError::Protocol`] when a stream for `method` is already open, or a transport
    /// error.
    pub async fn notifications(&self, method: &str) -> Result<Notifications, ClientError> {
        let inner = self.inner.subscribe_to_method(method).await.map_err(|e| self.map_error(e))?;
        Ok(Notifications { inner })
    }

    /// Waits until the connection is gone and says why: a [`ClientError::Transport`] with the
    /// reason it broke (the daemon hung up, a socket error, framing the client cannot follow).
    /// Returns at once when it is already gone, e.g. after a [`Notifications`] stream ended
    /// without [`Notifications::lagged`], which only a lost connection does.
    pub async fn disconnected(&self) -> ClientError {
        self.map_error(self.inner.on_disconnect().await)
    }

    /// Starts a jsonrpsee subscription (unsubscribed with `unsubscribe_method` when dropped or
    /// on [`Subscription::unsubscribe`]). `params` as for [`Client::request`]. The raw
    /// subscription ends silently however it ends; for `fs/streamText` use
    /// [`Client::stream_text`], which checks the chunks and reports every early end.
    ///
    /// # Errors
    /// As for [`Client::request`].
    pub async fn subscribe<N: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        unsubscribe_method: &str,
    ) -> Result<Subscription<N>, ClientError> {
        let params = Params::new(&params).map_err(ClientError::Encode)?;
        self.inner.subscribe(method, params, unsubscribe_method).await.map_err(|e| self.map_error(e))
    }

    fn map_error(&self, error: jsonrpsee::core::client::Error) -> ClientError {
        ClientError::from_rpc(error, self.request_timeout)
    }
}

/// A stream of the `params` of one server→client notification method; see
/// [`Client::notifications`]. It ends when the connection closes ([`Client::disconnected`] then
/// says why), or when more than the configured buffer of notifications went unread
/// ([`Notifications::lagged`] then says so).
#[derive(Debug)]
pub struct Notifications {
    inner: Subscription<serde_json::Value>,
}

impl Notifications {
    /// Whether the stream ended because notifications were not read fast enough.
    pub fn lagged(&self) -> bool {
        matches!(self.inner.close_reason(), Some(jsonrpsee::core::client::SubscriptionCloseReason::Lagged))
    }
}

impl Stream for Notifications {
    type Item = serde_json::Value;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<serde_json::Value>> {
        loop {
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(value))) => return Poll::Ready(Some(value)),
                // Any JSON decodes as a Value; skip rather than end the stream if that ever fails.
                Poll::Ready(Some(Err(_))) => continue,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
