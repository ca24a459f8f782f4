//! The daemon's runtime configuration, passed explicitly to [`crate::run`] (no globals).

use std::time::Duration;

use crate::context::ProviderConfig;

/// Caps and timings the server enforces. Every field has a default that suits one user's agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Most connections (sessions) open at once; the one over the cap is refused with -32009.
    pub max_connections: usize,
    /// Largest frame body accepted or sent, in bytes; a larger request is answered -32007.
    pub max_frame_bytes: usize,
    /// Most entries in one JSON-RPC batch; a larger batch is answered -32010.
    pub max_batch_len: usize,
    /// Most requests of one connection served concurrently. When they are all busy the daemon
    /// stops reading that connection, so a flooding client is slowed down rather than buffered.
    pub max_concurrent_requests: usize,
    /// Most outgoing messages queued for one connection. A client that does not read its socket
    /// fills this queue, which stalls its own requests (and drops its notifications) and nothing
    /// else.
    pub max_queued_messages: usize,
    /// Most subscriptions open at once on one connection.
    pub max_subscriptions: u32,
    /// Most bytes of one batch's response. Entries whose responses do not fit are answered
    /// -32010, in order, and the entries not yet started are not run. At most the frame cap.
    pub max_batch_response_bytes: usize,
    /// Most bytes of outgoing messages queued for one connection (streams included). A
    /// connection at it is not read until its client reads; one message always fits an empty
    /// queue, so a bigger response is still delivered alone.
    pub max_queued_bytes: usize,
    /// Most bytes of outgoing messages queued over all connections. Every connection is
    /// guaranteed `max_total_queued_bytes / max_connections`; when the rest is more than half
    /// used, the connections holding the most wait first.
    pub max_total_queued_bytes: usize,
    /// How long a new connection has to complete `initialize`; after it, it is closed.
    pub initialize_timeout: Duration,
    /// How long a frame that has started to arrive may go without a byte; after it, the
    /// connection is closed (its stream cannot be resynchronised).
    pub frame_timeout: Duration,
    /// Most bytes of partly received frames over all connections. A frame over 64 KiB reserves
    /// its declared length before its body is read, and its connection waits (unread) until
    /// the reservation fits.
    pub max_partial_frame_bytes: usize,
    /// How long shutdown waits for in-flight requests before giving up on them.
    pub shutdown_grace: Duration,
    /// Exit after this long without any session (socket activation restarts the daemon).
    pub idle_exit: Option<Duration>,
    /// Most files one session remembers having read; past it the least recent must be re-read.
    pub max_observed_files: usize,
    /// Most bytes one session's records (its owners' observations and dedup records) may hold;
    /// past it its largest owners forget their least recently used observations (which must
    /// then be read again before they are written).
    pub max_session_observed_bytes: usize,
    /// Most bytes every session's records may hold together; past it the session holding the
    /// most forgets its least recently used observations.
    pub max_observed_bytes: usize,
    /// Locks, caps, durability and cache bounds of the file service.
    pub files: ProviderConfig,
    /// The journal of changes (`None`: off).
    pub journal: Option<crate::journal::JournalConfig>,
    /// The language servers.
    pub lsp: crate::lsp::LspConfig,
    /// The program language servers are run under (`filectxd` itself, as their guard; see
    /// `lsp::guard`); `None`: they run unguarded (a library use).
    pub lsp_guard: Option<std::path::PathBuf>,
    /// The search index on disk (`None`: none kept).
    pub search_index: Option<crate::listing::index::IndexConfig>,
    /// Folders session roots must lie in; empty: anywhere but `/` itself.
    pub allowed_roots: Vec<std::path::PathBuf>,
    /// Globs (relative to a path's root) no session may read.
    pub deny_read: Vec<String>,
    /// Globs (relative to a path's root) no session may write or edit.
    pub deny_write: Vec<String>,
    /// Most file operations running at once on the blocking pool, shared fairly between
    /// sessions (see [`crate::rpc::slots`]).
    pub file_slots: usize,
    /// The `read` tool's budget, in bytes, of a session that does not ask for its own
    /// (`readMaxBytes`): numbered lines and footer. At most `files.max_window_bytes`.
    pub read_max_bytes: u64,
    /// Most named owners (`owner` on `tools/call` and `file/*`) per session; a new one past it
    /// is refused with `FS_INVALID_ARGUMENT`.
    pub max_owners: usize,
    /// Most folders one session's `initialize` may name in `roots` (each is held open); more is
    /// refused with `FS_INVALID_ARGUMENT`. Roots also share the daemon's descriptor budget (see
    /// [`crate::descriptors`]).
    pub max_roots: usize,
    /// How long an ended resumable session is kept for a `resume`.
    pub resume_grace: Duration,
    /// Most ended resumable sessions kept at once (oldest dropped first).
    pub max_parked_sessions: usize,
    /// Most bytes (estimated) ended resumable sessions may hold (oldest dropped first).
    pub max_parked_bytes: usize,
    /// Whether sessions may register write-intent gates (`--no-gates` turns them off).
    pub gates: bool,
    /// Most intents one gate has in flight; further writes wait their turn (within the gate's
    /// timeout).
    pub max_gate_intents: usize,
    /// Which sessions may register gates (never a read-only one).
    pub gate_sessions: GateSessions,
    /// The secret `gate/register` must carry under [`GateSessions::Token`], and the file it is
    /// kept in; `None`: no session can present it (the binary keeps one next to its socket).
    pub gate_token: Option<crate::gate::token::GateToken>,
    /// Most searches (`glob`, `grep`) running at once, shared fairly between sessions like the
    /// file slots but apart from them: searches never hold the slots reads and writes need.
    pub search_slots: usize,
    /// How long one search may run; past it, it stops and answers what it found so far, saying
    /// how much it searched.
    pub search_timeout: Duration,
    /// Most memory one search's regular expression may use: its compiled program and the lazy
    /// DFA caches of the threads that run it (see `search::RegexLimits`). A pattern whose
    /// program does not fit is refused.
    pub search_regex_bytes: usize,
}

