//! One session per connection: its identity, the options `initialize` gave it (roots, cwd,
//! tools, read-only, dedup), its lifecycle phase, its owners (each with its observations), and
//! its own outgoing queue for server notifications. A resumable session parks its owners in the
//! daemon's park store when it ends.
//!
//! Method handlers reach their session through jsonrpsee's request `Extensions` (an
//! `Arc<Session>` inserted by the connection driver), never through a global table, so nothing
//! one session holds can be reached from another session's request.
//!
//! Beneath the transport, which uses it and is never used by it. Its parts: this file (the
//! session itself), `owners.rs` (who inside a session observed what), `resume.rs` (resume
//! tokens and parked sessions), the outgoing sink the session and the gates push into
//! (`budget.rs`: the per-connection queue and the byte budgets; `outbound.rs`: requests the
//! daemon sends a client and the routing of their answers), and `watched.rs` (how a session
//! and its owners meet the watcher, which names no session).

pub(crate) mod budget;
pub(crate) mod outbound;
pub mod owners;
pub mod resume;
mod watched;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::context::Observations;
use crate::context::Root;
use crate::context::deny::{DenyRules, Origin};
use crate::descriptors::Descriptors;
use crate::session::budget::{Outgoing, QueueRefused};
use crate::session::outbound::Outbound;
use crate::session::owners::Owners;
use crate::session::resume::{Digest, ParkStore};
use crate::stats::Stats;
use filectx_protocol::tools::{DEFAULT_READ_MAX_BYTES, MIN_READ_MAX_BYTES};
use filectx_protocol::{ClientInfo, InitializeParams, StaleEdits, ToolName};
use jsonrpsee::core::server::BoundedSubscriptions;
use serde::Serialize;

/// Where a session is in the LSP-style lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Connected; only `initialize` (or `exit`) is accepted.
    Uninitialized = 0,
    /// `initialize` succeeded; everything is served.
    Ready = 1,
    /// `shutdown` was answered; only `exit` is accepted.
    ShutDown = 2,
}

/// What the daemon allows every session (from its configuration).
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// Folders roots must lie in (canonical); empty: anywhere but `/` itself.
    pub allowed_roots: Vec<PathBuf>,
    /// The daemon's deny rules.
    pub deny: DenyRules,
    /// The `read` tool's budget of a session that does not ask for its own.
    pub read_max_bytes: u64,
    /// The most a session may ask for as its `readMaxBytes` (the daemon's window cap).
    pub max_window_bytes: u64,
    /// Most folders one `initialize` may name in `roots`.
    pub max_roots: usize,
    /// The daemon's descriptor budget, which a session's root handles are paid from.
    pub descriptors: Arc<Descriptors>,
    /// The daemon's own files and folders: no root may be at or inside one, and no root
    /// reaches one beneath it.
    pub private: Arc<crate::context::Private>,
    /// Whether a language server may run: the `diagnostics` tool is offered only then.
    pub diagnostics: bool,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        Self {
            allowed_roots: Vec::new(),
            deny: DenyRules::default(),
            read_max_bytes: DEFAULT_READ_MAX_BYTES,
            max_window_bytes: crate::context::DEFAULT_MAX_WINDOW_BYTES,
            max_roots: DEFAULT_MAX_ROOTS,
            descriptors: Arc::default(),
            private: crate::context::Private::none(),
            diagnostics: false,
        }
    }
}

/// Default of [`SessionPolicy::max_roots`] (`--max-roots`).
pub const DEFAULT_MAX_ROOTS: usize = 64;

