//! Command-line interface of `filectxd`: flags, the optional config file, and how both become a
//! [`Config`] and a socket path. Precedence: a flag, then the config file, then the default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use filectx_protocol::DEFAULT_MAX_FRAME_BYTES;
use filectx_protocol::socket::{SOCKET_ENV, default_socket_path};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::listen::FolderPolicy;

/// Environment variable naming the config file.
pub const CONFIG_ENV: &str = "FILECTX_CONFIG";

const AFTER_HELP: &str = "\
Config file:
  $XDG_CONFIG_HOME/filectx/config.toml (else ~/.config/filectx/config.toml), or --config /
  FILECTX_CONFIG. Its keys are the flags' names with '_' for '-' (socket, log_level,
  max_connections, max_frame_bytes, max_batch, max_concurrent_requests, max_queued_messages,
  max_batch_response_bytes, max_queued_bytes, max_total_queued_bytes, initialize_timeout,
  frame_timeout, max_partial_frame_bytes,
  max_edit_bytes, lock_timeout, fsync, max_cached_files, max_cache_bytes, max_mapped_bytes,
  max_open_files, cache_idle, shutdown_grace, idle_exit, max_hash_bytes, file_slots,
  allowed_roots, deny_read, deny_write, refuse_multi_link_writes, max_owners, max_roots,
  resume_grace, max_parked_sessions, max_parked_bytes, max_session_observed_bytes,
  max_observed_bytes, max_snapshot_bytes, max_snapshot_file_bytes, max_window_bytes,
  read_max_bytes, max_search_cache_bytes, max_watches, no_gates, max_gate_intents,
  gate_sessions, search_slots, search_timeout, search_regex_bytes). A flag beats the file; the
  file beats the default. An unknown key or a wrong type is an error that names it.
  --print-config shows the result.

Sandbox:
  A session's roots are opened as directory handles and every file operation is done beneath
  them (openat2 RESOLVE_BENEATH, no symlink followed out). allowed_roots (--allow-root) fences
  where roots may be; `/` is refused unless named there. Deny rules are globs matched against a
  path relative to its root ('*' stays in one folder, '**' crosses folders): deny_read refuses
  read/stat/streams, deny_write refuses write/edit, with FS_PERMISSION_DENIED naming the rule.
  The default deny_write is ['**/.git/**']; giving the key or the flag replaces that list.
  Sessions may add their own rules in initialize (deny: {read, write}).

Gates:
  A write-intent gate (filectx gate) holds every session's writes under its folders until it
  allows them. Only the daemon's user may set one up: at start the daemon writes a fresh random
  gate token to <socket>.gate-token (mode 0600, next to the socket; removed at exit), and
  gate/register must carry it (gate_sessions = 'token', the default; 'any' drops that need).
  No session reads or writes that file through the daemon, and a read-only session is never a
  gate. A gate's timeout is at most 600 s; a session holds at most 4 gates, the daemon 64.

Descriptors:
  At start the soft open-file limit (RLIMIT_NOFILE) is raised to the hard one. An eighth of it
  (64 to 1024) is kept in reserve for accepting, answering and the work in flight; connections,
  session roots (max_roots per session) and cached open files share the rest, the budget. A
  connection is refused (-32009) when there is no room for it and one root; past its first root
  a session may take at most half of what is left above the budget's last quarter, which stays
  for new connections (FS_BUSY beyond); cached files give way to both. A daemon out of
  descriptors still answers new connections (-32009) instead of leaving them waiting. Raise the
  limit with `ulimit -n` or systemd's LimitNOFILE=.

Searches:
  glob and grep run in --search-slots slots of their own, shared fairly between sessions (one
  session never holds them all), so they never take the file slots reads and writes need. A
  search stops when its request is cancelled or its client disconnects, within a file too (it
  is read in pieces), and at --search-timeout, when it answers what it found with a footer
  saying how much was searched. --search-regex-bytes bounds one search's regex: a quarter for
  its compiled program (forward and reverse), an eighth for each lazy DFA cache (forward and
  reverse, on each of its two threads); a pattern whose program does not fit is refused.
  daemon/status shows searchSlots, searchSlotsBusy and searchMemoryBytes, the bound over all
  slots.

