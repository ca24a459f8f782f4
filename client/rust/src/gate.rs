//! A write gate: a session that the daemon asks before any session's write or edit lands on a
//! file under the gate's folders, and that allows or denies each one. `filectx gate` is a person
//! at a terminal doing this; [`Gate`] is the same for a Rust harness.
//!
//! **Wire** (daemon feature `gate`). The session opens with `initialize` (its roots must contain
//! the gated folders) and registers with `gate/register` `{paths, operations?, name?,
//! timeoutMs?, onTimeout?, gateToken?}` → `{gateId}`. `gateToken` is the daemon's gate token,
//! which only the daemon's user can read ([`read_gate_token`]: the file next to the socket);
//! [`Gate::connect`] reads and sends it unless [`GateOptions::gate_token`] gave one. Before a write or edit lands under one of `paths`, the
//! daemon sends the gate a JSON-RPC *request* `gate/writeIntent` ([`WriteIntent`]), answered with
//! `{allow, reason?}` ([`Decision`]). A `$/cancelRequest {id, reason}` notification from the
//! daemon withdraws an intent nobody waits for any more: the agent cancelled its call, or the
//! timeout passed ([`IntentWithdrawal`]). An intent may arrive before the answer to
//! `gate/register` (a write that waited for the registration); it is queued like any other.
//! `gate/unregister` `{gateId}` ends the gate. An intent not answered within `timeoutMs` is
//! settled by the daemon as `onTimeout` says.
//!
//! jsonrpsee's client cannot answer requests from the server, so a gate runs its own
//! `Content-Length` framed loop over the same trust-checked socket as [`crate::Client`]: a
//! reader task turns the daemon's messages into [`GateEvent`]s and routes the answers to this
//! side's few requests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use filectx_client::gate::{Decision, Gate, GateEvent, GateOptions};
//! use filectx_client::socket_path;
//!
//! let mut gate = Gate::connect(socket_path(None), GateOptions::new(["/home/me/project"])).await?;
//! loop {
//!     match gate.next().await? {
//!         GateEvent::Intent(intent) => {
//!             let decision = if intent.path.ends_with(".lock") {
//!                 Decision::deny("lock files are updated by cargo, not by hand")
//!             } else {
//!                 Decision::allow()
//!             };
//!             gate.decide(&intent.intent_id, decision).await?;
//!         }
//!         GateEvent::Withdrawn { path, reason, .. } => println!("{path}: withdrawn ({reason:?})"),
//!     }
//! }
//! # }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use filectx_protocol::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
use filectx_protocol::methods::{CANCEL_REQUEST, GATE_REGISTER, GATE_UNREGISTER, GATE_WRITE_INTENT};
use filectx_protocol::{
    ClientInfo, DEFAULT_MAX_FRAME_BYTES, Frame, GateRegisterParams, GateRegisterResult, GateUnregisterParams,
    InitializeParams, LspCodec, features, methods,
};
pub use filectx_protocol::{
    GateOnTimeout, GateOperation, INTENT_DIFF_HIDDEN, INTENT_DIFF_NOT_TEXT, INTENT_DIFF_TOO_LARGE,
    IntentWithdrawal, WriteIntentParams, WriteIntentResult,
};
use futures::{SinkExt, StreamExt as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::{ClientError, transport};

/// How long this side's own requests (`initialize`, `gate/register`, `gate/unregister`,
/// `shutdown`) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Events read from the daemon and not taken by [`Gate::next`] yet; when full, the reader stops
/// reading the socket until there is room.
const EVENT_QUEUE: usize = 256;

/// How a gate registers: its folders and, optionally, the operations it reviews, its name, and
/// how long the daemon waits for a decision.
#[derive(Debug, Clone)]
pub struct GateOptions {
    paths: Vec<String>,
    roots: Option<Vec<String>>,
    operations: Option<Vec<GateOperation>>,
    name: Option<String>,
    timeout: Option<Duration>,
    on_timeout: Option<GateOnTimeout>,
    client_name: String,
    gate_token: Option<String>,
}

impl GateOptions {
    /// Gates `paths`: absolute folders (or files) the session's roots contain; by default the
    /// roots are these same paths.
    pub fn new<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> Self {
        Self {
            paths: paths.into_iter().map(Into::into).collect(),
            roots: None,
            operations: None,
            name: None,
            timeout: None,
            on_timeout: None,
            client_name: "filectx gate".to_owned(),
            gate_token: None,
        }
    }

    /// The session's roots (`initialize`), when they should differ from the gated paths; they
    /// must contain every gated path.
    pub fn roots<S: Into<String>>(mut self, roots: impl IntoIterator<Item = S>) -> Self {
        self.roots = Some(roots.into_iter().map(Into::into).collect());
        self
    }

    /// Only these operations are reviewed (default: all three); the others land unasked.
    pub fn operations(mut self, operations: impl IntoIterator<Item = GateOperation>) -> Self {
        self.operations = Some(operations.into_iter().collect());
        self
    }

    /// The gate's name, as `daemon/status` lists it.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How long the daemon waits for each decision (the daemon's default: 50 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What the daemon does when that time has passed (the daemon's default: deny).
    pub fn on_timeout(mut self, on_timeout: GateOnTimeout) -> Self {
        self.on_timeout = Some(on_timeout);
        self
    }

    /// The session's `clientInfo.name` (default `filectx gate`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// The daemon's gate token to register with (default: read from the file next to the
    /// socket, [`read_gate_token`]).
    pub fn gate_token(mut self, token: impl Into<String>) -> Self {
        self.gate_token = Some(token.into());
        self
    }

    /// The `gate/register` params.
    fn register_params(&self) -> GateRegisterParams {
        GateRegisterParams {
            paths: self.paths.clone(),
            operations: self.operations.clone(),
            name: self.name.clone(),
            timeout_ms: self.timeout.map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            on_timeout: self.on_timeout,
            gate_token: self.gate_token.clone(),
        }
    }
}

/// The file next to `socket` in which its daemon keeps its gate token: `<socket>.gate-token`.
pub fn gate_token_file(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".gate-token");
    PathBuf::from(name)
}