/// What `initialize` established, validated and canonicalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    /// The roots, canonical, each with its directory handle: the session's sandbox. Never
    /// empty.
    pub roots: Vec<Root>,
    /// Canonical folder that relative paths resolve against; inside one of the roots.
    pub cwd: PathBuf,
    /// The tools this session may call, in listing order, without duplicates.
    pub tools: Vec<ToolName>,
    /// Whether every write path is refused.
    pub read_only: bool,
    /// The daemon's deny rules plus the session's own.
    pub deny: DenyRules,
    /// Who connected, as the client said.
    pub client: Option<ClientInfo>,
    /// Whether every root is on a local filesystem, so warm reads may run on an async worker
    /// (never on NFS and the like, where a `stat` can hang).
    pub local_roots: bool,
    /// Most bytes of text one `read` tool answer holds (`readMaxBytes`).
    pub read_max_bytes: u64,
    /// Whether the `read` tool answers a repeated read of unchanged lines with one short line.
    pub dedup_reads: bool,
    /// What an `edit` tool call whose observation is stale does (`staleEdits`; default refuse).
    pub stale_edits: StaleEdits,
    /// Whether `read_max_bytes` counts the tools' text as JSON escapes it (`jsonBudget`).
    pub json_budget: bool,
    /// Whether writes and edits wait for their diagnostics (`diagnostics`; default wait).
    pub diagnostics: filectx_protocol::DiagnosticsMode,
}

/// Why `initialize` was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// `roots` was empty.
    #[error("`roots` must name at least one folder")]
    NoRoots,
    /// A root or the cwd was not an absolute path.
    #[error("{what} {path:?} is not an absolute path")]
    NotAbsolute {
        /// `root` or `cwd`.
        what: &'static str,
        /// The path as given.
        path: String,
    },
    /// A root or the cwd does not exist.
    #[error("{what} {path:?} does not exist")]
    NotFound {
        /// `root` or `cwd`.
        what: &'static str,
        /// The path as given.
        path: String,
    },
    /// A root or the cwd is not a folder.
    #[error("{what} {path:?} is not a folder")]
    NotAFolder {
        /// `root` or `cwd`.
        what: &'static str,
        /// The path as given.
        path: String,
    },
    /// The cwd lies outside every root.
    #[error("cwd {path:?} is outside every root")]
    CwdOutsideRoots {
        /// The cwd as given.
        path: String,
    },
    /// A root or the cwd could not be inspected.
    #[error("cannot inspect {what} {path:?}: {source}")]
    Io {
        /// `root` or `cwd`.
        what: &'static str,
        /// The path as given.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A root lies where the daemon's configuration does not allow roots.
    #[error("root {path:?} is not allowed: {why}")]
    RootNotAllowed {
        /// The root as given.
        path: String,
        /// Which setting refuses it.
        why: String,
    },
    /// A deny rule of the session does not parse.
    #[error(transparent)]
    BadRule(#[from] crate::context::deny::BadRule),
    /// `readMaxBytes` is outside what the daemon allows.
    #[error(
        "readMaxBytes {value} is out of range: it must be from {min} to {max} (the daemon's max_window_bytes)"
    )]
    ReadMaxBytes {
        /// The value asked for.
        value: u64,
        /// The smallest allowed.
        min: u64,
        /// The largest allowed.
        max: u64,
    },
    /// `initialize` was already answered on this connection.
    #[error("this session is already initialized; `initialize` may be sent once per connection")]
    AlreadyInitialized,
    /// `roots` names more folders than the daemon allows a session.
    #[error(
        "`roots` names {given} folders, and this daemon allows at most {max} per session (max_roots): \
         name fewer, such as a folder that holds them all"
    )]
    TooManyRoots {
        /// Folders named.
        given: usize,
        /// The daemon's `max_roots`.
        max: usize,
    },
    /// The daemon's file descriptors, shared among its sessions, leave this session fewer
    /// roots than it asked for.
    #[error(
        "this session may hold at most {allowed} roots now, not {given}: the daemon's file descriptors are \
         shared among its sessions and the others hold the rest; name fewer roots (such as a folder that \
         holds them all), or try again when other sessions have ended"
    )]
    NoDescriptors {
        /// Folders named.
        given: usize,
        /// The most this session could have now.
        allowed: usize,
    },
}