Socket:
  Default path: $XDG_RUNTIME_DIR/filectx.sock, or /tmp/filectx-$UID/filectx.sock when
  XDG_RUNTIME_DIR is unset (that folder must be yours and mode 0700). The socket is created mode
  0600 and only processes of the daemon's own uid are served (SO_PEERCRED). A lock file next to
  the socket (<socket>.lock) keeps a second daemon from taking the same path; a socket file left
  by a crashed daemon is replaced. Under systemd socket activation (LISTEN_FDS, with LISTEN_PID
  equal to the daemon's pid) the passed socket is used instead and systemd owns its file.

systemd:
  Sends READY=1 once serving, STOPPING=1 on shutdown, and WATCHDOG=1 when WatchdogSec is set
  (NOTIFY_SOCKET). With --idle-exit, a socket-activated daemon exits when idle and systemd
  starts it again on the next connection. See systemd/ and docs/service.md.

Logging:
  Logs go to stderr. --log-level takes a level (error, warn, info, debug, trace) or a full
  tracing filter such as 'info,filectx_daemon=debug'; without it RUST_LOG is used, else 'info'.

Signals:
  SIGTERM or SIGINT: stop accepting connections, let in-flight requests finish (at most
  --shutdown-grace seconds), remove the socket file, exit 0.

Exit status:
  0  stopped cleanly (SIGTERM/SIGINT, or --idle-exit), or --print-config
  1  could not start (another daemon serves the socket, the folder is unsafe, bind failed,
     a bad config file or setting: the message names the key and where it came from)
  2  usage error";

/// filectxd: the per-user filectx daemon. Serves safe read/write/edit file tools to many agent
/// processes over one Unix socket (LSP Content-Length framing, JSON-RPC 2.0).
#[derive(Debug, Default, Parser)]
#[command(name = "filectxd", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Args {
    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/filectx.sock]
    #[arg(long, value_name = "PATH", env = SOCKET_ENV)]
    pub socket: Option<PathBuf>,

    /// Config file [default: $XDG_CONFIG_HOME/filectx/config.toml, if it exists]
    #[arg(long, value_name = "PATH", env = CONFIG_ENV)]
    pub config: Option<PathBuf>,

    /// Print the effective configuration (flags, config file and defaults merged) as TOML and exit
    #[arg(long)]
    pub print_config: bool,

    /// Log level or tracing filter (overrides RUST_LOG) [default: info]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,

    /// Most connections (agent sessions) served at once; the next one is refused with error -32009 [default: 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,

    /// Largest JSON-RPC message accepted or sent, in bytes; a bigger request is skipped unread and answered -32007 [default: 64 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_frame_bytes: Option<u64>,

    /// Most entries in one JSON-RPC batch (a bigger batch is answered -32010) [default: 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_batch: Option<u64>,

    /// Most requests of one connection served concurrently; beyond it the daemon stops reading that connection until one finishes [default: 32]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_concurrent_requests: Option<u64>,

    /// Most outgoing messages queued for one connection; a client that does not read stalls only itself, and its notifications are dropped [default: 256]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_queued_messages: Option<u64>,

    /// Most bytes of one batch's response; entries whose responses do not fit are answered -32010 in order (those not yet started are not run) [default: 16 MiB, at most --max-frame-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_batch_response_bytes: Option<u64>,

    /// Most bytes of outgoing messages (responses, notifications, stream chunks) queued for one connection; at it the daemon stops reading that connection until its client reads [default: 8 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_queued_bytes: Option<u64>,

    /// Most bytes of outgoing messages queued over all connections; each connection is guaranteed this divided by --max-connections, and when the rest runs low the connections holding the most wait first [default: 256 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_total_queued_bytes: Option<u64>,

    /// Seconds a new connection has to complete `initialize` before it is closed (and logged) [default: 10]
    #[arg(long, value_name = "SECS")]
    pub initialize_timeout: Option<f64>,

    /// Seconds a frame that has started to arrive may go without a byte before its connection is closed [default: 10]
    #[arg(long, value_name = "SECS")]
    pub frame_timeout: Option<f64>,

    /// Most bytes of partly received frames over all connections; a frame over 64 KiB waits, unread, until its declared length fits [default: 128 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_partial_frame_bytes: Option<u64>,

    /// Largest file an edit loads and largest content a write accepts, in bytes (FS_TOO_LARGE beyond) [default: 256 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_edit_bytes: Option<u64>,

    /// Seconds a write or edit waits for a file's locks (held by another request or another process's flock) before FS_BUSY [default: 10]
    #[arg(long, value_name = "SECS")]
    pub lock_timeout: Option<f64>,

    /// Do not fsync files and folders before acknowledging writes (faster; a power loss may lose acknowledged writes, though never half-write a file)
    #[arg(long)]
    pub no_fsync: bool,

    /// Most files whose versions and line indexes are cached [default: 4096]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_cached_files: Option<u64>,

    /// Most bytes of line indexes cached [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_cache_bytes: Option<u64>,

    /// Most bytes of large files memory-mapped at once [default: 8 GiB]
    #[arg(long, value_name = "BYTES")]
    pub max_mapped_bytes: Option<u64>,

    /// Most cached files kept open so that warm reads need no open (each holds a file descriptor; capped at a quarter of the open-file limit) [default: 1024]
    #[arg(long, value_name = "N")]
    pub max_open_files: Option<u64>,

    /// Seconds after which cached state nobody used is released (open files closed, mappings and line indexes dropped, freed memory given back): entries go after one to two of these periods [default: 30]
    #[arg(long, value_name = "SECS")]
    pub cache_idle: Option<f64>,

    /// Seconds to wait for in-flight requests after SIGTERM/SIGINT before exiting anyway [default: 5]
    #[arg(long, value_name = "SECS")]
    pub shutdown_grace: Option<f64>,

    /// Exit after this many seconds without any session (for socket activation: systemd starts the daemon again on the next connection) [default: never]
    #[arg(long, value_name = "SECS")]
    pub idle_exit: Option<f64>,

    /// A folder session roots may lie in (repeatable); with none given, roots may be anywhere except `/` itself [default: none]
    #[arg(long = "allow-root", value_name = "DIR")]
    pub allowed_roots: Vec<PathBuf>,

    /// Glob of paths (relative to their root) whose content no session may read (repeatable) [default: none]
    #[arg(long = "deny-read", value_name = "GLOB")]
    pub deny_read: Vec<String>,

    /// Glob of paths (relative to their root) no session may write or edit (repeatable; replaces the default list) [default: **/.git/**]
    #[arg(long = "deny-write", value_name = "GLOB")]
    pub deny_write: Vec<String>,

    /// Refuse writes and edits of files with several hard links (they are rewritten in place, so a link outside the roots would see the change) [default: allowed]
    #[arg(long)]
    pub refuse_multi_link_writes: bool,

    /// Largest file a read or stat hashes, in bytes: reading a bigger file is FS_TOO_LARGE, and stat reports it without a version [default: 64 GiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_hash_bytes: Option<u64>,

    /// Most file operations (open, hash, read, write) running at once, shared fairly between sessions; one session never holds them all [default: 4 per core, at least 8]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub file_slots: Option<u64>,

    /// Most named owners (sub-agents sharing a session, `owner` on tools/call and file/*) per session; a new one past it is refused with FS_INVALID_ARGUMENT [default: 64]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_owners: Option<u64>,

    /// Most folders one session's initialize may name in `roots` (each is held open as a handle); more is refused with FS_INVALID_ARGUMENT. Roots also share the open-file budget: past its first root a session may take at most half of what is left above the budget's last quarter, else FS_BUSY [default: 64]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_roots: Option<u64>,

    /// Seconds an ended resumable session (initialize with resumable: true) is kept for a later initialize with its resumeToken [default: 600]
    #[arg(long, value_name = "SECS")]
    pub resume_grace: Option<f64>,

    /// Most ended resumable sessions kept at once, the oldest dropped first (0: none) [default: 64]
    #[arg(long, value_name = "N")]
    pub max_parked_sessions: Option<u64>,

    /// Most bytes (estimated) the ended resumable sessions kept may hold, the oldest dropped first [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_parked_bytes: Option<u64>,

    /// Most bytes (estimated: paths twice, plus table slots) one session's records of what its owners read may hold; past it its largest owners forget their least recently used files, which must be read again before they are written [default: 32 MiB, at least 64 KiB]
    #[arg(long, value_name = "BYTES")]
    pub max_session_observed_bytes: Option<u64>,

    /// Most bytes every session's records of what was read may hold together; past it the session holding the most forgets its least recently used files [default: 256 MiB, at least 64 KiB]
    #[arg(long, value_name = "BYTES")]
    pub max_observed_bytes: Option<u64>,

    /// Turn write-intent gates off: gate/register is refused (FS_PERMISSION_DENIED) and writes are never held for a gate [default: gates allowed]
    #[arg(long)]
    pub no_gates: bool,

    /// Most write intents one gate has in flight; further writes wait their turn, within the gate's timeout [default: 16]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_gate_intents: Option<u64>,

    /// Which sessions may register write-intent gates: `token`, only one whose gate/register carries the gate token the daemon keeps in <socket>.gate-token (mode 0600; `filectx gate` reads it there, no session can read it through the daemon); `any`, every session. Never a read-only session [default: token]
    #[arg(long, value_name = "WHO")]
    pub gate_sessions: Option<crate::config::GateSessions>,
    /// Most bytes of file versions kept (least recently used out first) so that a refused stale write or edit can show what changed since the session's last read; 0 keeps none and shows no diffs [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_snapshot_bytes: Option<u64>,

    /// Largest file version kept for those diffs; a stale refusal of a bigger file shows no diff [default: 1 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_snapshot_file_bytes: Option<u64>,

    /// Most bytes of searched folders' file lists kept warm, so that a repeated glob or grep skips the walk, with the trigram filters a repeated grep skips files by (least recently used list out first; a list over it alone is never kept); 0 keeps none [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    pub max_search_cache_bytes: Option<u64>,

    /// Most searches (glob, grep) running at once, apart from the file slots and shared fairly between sessions; one session never holds them all [default: 1 per core, at least 2]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub search_slots: Option<u64>,

    /// Seconds one search may run; past it, it stops and answers what it found with a footer saying how much it searched [default: 10]
    #[arg(long, value_name = "SECS")]
    pub search_timeout: Option<f64>,

    /// Most memory one search's regular expression may use, its compiled program and DFA caches; a pattern whose program needs more than a quarter of it is refused [default: 16 MiB, at least 1 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(crate::config::MIN_SEARCH_REGEX_BYTES..))]
    pub search_regex_bytes: Option<u64>,

    /// Most inotify watches the daemon holds at once, the search listings and the file watcher together (listings take at most three quarters): a search needing more walks every time instead of being kept warm, and a read file in a folder that cannot be watched is checked when next used instead of notified. Keep it well below fs.inotify.max_user_watches, which all the user's programs share; 0 holds none [default: a quarter of fs.inotify.max_user_watches, at most 65536]
    #[arg(long, value_name = "N")]
    pub max_watches: Option<u64>,

    /// Most bytes of line text one file/read, fs/readText or fs/streamText chunk returns: lines come whole, a window stops before this, and a single longer line is FS_TOO_LARGE (the read tool cuts long lines instead) [default: --max-frame-bytes / 8, 8 MiB; at least 1024, at most --max-frame-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_window_bytes: Option<u64>,

    /// Most bytes of text one read tool answer holds (numbered lines and footer), for sessions that do not set readMaxBytes in initialize [default: 51200; at least 1024, at most --max-window-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub read_max_bytes: Option<u64>,
}

