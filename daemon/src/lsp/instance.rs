//! One running language server for one project root, shared by every session: its process (the
//! guard and the server beneath it), its pipes, the documents the daemon opened in it and the
//! diagnostics it published. The daemon is its only client, so every open document's text is
//! what is on disk (or what the daemon just wrote there).
//!
//! Three tasks serve it: the driver (starts the server, then takes the events of its project in
//! order: documents to open, changes that landed, outside changes), the reader (frames from the
//! server, each at most [`MAX_FRAME_BYTES`], answered or kept: `publishDiagnostics` stored per
//! file, requests of the server answered) and the writer (frames to the server, at most
//! [`MAX_QUEUED`] waiting). A server that exits, hangs its input or speaks something that cannot be
//! framed is ended and started again after a backoff; nothing it sends reaches the daemon's
//! memory past those bounds.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::config::Server;
use super::introduced::LineShift;
use super::wire::{self, Diagnostic};
use crate::provider::Version;

/// Largest frame taken from a server; a larger one is skipped unread.
pub const MAX_FRAME_BYTES: usize = 8 << 20;
/// Most frames waiting to be written to a server; past it the server counts as hung.
const MAX_QUEUED: usize = 1024;
/// Most bytes of frames waiting to be written to a server; past it the server counts as hung.
const MAX_QUEUED_BYTES: usize = 32 << 20;
/// Most files whose diagnostics are kept (open documents first); past it the least recent go.
const MAX_PUBLISHED_FILES: usize = 1024;
/// Most documents open in one server; past it the least recently used is closed.
pub const MAX_OPEN_DOCUMENTS: usize = 256;
/// Most bytes of one server's stderr logged a minute.
const STDERR_LOG_BYTES: usize = 4096;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerPhase {
    /// Spawned, `initialize` not answered yet.
    Starting,
    /// Answering.
    Ready,
    /// It failed (why); started again at `until`.
    Restarting {
        /// Why it failed.
        why: String,
        /// When it is started again.
        until: Instant,
    },
    /// Stopped for good (idle, evicted, the daemon stopping): why.
    Stopped(String),
}

/// A change of an open document the daemon sent, and what a wait for its diagnostics needs.
#[derive(Debug, Clone)]
pub struct SentChange {
    /// The content (blake3 version) it made.
    pub content: Version,
    /// The document version it was sent as.
    pub version: i32,
    /// The version it replaced (0: it is the document's open).
    pub replaced: i32,
    /// The document's diagnostics before it, when they were known for the text it replaced.
    pub before: Option<Vec<Diagnostic>>,
    /// How the lines moved.
    pub shift: LineShift,
    /// When it was sent.
    pub sent: Instant,
    /// The first publish for the document after it was sent.
    pub first_reply: Option<Instant>,
    /// The other documents' diagnostics when it was sent, when the server had said what it had
    /// to say of every other document's last change (`None` otherwise: another change was
    /// still being checked, and what appears in other files cannot be told apart).
    pub others: Option<HashMap<PathBuf, Vec<Diagnostic>>>,
}

/// An open document.
#[derive(Debug, Clone)]
pub struct Doc {
    /// Its LSP version.
    pub version: i32,
    /// Its text as sent.
    pub text: Arc<str>,
    /// The content's blake3 version.
    pub content: Version,
    /// When it was last used.
    pub used: Instant,
    /// The last change sent (or the open, with no diagnostics before it).
    pub change: SentChange,
}

/// The diagnostics a server published for one file.
#[derive(Debug, Clone)]
pub struct Published {
    /// The document version it said they are for.
    pub version: Option<i32>,
    /// The diagnostics.
    pub items: Vec<Diagnostic>,
    /// When they came.
    pub at: Instant,
    /// Whether they answered a pull (then they are all the server has to say of that version).
    pub pulled: bool,
}

/// How diagnostics can be asked of a server, besides waiting for its pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pull {
    /// They cannot: only its pushes.
    #[default]
    No,
    /// `textDocument/diagnostic`.
    Lsp,
    /// typescript-language-server's `typescript.tsserverRequest` command, asking its tsserver
    /// for a file's syntactic and semantic diagnostics: its pushes say no version, come only
    /// when something changed, and may still be of the text before; what it answers to a
    /// request sent after a change is of the text after. Its pushes for open documents are
    /// then not taken: the pulls are (of the changed document, and of the others open).
    TsServer,
}