/// Which sessions may register write-intent gates (`--gate-sessions`, config `gate_sessions`).
/// A read-only session never may.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum GateSessions {
    /// Only a session whose `gate/register` carries the daemon's gate token, which the
    /// daemon keeps in a file only its user can read (`filectx gate` and the clients' gate
    /// helpers read it there); an agent that only speaks the protocol cannot.
    #[default]
    Token,
    /// Any session that is not read-only (the token is not needed).
    Any,
}

/// Default of [`Config::file_slots`]: four per core, at least eight.
pub fn default_file_slots() -> usize {
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(2);
    (cores * 4).max(8)
}

/// Default of [`Config::search_slots`]: one per core, at least two.
pub fn default_search_slots() -> usize {
    std::thread::available_parallelism().map(usize::from).unwrap_or(2).max(2)
}

/// Default of [`Config::search_timeout`], in seconds.
pub const DEFAULT_SEARCH_TIMEOUT_SECS: u64 = 10;
/// Default of [`Config::search_regex_bytes`]: 16 MiB.
pub const DEFAULT_SEARCH_REGEX_BYTES: u64 = 16 * 1024 * 1024;
/// Least [`Config::search_regex_bytes`]: 1 MiB (a program of 256 KiB: `\w{4}` with Unicode `\w` fits).
pub const MIN_SEARCH_REGEX_BYTES: u64 = 1024 * 1024;