/// The config file's keys: the flags' names with `_`. Every key is optional.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// See `--socket`.
    pub socket: Option<PathBuf>,
    /// See `--log-level`.
    pub log_level: Option<String>,
    /// See `--max-connections`.
    pub max_connections: Option<u64>,
    /// See `--max-frame-bytes`.
    pub max_frame_bytes: Option<u64>,
    /// See `--max-batch`.
    pub max_batch: Option<u64>,
    /// See `--max-concurrent-requests`.
    pub max_concurrent_requests: Option<u64>,
    /// See `--max-queued-messages`.
    pub max_queued_messages: Option<u64>,
    /// See `--max-batch-response-bytes`.
    pub max_batch_response_bytes: Option<u64>,
    /// See `--max-queued-bytes`.
    pub max_queued_bytes: Option<u64>,
    /// See `--max-total-queued-bytes`.
    pub max_total_queued_bytes: Option<u64>,
    /// See `--initialize-timeout` (seconds).
    pub initialize_timeout: Option<f64>,
    /// See `--frame-timeout` (seconds).
    pub frame_timeout: Option<f64>,
    /// See `--max-partial-frame-bytes`.
    pub max_partial_frame_bytes: Option<u64>,
    /// See `--max-edit-bytes`.
    pub max_edit_bytes: Option<u64>,
    /// See `--lock-timeout` (seconds).
    pub lock_timeout: Option<f64>,
    /// Whether writes are fsynced (`--no-fsync` turns it off).
    pub fsync: Option<bool>,
    /// See `--max-cached-files`.
    pub max_cached_files: Option<u64>,
    /// See `--max-cache-bytes`.
    pub max_cache_bytes: Option<u64>,
    /// See `--max-mapped-bytes`.
    pub max_mapped_bytes: Option<u64>,
    /// See `--max-open-files`.
    pub max_open_files: Option<u64>,
    /// See `--cache-idle` (seconds).
    pub cache_idle: Option<f64>,
    /// See `--shutdown-grace` (seconds).
    pub shutdown_grace: Option<f64>,
    /// See `--idle-exit` (seconds; 0 means never).
    pub idle_exit: Option<f64>,
    /// See `--allow-root`.
    pub allowed_roots: Option<Vec<PathBuf>>,
    /// See `--deny-read`.
    pub deny_read: Option<Vec<String>>,
    /// See `--deny-write`.
    pub deny_write: Option<Vec<String>>,
    /// See `--refuse-multi-link-writes`.
    pub refuse_multi_link_writes: Option<bool>,
    /// See `--max-hash-bytes`.
    pub max_hash_bytes: Option<u64>,
    /// See `--file-slots`.
    pub file_slots: Option<u64>,
    /// See `--max-owners`.
    pub max_owners: Option<u64>,
    /// See `--max-roots`.
    pub max_roots: Option<u64>,
    /// See `--resume-grace` (seconds).
    pub resume_grace: Option<f64>,
    /// See `--max-parked-sessions`.
    pub max_parked_sessions: Option<u64>,
    /// See `--max-parked-bytes`.
    pub max_parked_bytes: Option<u64>,
    /// See `--max-session-observed-bytes`.
    pub max_session_observed_bytes: Option<u64>,
    /// See `--max-observed-bytes`.
    pub max_observed_bytes: Option<u64>,
    /// See `--no-gates`.
    pub no_gates: Option<bool>,
    /// See `--max-gate-intents`.
    pub max_gate_intents: Option<u64>,
    /// See `--gate-sessions`.
    pub gate_sessions: Option<crate::config::GateSessions>,
    /// See `--max-snapshot-bytes`.
    pub max_snapshot_bytes: Option<u64>,
    /// See `--max-snapshot-file-bytes`.
    pub max_snapshot_file_bytes: Option<u64>,
    /// See `--max-search-cache-bytes`.
    pub max_search_cache_bytes: Option<u64>,
    /// See `--max-watches`.
    pub max_watches: Option<u64>,
    /// See `--max-window-bytes`.
    pub max_window_bytes: Option<u64>,
    /// See `--read-max-bytes`.
    pub read_max_bytes: Option<u64>,
    /// See `--search-slots`.
    pub search_slots: Option<u64>,
    /// See `--search-timeout` (seconds).
    pub search_timeout: Option<f64>,
    /// See `--search-regex-bytes`.
    pub search_regex_bytes: Option<u64>,
}

