//! Language servers, one per (server, project root), shared by every session, the daemon their
//! only client: a write or edit can then be answered with what it broke.
//!
//! - Which servers: [`config`] (the owner's entries and the built-ins found on `PATH`).
//! - Where: a file's project root by the server's markers ([`root`]), never above the session
//!   root holding it.
//! - Fed from where changes land: the provider tells [`Lsp`] (its [`Feed`]) of every write, edit
//!   and restore that landed, whoever made it, journal on or off; a read opens the document
//!   ([`Lsp::touch`]); the watcher tells it of outside changes ([`Lsp::outside`]). Each server's
//!   events are taken in order by its driver ([`instance`]).
//! - Asked: [`Lsp::wait`] waits, up to a deadline and holding nothing, for the diagnostics of
//!   the version a change wrote, and says what the change introduced ([`introduced`]), what was
//!   there before, and what it broke in other open files; [`Lsp::current`] for the file as it is.
//! - Bounded: at most `max_servers` at once and `max_memory` bytes over their whole process
//!   trees ([`tree`]), the least recently used stopped first; idle ones stop; every process a
//!   server started ends when the daemon does, however it ends ([`guard`]).

pub mod config;
pub mod guard;
mod instance;
pub mod introduced;
pub mod root;
pub mod tree;
pub mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

pub use self::config::{LspConfig, Server, ServerSpec};
use self::instance::{Instance, Pull, ServerPhase};
pub use self::wire::{Diagnostic, Severity};
use crate::provider::journaled::{Feed, Landing};
use crate::provider::{Root, Version};

/// Largest file sent to a language server; a bigger one gets no diagnostics.
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;
/// Most bytes of document text waiting to be taken by the drivers; past it a change is not
/// queued (its document is read again from disk later).
const MAX_QUEUED_BYTES: usize = 64 << 20;
/// Most events waiting for one server's driver.
const MAX_EVENTS: usize = 512;
/// How long a server refused by the memory budget stays refused.
const REFUSED_FOR: Duration = Duration::from_secs(30);
/// How often memory is measured and idle servers and documents are looked for.
const TICK: Duration = Duration::from_secs(2);

/// A server instance's key: which server, for which project root.
type Key = (usize, PathBuf);

/// Something a driver does for its server.
#[derive(Debug)]
enum Event {
    /// Open `path` (read beneath `root`) unless it is open at what is on disk.
    Open { root: Root, path: PathBuf },
    /// A change of `path` landed: whether it created the file, the text it replaced (when the
    /// document is not open, so that what was there before is known) and the text it wrote
    /// (`None`: removed).
    Landed {
        root: Root,
        path: PathBuf,
        created: bool,
        before: Option<Arc<str>>,
        after: Option<(Version, Arc<str>)>,
    },
    /// `path` changed outside the daemon (to `current`; `None`: gone): read it again if it is
    /// open at another content.
    Outside { root: Root, path: PathBuf, current: Option<Version> },
}

impl Event {
    fn bytes(&self) -> usize {
        match self {
            Self::Landed { before, after, .. } => {
                before.as_ref().map_or(0, |t| t.len()) + after.as_ref().map_or(0, |(_, t)| t.len())
            }
            _ => 0,
        }
    }
}

/// A running server's handle: its instance and its driver's queue.
#[derive(Debug, Clone)]
struct Running {
    instance: Arc<Instance>,
    events: mpsc::Sender<Event>,
}

/// How fresh an answer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The diagnostics of the version asked about.
    Fresh,
    /// None came in time (the server is ready).
    Pending,
    /// None came in time, the server still starting.
    Starting,
    /// The server failed, or was refused (why).
    Failed(String),
}

/// What a server said of one version of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// How fresh.
    pub status: Status,
    /// The server's short name.
    pub server: String,
    /// How long the answer took.
    pub elapsed: Duration,
    /// The diagnostics (of the severities shown) the change introduced, or all of the file's for
    /// [`Lsp::current`].
    pub introduced: Vec<Diagnostic>,
    /// Those of the file that were there before.
    pub remaining: usize,
    /// Other files with diagnostics the change introduced, and how many.
    pub other_files: Vec<(PathBuf, usize)>,
}