/// The gate token of the daemon at `socket` (see [`gate_token_file`]), or `None` when it keeps
/// none there (an older daemon, one that could not write it) or the file is not a small regular
/// file of this user's: it is opened without following a symlink and without blocking, and at
/// most 256 bytes are read. Read it only from a socket whose folder the trust checks passed.
pub fn read_gate_token(socket: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags.bits()).ok()?)
        .open(gate_token_file(socket))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return None;
    }
    let mut text = String::new();
    file.take(256).read_to_string(&mut text).ok()?;
    let token = text.trim();
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_hexdigit())).then(|| token.to_owned())
}

/// One write or edit waiting for the gate's decision: the `gate/writeIntent` params
/// ([`WriteIntentParams`], whose fields it derefs to), and any field a newer daemon added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteIntent {
    /// The params as the protocol defines them.
    #[serde(flatten)]
    pub params: WriteIntentParams,
    /// Any other field the daemon sent, kept as it came (printed by `filectx gate --json`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl std::ops::Deref for WriteIntent {
    type Target = WriteIntentParams;

    fn deref(&self) -> &WriteIntentParams {
        &self.params
    }
}

impl From<WriteIntentParams> for WriteIntent {
    fn from(params: WriteIntentParams) -> Self {
        Self { params, extra: Map::new() }
    }
}

/// Whether `diff` (of an intent) is a marker the daemon sends instead of a diff:
/// [`INTENT_DIFF_TOO_LARGE`], [`INTENT_DIFF_NOT_TEXT`] or [`INTENT_DIFF_HIDDEN`]. A real diff
/// starts with `---`, or is empty.
pub fn diff_withheld(diff: &str) -> bool {
    [INTENT_DIFF_TOO_LARGE, INTENT_DIFF_NOT_TEXT, INTENT_DIFF_HIDDEN].contains(&diff)
}

/// What the gate says to an intent: sent as the `gate/writeIntent` result
/// ([`WriteIntentResult`]), with constructors that leave an empty reason out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the write or edit may land.
    pub allow: bool,
    /// Why, in words the agent reads (mostly for a denial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<Decision> for WriteIntentResult {
    fn from(decision: Decision) -> Self {
        Self { allow: decision.allow, reason: decision.reason }
    }
}

impl Decision {
    /// Let it land.
    pub fn allow() -> Self {
        Self { allow: true, reason: None }
    }