/// Most pieces of work in progress a server is followed in; more are not followed.
const MAX_PROGRESS: usize = 64;
/// Work in progress a server said nothing more of for this long is taken as ended.
const PROGRESS_FORGOTTEN: Duration = Duration::from_secs(60);

/// Most other open documents pulled after a change, the most recently used first.
const MAX_PULLED_OTHERS: usize = 16;

/// What an instance holds, under its lock.
#[derive(Debug)]
pub struct State {
    /// Its phase.
    pub phase: ServerPhase,
    /// The guard's pid (the server runs beneath it).
    pub pid: Option<u32>,
    /// How its diagnostics can be asked for.
    pub pull: Pull,
    /// Its work in progress (`window/workDoneProgress/create` or `$/progress` begun, not
    /// ended), by token, with when it last said something: while any goes on, what it
    /// published may be a step of its work (pyright publishes a file checked in part, then
    /// the rest).
    pub progress: HashMap<String, Instant>,
    /// When it last published or said something of its work.
    pub activity: Instant,
    /// Its open documents.
    pub docs: HashMap<PathBuf, Doc>,
    /// What it published, per file.
    pub published: HashMap<PathBuf, Published>,
    /// Its requests waiting for an answer.
    pending: HashMap<i64, oneshot::Sender<Value>>,
    /// The last document version given (each open and change takes the next, across all
    /// documents and their reopenings, so no answer about an earlier text can pass for a
    /// later one's).
    versions: i32,
    next_id: i64,
    /// When it was last used.
    pub used: Instant,
    /// The sessions that used it.
    pub sessions: HashSet<Arc<str>>,
    /// Times it was started again after a failure.
    pub restarts: u32,
    /// Its process tree's resident bytes, when last measured.
    pub rss: u64,
    /// The writer's queue, while it runs.
    out: Option<mpsc::Sender<Vec<u8>>>,
    /// Ends the current run's process and tasks.
    run: Option<CancellationToken>,
}

/// One server for one project root.
#[derive(Debug)]
pub struct Instance {
    /// The server.
    pub server: Arc<Server>,
    /// The project root.
    pub root: PathBuf,
    state: Mutex<State>,
    /// Told of every publish, answer and change of phase.
    pub changed: Notify,
    /// Ends its tasks and process.
    pub stop: CancellationToken,
    /// Bytes of frames queued for the writer and not written yet.
    queued: Arc<AtomicUsize>,
    /// Set when a frame found the queue full: the current run ends as failed.
    hung: AtomicBool,
}