/// Why the configuration could not be put together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The config file is not valid (the message names the key and the line).
    #[error("bad config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range.
    #[error("{key} = {value} ({origin}): {why}")]
    Value {
        /// The key (as a flag or config name).
        key: &'static str,
        /// The value given.
        value: String,
        /// Where the value came from: the command line, a config file, or the default.
        origin: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// The effective settings: what the daemon runs with, and what `--print-config` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// The socket path.
    pub socket: PathBuf,
    /// The log filter, if one was set (else RUST_LOG, else info).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// See [`Config::max_connections`].
    pub max_connections: u64,
    /// See [`Config::max_frame_bytes`].
    pub max_frame_bytes: u64,
    /// See [`Config::max_batch_len`].
    pub max_batch: u64,
    /// See [`Config::max_concurrent_requests`].
    pub max_concurrent_requests: u64,
    /// See [`Config::max_queued_messages`].
    pub max_queued_messages: u64,
    /// See [`Config::max_batch_response_bytes`].
    pub max_batch_response_bytes: u64,
    /// See [`Config::max_queued_bytes`].
    pub max_queued_bytes: u64,
    /// See [`Config::max_total_queued_bytes`].
    pub max_total_queued_bytes: u64,
    /// See [`Config::initialize_timeout`], seconds.
    pub initialize_timeout: f64,
    /// See [`Config::frame_timeout`], seconds.
    pub frame_timeout: f64,
    /// See [`Config::max_partial_frame_bytes`].
    pub max_partial_frame_bytes: u64,
    /// Largest edit or write, bytes.
    pub max_edit_bytes: u64,
    /// Lock wait, seconds.
    pub lock_timeout: f64,
    /// Whether writes are fsynced.
    pub fsync: bool,
    /// Cached files.
    pub max_cached_files: u64,
    /// Cached index bytes.
    pub max_cache_bytes: u64,
    /// Mapped bytes.
    pub max_mapped_bytes: u64,
    /// Cached files kept open.
    pub max_open_files: u64,
    /// Idle release period, seconds.
    pub cache_idle: f64,
    /// Shutdown grace, seconds.
    pub shutdown_grace: f64,
    /// Idle exit, seconds (0 = never).
    pub idle_exit: f64,
    /// See [`Config::allowed_roots`].
    pub allowed_roots: Vec<PathBuf>,
    /// See [`Config::deny_read`].
    pub deny_read: Vec<String>,
    /// See [`Config::deny_write`].
    pub deny_write: Vec<String>,
    /// Whether writes to multi-link files are refused.
    pub refuse_multi_link_writes: bool,
    /// Largest file a read or stat hashes, bytes.
    pub max_hash_bytes: u64,
    /// File operations at once, shared fairly between sessions.
    pub file_slots: u64,
    /// See [`Config::max_owners`].
    pub max_owners: u64,
    /// See [`Config::max_roots`].
    pub max_roots: u64,
    /// See [`Config::resume_grace`], seconds.
    pub resume_grace: f64,
    /// See [`Config::max_parked_sessions`].
    pub max_parked_sessions: u64,
    /// See [`Config::max_parked_bytes`].
    pub max_parked_bytes: u64,
    /// See [`Config::max_session_observed_bytes`].
    pub max_session_observed_bytes: u64,
    /// See [`Config::max_observed_bytes`].
    pub max_observed_bytes: u64,
    /// Whether write-intent gates are turned off.
    pub no_gates: bool,
    /// See [`Config::max_gate_intents`].
    pub max_gate_intents: u64,
    /// See [`Config::gate_sessions`].
    pub gate_sessions: crate::config::GateSessions,
    /// Bytes of file versions kept for stale refusals' diffs.
    pub max_snapshot_bytes: u64,
    /// Largest file version kept for them, bytes.
    pub max_snapshot_file_bytes: u64,
    /// Bytes of searched folders' file lists kept warm.
    pub max_search_cache_bytes: u64,
    /// Most inotify watches held at once.
    pub max_watches: u64,
    /// Most bytes of line text in one window of whole lines.
    pub max_window_bytes: u64,
    /// The read tool's default budget, bytes.
    pub read_max_bytes: u64,
    /// See [`Config::search_slots`].
    pub search_slots: u64,
    /// See [`Config::search_timeout`], seconds.
    pub search_timeout: f64,
    /// See [`Config::search_regex_bytes`].
    pub search_regex_bytes: u64,
    /// The config file that was read, if any.
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
}