/// A running server, for `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its short name.
    pub name: String,
    /// Its project root.
    pub root: PathBuf,
    /// The server's pid (beneath its guard).
    pub pid: Option<u32>,
    /// `starting`, `ready`, `restarting` or `stopped`.
    pub state: &'static str,
    /// Resident bytes of its process tree.
    pub rss_bytes: u64,
    /// Documents open in it.
    pub open_documents: usize,
    /// Sessions that used it.
    pub sessions: usize,
    /// Times it was started again after failing.
    pub restarts: u32,
}

/// Most files remembered as not sent to a server (too big, not text), with why.
const MAX_SKIPPED: usize = 256;

/// The language servers of the daemon.
#[derive(Debug)]
pub struct Lsp {
    /// Itself, for the tasks it starts from where only `&self` is at hand (the provider's feed).
    me: Weak<Lsp>,
    config: LspConfig,
    servers: Vec<Arc<Server>>,
    missing: Vec<String>,
    unusable: Vec<(String, String)>,
    /// The guard program and the thread that forks guards (`None`: servers run unguarded, as
    /// in a library use without the `filectxd` binary).
    guard: Option<(PathBuf, Arc<guard::Spawner>)>,
    running: Mutex<HashMap<Key, Running>>,
    /// Which server each document went to.
    index: Mutex<HashMap<PathBuf, Key>>,
    /// Servers the memory budget refused, and until when.
    refused: Mutex<HashMap<Key, (String, Instant)>>,
    /// Files whose last change was not sent to their server, and why.
    skipped: Mutex<HashMap<PathBuf, String>>,
    /// Built-ins already logged as not run from inside a root (logged once each).
    kept_out: Mutex<std::collections::HashSet<usize>>,
    /// Told whenever an event is handed to a driver.
    routed: Notify,
    queued: Arc<AtomicUsize>,
    runtime: tokio::runtime::Handle,
    stop: CancellationToken,
}