impl Instance {
    /// A server for `root`, not started.
    pub fn new(server: Arc<Server>, root: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            server,
            root,
            state: Mutex::new(State {
                phase: ServerPhase::Starting,
                pid: None,
                pull: Pull::No,
                progress: HashMap::new(),
                activity: Instant::now(),
                docs: HashMap::new(),
                published: HashMap::new(),
                pending: HashMap::new(),
                versions: 0,
                next_id: 1,
                used: Instant::now(),
                sessions: HashSet::new(),
                restarts: 0,
                rss: 0,
                out: None,
                run: None,
            }),
            changed: Notify::new(),
            stop: CancellationToken::new(),
            queued: Arc::default(),
            hung: AtomicBool::new(false),
        })
    }

    /// Its state.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks it used now by `session`.
    pub fn use_by(&self, session: Option<&Arc<str>>) {
        let mut state = self.lock();
        state.used = Instant::now();
        if let Some(session) = session {
            state.sessions.insert(session.clone());
        }
    }

    /// Queues `message` for the server; false when it cannot take it (not running, or hung).
    pub fn send(&self, message: &Value) -> bool {
        self.send_in(&self.lock(), message)
    }

    /// [`Instance::send`] with the state held: what was sent under one lock reaches the server
    /// in that order, before anything sent after it.
    fn send_in(&self, state: &State, message: &Value) -> bool {
        let Some(out) = &state.out else { return false };
        let body = message.to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        let bytes = frame.len();
        let waiting = self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let hung = if waiting > MAX_QUEUED_BYTES {
            true
        } else {
            match out.try_send(frame) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        };
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
        if hung {
            // It stopped reading its input: ended, and started again after a pause.
            self.hung.store(true, Ordering::Relaxed);
            if let Some(run) = &state.run {
                run.cancel();
            }
        }
        false
    }

    /// Sends the request `method` and waits for its answer at most `within`.
    pub async fn request(&self, method: &str, params: Value, within: Duration) -> Option<Value> {
        let (id, rx) = self.request_in(&mut self.lock(), method, params)?;
        self.answer_to(id, rx, within).await
    }

    /// Sends the request `method` with the state held (see [`Instance::send_in`]): its id and
    /// where its answer comes.
    fn request_in(
        &self,
        state: &mut State,
        method: &str,
        params: Value,
    ) -> Option<(i64, oneshot::Receiver<Value>)> {
        let (tx, rx) = oneshot::channel();
        let id = state.next_id;
        state.next_id += 1;
        state.pending.insert(id, tx);
        if !self.send_in(state, &wire::request(id, method, params)) {
            state.pending.remove(&id);
            return None;
        }
        Some((id, rx))
    }

    /// The answer to request `id`, waited for at most `within`.
    async fn answer_to(&self, id: i64, rx: oneshot::Receiver<Value>, within: Duration) -> Option<Value> {
        let answer = tokio::time::timeout(within, rx).await.ok().and_then(Result::ok);
        self.lock().pending.remove(&id);
        answer
    }

    /// Starts the server's process and its reader, writer and stderr tasks; `Err` says why it
    /// could not start.
    pub async fn spawn(
        self: &Arc<Self>,
        guard: Option<&(PathBuf, Arc<super::guard::Spawner>)>,
    ) -> Result<(), String> {
        use std::process::Stdio;
        let server = &self.server;
        let mut command = match guard {
            Some((program, _)) => {
                let mut command = tokio::process::Command::new(program);
                command.arg(super::guard::GUARD_ARG).arg(std::process::id().to_string()).arg(&server.command);
                command
            }
            None => {
                let mut command = tokio::process::Command::new(&server.command);
                command.process_group(0);
                command
            }
        };
        command
            .args(&server.args)
            .envs(server.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&self.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        let spawned = match guard {
            Some((_, spawner)) => spawner.spawn(command).await,
            None => command.spawn(),
        };
        let mut child = spawned.map_err(|e| format!("it could not be started: {e}"))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("it could not be started: no pipes".to_owned());
        };
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        let stop = self.stop.child_token();
        {
            let mut state = self.lock();
            state.pid = child.id();
            state.out = Some(tx);
            state.phase = ServerPhase::Starting;
            state.docs.clear();
            state.pending.clear();
            state.run = Some(stop.clone());
        }
        self.queued.store(0, Ordering::Relaxed);
        self.hung.store(false, Ordering::Relaxed);
        tokio::spawn(write_all(rx, stdin, self.queued.clone(), stop.clone()));
        tokio::spawn(drain_stderr(stderr, self.server.name.clone(), stop.clone()));
        tokio::spawn(self.clone().read_all(stdout, child, stop));
        Ok(())
    }

    /// Ends the current run: its process (the guard ends the tree) and its tasks.
    pub fn end_run(&self) {
        if let Some(run) = self.lock().run.take() {
            run.cancel();
        }
    }

    /// Takes the server's frames until it exits or is stopped, then marks it failed (unless it
    /// was stopped) and ends its process.
    async fn read_all(
        self: Arc<Self>,
        stdout: tokio::process::ChildStdout,
        mut child: tokio::process::Child,
        stop: CancellationToken,
    ) {
        let mut frames = tokio_util::codec::FramedRead::new(
            stdout,
            filectx_protocol::codec::LspCodec::new(MAX_FRAME_BYTES),
        );
        // Why it failed, and whether it ended by itself (then its status is worth saying).
        let why = loop {
            let frame = tokio::select! {
                () = stop.cancelled() => break self.hung.swap(false, Ordering::Relaxed).then(|| {
                    (format!("it stopped reading its input ({} MiB or {MAX_QUEUED} messages waited)", MAX_QUEUED_BYTES >> 20), false)
                }),
                frame = frames.next() => frame,
            };
            match frame {
                None => break Some(("it exited".to_owned(), true)),
                Some(Err(e)) => {
                    break Some((format!("it sent something that is not a framed message ({e})"), false));
                }
                Some(Ok(filectx_protocol::codec::Frame::Oversized { length, limit })) => {
                    tracing::warn!(
                        server = self.server.name,
                        length,
                        limit,
                        "a language server's message over the cap was skipped"
                    );
                }
                Some(Ok(filectx_protocol::codec::Frame::Message(body))) => {
                    if let Ok(message) = serde_json::from_slice::<Value>(&body) {
                        self.take(message);
                    }
                }
            }
        };
        // Ends the process tree: the guard kills what is beneath it on SIGTERM.
        if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let status = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
        if status.is_err() {
            let _ = child.kill().await;
        }
        let mut state = self.lock();
        state.out = None;
        state.pending.clear();
        state.pid = None;
        if let Some((why, by_itself)) = why
            && !matches!(state.phase, ServerPhase::Stopped(_))
        {
            let why = match status {
                Ok(Ok(status)) if by_itself => format!("{why} ({status})"),
                _ => why,
            };
            let backoff = Duration::from_secs(1 << state.restarts.min(5));
            tracing::warn!(server = self.server.name, root = %self.root.display(), why, ?backoff, "a language server failed; it starts again after a pause");
            state.phase = ServerPhase::Restarting { why, until: Instant::now() + backoff };
            state.restarts += 1;
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// One message of the server's.
    fn take(&self, message: Value) {
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
        match (id, method) {
            // An answer to one of ours.
            (Some(id), None) => {
                let sender = id.as_i64().and_then(|id| self.lock().pending.remove(&id));
                if let Some(sender) = sender {
                    let _ = sender.send(message.get("result").cloned().unwrap_or(Value::Null));
                }
                self.changed.notify_waiters();
            }
            // A request of the server's.
            (Some(id), Some(method)) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let reply = match method.as_str() {
                    "workspace/configuration" => {
                        wire::answer(&id, wire::configuration(&params, self.server.settings.as_ref()))
                    }
                    "window/workDoneProgress/create" => {
                        if let Some(token) = params.get("token") {
                            self.progress(token, true);
                        }
                        wire::answer(&id, Value::Null)
                    }
                    "client/registerCapability"
                    | "client/unregisterCapability"
                    | "window/showMessageRequest" => wire::answer(&id, Value::Null),
                    "workspace/workspaceFolders" => {
                        let uri = wire::uri_of(&self.root);
                        wire::answer(&id, serde_json::json!([{"uri": uri, "name": "root"}]))
                    }
                    other => wire::refusal(&id, other),
                };
                self.send(&reply);
            }
            (None, Some(method)) if method == "textDocument/publishDiagnostics" => {
                if let Some(params) = message.get("params") {
                    self.publish(params);
                }
            }
            (None, Some(method)) if method == "$/progress" => {
                let params = message.get("params");
                if let Some(token) = params.and_then(|p| p.get("token")) {
                    let kind = params.and_then(|p| p.pointer("/value/kind")).and_then(Value::as_str);
                    self.progress(token, kind != Some("end"));
                }
            }
            _ => {}
        }
    }

    /// Work in progress `token` goes on (`going`) or ended.
    fn progress(&self, token: &Value, going: bool) {
        let token = match token {
            Value::String(s) => s.chars().take(64).collect(),
            other => other.to_string().chars().take(64).collect(),
        };
        let now = Instant::now();
        {
            let mut state = self.lock();
            state.activity = now;
            state.progress.retain(|_, at| at.elapsed() < PROGRESS_FORGOTTEN);
            if !going {
                state.progress.remove(&token);
            } else if state.progress.len() < MAX_PROGRESS || state.progress.contains_key(&token) {
                state.progress.insert(token, now);
            }
        }
        self.changed.notify_waiters();
    }

    /// Whether what the server published at `at` is what it has to say: no work in progress,
    /// and it has been quiet for `settle` since (nothing published or said of its work), or,
    /// on a server other agents keep busy, `at` is four settles old.
    pub fn settled(state: &State, at: Instant, settle: Duration) -> bool {
        state.progress.values().all(|said| said.elapsed() >= PROGRESS_FORGOTTEN)
            && (state.activity.elapsed() >= settle || at.elapsed() >= settle * 4)
    }

    /// Keeps a `publishDiagnostics`: newer than what is kept for that file (a version older than
    /// the one kept is stale and dropped), for a path inside the project root or open.
    pub fn publish(&self, params: &Value) {
        let Some(path) = params.get("uri").and_then(Value::as_str).and_then(wire::path_of) else { return };
        let version = params.get("version").and_then(Value::as_i64).and_then(|v| i32::try_from(v).ok());
        let items = wire::diagnostics(params.get("diagnostics"));
        self.store(path, version, items, false);
    }

    /// Keeps diagnostics of `path` (see [`Instance::publish`]).
    pub fn store(&self, path: PathBuf, version: Option<i32>, items: Vec<Diagnostic>, pulled: bool) {
        let now = Instant::now();
        tracing::debug!(server = self.server.name, path = %path.display(), ?version, diagnostics = items.len(), "diagnostics");
        {
            let mut state = self.lock();
            let open = state.docs.contains_key(&path);
            if !open && !path.starts_with(&self.root) {
                return;
            }
            if open && version.is_none() && state.pull == Pull::TsServer {
                return;
            }
            if let (Some(new), Some(Published { version: Some(kept), .. })) =
                (version, state.published.get(&path))
                && new < *kept
            {
                return;
            }
            if let Some(doc) = state.docs.get_mut(&path) {
                if doc.change.first_reply.is_none() && version.is_none_or(|v| v >= doc.change.version) {
                    doc.change.first_reply = Some(now);
                }
                // Said of the text the last change replaced, after it was sent: what it is
                // measured against, when nothing was known of that text before.
                if doc.change.before.is_none()
                    && doc.change.replaced > 0
                    && version == Some(doc.change.replaced)
                {
                    doc.change.before = Some(items.clone());
                }
            }
            if state.published.len() >= MAX_PUBLISHED_FILES && !state.published.contains_key(&path) {
                let docs: HashSet<PathBuf> = state.docs.keys().cloned().collect();
                let oldest = state
                    .published
                    .iter()
                    .filter(|(p, _)| !docs.contains(*p))
                    .min_by_key(|(_, p)| p.at)
                    .map(|(p, _)| p.clone());
                match oldest {
                    Some(oldest) => {
                        state.published.remove(&oldest);
                    }
                    None => return,
                }
            }
            state.activity = now;
            state.published.insert(path, Published { version, items, at: now, pulled });
        }
        self.changed.notify_waiters();
    }

    /// The server's `initialize`, then `initialized`; whether it answered within `within`.
    pub async fn initialize(&self, within: Duration) -> Result<(), String> {
        let params = wire::initialize(&self.root, self.server.initialization_options.as_ref());
        let Some(answer) = self.request("initialize", params, within).await else {
            return Err(format!("it did not answer initialize within {} s", within.as_secs_f64()));
        };
        let capabilities = answer.get("capabilities");
        let commands = capabilities
            .and_then(|c| c.get("executeCommandProvider"))
            .and_then(|p| p.get("commands"))
            .and_then(Value::as_array);
        let pull = if capabilities.and_then(|c| c.get("diagnosticProvider")).is_some_and(|p| !p.is_null()) {
            Pull::Lsp
        } else if commands.is_some_and(|all| all.iter().any(|c| c == wire::TSSERVER_REQUEST)) {
            Pull::TsServer
        } else {
            Pull::No
        };
        self.send(&wire::notification("initialized", serde_json::json!({})));
        let mut state = self.lock();
        state.pull = pull;
        state.phase = ServerPhase::Ready;
        drop(state);
        self.changed.notify_waiters();
        Ok(())
    }

    /// The polite end: `shutdown` and `exit`, then the process and its tasks end.
    pub async fn shutdown(&self, why: &str) {
        let running = {
            let mut state = self.lock();
            let running = state.out.is_some() && state.phase == ServerPhase::Ready;
            state.phase = ServerPhase::Stopped(why.to_owned());
            running
        };
        if running {
            self.request("shutdown", Value::Null, Duration::from_millis(500)).await;
            self.send(&wire::notification("exit", Value::Null));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.stop.cancel();
        self.changed.notify_waiters();
    }

    /// Opens `path` with `text` as a new document (version 1); its diagnostics before are
    /// unknown.
    pub fn open(&self, path: &Path, text: Arc<str>, content: Version) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        if state.docs.len() >= MAX_OPEN_DOCUMENTS
            && let Some(oldest) = state.docs.iter().min_by_key(|(_, d)| d.used).map(|(p, _)| p.clone())
        {
            state.docs.remove(&oldest);
            drop(state);
            self.send(&wire::notification(
                "textDocument/didClose",
                serde_json::json!({"textDocument": {"uri": wire::uri_of(&oldest)}}),
            ));
            state = self.lock();
        }
        state.versions = state.versions.saturating_add(1);
        let version = state.versions;
        let change = SentChange {
            content,
            version,
            replaced: 0,
            before: None,
            shift: LineShift::default(),
            sent: now,
            first_reply: None,
            others: None,
        };
        state
            .docs
            .insert(path.to_path_buf(), Doc { version, text: text.clone(), content, used: now, change });
        state.published.remove(path);
        tracing::debug!(server = self.server.name, path = %path.display(), version, "opened");
        let uri = wire::uri_of(path);
        let sent = self.send_in(
            &state,
            &wire::notification(
                "textDocument/didOpen",
                serde_json::json!({"textDocument": {
                    "uri": uri,
                    "languageId": self.server.language_id(path),
                    "version": version,
                    "text": &*text,
                }}),
            ),
        );
        self.saved_in(&state, &uri);
        sent
    }

    /// Sends the open document `path` its new `text` (full), with what a wait for its diagnostics
    /// needs; false when it is not open.
    pub fn change(&self, path: &Path, text: Arc<str>, content: Version) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        // Every other open document's last change answered (its own version published): what
        // the others say after this change is this change's doing.
        let settled = state.docs.iter().filter(|(p, _)| p.as_path() != path).all(|(p, d)| {
            state.published.get(p).is_some_and(|published| match published.version {
                Some(v) => v >= d.version,
                None => d.change.first_reply.is_some(),
            })
        });
        let others: Option<HashMap<PathBuf, Vec<Diagnostic>>> = settled.then(|| {
            state
                .published
                .iter()
                .filter(|(p, _)| p.as_path() != path)
                .map(|(p, published)| (p.clone(), published.items.clone()))
                .collect()
        });
        let before = state.published.get(path).cloned();
        state.versions = state.versions.saturating_add(1);
        let next = state.versions;
        let Some(doc) = state.docs.get_mut(path) else { return false };
        if doc.content == content {
            doc.used = now;
            return true;
        }
        // What it said of the text being replaced, if it said it after that text was sent.
        let before = before
            .filter(|p| p.version.map_or(doc.change.first_reply.is_some(), |v| v == doc.version))
            .map(|p| p.items);
        let shift = LineShift::between(&doc.text, &text);
        let replaced = doc.version;
        tracing::debug!(server = self.server.name, path = %path.display(), version = next, replaced, before = ?before.as_ref().map(Vec::len), "changed");
        doc.version = next;
        doc.text = text.clone();
        doc.content = content;
        doc.used = now;
        doc.change = SentChange {
            content,
            version: next,
            replaced,
            before,
            shift,
            sent: now,
            first_reply: None,
            others,
        };
        let version = doc.version;
        let uri = wire::uri_of(path);
        let sent = self.send_in(
            &state,
            &wire::notification(
                "textDocument/didChange",
                serde_json::json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": &*text}]}),
            ),
        );
        self.saved_in(&state, &uri);
        sent
    }

    /// Tells a server that checks on save (`did_save`) that `uri` was saved: it says nothing
    /// of an opened or changed document until then.
    fn saved_in(&self, state: &State, uri: &str) {
        if self.server.did_save {
            let saved = serde_json::json!({"textDocument": {"uri": uri}});
            self.send_in(state, &wire::notification("textDocument/didSave", saved));
        }
    }

    /// Closes `path` (gone, or long unused).
    pub fn close(&self, path: &Path) {
        let open = self.lock().docs.remove(path).is_some();
        if open {
            self.send(&wire::notification(
                "textDocument/didClose",
                serde_json::json!({"textDocument": {"uri": wire::uri_of(path)}}),
            ));
        }
    }

    /// Tells the server files came or went (`1` created, `2` changed, `3` deleted).
    pub fn watched(&self, path: &Path, kind: u8) {
        self.send(&wire::notification(
            "workspace/didChangeWatchedFiles",
            serde_json::json!({"changes": [{"uri": wire::uri_of(path), "type": kind}]}),
        ));
    }

    /// Asks a server that answers pulls for the diagnostics of the open document `path`, and
    /// keeps them as published for the version asked about; with `others` (after a change),
    /// first those of the other open documents a tsserver may have changed its mind about.
    pub async fn pull(&self, path: &Path, within: Duration, others: bool) {
        let until = Instant::now() + within;
        let kind = self.lock().pull;
        if kind == Pull::TsServer && others {
            let mut open: Vec<(Instant, PathBuf)> = self
                .lock()
                .docs
                .iter()
                .filter(|(p, _)| p.as_path() != path)
                .map(|(p, d)| (d.used, p.clone()))
                .collect();
            open.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
            for (_, other) in open.into_iter().take(MAX_PULLED_OTHERS) {
                self.pull_one(&other, kind, until).await;
            }
        }
        self.pull_one(path, kind, until).await;
    }

    /// One document's pull, answered by `until`.
    async fn pull_one(&self, path: &Path, kind: Pull, until: Instant) {
        let uri = wire::uri_of(path);
        let ts = |command: &str| serde_json::json!({"command": wire::TSSERVER_REQUEST, "arguments": [command, {"file": uri}]});
        // The version and the requests under one lock: no change goes between them.
        let (version, asked) = {
            let mut state = self.lock();
            let Some(version) = state.docs.get(path).map(|d| d.version) else { return };
            let asked: Vec<_> = match kind {
                Pull::No => return,
                Pull::Lsp => {
                    let params = serde_json::json!({"textDocument": {"uri": uri}});
                    self.request_in(&mut state, "textDocument/diagnostic", params).into_iter().collect()
                }
                Pull::TsServer => ["syntacticDiagnosticsSync", "semanticDiagnosticsSync"]
                    .iter()
                    .filter_map(|c| self.request_in(&mut state, "workspace/executeCommand", ts(c)))
                    .collect(),
            };
            (version, asked)
        };
        let mut items = Vec::new();
        let wanted = asked.len();
        for (id, rx) in asked {
            let within = until.saturating_duration_since(Instant::now());
            let Some(answer) = self.answer_to(id, rx, within).await else { return };
            // An error, or a report without its list, says nothing of the version.
            let list = answer.get(if kind == Pull::TsServer { "body" } else { "items" });
            if !list.is_some_and(Value::is_array) {
                return;
            }
            match kind {
                Pull::TsServer => items.extend(wire::tsserver_diagnostics(list)),
                _ => items.extend(wire::diagnostics(list)),
            }
        }
        if wanted > 0 {
            items.truncate(wire::MAX_DIAGNOSTICS_PER_FILE);
            self.store(path.to_path_buf(), Some(version), items, true);
        }
    }
}