    /// Refuse it, saying why (an empty reason is left out).
    pub fn deny(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self { allow: false, reason: (!reason.is_empty()).then_some(reason) }
    }
}

/// What a gate hears from the daemon.
#[derive(Debug, Clone, PartialEq)]
pub enum GateEvent {
    /// A write or edit waits for [`Gate::decide`].
    Intent(Box<WriteIntent>),
    /// The daemon withdrew an intent not decided yet (the agent cancelled its call, or the
    /// gate's timeout passed): deciding it now fails with [`GateError::UnknownIntent`].
    Withdrawn {
        /// The intent's id.
        intent_id: String,
        /// The file it was about.
        path: String,
        /// Why: [`IntentWithdrawal::Cancelled`] (nothing is written) or
        /// [`IntentWithdrawal::Timeout`] (the daemon settled it as `onTimeout` says).
        reason: IntentWithdrawal,
    },
}

/// Why a gate call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// Connecting, the session, or the connection failed: [`ClientError::Connect`],
    /// [`ClientError::UntrustedSocket`], [`ClientError::Unsupported`] (the daemon lacks the
    /// `gate` feature), [`ClientError::Rpc`] (the daemon refused `initialize`, `gate/register`
    /// or `gate/unregister`, e.g. a path outside the roots), [`ClientError::Timeout`], or
    /// [`ClientError::Transport`] (the connection is gone).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No undecided intent has this id: it was decided already, withdrawn, or never sent.
    #[error("no intent {intent_id} waits for a decision (already decided, withdrawn, or unknown)")]
    UnknownIntent {
        /// The id given.
        intent_id: String,
    },
}

/// A registered gate: [`Gate::next`] yields what the daemon asks, [`Gate::decide`] answers.
/// Dropping it closes the connection, which ends the gate at the daemon; [`Gate::close`]
/// unregisters first.
#[derive(Debug)]
pub struct Gate {
    shared: Arc<Shared>,
    events: mpsc::Receiver<GateEvent>,
    reader: JoinHandle<()>,
    gate_id: String,
    features: Vec<String>,
    paths: Vec<String>,
}

/// What the gate and its reader task share.
#[derive(Debug)]
struct Shared {
    writer: tokio::sync::Mutex<FramedWrite<OwnedWriteHalf, LspCodec>>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The undecided intents by intent id: the JSON-RPC id to answer, and the path.
    pending: HashMap<String, (Value, String)>,
    /// This side's requests waiting for their answer, by id.
    calls: HashMap<u64, oneshot::Sender<Result<Value, ClientError>>>,
    next_id: u64,
    /// Why the connection ended, once it has.
    closed: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn send(&self, message: &Value) -> Result<(), ClientError> {
        let mut writer = self.writer.lock().await;
        writer.send(message.to_string()).await.map_err(|error| ClientError::Transport(error.to_string()))
    }

    /// Sends a request whose answer the reader task routes back; waits at most
    /// [`REQUEST_TIMEOUT`].
    async fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let (answer, answered) = oneshot::channel();
        let id = {
            let mut state = self.lock();
            if let Some(reason) = &state.closed {
                return Err(ClientError::Transport(reason.clone()));
            }
            state.next_id += 1;
            let id = state.next_id;
            state.calls.insert(id, answer);
            id
        };
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(error) = self.send(&request).await {
            self.lock().calls.remove(&id);
            return Err(error);
        }
        match tokio::time::timeout(REQUEST_TIMEOUT, answered).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ClientError::Transport(self.closed_reason())),
            Err(_) => {
                self.lock().calls.remove(&id);
                Err(ClientError::Timeout(REQUEST_TIMEOUT))
            }
        }
    }

    fn closed_reason(&self) -> String {
        self.lock().closed.clone().unwrap_or_else(|| "the daemon closed the connection".to_owned())
    }
}

