//! Wire types of `daemon/status`: the daemon's counters, sessions, owners and gates.

use serde::{Deserialize, Serialize};

use super::gate::GateInfo;

/// Result of `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// The daemon's version.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Milliseconds since the daemon started serving.
    pub uptime_ms: u64,
    /// Connections (sessions) open now.
    pub sessions: u64,
    /// The cap on concurrent connections.
    pub max_sessions: u64,
    /// Connections refused so far (over the cap, or a peer of another uid).
    pub refused_connections: u64,
    /// Files the provider holds cached state for.
    pub cached_files: u64,
    /// Bytes of those files' line indexes (checkpoints, and the line ends of warm files of 64
    /// to 512 KiB), at most `--max-cache-bytes`.
    #[serde(default)]
    pub index_bytes: u64,
    /// Bytes of files currently memory-mapped.
    pub mapped_bytes: u64,
    /// Cached files the provider keeps open (so warm reads need no `open`); released with
    /// their cache entries (least recently used, or idle for a while).
    #[serde(default)]
    pub open_files: u64,
    /// Paths the watcher watches.
    pub watched_paths: u64,
    /// Requests served since start (batch entries count one each).
    pub requests: u64,
    /// Server→client notifications dropped because a client did not read them.
    pub notifications_dropped: u64,
    /// Bytes of file content hashed to learn versions since start (reads, stats and version
    /// checks that missed the cache). A read that the first chunk of a file shows to be binary
    /// hashes nothing.
    #[serde(default)]
    pub hashed_bytes: u64,
    /// File operations that may run at once (shared fairly between sessions).
    #[serde(default)]
    pub file_slots: u64,
    /// File operations running now.
    #[serde(default)]
    pub file_slots_busy: u64,
    /// File operations waiting for a slot now.
    #[serde(default)]
    pub file_slots_waiting: u64,
    /// Named owners of the sessions open now (each session's default owner not counted).
    #[serde(default)]
    pub owners: u64,
    /// Ended resumable sessions kept for a `resume`.
    #[serde(default)]
    pub parked_sessions: u64,
    /// Estimated bytes those ended sessions hold.
    #[serde(default)]
    pub parked_bytes: u64,
    /// File versions whose bytes are kept for stale refusals' diffs.
    #[serde(default)]
    pub snapshots: u64,
    /// Bytes those versions hold (at most `--max-snapshot-bytes`).
    #[serde(default)]
    pub snapshot_bytes: u64,
    /// Searched folders whose file lists are kept warm (a repeated `glob`/`grep` skips the walk).
    #[serde(default)]
    pub cached_listings: u64,
    /// Bytes those lists hold (at most `--max-search-cache-bytes`), their files' trigram
    /// filters included.
    #[serde(default)]
    pub cached_listing_bytes: u64,
    /// Files those lists hold (`cachedListingBytes` over it: what is kept per listed file).
    #[serde(default)]
    pub cached_listed_files: u64,
    /// Bytes of those files' trigram filters (part of `cachedListingBytes`).
    #[serde(default)]
    pub cached_filter_bytes: u64,
    /// Whether filters are being built now (after a listing's first grep); until they are, a
    /// repeated grep reads the files still without one.
    #[serde(default)]
    pub cached_filters_building: bool,
    /// The search index on disk of each root (of the asking session's roots, unless
    /// `daemon/status` carried the daemon's gate token): kept listings and their filters, which
    /// a restarted daemon validates instead of walking and reading every file.
    #[serde(default)]
    pub search_indexes: Vec<SearchIndexInfo>,
    /// The write-intent gates registered now, in registration order.
    #[serde(default)]
    pub gates: Vec<GateInfo>,
    /// Responses from clients that matched no request of the daemon (a late answer to a
    /// withdrawn or timed-out `gate/writeIntent`, say): dropped.
    #[serde(default)]
    pub unmatched_responses: u64,
    /// Gates registered by other sessions, which `gates` does not list (it lists only the
    /// asking session's, unless `daemon/status` carried the daemon's gate token).
    #[serde(default)]
    pub other_gates: u64,
    /// Bytes (estimated) the open sessions' records of what they read hold: their owners'
    /// observations (each path twice: the record and the watcher's copy) and dedup records.
    #[serde(default)]
    pub observed_bytes: u64,
    /// The most `observed_bytes` may reach (`max_observed_bytes`): past it the session holding
    /// the most forgets its least recently used observations.
    #[serde(default)]
    pub max_observed_bytes: u64,
    /// The most one session's records may hold (`max_session_observed_bytes`): past it its
    /// largest owners forget their least recently used observations.
    #[serde(default)]
    pub max_session_observed_bytes: u64,
    /// Observations forgotten to stay within those caps since the daemon started (each such
    /// file must be read again before it is written).
    #[serde(default)]
    pub observations_evicted: u64,
    /// File descriptors the daemon has open now (counted when asked).
    #[serde(default)]
    pub open_descriptors: u64,
    /// Its open-file limit (`RLIMIT_NOFILE`: the soft limit, raised to the hard one at start).
    #[serde(default)]
    pub descriptor_limit: u64,
    /// Descriptors never handed to connections, roots or cached files: kept for accepting,
    /// answering and the work in flight.
    #[serde(default)]
    pub descriptor_reserve: u64,
    /// Root handles the open sessions hold (one descriptor each).
    #[serde(default)]
    pub roots_held: u64,
    /// Searches (`glob`, `grep`) that may run at once (`--search-slots`), in slots of their
    /// own, apart from the file slots, shared fairly between sessions.
    #[serde(default)]
    pub search_slots: u64,
    /// Searches running now.
    #[serde(default)]
    pub search_slots_busy: u64,
    /// Searches waiting for a search slot now.
    #[serde(default)]
    pub search_slots_waiting: u64,
    /// Most memory one search's regular expression may use (`--search-regex-bytes`).
    #[serde(default)]
    pub search_regex_bytes: u64,
    /// Most memory all searches at once may hold: search slots × (the regex bound + the file
    /// bytes one search holds at most).
    #[serde(default)]
    pub search_memory_bytes: u64,
    /// inotify watches the daemon holds now: warm search listings and the file watcher together.
    #[serde(default)]
    pub watches_held: u64,
    /// The most inotify watches the daemon holds at once (`--max-watches`; search listings take
    /// at most three quarters of them, the rest is the file watcher's).
    #[serde(default)]
    pub watches_cap: u64,
    /// Whether the journal records changes (`journal = false` turns it off).
    #[serde(default)]
    pub journal: bool,
    /// Entries the journal holds now.
    #[serde(default)]
    pub journal_entries: u64,
    /// Bytes the journal holds on disk now: its log and the contents it keeps, at most
    /// `journal_max_bytes`.
    #[serde(default)]
    pub journal_bytes: u64,
    /// Why a journal the daemon is configured to keep records nothing (it could not be opened
    /// or loaded: another daemon holds its folder, a segment of another format version, a
    /// failing disk); absent when it works or is turned off by its setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_problem: Option<String>,
    /// The language servers running now, one per (server, project root).
    #[serde(default)]
    pub language_servers: Vec<LanguageServerInfo>,
    /// The built-in language servers whose command the daemon did not find on its `PATH`, and
    /// configured ones it cannot run (name and why).
    #[serde(default)]
    pub language_servers_missing: Vec<String>,
    /// The `PATH` the daemon looked language servers up in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_server_path: Option<String>,
}