/// Default of [`Config::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// Default of [`Config::max_batch_len`].
pub const DEFAULT_MAX_BATCH_LEN: u32 = 1024;
/// Default of [`Config::max_concurrent_requests`].
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: u32 = 32;
/// Default of [`Config::max_queued_messages`].
pub const DEFAULT_MAX_QUEUED_MESSAGES: u32 = 256;
/// Default of [`Config::shutdown_grace`], in seconds.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 5;
/// Default of [`Config::max_batch_response_bytes`]: 16 MiB.
pub const DEFAULT_MAX_BATCH_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// Default of [`Config::max_queued_bytes`]: 8 MiB.
pub const DEFAULT_MAX_QUEUED_BYTES: u64 = 8 * 1024 * 1024;
/// Default of [`Config::max_total_queued_bytes`]: 256 MiB.
pub const DEFAULT_MAX_TOTAL_QUEUED_BYTES: u64 = 256 * 1024 * 1024;
/// Default of [`Config::initialize_timeout`], in seconds.
pub const DEFAULT_INITIALIZE_TIMEOUT_SECS: u64 = 10;
/// Default of [`Config::frame_timeout`], in seconds.
pub const DEFAULT_FRAME_TIMEOUT_SECS: u64 = 10;
/// Default of [`Config::max_partial_frame_bytes`]: 128 MiB (two frames at the default cap).
pub const DEFAULT_MAX_PARTIAL_FRAME_BYTES: u64 = 128 * 1024 * 1024;

impl Default for Config {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_frame_bytes: filectx_protocol::DEFAULT_MAX_FRAME_BYTES,
            max_batch_len: DEFAULT_MAX_BATCH_LEN as usize,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS as usize,
            max_queued_messages: DEFAULT_MAX_QUEUED_MESSAGES as usize,
            max_subscriptions: 64,
            max_batch_response_bytes: DEFAULT_MAX_BATCH_RESPONSE_BYTES as usize,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES as usize,
            max_total_queued_bytes: DEFAULT_MAX_TOTAL_QUEUED_BYTES as usize,
            initialize_timeout: Duration::from_secs(DEFAULT_INITIALIZE_TIMEOUT_SECS),
            frame_timeout: Duration::from_secs(DEFAULT_FRAME_TIMEOUT_SECS),
            max_partial_frame_bytes: DEFAULT_MAX_PARTIAL_FRAME_BYTES as usize,
            shutdown_grace: Duration::from_secs(DEFAULT_SHUTDOWN_GRACE_SECS),
            idle_exit: None,
            max_observed_files: crate::context::DEFAULT_MAX_OBSERVED,
            max_session_observed_bytes: crate::context::ledger::DEFAULT_MAX_SESSION_OBSERVED_BYTES as usize,
            max_observed_bytes: crate::context::ledger::DEFAULT_MAX_OBSERVED_BYTES as usize,
            files: ProviderConfig::default(),
            journal: None,
            lsp: crate::lsp::LspConfig::default(),
            lsp_guard: None,
            search_index: None,
            allowed_roots: Vec::new(),
            deny_read: Vec::new(),
            deny_write: crate::context::deny::DEFAULT_DENY_WRITE.iter().map(|s| (*s).to_owned()).collect(),
            file_slots: default_file_slots(),
            read_max_bytes: filectx_protocol::tools::DEFAULT_READ_MAX_BYTES,
            max_owners: crate::session::owners::DEFAULT_MAX_OWNERS,
            max_roots: crate::session::DEFAULT_MAX_ROOTS,
            resume_grace: Duration::from_secs(crate::session::resume::DEFAULT_RESUME_GRACE_SECS),
            max_parked_sessions: crate::session::resume::DEFAULT_MAX_PARKED_SESSIONS as usize,
            max_parked_bytes: crate::session::resume::DEFAULT_MAX_PARKED_BYTES as usize,
            gates: true,
            max_gate_intents: crate::gate::DEFAULT_MAX_IN_FLIGHT,
            gate_sessions: GateSessions::Token,
            gate_token: None,
            search_slots: default_search_slots(),
            search_timeout: Duration::from_secs(DEFAULT_SEARCH_TIMEOUT_SECS),
            search_regex_bytes: DEFAULT_SEARCH_REGEX_BYTES as usize,
        }
    }
}