impl Lsp {
    /// The language servers of `config` (commands looked up now), run with the guard program
    /// `guard` (the `filectxd` binary; `None`: unguarded). Must be called inside a runtime.
    pub fn start(config: LspConfig, guard: Option<PathBuf>) -> Arc<Self> {
        let found = config::find(&config);
        let runtime = tokio::runtime::Handle::current();
        let guard = guard.and_then(|program| match guard::Spawner::start(runtime.clone()) {
            Ok(spawner) => Some((program, Arc::new(spawner))),
            Err(e) => {
                tracing::warn!(%e, "no language-server spawner: servers run without their guard");
                None
            }
        });
        for (name, why) in &found.unusable {
            tracing::warn!(server = name, why, "a configured language server cannot be used");
        }
        if !found.servers.is_empty() {
            let names: Vec<&str> = found.servers.iter().map(|s| s.name.as_str()).collect();
            tracing::info!(servers = ?names, missing = ?found.missing, "language servers");
        }
        let lsp = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            servers: found.servers.into_iter().map(Arc::new).collect(),
            missing: found.missing,
            unusable: found.unusable,
            config,
            guard,
            running: Mutex::default(),
            index: Mutex::default(),
            refused: Mutex::default(),
            skipped: Mutex::default(),
            kept_out: Mutex::default(),
            routed: Notify::new(),
            queued: Arc::default(),
            runtime,
            stop: CancellationToken::new(),
        });
        lsp.runtime.spawn(tend(Arc::downgrade(&lsp)));
        lsp
    }

    /// Whether any server may run.
    pub fn any(&self) -> bool {
        !self.servers.is_empty()
    }

    /// The built-ins not found, and the owner's entries that cannot be used, for status.
    pub fn missing(&self) -> Vec<String> {
        self.missing
            .iter()
            .cloned()
            .chain(self.unusable.iter().map(|(n, why)| format!("{n}: {why}")))
            .collect()
    }

    /// The `PATH` commands were looked up in.
    pub fn path(&self) -> Option<String> {
        self.config.path.as_ref().map(|p| p.to_string_lossy().into_owned())
    }

    /// The server that serves `path`, if any.
    pub fn serves(&self, path: &Path) -> Option<(usize, &Arc<Server>)> {
        self.servers.iter().enumerate().find(|(_, s)| s.serves(path))
    }

    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `path` (read beneath `root`) in its server, starting that server, without waiting:
    /// a read warms it up before the first edit. A document already sent is left as it is (the
    /// changes that land and the watcher keep it true).
    pub fn touch(&self, root: &Root, path: &Path) {
        if self.serves(path).is_some() && !Self::lock(&self.index).contains_key(path) {
            self.route(root, path, Event::Open { root: root.clone(), path: path.to_path_buf() });
        }
    }

    /// `path` changed outside the daemon, to `current` (`None`: removed): its server reads it
    /// again if it has it open at another content (the daemon's own writes are known already).
    pub fn outside(&self, root: &Root, path: &Path, current: Option<Version>) {
        if Self::lock(&self.index).contains_key(path) {
            self.route(root, path, Event::Outside { root: root.clone(), path: path.to_path_buf(), current });
        }
    }

    /// Hands `event` of `path` to its server's driver (on the runtime: finding the project root
    /// looks at files), unless too much text is queued already.
    fn route(&self, root: &Root, path: &Path, event: Event) {
        let (Some((server, _)), Some(lsp)) = (self.serves(path), self.me.upgrade()) else { return };
        Self::lock(&self.skipped).remove(path);
        let bytes = event.bytes();
        if self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes > MAX_QUEUED_BYTES {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            tracing::warn!(path = %path.display(), "too much text waits for the language servers: a change was not sent (the file is read again when next used)");
            Self::lock(&self.index).remove(path);
            return;
        }
        let (root, path) = (root.clone(), path.to_path_buf());
        self.runtime.spawn(async move {
            if let Some(why) = inside_root(&lsp.servers[server], &root) {
                if Self::lock(&lsp.kept_out).insert(server) {
                    tracing::warn!(server = lsp.servers[server].name, root = %root.path().display(), why, "a built-in language server is not run");
                }
                lsp.skip(&path, &why);
                lsp.queued.fetch_sub(bytes, Ordering::Relaxed);
                lsp.routed.notify_waiters();
                return;
            }
            let key = match Self::lock(&lsp.index).get(&path).cloned() {
                Some(key) => key,
                None => (server, root::project_root(&root, &path, &lsp.servers[server].markers)),
            };
            let sent = match lsp.running_for(&key) {
                Some(running) => {
                    Self::lock(&lsp.index).insert(path.clone(), key);
                    running.events.send(event).await.is_ok()
                }
                None => {
                    // Refused by the budget: a wait for this file says why at once.
                    if let Some((why, _)) = Self::lock(&lsp.refused).get(&key).cloned() {
                        lsp.skip(&path, &why);
                    }
                    false
                }
            };
            if !sent {
                lsp.queued.fetch_sub(bytes, Ordering::Relaxed);
            }
            lsp.routed.notify_waiters();
        });
    }

    /// The running server of `key`, started when it is not (stopping the least recently used
    /// one when `max_servers` run); `None` while the memory budget refuses it.
    fn running_for(&self, key: &Key) -> Option<Running> {
        if let Some((_, until)) = Self::lock(&self.refused).get(key)
            && Instant::now() < *until
        {
            return None;
        }
        let mut running = Self::lock(&self.running);
        if let Some(found) = running.get(key) {
            return Some(found.clone());
        }
        if running.len() >= self.config.max_servers.max(1)
            && let Some(oldest) =
                running.iter().min_by_key(|(_, r)| r.instance.lock().used).map(|(k, _)| k.clone())
            && let Some(evicted) = running.remove(&oldest)
        {
            tracing::info!(server = evicted.instance.server.name, root = %oldest.1.display(), max = self.config.max_servers, "a language server stops to make room (max_language_servers)");
            self.runtime.spawn(async move {
                evicted.instance.shutdown("stopped to make room for another (max_language_servers)").await
            });
        }
        let instance = Instance::new(self.servers[key.0].clone(), key.1.clone());
        let (events, rx) = mpsc::channel(MAX_EVENTS);
        let handle = Running { instance: instance.clone(), events };
        running.insert(key.clone(), handle.clone());
        drop(running);
        self.runtime.spawn(drive(self.me.clone(), instance, rx));
        Some(handle)
    }

    /// The server and its document of `path`, if it went to one.
    fn instance_of(&self, path: &Path) -> Option<(Key, Arc<Instance>)> {
        let key = Self::lock(&self.index).get(path).cloned()?;
        let running = Self::lock(&self.running).get(&key).map(|r| r.instance.clone())?;
        Some((key, running))
    }

    /// Waits, at most the deadline (`wait`, or `wait_starting` while the server starts), for the
    /// diagnostics of `path` at `content` (the version a change wrote), and says what that
    /// change introduced; `visible` says which other files may be named. `None` when no server
    /// serves the file. A cancel answers at once (pending).
    pub async fn wait(
        &self,
        path: &Path,
        content: Version,
        visible: &(dyn Fn(&Path) -> bool + Sync),
        cancel: Option<&CancellationToken>,
    ) -> Option<Report> {
        let (_, server) = self.serves(path)?;
        Some(self.answer(server, path, content, visible, cancel, true).await)
    }

    /// The diagnostics of `path` as it is now (`content`), opened from disk beneath `root` when
    /// it is not open: all of them (of the severities shown), as [`Report::introduced`].
    pub async fn current(
        &self,
        root: &Root,
        path: &Path,
        content: Version,
        cancel: Option<&CancellationToken>,
    ) -> Option<Report> {
        let (_, server) = self.serves(path)?;
        self.route(root, path, Event::Open { root: root.clone(), path: path.to_path_buf() });
        Some(self.answer(server, path, content, &|_| false, cancel, false).await)
    }

    async fn answer(
        &self,
        server: &Arc<Server>,
        path: &Path,
        content: Version,
        visible: &(dyn Fn(&Path) -> bool + Sync),
        cancel: Option<&CancellationToken>,
        introduced: bool,
    ) -> Report {
        let started = Instant::now();
        let name = server.name.clone();
        let report = |status, introduced, remaining, other_files| Report {
            status,
            server: name.clone(),
            elapsed: started.elapsed(),
            introduced,
            remaining,
            other_files,
        };
        let mut deadline: Option<Instant> = None;
        // The document version last pulled: a document opened again (or changed) since is
        // pulled again.
        let mut pulled: Option<i32> = None;
        loop {
            if let Some(why) = Self::lock(&self.skipped).get(path) {
                return report(Status::Failed(why.clone()), Vec::new(), 0, Vec::new());
            }
            let found = self.instance_of(path);
            let starting = found.as_ref().is_none_or(|(_, i)| i.lock().phase == ServerPhase::Starting);
            // Set once: a server still starting when asked gets the longer deadline.
            let limit = if starting { self.config.wait_starting } else { self.config.wait };
            let until = *deadline.get_or_insert(started + limit);
            if let Some((key, instance)) = &found {
                if let Some((why, until)) = Self::lock(&self.refused).get(key)
                    && Instant::now() < *until
                {
                    return report(Status::Failed(why.clone()), Vec::new(), 0, Vec::new());
                }
                let state = instance.lock();
                match &state.phase {
                    ServerPhase::Restarting { why, until } => {
                        let left = until.saturating_duration_since(Instant::now()).as_secs_f64().ceil();
                        let why = format!("{why}; it starts again in {left} s");
                        return report(Status::Failed(why), Vec::new(), 0, Vec::new());
                    }
                    ServerPhase::Stopped(why) => {
                        return report(Status::Failed(why.clone()), Vec::new(), 0, Vec::new());
                    }
                    ServerPhase::Starting | ServerPhase::Ready => {}
                }
                if let Some(doc) = state.docs.get(path).filter(|d| d.change.content == content) {
                    let change = &doc.change;
                    let fresh = state.published.get(path).filter(|p| match p.version {
                        Some(v) => v >= change.version,
                        None => change.first_reply.is_some_and(|first| first.elapsed() >= self.config.settle),
                    });
                    // A pull's answer is all the server has to say of that version. A push may
                    // be a step of its work (pyright publishes a file checked in part while it
                    // says work remains), and other open files' reports follow the changed
                    // one's: a push counts once the server has been quiet a settle long (or the
                    // push is four settles old), with no work in progress.
                    let settled = |p: &&instance::Published| {
                        p.pulled || Instance::settled(&state, p.at, self.config.settle)
                    };
                    if let Some(published) = fresh.filter(settled) {
                        let shown = |d: &Diagnostic| self.shown(d);
                        let after: Vec<Diagnostic> =
                            published.items.iter().filter(|d| shown(d)).cloned().collect();
                        if !introduced {
                            return report(Status::Fresh, after, 0, Vec::new());
                        }
                        let before: Vec<Diagnostic> =
                            change.before.iter().flatten().filter(|d| shown(d)).cloned().collect();
                        let new = introduced::introduced(&before, &after, &change.shift);
                        let remaining = after.len() - new.len();
                        let added: Vec<Diagnostic> = new.into_iter().map(|i| after[i].clone()).collect();
                        // Other files broken: only while no other document changed since this
                        // change (nor was still being checked when it was sent), and only files
                        // whose errors before it are known; else another change may be the cause.
                        let alone = state
                            .docs
                            .iter()
                            .all(|(p, d)| p.as_path() == path || d.change.sent <= change.sent);
                        let snapshot = change.others.as_ref().filter(|_| alone);
                        let mut others: Vec<(PathBuf, usize)> = state
                            .published
                            .iter()
                            .filter(|(p, pub_)| p.as_path() != path && pub_.at > change.sent && visible(p))
                            .filter_map(|(p, pub_)| {
                                let before: Vec<Diagnostic> =
                                    snapshot?.get(p)?.iter().filter(|d| shown(d)).cloned().collect();
                                let after: Vec<Diagnostic> =
                                    pub_.items.iter().filter(|d| shown(d)).cloned().collect();
                                let count =
                                    introduced::introduced(&before, &after, &Default::default()).len();
                                (count > 0).then(|| (p.clone(), count))
                            })
                            .collect();
                        others.sort();
                        return report(Status::Fresh, added, remaining, others);
                    }
                    if state.pull != Pull::No && pulled != Some(doc.version) {
                        pulled = Some(doc.version);
                        let (instance, path) = (instance.clone(), path.to_path_buf());
                        let within = until.saturating_duration_since(Instant::now());
                        self.runtime.spawn(async move { instance.pull(&path, within, true).await });
                    }
                }
            }
            let now = Instant::now();
            if now >= until {
                let status = if starting { Status::Starting } else { Status::Pending };
                return report(status, Vec::new(), 0, Vec::new());
            }
            let changed = found.as_ref().map(|(_, i)| i.changed.notified());
            let routed = self.routed.notified();
            // A settle may end with no message: look again in a moment.
            let tick = (until - now).min(self.config.settle.max(Duration::from_millis(20)));
            tokio::select! {
                () = async { if let Some(c) = cancel { c.cancelled().await } else { std::future::pending().await } } => {
                    return report(if starting { Status::Starting } else { Status::Pending }, Vec::new(), 0, Vec::new());
                }
                () = async { if let Some(c) = changed { c.await } else { std::future::pending().await } } => {}
                () = routed => {}
                () = tokio::time::sleep(tick) => {}
            }
        }
    }

    /// Whether a diagnostic is of a severity shown (errors; warnings too when asked).
    fn shown(&self, diagnostic: &Diagnostic) -> bool {
        diagnostic.severity == Severity::Error
            || (self.config.warnings && diagnostic.severity == Severity::Warning)
    }

    /// The running servers, for `daemon/status`.
    pub fn status(&self) -> Vec<ServerStatus> {
        let running: Vec<Running> = Self::lock(&self.running).values().cloned().collect();
        let mut out: Vec<ServerStatus> = running
            .iter()
            .map(|r| {
                let state = r.instance.lock();
                ServerStatus {
                    name: r.instance.server.name.clone(),
                    root: r.instance.root.clone(),
                    pid: state.pid.and_then(|guard| {
                        if self.guard.is_some() {
                            tree::descendants(guard).first().copied()
                        } else {
                            Some(guard)
                        }
                    }),
                    state: match state.phase {
                        ServerPhase::Starting => "starting",
                        ServerPhase::Ready => "ready",
                        ServerPhase::Restarting { .. } => "restarting",
                        ServerPhase::Stopped(_) => "stopped",
                    },
                    rss_bytes: state.rss,
                    open_documents: state.docs.len(),
                    sessions: state.sessions.len(),
                    restarts: state.restarts,
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.name, &a.root).cmp(&(&b.name, &b.root)));
        out
    }

    /// Stops every server (the daemon is stopping).
    pub async fn stop_all(&self) {
        self.stop.cancel();
        let running: Vec<Running> = Self::lock(&self.running).drain().map(|(_, r)| r).collect();
        let stops = running.iter().map(|r| r.instance.shutdown("the daemon stopped"));
        futures::future::join_all(stops).await;
        // Their processes end with their readers (SIGTERM to each guard); a moment for that.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// Measures memory, stops idle servers and what the budget does not allow, closes idle
    /// documents.
    fn tick(&self) {
        let now = Instant::now();
        let running: Vec<(Key, Running)> =
            Self::lock(&self.running).iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        let mut total = 0u64;
        let mut by_use: Vec<(Instant, Key, u64)> = Vec::new();
        for (key, r) in &running {
            let pid = r.instance.lock().pid;
            let rss = pid.map_or(0, tree::resident_bytes);
            let mut state = r.instance.lock();
            state.rss = rss;
            total += rss;
            by_use.push((state.used, key.clone(), rss));
            let idle_docs: Vec<PathBuf> = state
                .docs
                .iter()
                .filter(|(_, d)| now.duration_since(d.used) > self.config.document_idle)
                .map(|(p, _)| p.clone())
                .collect();
            let idle = now.duration_since(state.used) > self.config.idle;
            drop(state);
            for path in idle_docs {
                r.instance.close(&path);
                Self::lock(&self.index).remove(&path);
            }
            if idle {
                self.retire(key, "stopped after being idle", None);
            }
        }
        by_use.sort();
        let mut over = total.saturating_sub(self.config.max_memory);
        for (_, key, rss) in by_use {
            if over == 0 {
                break;
            }
            let why = format!(
                "the language servers' memory budget ({} MiB, language_server_memory) is used up; this one took {} MiB",
                self.config.max_memory >> 20,
                rss >> 20
            );
            self.retire(&key, &why, Some(now + REFUSED_FOR));
            over = over.saturating_sub(rss);
        }
    }

    /// Stops the server of `key` for `why`; refused until `refused` when given.
    fn retire(&self, key: &Key, why: &str, refused: Option<Instant>) {
        let Some(running) = Self::lock(&self.running).remove(key) else { return };
        tracing::info!(server = running.instance.server.name, root = %key.1.display(), why, "a language server stops");
        if let Some(until) = refused {
            Self::lock(&self.refused).insert(key.clone(), (why.to_owned(), until));
        }
        Self::lock(&self.index).retain(|_, k| k != key);
        let why = why.to_owned();
        self.runtime.spawn(async move { running.instance.shutdown(&why).await });
    }
}

/// The daemon's [`Feed`]: every change that landed goes to its file's server.
impl Feed for Lsp {
    fn wants(&self, path: &Path) -> Option<u64> {
        self.serves(path).map(|_| MAX_DOCUMENT_BYTES)
    }

    fn landed(&self, landing: Landing<'_>) {
        let path = landing.path;
        let text = |bytes: &[u8]| std::str::from_utf8(bytes).ok().map(Arc::<str>::from);
        let after = match landing.after {
            None => None,
            Some((version, Some(bytes))) => match text(bytes) {
                Some(text) => Some((version, text)),
                None => return self.skip(path, "the file is not UTF-8 text"),
            },
            Some((_, None)) => {
                return self.skip(
                    path,
                    &format!(
                        "the file is over {} MiB, which is not sent to language servers",
                        MAX_DOCUMENT_BYTES >> 20
                    ),
                );
            }
        };
        // The text before, even for a document its server has: a read's open may still be on
        // its way, to find this change's text on disk when it gets there.
        let before = landing.before.and_then(text);
        let root = landing.root.clone();
        let event = Event::Landed { root, path: path.to_path_buf(), created: landing.created, before, after };
        self.route(landing.root, path, event);
        if let (Some(session), Some((_, instance))) = (landing.session, self.instance_of(path)) {
            instance.use_by(Some(&Arc::from(session)));
        }
    }
}

impl Lsp {
    /// Remembers that the last change of `path` was not sent to its server, and why.
    fn skip(&self, path: &Path, why: &str) {
        let mut skipped = Self::lock(&self.skipped);
        if skipped.len() >= MAX_SKIPPED {
            skipped.clear();
        }
        skipped.insert(path.to_path_buf(), why.to_owned());
    }
}

/// Why a built-in server must not run for files beneath `root`: its command (as found on the
/// daemon's `PATH`, or where that leads) lies inside it, where a repository chose it (a
/// `node_modules/.bin`, a venv). The owner's own entries run wherever they are.
fn inside_root(server: &Server, root: &Root) -> Option<String> {
    if server.configured {
        return None;
    }
    let real = std::fs::canonicalize(&server.command).ok();
    let inside = [Some(server.command.as_path()), real.as_deref()]
        .into_iter()
        .flatten()
        .any(|c| c.starts_with(root.path()));
    inside.then(|| {
        format!(
            "its command {} lies inside this session's root, and a built-in never runs from there (name it in a [[language_server]] entry to allow it)",
            server.command.display()
        )
    })
}

/// Every few seconds, while the `Lsp` lives: [`Lsp::tick`].
async fn tend(lsp: Weak<Lsp>) {
    loop {
        tokio::time::sleep(TICK).await;
        let Some(lsp) = lsp.upgrade() else { return };
        if lsp.stop.is_cancelled() {
            return;
        }
        lsp.tick();
    }
}

/// One server's driver: starts it (again, after a failure and its backoff), then takes its
/// events in order.
async fn drive(lsp: Weak<Lsp>, instance: Arc<Instance>, mut events: mpsc::Receiver<Event>) {
    let mut roots: HashMap<PathBuf, Root> = HashMap::new();
    loop {
        let Some(this) = lsp.upgrade() else { return };
        let (guard, wait_starting) = (this.guard.clone(), this.config.wait_starting);
        let queued = this.queued.clone();
        drop(this);
        let started = match instance.spawn(guard.as_ref()).await {
            Ok(()) => instance.initialize(wait_starting.max(Duration::from_secs(5))).await,
            Err(why) => Err(why),
        };
        if let Err(why) = started {
            let mut state = instance.lock();
            if matches!(state.phase, ServerPhase::Stopped(_)) {
                return;
            }
            let backoff = Duration::from_secs(1 << state.restarts.min(5));
            tracing::warn!(server = instance.server.name, root = %instance.root.display(), why, "a language server could not start");
            state.phase = ServerPhase::Restarting { why, until: Instant::now() + backoff };
            state.restarts += 1;
            drop(state);
            instance.end_run();
            instance.changed.notify_waiters();
        } else {
            // Documents open before a failure are opened again from disk.
            for (path, root) in roots.clone() {
                open_from_disk(&instance, &root, &path).await;
            }
        }
        // Events until it fails or stops.
        loop {
            let phase = instance.lock().phase.clone();
            match phase {
                ServerPhase::Stopped(_) => return,
                ServerPhase::Restarting { until, .. } => {
                    tokio::select! {
                        () = instance.stop.cancelled() => return,
                        () = tokio::time::sleep_until(until.into()) => {}
                    }
                    break;
                }
                ServerPhase::Starting | ServerPhase::Ready => {}
            }
            let event = tokio::select! {
                () = instance.stop.cancelled() => return,
                () = instance.changed.notified() => continue,
                event = events.recv() => event,
            };
            let Some(event) = event else { return };
            queued.fetch_sub(event.bytes(), Ordering::Relaxed);
            let settle = lsp.upgrade().map_or(Duration::from_millis(100), |l| l.config.settle);
            take(&instance, event, &mut roots, settle).await;
        }
    }
}

/// One event of a server's.
async fn take(instance: &Arc<Instance>, event: Event, roots: &mut HashMap<PathBuf, Root>, settle: Duration) {
    instance.use_by(None);
    match event {
        Event::Open { root, path } => {
            roots.insert(path.clone(), root.clone());
            open_from_disk(instance, &root, &path).await;
        }
        Event::Outside { root, path, current } => {
            let open = instance.lock().docs.get(&path).map(|doc| doc.content);
            match (open, current) {
                (Some(known), Some(now)) if known == now => {}
                (Some(_), None) => {
                    instance.close(&path);
                    instance.watched(&path, 3);
                    roots.remove(&path);
                }
                (Some(_), Some(_)) => open_from_disk(instance, &root, &path).await,
                (None, _) => {}
            }
        }
        Event::Landed { root, path, created, before, after } => {
            let mut open = instance.lock().docs.contains_key(&path);
            // Opened from disk after this change had landed (a read's open went after it): the
            // server has the new text as if it had always been there. Opened again from the
            // text before, so that the change is measured, and sent, as one.
            if let (Some((content, _)), Some(before)) = (&after, &before) {
                let opened_after = instance.lock().docs.get(&path).is_some_and(|d| {
                    d.change.replaced == 0
                        && d.content == *content
                        && Version::of(before.as_bytes()) != *content
                });
                if opened_after {
                    instance.close(&path);
                    open = false;
                }
            }
            roots.insert(path.clone(), root);
            match after {
                None => {
                    instance.close(&path);
                    instance.watched(&path, 3);
                    roots.remove(&path);
                }
                Some((content, text)) => {
                    if created {
                        instance.watched(&path, 1);
                    }
                    if !open {
                        match before {
                            // What was there before, opened first: its diagnostics are what the
                            // change is measured against.
                            Some(before) => {
                                let old = Version::of(before.as_bytes());
                                instance.open(&path, before, old);
                                first_diagnostics(instance, &path, settle).await;
                            }
                            // A new file (or one whose old text is not known): all it has is new.
                            None => {
                                instance.open(&path, text, content);
                                return;
                            }
                        }
                    }
                    instance.change(&path, text, content);
                }
            }
        }
    }
}

/// Waits (a little) for the first diagnostics of a document just opened.
async fn first_diagnostics(instance: &Arc<Instance>, path: &Path, settle: Duration) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let ready = {
            let state = instance.lock();
            state.published.contains_key(path) || state.phase != ServerPhase::Ready
        };
        if ready {
            tokio::time::sleep(settle).await;
            return;
        }
        if instance.lock().pull != Pull::No {
            instance.pull(path, Duration::from_secs(2), false).await;
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let _ = tokio::time::timeout(deadline - now, instance.changed.notified()).await;
    }
}