impl Gate {
    /// Connects to the daemon at `socket` (trusting only a daemon of this user, as
    /// [`crate::Client::connect`] does), opens a session whose roots are the gated paths (or
    /// [`GateOptions::roots`]), checks that the daemon has the `gate` feature, and registers.
    /// Must run inside a tokio runtime (the reader task is spawned on it).
    ///
    /// # Errors
    /// [`ClientError::Connect`] or [`ClientError::UntrustedSocket`] as for connecting;
    /// [`ClientError::Unsupported`] when the daemon lacks `gate`; [`ClientError::Rpc`] when it
    /// refuses `initialize` or `gate/register` (e.g. a gated path outside the roots);
    /// [`ClientError::Timeout`] or [`ClientError::Transport`].
    pub async fn connect(socket: impl AsRef<Path>, options: GateOptions) -> Result<Self, ClientError> {
        let stream = transport::connect_stream(socket.as_ref()).await?;
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new(FramedWrite::new(write, LspCodec::new(DEFAULT_MAX_FRAME_BYTES))),
            state: Mutex::new(State::default()),
        });
        let (sender, events) = mpsc::channel(EVENT_QUEUE);
        let reader = FramedRead::new(read, LspCodec::new(DEFAULT_MAX_FRAME_BYTES));
        let reader = tokio::spawn(read_loop(reader, Arc::clone(&shared), sender));
        let mut gate = Self {
            shared,
            events,
            reader,
            gate_id: String::new(),
            features: Vec::new(),
            paths: options.paths.clone(),
        };
        let roots = options.roots.clone().unwrap_or_else(|| options.paths.clone());
        let params = InitializeParams {
            client_info: Some(ClientInfo {
                name: options.client_name.clone(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            ..InitializeParams::new(roots)
        };
        let params = serde_json::to_value(&params).map_err(ClientError::Encode)?;
        let session = gate.shared.call(methods::INITIALIZE, params).await?;
        gate.features = session
            .pointer("/capabilities/features")
            .and_then(Value::as_array)
            .map(|all| all.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        if !gate.features.iter().any(|feature| feature == features::GATE) {
            return Err(ClientError::Unsupported { feature: features::GATE.to_owned() });
        }
        let mut register = options.register_params();
        if register.gate_token.is_none() {
            // Read now that the trust checks passed: the socket's folder is this user's alone.
            register.gate_token = read_gate_token(socket.as_ref());
        }
        let params = serde_json::to_value(register).map_err(ClientError::Encode)?;
        // Intents may arrive before this answer (writes that waited for the registration): the
        // reader task queues them as events, which `next` yields once this returns.
        let registered = gate.shared.call(GATE_REGISTER, params).await?;
        gate.gate_id = serde_json::from_value::<GateRegisterResult>(registered.clone())
            .map_err(|error| {
                ClientError::Protocol(format!("gate/register answered {registered}, not {{gateId}}: {error}"))
            })?
            .gate_id;
        Ok(gate)
    }

    /// The id the daemon gave this gate.
    pub fn gate_id(&self) -> &str {
        &self.gate_id
    }

    /// The gated paths, as registered.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// The features the daemon announced in `initialize`.
    pub fn features(&self) -> &[String] {
        &self.features
    }

    /// The next intent or withdrawal, in the order the daemon sent them. Cancel-safe: dropping
    /// the future loses nothing, so it can sit in a `select!` beside other input.
    ///
    /// # Errors
    /// [`ClientError::Transport`] once the connection is gone (every event before that was
    /// delivered).
    pub async fn next(&mut self) -> Result<GateEvent, ClientError> {
        match self.events.recv().await {
            Some(event) => Ok(event),
            None => Err(ClientError::Transport(self.shared.closed_reason())),
        }
    }

    /// Answers the intent `intent_id` with `decision`.
    ///
    /// # Errors
    /// [`GateError::UnknownIntent`] when no undecided intent has that id (decided already, or
    /// withdrawn); [`GateError::Client`] with [`ClientError::Transport`] when the connection is
    /// gone.
    pub async fn decide(&self, intent_id: &str, decision: Decision) -> Result<(), GateError> {
        let Some((id, _)) = self.shared.lock().pending.remove(intent_id) else {
            return Err(GateError::UnknownIntent { intent_id: intent_id.to_owned() });
        };
        let result = serde_json::to_value(WriteIntentResult::from(decision)).map_err(ClientError::Encode)?;
        self.shared.send(&json!({"jsonrpc": "2.0", "id": id, "result": result})).await?;
        Ok(())
    }

    /// Whether `intent_id` still waits for a decision (not decided, not withdrawn).
    pub fn is_pending(&self, intent_id: &str) -> bool {
        self.shared.lock().pending.contains_key(intent_id)
    }

    /// Unregisters (`gate/unregister`), closes the session (`shutdown`, `exit`) and the
    /// connection. Intents still undecided are left to the daemon.
    ///
    /// # Errors
    /// The error of `gate/unregister` ([`ClientError::Transport`] when the connection is
    /// already gone).
    pub async fn close(self) -> Result<(), ClientError> {
        let params = GateUnregisterParams { gate_id: self.gate_id.clone() };
        let params = serde_json::to_value(params).map_err(ClientError::Encode)?;
        let unregistered = self.shared.call(GATE_UNREGISTER, params).await;
        if unregistered.is_ok() {
            // Best effort: the daemon ends the session on hang-up anyway.
            let _ = self.shared.call(methods::SHUTDOWN, json!({})).await;
            let _ = self.shared.send(&json!({"jsonrpc": "2.0", "method": methods::EXIT})).await;
        }
        let _ = SinkExt::<String>::close(&mut *self.shared.writer.lock().await).await;
        self.reader.abort();
        unregistered.map(drop)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Reads the daemon's messages until the connection ends: intents and withdrawals become events,
/// answers go to their waiting calls, other requests are refused.
async fn read_loop(
    mut reader: FramedRead<OwnedReadHalf, LspCodec>,
    shared: Arc<Shared>,
    events: mpsc::Sender<GateEvent>,
) {
    let reason = loop {
        let body = match reader.next().await {
            Some(Ok(Frame::Message(body))) => body,
            // Skipped unbuffered by the codec; no intent is that large (big diffs are "too large").
            Some(Ok(Frame::Oversized { .. })) => continue,
            Some(Err(error)) => break error.to_string(),
            None => break "the daemon closed the connection".to_owned(),
        };
        let Ok(message) = serde_json::from_slice::<Value>(&body) else {
            continue;
        };
        if handle(&shared, &events, message).await.is_err() {
            break "the gate stopped listening".to_owned();
        }
    };
    let calls = {
        let mut state = shared.lock();
        state.closed = Some(reason.clone());
        std::mem::take(&mut state.calls)
    };
    for (_, call) in calls {
        let _ = call.send(Err(ClientError::Transport(reason.clone())));
    }
}

/// Handles one message from the daemon; fails only when nobody takes events any more.
async fn handle(shared: &Shared, events: &mpsc::Sender<GateEvent>, message: Value) -> Result<(), ()> {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").cloned();
    match (method, id) {
        (Some(GATE_WRITE_INTENT), Some(id)) => {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            match serde_json::from_value::<WriteIntent>(params) {
                Ok(intent) => {
                    shared.lock().pending.insert(intent.intent_id.clone(), (id, intent.path.clone()));
                    events.send(GateEvent::Intent(Box::new(intent))).await.map_err(drop)?;
                }
                Err(error) => {
                    let message = format!("invalid gate/writeIntent params: {error}");
                    let _ = shared.send(&error_response(id, INVALID_PARAMS, &message)).await;
                }
            }
        }
        (Some(CANCEL_REQUEST), None) => {
            // `GateCancelParams`, read leniently: the id as whatever JSON the intent's request
            // had, and a missing or unknown `reason` as a cancellation.
            let Some(cancelled) = message.pointer("/params/id") else { return Ok(()) };
            let reason = message
                .pointer("/params/reason")
                .and_then(|reason| IntentWithdrawal::deserialize(reason).ok())
                .unwrap_or_default();
            let withdrawn = {
                let mut state = shared.lock();
                let intent_id =
                    state.pending.iter().find(|(_, (id, _))| id == cancelled).map(|(k, _)| k.clone());
                intent_id
                    .and_then(|intent_id| state.pending.remove(&intent_id).map(|(_, path)| (intent_id, path)))
            };
            if let Some((intent_id, path)) = withdrawn {
                events.send(GateEvent::Withdrawn { intent_id, path, reason }).await.map_err(drop)?;
            }
        }
        (Some(method), Some(id)) => {
            let message = format!("Method not found: a gate does not serve {method}");
            let _ = shared.send(&error_response(id, METHOD_NOT_FOUND, &message)).await;
        }
        // Other notifications (file/didChange, …) do not concern a gate.
        (Some(_), None) => {}
        (None, Some(id)) => {
            let answer = match (message.get("result"), message.get("error")) {
                (Some(result), None) => Ok(result.clone()),
                (_, Some(error)) => Err(ClientError::Rpc {
                    code: error
                        .get("code")
                        .and_then(Value::as_i64)
                        .and_then(|c| i32::try_from(c).ok())
                        .unwrap_or(0),
                    message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    data: error.get("data").cloned(),
                }),
                (None, None) => return Ok(()),
            };
            let call = id.as_u64().and_then(|id| shared.lock().calls.remove(&id));
            if let Some(call) = call {
                let _ = call.send(answer);
            }
        }
        (None, None) => {}
    }
    Ok(())
}

/// A JSON-RPC error response.
fn error_response(id: Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The gated folder of `paths` that contains `path`, and `path` relative to it; `None` when
/// none does.
pub fn relative_to_gate<'a>(paths: &[String], path: &'a str) -> Option<(PathBuf, &'a Path)> {
    paths.iter().find_map(|folder| {
        let folder = PathBuf::from(folder);
        Path::new(path).strip_prefix(&folder).ok().map(|rest| (folder, rest))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_params_carry_only_what_was_set() -> Result<(), serde_json::Error> {
        let params = |options: &GateOptions| serde_json::to_value(options.register_params());
        assert_eq!(params(&GateOptions::new(["/p"]))?, json!({"paths": ["/p"]}));
        let options = GateOptions::new(["/p", "/q"])
            .operations([GateOperation::Update, GateOperation::Edit])
            .name("review")
            .timeout(Duration::from_secs(30))
            .on_timeout(GateOnTimeout::Allow);
        assert_eq!(
            params(&options)?,
            json!({
                "paths": ["/p", "/q"],
                "operations": ["update", "edit"],
                "name": "review",
                "timeoutMs": 30000,
                "onTimeout": "allow",
            })
        );
        Ok(())
    }

    #[test]
    fn intents_parse_with_and_without_optional_fields_and_keep_unknown_ones() -> Result<(), serde_json::Error>
    {
        let full: WriteIntent = serde_json::from_value(json!({
            "gateId": "g1", "intentId": "i1", "sessionId": "s1", "clientName": "claude-code",
            "owner": "sub", "path": "/p/a.rs", "operation": "edit", "diff": "--- a\n+++ b\n",
            "oldVersion": "v1", "newVersion": "v2", "bytes": 12, "future": true,
        }))?;
        assert_eq!(full.operation, GateOperation::Edit);
        assert_eq!(full.extra.get("future"), Some(&json!(true)));
        assert_eq!(serde_json::to_value(&full)?["future"], true);
        let bare: WriteIntent = serde_json::from_value(json!({
            "gateId": "g1", "intentId": "i2", "sessionId": "s1", "path": "/p/b.rs",
            "operation": "create", "diff": "too large", "newVersion": "v3", "bytes": 0,
        }))?;
        assert_eq!(
            (bare.client_name.as_deref(), bare.old_version.as_deref(), bare.diff.as_str()),
            (None, None, INTENT_DIFF_TOO_LARGE)
        );
        assert!(diff_withheld(&bare.diff) && diff_withheld("hidden") && !diff_withheld("--- a\n"));
        assert!(serde_json::from_value::<WriteIntent>(json!({"intentId": "i3"})).is_err());
        Ok(())
    }

    #[test]
    fn decisions_leave_an_empty_reason_out() -> Result<(), serde_json::Error> {
        assert_eq!(serde_json::to_value(Decision::allow())?, json!({"allow": true}));
        assert_eq!(serde_json::to_value(Decision::deny(""))?, json!({"allow": false}));
        assert_eq!(serde_json::to_value(Decision::deny("no"))?, json!({"allow": false, "reason": "no"}));
        Ok(())
    }

    #[test]
    fn paths_are_shown_relative_to_their_gate() {
        let paths = vec!["/srv/app".to_owned(), "/srv/lib".to_owned()];
        let found = relative_to_gate(&paths, "/srv/lib/src/x.rs");
        assert_eq!(found, Some((PathBuf::from("/srv/lib"), Path::new("src/x.rs"))));
        assert!(relative_to_gate(&paths, "/srv/other/x.rs").is_none());
        assert!(relative_to_gate(&paths, "/srv/application/x.rs").is_none());
    }
}