/// The default config file: `$XDG_CONFIG_HOME/filectx/config.toml`, else under `~/.config`.
pub fn default_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("filectx").join("config.toml"))
}

fn read_config(path: &Path) -> Result<FileConfig, SettingsError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SettingsError::Read { path: path.to_owned(), source })?;
    toml::from_str(&text)
        .map_err(|e| SettingsError::Parse { path: path.to_owned(), message: e.to_string().trim().to_owned() })
}

/// `value` when it `fits`; else the error saying `why` it does not.
fn checked<T: std::fmt::Display>(
    key: &'static str,
    value: T,
    fits: bool,
    why: &'static str,
) -> Result<T, SettingsError> {
    if fits {
        Ok(value)
    } else {
        Err(SettingsError::Value { key, value: value.to_string(), origin: String::new(), why })
    }
}

fn seconds(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (0.0..=86_400.0).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 0 to 86400")
}

fn at_least_one(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1, "must be at least 1")
}

/// A byte budget: at least 1 KiB (a smaller one would only make every message wait).
fn at_least_kib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1024, "must be at least 1024")
}

/// A byte cap of what sessions remember: at least 64 KiB (room for a few records of the longest
/// paths).
fn at_least_64kib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 64 * 1024, "must be at least 65536")
}

/// A search's regex bound: at least [`crate::config::MIN_SEARCH_REGEX_BYTES`].
fn search_regex_bytes(value: u64) -> Result<u64, SettingsError> {
    let fits = value >= crate::config::MIN_SEARCH_REGEX_BYTES;
    checked("search_regex_bytes", value, fits, "must be at least 1048576 (1 MiB)")
}

/// A timeout: more than zero (zero would close every connection at once), at most a day.
fn timeout_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && value > 0.0 && value <= 86_400.0;
    checked(key, value, fits, "must be a number of seconds above 0, at most 86400")
}