impl SessionError {
    /// The path the failure concerns, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::NotAbsolute { path, .. }
            | Self::NotFound { path, .. }
            | Self::NotAFolder { path, .. }
            | Self::CwdOutsideRoots { path }
            | Self::RootNotAllowed { path, .. }
            | Self::Io { path, .. } => Some(path),
            Self::NoRoots
            | Self::AlreadyInitialized
            | Self::BadRule(_)
            | Self::ReadMaxBytes { .. }
            | Self::TooManyRoots { .. }
            | Self::NoDescriptors { .. } => None,
        }
    }
}

/// Canonicalises one folder given by the client (blocking: a few syscalls per path).
fn canonical_folder(what: &'static str, raw: &str) -> Result<PathBuf, SessionError> {
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err(SessionError::NotAbsolute { what, path: raw.to_owned() });
    }
    let canonical = std::fs::canonicalize(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => SessionError::NotFound { what, path: raw.to_owned() },
        std::io::ErrorKind::NotADirectory => SessionError::NotFound { what, path: raw.to_owned() },
        _ => SessionError::Io { what, path: raw.to_owned(), source },
    })?;
    let meta = std::fs::metadata(&canonical).map_err(|source| SessionError::Io {
        what,
        path: raw.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(SessionError::NotAFolder { what, path: raw.to_owned() });
    }
    Ok(canonical)
}

/// Refuses a root the daemon's configuration does not allow: outside every allowed folder, or
/// `/` itself unless allowed by name.
fn allowed(raw: &str, canonical: &Path, policy: &SessionPolicy) -> Result<(), SessionError> {
    let refuse = |why: String| Err(SessionError::RootNotAllowed { path: raw.to_owned(), why });
    if let Some(private) = policy.private.containing(canonical) {
        return refuse(format!(
            "it is inside {}, one of filectxd's own private folders (its journal, tokens and indexes), \
             which no session may reach",
            private.display()
        ));
    }
    if policy.allowed_roots.is_empty() {
        if canonical == Path::new("/") {
            return refuse("`/` as a root would give the whole machine; name it in the daemon's allowed_roots to allow it".into());
        }
        return Ok(());
    }
    if canonical == Path::new("/") && !policy.allowed_roots.iter().any(|a| a == Path::new("/")) {
        return refuse("`/` is not in the daemon's allowed_roots".into());
    }
    if policy.allowed_roots.iter().any(|allowed| canonical.starts_with(allowed)) {
        return Ok(());
    }
    let list: Vec<String> = policy.allowed_roots.iter().map(|p| p.display().to_string()).collect();
    refuse(format!("roots must lie in one of the daemon's allowed_roots: {}", list.join(", ")))
}