/// Opens (or changes to) `path` as it is on disk beneath `root`.
async fn open_from_disk(instance: &Arc<Instance>, root: &Root, path: &Path) {
    let (root, owned) = (root.clone(), path.to_path_buf());
    let read = tokio::task::spawn_blocking(move || -> Option<(Version, Arc<str>)> {
        use std::io::Read as _;
        let rel = root.relative(&owned)?;
        let file = root.open_read(rel).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_DOCUMENT_BYTES || !root.admits(&meta) {
            return None;
        }
        let mut bytes = Vec::new();
        file.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes).ok()?;
        let version = Version::of(&bytes);
        Some((version, Arc::from(String::from_utf8(bytes).ok()?)))
    })
    .await
    .ok()
    .flatten();
    let Some((content, text)) = read else {
        instance.close(path);
        return;
    };
    let open = instance.lock().docs.get(path).map(|d| d.content);
    match open {
        Some(known) if known == content => {}
        Some(_) => {
            instance.change(path, text, content);
        }
        None => {
            instance.open(path, text, content);
            // A tsserver says nothing of an opened document unasked: asked now, what it says
            // is what the next change is measured against.
            if instance.lock().pull == Pull::TsServer {
                let (instance, path) = (instance.clone(), path.to_path_buf());
                tokio::spawn(async move { instance.pull(&path, Duration::from_secs(20), false).await });
            }
        }
    }
}