/// One running language server, in `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LanguageServerInfo {
    /// Its short name.
    pub name: String,
    /// The project root it serves.
    pub root: String,
    /// The server's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `starting`, `ready`, `restarting` or `stopped`.
    pub state: String,
    /// Resident bytes of its whole process tree.
    pub rss_bytes: u64,
    /// Documents open in it.
    pub open_documents: u64,
    /// Sessions that used it.
    pub sessions: u64,
    /// Times it was started again after failing.
    pub restarts: u64,
}

/// One root's search index, as `daemon/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SearchIndexInfo {
    /// The root.
    pub root: String,
    /// Whether its listings were loaded from its index on disk and validated when a session
    /// named it (else they were built by walking).
    pub loaded: bool,
    /// Files that validation found new, or changed since their filter was built (stat data:
    /// device, inode, size, mtime, ctime): their filters are built again, and searches read
    /// them meanwhile.
    pub reread_files: u64,
    /// Bytes of its index file on disk (0: none written).
    pub bytes: u64,
    /// Milliseconds the validation took (0: not loaded).
    pub validation_ms: u64,
}

/// Params of `daemon/status` (optional, as is every field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DaemonStatusParams {
    /// The daemon's gate token (the file `<socket>.gate-token`): with it, `gates` lists every
    /// session's gates, as the daemon's owner may see them; without it (or with a wrong one),
    /// only the asking session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_token: Option<String>,
}