/// Writes the frames queued for a server until it is stopped or its input closes.
async fn write_all(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut stdin: tokio::process::ChildStdin,
    queued: Arc<AtomicUsize>,
    stop: CancellationToken,
) {
    loop {
        let frame = tokio::select! {
            () = stop.cancelled() => return,
            frame = rx.recv() => frame,
        };
        let Some(frame) = frame else { return };
        let written = stdin.write_all(&frame).await;
        queued.fetch_sub(frame.len(), Ordering::Relaxed);
        if written.is_err() {
            return;
        }
    }
}

/// Logs what a server says on stderr, at most [`STDERR_LOG_BYTES`] a minute; the rest is read
/// and dropped.
async fn drain_stderr(stderr: tokio::process::ChildStderr, name: String, stop: CancellationToken) {
    use tokio::io::AsyncReadExt as _;
    let mut stderr = stderr;
    let mut buf = vec![0u8; 8192];
    let (mut window, mut logged) = (Instant::now(), 0usize);
    loop {
        let n = tokio::select! {
            () = stop.cancelled() => return,
            n = stderr.read(&mut buf) => n,
        };
        let Ok(n) = n else { return };
        if n == 0 {
            return;
        }
        if window.elapsed() > Duration::from_secs(60) {
            (window, logged) = (Instant::now(), 0);
        }
        if logged < STDERR_LOG_BYTES {
            let take = n.min(STDERR_LOG_BYTES - logged);
            logged += take;
            let text = String::from_utf8_lossy(&buf[..take]);
            tracing::debug!(server = name, stderr = %text.escape_debug(), "language server said");
        }
    }
}