impl Args {
    /// Merges flags, the config file and the defaults. A bad value is reported with its key and
    /// where it came from.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        self.merge().map_err(|err| match err {
            SettingsError::Value { key, value, why, .. } => {
                let origin = if self.flag_set(key) {
                    "from the command line".to_owned()
                } else {
                    match self.config.clone().or_else(default_config_path) {
                        Some(path) if path.exists() => format!("from the config file {}", path.display()),
                        _ => "the default".to_owned(),
                    }
                };
                SettingsError::Value { key, value, origin, why }
            }
            other => other,
        })
    }

    /// Whether the flag for a config key was given.
    fn flag_set(&self, key: &str) -> bool {
        match key {
            "log_level" => self.log_level.is_some(),
            "max_connections" => self.max_connections.is_some(),
            "max_frame_bytes" => self.max_frame_bytes.is_some(),
            "max_batch" => self.max_batch.is_some(),
            "max_concurrent_requests" => self.max_concurrent_requests.is_some(),
            "max_queued_messages" => self.max_queued_messages.is_some(),
            "max_batch_response_bytes" => self.max_batch_response_bytes.is_some(),
            "max_queued_bytes" => self.max_queued_bytes.is_some(),
            "max_total_queued_bytes" => self.max_total_queued_bytes.is_some(),
            "initialize_timeout" => self.initialize_timeout.is_some(),
            "frame_timeout" => self.frame_timeout.is_some(),
            "max_partial_frame_bytes" => self.max_partial_frame_bytes.is_some(),
            "lock_timeout" => self.lock_timeout.is_some(),
            "max_cached_files" => self.max_cached_files.is_some(),
            "cache_idle" => self.cache_idle.is_some(),
            "shutdown_grace" => self.shutdown_grace.is_some(),
            "idle_exit" => self.idle_exit.is_some(),
            "allowed_roots" => !self.allowed_roots.is_empty(),
            "deny_read" => !self.deny_read.is_empty(),
            "deny_write" => !self.deny_write.is_empty(),
            "max_hash_bytes" => self.max_hash_bytes.is_some(),
            "file_slots" => self.file_slots.is_some(),
            "max_owners" => self.max_owners.is_some(),
            "max_roots" => self.max_roots.is_some(),
            "max_gate_intents" => self.max_gate_intents.is_some(),
            "gate_sessions" => self.gate_sessions.is_some(),
            "max_session_observed_bytes" => self.max_session_observed_bytes.is_some(),
            "max_observed_bytes" => self.max_observed_bytes.is_some(),
            "resume_grace" => self.resume_grace.is_some(),
            "max_parked_sessions" => self.max_parked_sessions.is_some(),
            "max_parked_bytes" => self.max_parked_bytes.is_some(),
            "max_snapshot_bytes" => self.max_snapshot_bytes.is_some(),
            "max_snapshot_file_bytes" => self.max_snapshot_file_bytes.is_some(),
            "max_search_cache_bytes" => self.max_search_cache_bytes.is_some(),
            "max_watches" => self.max_watches.is_some(),
            "max_window_bytes" => self.max_window_bytes.is_some(),
            "read_max_bytes" => self.read_max_bytes.is_some(),
            "search_slots" => self.search_slots.is_some(),
            "search_timeout" => self.search_timeout.is_some(),
            "search_regex_bytes" => self.search_regex_bytes.is_some(),
            _ => false,
        }
    }

    fn merge(&self) -> Result<Settings, SettingsError> {
        let (file, config_file) = match &self.config {
            Some(path) => (read_config(path)?, Some(path.clone())),
            None => match default_config_path().filter(|p| p.exists()) {
                Some(path) => (read_config(&path)?, Some(path)),
                None => (FileConfig::default(), None),
            },
        };
        let defaults = Config::default();
        let service = &defaults.files;
        let socket = match self.socket.clone().or(file.socket.clone()) {
            Some(path) => path,
            None => default_socket(),
        };
        let max_frame_bytes =
            match self.max_frame_bytes.or(file.max_frame_bytes).unwrap_or(DEFAULT_MAX_FRAME_BYTES as u64) {
                n if n >= 1024 => n,
                n => {
                    return Err(SettingsError::Value {
                        key: "max_frame_bytes",
                        value: n.to_string(),
                        origin: String::new(),
                        why: "must be at least 1024",
                    });
                }
            };
        let max_window_bytes = match self
            .max_window_bytes
            .or(file.max_window_bytes)
            .unwrap_or((max_frame_bytes / 8).max(1024))
        {
            n if (1024..=max_frame_bytes).contains(&n) => n,
            n => {
                return Err(SettingsError::Value {
                    key: "max_window_bytes",
                    value: n.to_string(),
                    origin: String::new(),
                    why: "must be at least 1024 and at most max_frame_bytes",
                });
            }
        };
        let read_max_bytes = match self
            .read_max_bytes
            .or(file.read_max_bytes)
            .unwrap_or(defaults.read_max_bytes.min(max_window_bytes))
        {
            n if (1024..=max_window_bytes).contains(&n) => n,
            n => {
                return Err(SettingsError::Value {
                    key: "read_max_bytes",
                    value: n.to_string(),
                    origin: String::new(),
                    why: "must be at least 1024 and at most max_window_bytes",
                });
            }
        };
        Ok(Settings {
            socket,
            log_level: match self.log_level.clone().or(file.log_level.clone()) {
                Some(filter) => match tracing_subscriber::EnvFilter::try_new(&filter) {
                    Ok(_) => Some(filter),
                    Err(_) => {
                        return Err(SettingsError::Value {
                            key: "log_level",
                            value: filter,
                            origin: String::new(),
                            why: "must be a level (error, warn, info, debug, trace) or a tracing filter",
                        });
                    }
                },
                None => None,
            },
            max_connections: at_least_one(
                "max_connections",
                self.max_connections.or(file.max_connections).unwrap_or(defaults.max_connections as u64),
            )?,
            max_frame_bytes,
            max_batch: at_least_one(
                "max_batch",
                self.max_batch.or(file.max_batch).unwrap_or(defaults.max_batch_len as u64),
            )?,
            max_concurrent_requests: at_least_one(
                "max_concurrent_requests",
                self.max_concurrent_requests
                    .or(file.max_concurrent_requests)
                    .unwrap_or(defaults.max_concurrent_requests as u64),
            )?,
            max_queued_messages: at_least_one(
                "max_queued_messages",
                self.max_queued_messages
                    .or(file.max_queued_messages)
                    .unwrap_or(defaults.max_queued_messages as u64),
            )?,
            max_batch_response_bytes: at_least_kib(
                "max_batch_response_bytes",
                self.max_batch_response_bytes
                    .or(file.max_batch_response_bytes)
                    .unwrap_or(defaults.max_batch_response_bytes as u64),
            )?,
            max_queued_bytes: at_least_kib(
                "max_queued_bytes",
                self.max_queued_bytes.or(file.max_queued_bytes).unwrap_or(defaults.max_queued_bytes as u64),
            )?,
            max_total_queued_bytes: at_least_kib(
                "max_total_queued_bytes",
                self.max_total_queued_bytes
                    .or(file.max_total_queued_bytes)
                    .unwrap_or(defaults.max_total_queued_bytes as u64),
            )?,
            initialize_timeout: timeout_secs(
                "initialize_timeout",
                self.initialize_timeout
                    .or(file.initialize_timeout)
                    .unwrap_or(defaults.initialize_timeout.as_secs_f64()),
            )?,
            frame_timeout: timeout_secs(
                "frame_timeout",
                self.frame_timeout.or(file.frame_timeout).unwrap_or(defaults.frame_timeout.as_secs_f64()),
            )?,
            max_partial_frame_bytes: at_least_kib(
                "max_partial_frame_bytes",
                self.max_partial_frame_bytes
                    .or(file.max_partial_frame_bytes)
                    .unwrap_or(defaults.max_partial_frame_bytes as u64),
            )?,
            max_edit_bytes: self.max_edit_bytes.or(file.max_edit_bytes).unwrap_or(service.max_edit_bytes),
            lock_timeout: seconds(
                "lock_timeout",
                self.lock_timeout.or(file.lock_timeout).unwrap_or(service.lock_patience.as_secs_f64()),
            )?,
            fsync: if self.no_fsync { false } else { file.fsync.unwrap_or(service.fsync) },
            max_cached_files: at_least_one(
                "max_cached_files",
                self.max_cached_files.or(file.max_cached_files).unwrap_or(service.max_cached_files as u64),
            )?,
            max_cache_bytes: self
                .max_cache_bytes
                .or(file.max_cache_bytes)
                .unwrap_or(service.max_index_bytes as u64),
            max_mapped_bytes: self
                .max_mapped_bytes
                .or(file.max_mapped_bytes)
                .unwrap_or(service.max_mapped_bytes as u64),
            max_open_files: self
                .max_open_files
                .or(file.max_open_files)
                .unwrap_or(service.max_open_files as u64),
            cache_idle: seconds(
                "cache_idle",
                self.cache_idle.or(file.cache_idle).unwrap_or(service.idle_release.as_secs_f64()),
            )?,
            shutdown_grace: seconds(
                "shutdown_grace",
                self.shutdown_grace.or(file.shutdown_grace).unwrap_or(defaults.shutdown_grace.as_secs_f64()),
            )?,
            idle_exit: seconds("idle_exit", self.idle_exit.or(file.idle_exit).unwrap_or(0.0))?,
            allowed_roots: match (&self.allowed_roots, &file.allowed_roots) {
                (given, _) if !given.is_empty() => absolute("allowed_roots", given)?,
                (_, Some(listed)) => absolute("allowed_roots", listed)?,
                _ => defaults.allowed_roots.clone(),
            },
            deny_read: globs("deny_read", pick(&self.deny_read, &file.deny_read, &defaults.deny_read))?,
            deny_write: globs("deny_write", pick(&self.deny_write, &file.deny_write, &defaults.deny_write))?,
            refuse_multi_link_writes: self.refuse_multi_link_writes
                || file.refuse_multi_link_writes.unwrap_or(service.refuse_multi_link_writes),
            max_hash_bytes: at_least_one(
                "max_hash_bytes",
                self.max_hash_bytes.or(file.max_hash_bytes).unwrap_or(service.max_hash_bytes),
            )?,
            file_slots: at_least_one(
                "file_slots",
                self.file_slots.or(file.file_slots).unwrap_or(defaults.file_slots as u64),
            )?,
            max_owners: at_least_one(
                "max_owners",
                self.max_owners.or(file.max_owners).unwrap_or(defaults.max_owners as u64),
            )?,
            max_roots: at_least_one(
                "max_roots",
                self.max_roots.or(file.max_roots).unwrap_or(defaults.max_roots as u64),
            )?,
            resume_grace: seconds(
                "resume_grace",
                self.resume_grace.or(file.resume_grace).unwrap_or(defaults.resume_grace.as_secs_f64()),
            )?,
            max_parked_sessions: self
                .max_parked_sessions
                .or(file.max_parked_sessions)
                .unwrap_or(defaults.max_parked_sessions as u64),
            max_parked_bytes: self
                .max_parked_bytes
                .or(file.max_parked_bytes)
                .unwrap_or(defaults.max_parked_bytes as u64),
            max_session_observed_bytes: at_least_64kib(
                "max_session_observed_bytes",
                self.max_session_observed_bytes
                    .or(file.max_session_observed_bytes)
                    .unwrap_or(defaults.max_session_observed_bytes as u64),
            )?,
            max_observed_bytes: at_least_64kib(
                "max_observed_bytes",
                self.max_observed_bytes
                    .or(file.max_observed_bytes)
                    .unwrap_or(defaults.max_observed_bytes as u64),
            )?,
            no_gates: self.no_gates || file.no_gates.unwrap_or(!defaults.gates),
            max_gate_intents: at_least_one(
                "max_gate_intents",
                self.max_gate_intents.or(file.max_gate_intents).unwrap_or(defaults.max_gate_intents as u64),
            )?,
            gate_sessions: self.gate_sessions.or(file.gate_sessions).unwrap_or(defaults.gate_sessions),
            max_snapshot_bytes: self
                .max_snapshot_bytes
                .or(file.max_snapshot_bytes)
                .unwrap_or(service.max_snapshot_bytes as u64),
            max_snapshot_file_bytes: self
                .max_snapshot_file_bytes
                .or(file.max_snapshot_file_bytes)
                .unwrap_or(service.max_snapshot_file_bytes as u64),
            max_search_cache_bytes: self
                .max_search_cache_bytes
                .or(file.max_search_cache_bytes)
                .unwrap_or(service.max_search_cache_bytes as u64),
            max_watches: self.max_watches.or(file.max_watches).unwrap_or(service.max_watches as u64),
            max_window_bytes,
            read_max_bytes,
            search_slots: at_least_one(
                "search_slots",
                self.search_slots.or(file.search_slots).unwrap_or(defaults.search_slots as u64),
            )?,
            search_timeout: timeout_secs(
                "search_timeout",
                self.search_timeout.or(file.search_timeout).unwrap_or(defaults.search_timeout.as_secs_f64()),
            )?,
            search_regex_bytes: search_regex_bytes(
                self.search_regex_bytes
                    .or(file.search_regex_bytes)
                    .unwrap_or(defaults.search_regex_bytes as u64),
            )?,
            config_file,
        })
    }
}