impl SessionOptions {
    /// Validates `initialize` parameters against the filesystem. Blocking: call it off the
    /// async workers.
    pub fn from_params(params: InitializeParams, policy: &SessionPolicy) -> Result<Self, SessionError> {
        let given = params.roots.len();
        if given == 0 {
            return Err(SessionError::NoRoots);
        }
        // Before any work: the list's length is the client's to choose.
        if given > policy.max_roots {
            return Err(SessionError::TooManyRoots { given, max: policy.max_roots });
        }
        // Each folder once, in the order given (a set: linear in the number of roots).
        let mut seen: HashSet<PathBuf> = HashSet::with_capacity(given);
        let mut folders: Vec<(&String, PathBuf)> = Vec::with_capacity(given);
        for raw in &params.roots {
            let canonical = canonical_folder("root", raw)?;
            allowed(raw, &canonical, policy)?;
            if seen.insert(canonical.clone()) {
                folders.push((raw, canonical));
            }
        }
        // A descriptor for each, from the daemon's budget (see `descriptors`).
        let mut grant = policy
            .descriptors
            .roots(folders.len())
            .map_err(|short| SessionError::NoDescriptors { given: folders.len(), allowed: short.allowed })?;
        let mut roots: Vec<Root> = Vec::with_capacity(folders.len());
        for (raw, canonical) in folders {
            let root = crate::context::open_root(&canonical, Path::new(raw), grant.take(), &policy.private)
                .map_err(|source| SessionError::Io { what: "root", path: raw.clone(), source })?;
            roots.push(root);
        }
        let cwd = match &params.cwd {
            None => roots[0].path().to_path_buf(),
            Some(raw) => {
                let cwd = canonical_folder("cwd", raw)?;
                // Component-wise containment (`Path::starts_with`), never a string prefix.
                if !roots.iter().any(|root| cwd.starts_with(root.path())) {
                    return Err(SessionError::CwdOutsideRoots { path: raw.clone() });
                }
                cwd
            }
        };
        let tools = match &params.tools {
            None => ToolName::DEFAULT.to_vec(),
            // The diagnostics tool only where a language server may answer it.
            Some(wanted) => ToolName::ALL
                .into_iter()
                .filter(|t| wanted.contains(t) && (policy.diagnostics || *t != ToolName::Diagnostics))
                .collect(),
        };
        let local_roots = roots.iter().all(|root| crate::context::is_local(root.path()));
        let deny = match &params.deny {
            Some(own) => policy.deny.with(&own.read, &own.write, Origin::Session)?,
            None => policy.deny.clone(),
        };
        let read_max_bytes = match params.read_max_bytes {
            None => policy.read_max_bytes,
            Some(value) if (MIN_READ_MAX_BYTES..=policy.max_window_bytes).contains(&value) => value,
            Some(value) => {
                return Err(SessionError::ReadMaxBytes {
                    value,
                    min: MIN_READ_MAX_BYTES,
                    max: policy.max_window_bytes,
                });
            }
        };
        Ok(Self {
            local_roots,
            roots,
            cwd,
            tools,
            read_only: params.read_only.unwrap_or(false),
            deny,
            client: params.client_info,
            read_max_bytes,
            dedup_reads: params.dedup_reads.unwrap_or(false),
            stale_edits: params.stale_edits.unwrap_or_default(),
            json_budget: params.json_budget.unwrap_or(false),
            diagnostics: params.diagnostics.unwrap_or_default(),
        })
    }
}

/// One connection's session.
#[derive(Debug)]
pub struct Session {
    id: String,
    phase: AtomicU8,
    options: OnceLock<SessionOptions>,
    /// The connection's outgoing queue. Notifications use `try_send` so that a client which
    /// does not read can never make the daemon wait or buffer beyond the queue's bounds.
    outgoing: Outgoing,
    /// Caps this connection's open subscriptions.
    subscriptions: BoundedSubscriptions,
    /// Who inside the session read or wrote what: dies with the connection, unless parked.
    owners: Owners,
    /// Set for a resumable session: where its owners go when it ends.
    parking: OnceLock<Parking>,
    /// Requests the daemon sent this session's client (a gate's intents) and their answers.
    outbound: Arc<Outbound>,
    stats: Arc<Stats>,
}

/// Where a resumable session's owners are kept after it ends, and under which token.
#[derive(Debug)]
struct Parking {
    digest: Digest,
    store: Arc<ParkStore>,
}

#[derive(Serialize)]
struct OutgoingNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