/// A list given by flags, else by the file, else the default.
fn pick(flags: &[String], file: &Option<Vec<String>>, default: &[String]) -> Vec<String> {
    if !flags.is_empty() {
        return flags.to_vec();
    }
    file.clone().unwrap_or_else(|| default.to_vec())
}

/// Checks that every pattern of a deny list parses.
fn globs(key: &'static str, patterns: Vec<String>) -> Result<Vec<String>, SettingsError> {
    for pattern in &patterns {
        if crate::context::deny::DenyRules::daemon(std::slice::from_ref(pattern), &[]).is_err() {
            return Err(SettingsError::Value {
                key,
                value: pattern.clone(),
                origin: String::new(),
                why: "is not a valid glob pattern",
            });
        }
    }
    Ok(patterns)
}

/// Checks that every folder of a list is absolute.
fn absolute(key: &'static str, folders: &[PathBuf]) -> Result<Vec<PathBuf>, SettingsError> {
    match folders.iter().find(|f| !f.is_absolute()) {
        Some(bad) => Err(SettingsError::Value {
            key,
            value: bad.display().to_string(),
            origin: String::new(),
            why: "must be an absolute path",
        }),
        None => Ok(folders.to_vec()),
    }
}

/// The default socket path for this user.
fn default_socket() -> PathBuf {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    default_socket_path(runtime.as_deref(), rustix::process::geteuid().as_raw())
}

impl Settings {
    /// The runtime configuration.
    pub fn config(&self) -> Config {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let defaults = Config::default();
        Config {
            max_connections: size(self.max_connections),
            max_frame_bytes: size(self.max_frame_bytes),
            max_batch_len: size(self.max_batch),
            max_concurrent_requests: size(self.max_concurrent_requests),
            max_queued_messages: size(self.max_queued_messages),
            max_batch_response_bytes: size(self.max_batch_response_bytes),
            max_queued_bytes: size(self.max_queued_bytes),
            max_total_queued_bytes: size(self.max_total_queued_bytes),
            initialize_timeout: Duration::from_secs_f64(self.initialize_timeout),
            frame_timeout: Duration::from_secs_f64(self.frame_timeout),
            max_partial_frame_bytes: size(self.max_partial_frame_bytes),
            shutdown_grace: Duration::from_secs_f64(self.shutdown_grace),
            idle_exit: (self.idle_exit > 0.0).then(|| Duration::from_secs_f64(self.idle_exit)),
            files: crate::context::FilesConfig {
                max_edit_bytes: self.max_edit_bytes,
                lock_patience: Duration::from_secs_f64(self.lock_timeout),
                fsync: self.fsync,
                max_cached_files: size(self.max_cached_files),
                max_index_bytes: size(self.max_cache_bytes),
                max_mapped_bytes: size(self.max_mapped_bytes),
                max_open_files: size(self.max_open_files),
                idle_release: Duration::from_secs_f64(self.cache_idle),
                refuse_multi_link_writes: self.refuse_multi_link_writes,
                max_hash_bytes: self.max_hash_bytes,
                max_snapshot_bytes: size(self.max_snapshot_bytes),
                max_snapshot_file_bytes: size(self.max_snapshot_file_bytes),
                max_search_cache_bytes: size(self.max_search_cache_bytes),
                max_watches: size(self.max_watches),
                max_window_bytes: self.max_window_bytes,
                ..defaults.files.clone()
            },
            allowed_roots: self.allowed_roots.clone(),
            deny_read: self.deny_read.clone(),
            deny_write: self.deny_write.clone(),
            file_slots: size(self.file_slots),
            max_owners: size(self.max_owners),
            max_roots: size(self.max_roots),
            resume_grace: Duration::from_secs_f64(self.resume_grace),
            max_parked_sessions: size(self.max_parked_sessions),
            max_parked_bytes: size(self.max_parked_bytes),
            max_session_observed_bytes: size(self.max_session_observed_bytes),
            max_observed_bytes: size(self.max_observed_bytes),
            gates: !self.no_gates,
            max_gate_intents: size(self.max_gate_intents),
            gate_sessions: self.gate_sessions,
            read_max_bytes: self.read_max_bytes,
            search_slots: size(self.search_slots),
            search_timeout: Duration::from_secs_f64(self.search_timeout),
            search_regex_bytes: size(self.search_regex_bytes),
            ..defaults
        }
    }

    /// How strictly to check the socket's folder: the `/tmp` fallback must be private; a folder
    /// the user named (or `$XDG_RUNTIME_DIR`) is used as given.
    pub fn folder_policy(&self) -> FolderPolicy {
        let uid = rustix::process::geteuid().as_raw();
        if self.socket == default_socket_path(None, uid) {
            FolderPolicy::Private
        } else {
            FolderPolicy::AsGiven
        }
    }

    /// The settings as TOML, for `--print-config`.
    pub fn to_toml(&self) -> String {
        let mut text = String::from("# filectxd effective configuration\n");
        match &self.config_file {
            Some(path) => text.push_str(&format!("# config file: {}\n", path.display())),
            None => text.push_str("# config file: none\n"),
        }
        match toml::to_string(self) {
            Ok(body) => text.push_str(&body),
            Err(err) => text.push_str(&format!("# cannot render: {err}\n")),
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_flag_has_help_and_defaults_match_config() {
        Args::command().debug_assert();
        for arg in Args::command().get_arguments() {
            assert!(arg.get_help().is_some(), "--{} has no help", arg.get_id());
        }
        let args = Args { config: Some(PathBuf::from("/dev/null")), ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.config(), Config::default());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_connections = 7\nfsync = false\nlock_timeout = 2.5\n").unwrap();
        let args = Args { config: Some(path.clone()), max_connections: Some(9), ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.max_connections, 9);
        assert!(!settings.fsync);
        assert_eq!(settings.config().files.lock_patience, Duration::from_millis(2500));
        let printed = settings.to_toml();
        assert!(printed.contains("max_connections = 9") && printed.contains("fsync = false"), "{printed}");
        assert!(printed.contains("deny_write = [\"**/.git/**\"]"), "{printed}");
    }

    #[test]
    fn sandbox_settings_come_from_flags_or_the_file_and_bad_globs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "allowed_roots = [\"/srv\"]\ndeny_read = [\"**/*.pem\"]\nrefuse_multi_link_writes = true\n",
        )
        .unwrap();
        let args = Args { config: Some(path.clone()), deny_write: vec!["*.lock".into()], ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.allowed_roots, vec![PathBuf::from("/srv")]);
        assert_eq!(
            (settings.deny_read.clone(), settings.deny_write.clone()),
            (vec!["**/*.pem".to_owned()], vec!["*.lock".to_owned()])
        );
        assert!(settings.config().files.refuse_multi_link_writes);
        let err = Args { config: Some(path.clone()), deny_read: vec!["a/[".into()], ..Args::default() }
            .settings()
            .unwrap_err();
        assert!(err.to_string().contains("deny_read"), "{err}");
        let err = Args { config: Some(path), allowed_roots: vec!["rel".into()], ..Args::default() }
            .settings()
            .unwrap_err();
        assert!(err.to_string().contains("allowed_roots"), "{err}");
    }

    #[test]
    fn a_bad_config_file_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_conections = 7\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_conections"), "{err}");
        std::fs::write(&path, "max_connections = \"many\"\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
        std::fs::write(&path, "max_batch = 0\n").unwrap();
        let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
        assert!(err.to_string().contains("max_batch"), "{err}");
        for bad in ["search_regex_bytes = 4096", "search_slots = 0", "search_timeout = 0"] {
            std::fs::write(&path, format!("{bad}\n")).unwrap();
            let err = Args { config: Some(path.clone()), ..Args::default() }.settings().unwrap_err();
            let key = bad.split(' ').next().unwrap();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        std::fs::write(&path, "search_slots = 3\nsearch_timeout = 2.5\nsearch_regex_bytes = 2097152\n")
            .unwrap();
        let config = Args { config: Some(path), ..Args::default() }.settings().unwrap().config();
        assert_eq!(
            (config.search_slots, config.search_timeout, config.search_regex_bytes),
            (3, Duration::from_millis(2500), 2 << 20)
        );
    }
}