impl Session {
    /// A new, uninitialized session writing to `outgoing`.
    pub(crate) fn new(
        id: String,
        outgoing: Outgoing,
        max_subscriptions: u32,
        owners: Owners,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            id,
            phase: AtomicU8::new(Phase::Uninitialized as u8),
            options: OnceLock::new(),
            subscriptions: BoundedSubscriptions::new(max_subscriptions),
            owners,
            parking: OnceLock::new(),
            outbound: Outbound::new(outgoing.clone()),
            outgoing,
            stats,
        }
    }

    /// The requests the daemon sent this session's client, waiting for answers.
    pub(crate) fn outbound(&self) -> &Arc<Outbound> {
        &self.outbound
    }

    /// What this session's default owner has observed.
    pub fn observations(&self) -> &Observations {
        self.owners.default_owner().observations()
    }

    /// The session's owners.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// Makes the session resumable: when it ends, its owners are parked in `store` under the
    /// token whose digest is `digest`.
    pub(crate) fn park_on_end(&self, digest: Digest, store: Arc<ParkStore>) {
        let _ = self.parking.set(Parking { digest, store });
    }

    /// The session's id, as reported by `initialize` and in the daemon's logs.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The current lifecycle phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Uninitialized,
            1 => Phase::Ready,
            _ => Phase::ShutDown,
        }
    }

    /// Records that `shutdown` was answered: from now on only `exit` is accepted.
    pub fn mark_shut_down(&self) {
        self.phase.store(Phase::ShutDown as u8, Ordering::Release);
    }

    /// Installs the options of a successful `initialize` and makes the session ready.
    pub fn install(&self, options: SessionOptions) -> Result<&SessionOptions, SessionError> {
        self.options.set(options).map_err(|_| SessionError::AlreadyInitialized)?;
        self.phase.store(Phase::Ready as u8, Ordering::Release);
        self.options.get().ok_or(SessionError::AlreadyInitialized)
    }

    /// The options of `initialize`, once it has succeeded.
    pub fn options(&self) -> Option<&SessionOptions> {
        self.options.get()
    }

    /// The connection's outgoing queue (streams wait on its byte budget).
    pub(crate) fn outgoing(&self) -> &Outgoing {
        &self.outgoing
    }

    /// The subscription cap of this connection.
    pub fn subscriptions(&self) -> &BoundedSubscriptions {
        &self.subscriptions
    }

    /// Queues a server→client notification for this session only. Never waits: when the
    /// client is not reading and its queue is full, the notification is dropped and counted.
    /// Returns whether it was queued.
    pub fn notify<P: Serialize>(&self, method: &str, params: P) -> bool {
        let message = OutgoingNotification { jsonrpc: "2.0", method, params };
        let Ok(json) = serde_json::value::to_raw_value(&message) else {
            tracing::error!(session = %self.id, method, "notification parameters failed to serialize");
            return false;
        };
        match self.outgoing.try_send(crate::json::Json::from(json)) {
            Ok(()) => true,
            Err(QueueRefused::Full) => {
                Stats::bump(&self.stats.notifications_dropped);
                tracing::debug!(session = %self.id, method, "client is not reading; notification dropped");
                false
            }
            Err(QueueRefused::Closed) => false,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Every request holds the session, so nothing uses its owners any more.
        if let Some(Parking { digest, store }) = self.parking.take() {
            let owners = self.owners.park_all();
            tracing::debug!(session = %self.id, owners = owners.len(), "session kept for a resume");
            store.park(digest, owners);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(roots: &[&str], cwd: Option<&str>) -> InitializeParams {
        InitializeParams {
            cwd: cwd.map(str::to_owned),
            ..InitializeParams::new(roots.iter().map(|r| (*r).to_owned()).collect())
        }
    }

    #[test]
    fn roots_are_canonical_and_cwd_defaults_to_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let dotted = format!("{}/a/../a", dir.path().display());
        let opts = SessionOptions::from_params(params(&[&dotted], None), &SessionPolicy::default()).unwrap();
        let canonical = std::fs::canonicalize(&a).unwrap();
        assert_eq!(
            opts.roots.iter().map(|r| r.path().to_path_buf()).collect::<Vec<_>>(),
            vec![canonical.clone()]
        );
        assert_eq!(opts.cwd, canonical);
        assert_eq!(opts.tools, ToolName::DEFAULT.to_vec());
        assert!(!opts.read_only);
    }

    #[test]
    fn bad_roots_and_cwd_are_refused_with_codes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("app");
        let evil = dir.path().join("app-evil");
        let file = dir.path().join("file");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&evil).unwrap();
        std::fs::write(&file, "x").unwrap();
        let s = |p: &Path| p.display().to_string();
        let cases = [
            (params(&[], None), "NoRoots"),
            (params(&["relative"], None), "NotAbsolute"),
            (params(&[&s(&dir.path().join("missing"))], None), "NotFound"),
            (params(&[&s(&file)], None), "NotAFolder"),
            // A string-prefix check would let app-evil pass as inside app.
            (params(&[&s(&root)], Some(&s(&evil))), "CwdOutsideRoots"),
        ];
        for (p, want) in cases {
            let err = SessionOptions::from_params(p.clone(), &SessionPolicy::default()).unwrap_err();
            let got = match err {
                SessionError::NoRoots => "NoRoots",
                SessionError::NotAbsolute { .. } => "NotAbsolute",
                SessionError::NotFound { .. } => "NotFound",
                SessionError::NotAFolder { .. } => "NotAFolder",
                SessionError::CwdOutsideRoots { .. } => "CwdOutsideRoots",
                _ => "other",
            };
            assert_eq!(got, want, "{p:?}: {err}");
        }
    }

    #[test]
    fn roots_must_be_where_the_daemon_allows() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("work/app")).unwrap();
        std::fs::create_dir_all(base.join("other")).unwrap();
        let s = |p: &Path| p.display().to_string();
        let open = SessionPolicy::default();
        let err = SessionOptions::from_params(params(&["/"], None), &open).unwrap_err();
        assert!(matches!(err, SessionError::RootNotAllowed { .. }), "{err}");
        assert!(SessionOptions::from_params(params(&[&s(&base.join("other"))], None), &open).is_ok());
        let fenced = SessionPolicy { allowed_roots: vec![base.join("work")], ..SessionPolicy::default() };
        assert!(SessionOptions::from_params(params(&[&s(&base.join("work/app"))], None), &fenced).is_ok());
        for refused in [base.join("other"), PathBuf::from("/")] {
            let err = SessionOptions::from_params(params(&[&s(&refused)], None), &fenced).unwrap_err();
            assert!(matches!(err, SessionError::RootNotAllowed { .. }), "{err}");
        }
        let everything =
            SessionPolicy { allowed_roots: vec![PathBuf::from("/")], ..SessionPolicy::default() };
        assert!(SessionOptions::from_params(params(&["/"], None), &everything).is_ok());
    }

    #[test]
    fn roots_are_capped_before_anything_is_looked_at_and_paid_for_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let policy = SessionPolicy { max_roots: 3, ..SessionPolicy::default() };
        // Four names, none of which exists: refused for their number, not for a missing one.
        let missing: Vec<String> = (0..4).map(|n| format!("{}/missing-{n}", base.display())).collect();
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        let err = SessionOptions::from_params(params(&names, None), &policy).unwrap_err();
        assert!(matches!(err, SessionError::TooManyRoots { given: 4, max: 3 }), "{err}");
        // The same folder spelt three ways is one root, one handle, one descriptor of the budget.
        let policy = SessionPolicy { descriptors: crate::descriptors::Descriptors::new(256, 16), ..policy };
        let spellings =
            [base.display().to_string(), format!("{}/.", base.display()), format!("{}/x/..", base.display())];
        std::fs::create_dir(base.join("x")).unwrap();
        let names: Vec<&str> = spellings.iter().map(String::as_str).collect();
        let opts = SessionOptions::from_params(params(&names, None), &policy).unwrap();
        assert_eq!(opts.roots.len(), 1);
        assert_eq!(policy.descriptors.usage().roots, 1);
        drop(opts);
        assert_eq!(policy.descriptors.usage().roots, 0, "given back with the handle");
    }

    #[test]
    fn notifications_never_wait_and_are_counted_when_dropped() {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let stats = Arc::new(Stats::new());
        let budget = crate::session::budget::OutgoingBudget::new(1 << 20, 1 << 20, 1).open();
        let limits = crate::session::owners::OwnerLimits { max_owners: 4, max_observed: 16 };
        let owners = Owners::new("t".into(), limits, None, stats.clone());
        let session = Session::new("t".into(), Outgoing::new(tx, budget), 4, owners, stats.clone());
        assert!(session.notify("file/didChange", serde_json::json!({"path": "/a"})));
        assert!(!session.notify("file/didChange", serde_json::json!({"path": "/b"})));
        assert_eq!(Stats::get(&stats.notifications_dropped), 1);
    }
}
