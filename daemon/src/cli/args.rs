//! The settings table: every `filectxd` setting declared once — its name, type, default, check,
//! help, flag, environment variable and config-file key — and what follows from it: [`Args`]
//! (the flags, which clap parses, and the config file, which serde parses into the same struct),
//! [`Settings`] (the effective values, which `--print-config` prints) and their merge,
//! [`Args::over`]: a flag over the config file over the default, each value checked once.

// The rows' doc comments are `--help` text, read in a terminal as written: a
// `[[language_server]]` or `<socket>` there is no link and no HTML tag.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::Parser;
use filectx_protocol::DEFAULT_MAX_FRAME_BYTES;
use filectx_protocol::socket::SOCKET_ENV;
use serde::{Deserialize, Serialize};

use super::error::SettingsError;
use super::rules::{
    DEFAULT_JOURNAL_MAX_AGE, DEFAULT_JOURNAL_MAX_BYTES, DEFAULT_JOURNAL_MAX_FILE_BYTES,
    DEFAULT_MAX_SEARCH_INDEX_BYTES, FromFlag, Given, absolute, absolute_dir, age_secs, any, at_least_64kib,
    at_least_journal, at_least_kib, at_least_mib, at_least_one, default_socket, globs, language_servers,
    log_filter, search_regex_bytes, seconds, settle_secs, timeout_secs, within,
};
use crate::config::{Config, GateSessions};

/// Environment variable naming the config file.
pub const CONFIG_ENV: &str = "FILECTX_CONFIG";

const AFTER_HELP: &str = "\
Config file:
  $XDG_CONFIG_HOME/filectx/config.toml (else ~/.config/filectx/config.toml), or --config /
  FILECTX_CONFIG. Its keys are the long flags' names with '_' for '-' (max_connections = 256),
  but for --allow-root (allowed_roots) and three switches whose keys are what they turn off
  (--no-fsync: fsync = false; --no-journal: journal = false; --no-builtin-language-servers:
  builtin_language_servers = false); [[language_server]] tables are the file's only. A flag beats the file; the file beats the default. An unknown key or a
  wrong type is an error that names it.
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
  slots. Kept listings and their filters are written to --search-index-dir (0700, files 0600,
  one per root, at most --max-search-index-bytes together) after their filters are built and at
  a clean stop; when a session next names the root, its index is validated against every
  folder's and file's stat data before the first search is answered from it (what changed is
  read again), so a restarted daemon's first search is warm.

Journal:
  Every change the daemon makes (the tools, file/*, fs/*, restores, gated writes once allowed)
  is recorded in --journal-dir (0700, files 0600), with the content before it, stored before the
  change lands; so are outside changes the watcher sees in files a session read, when the
  daemon still holds the version that session saw. Each version's bytes are kept once. The
  oldest entries go past --journal-max-bytes or --journal-max-age (and past 100000 entries); a
  file over --journal-max-file-bytes (or a quarter of --journal-max-bytes) is recorded without
  its bytes and cannot be restored. A torn tail after a crash is dropped on start; ids are never
  reused. journal/list, journal/diff and journal/restore (guarded like a write) serve it;
  `filectx history`, `filectx diff` and `filectx undo` use them. One daemon uses a journal
  folder at a time; a second runs without one, as does a daemon that finds a segment of another
  format version or cannot load it (logged, and said in `filectx status`). No session reaches
  the journal's folder, the state folder or the gate token, whatever its roots.

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

/// Makes the settings table's rows into [`Args`], [`Settings`] and [`Args::over`]. A row:
///
/// ```text
/// /// Its help (and its doc in both structs), one line
/// #[arg(...)]              // its flag: clap's attributes (`skip`: none)
/// #[serde(...)]            // optional: its config key when it is not the name
/// name: Type = default => rule;
/// ```
///
/// `default` may use the bindings of the `defaults { ... }` block and every setting of an
/// earlier row, by name; `rule` is a check of [`super::rules`], given the key and the value. A
/// flag and the config file give `Option<Type>`; a switch (`bool`, `action = SetTrue`) is given
/// by its flag only when it is on ([`FromFlag`]).
macro_rules! settings_table {
    (
        defaults { $($defaults:stmt;)* }
        $(
            $(#[doc = $doc:expr])*
            #[arg($($arg:tt)*)]
            $(#[serde($($serde:tt)*)])*
            $name:ident: $ty:ty = $default:expr => $rule:expr;
        )*
    ) => {
        /// filectxd: the per-user filectx daemon. Serves safe read/write/edit file tools to many
        /// agent processes over one Unix socket (LSP Content-Length framing, JSON-RPC 2.0).
        ///
        /// The same struct is the config file's schema: its keys are the fields' names (`fsync`
        /// for `--no-fsync`), every key optional, an unknown key an error. `--config` and
        /// `--print-config` are flags only. The fields stand in the config file's order (which
        /// its errors list); three flags take a `display_order` so that `--help` keeps its own
        /// order.
        #[derive(Debug, Default, Clone, PartialEq, Parser, Deserialize)]
        #[command(name = "filectxd", version, about, long_about = None, after_help = AFTER_HELP)]
        #[serde(deny_unknown_fields)]
        pub struct Args {
            /// Config file [default: $XDG_CONFIG_HOME/filectx/config.toml, if it exists]
            #[arg(long, value_name = "PATH", env = CONFIG_ENV)]
            #[serde(skip)]
            pub config: Option<PathBuf>,

            /// Print the effective configuration (flags, config file and defaults merged) as TOML and exit
            #[arg(long)]
            #[serde(skip)]
            pub print_config: bool,

            $(
                $(#[doc = $doc])*
                #[arg($($arg)*)]
                $(#[serde($($serde)*)])*
                pub $name: Option<$ty>,
            )*
        }

        /// The effective settings: what the daemon runs with, and what `--print-config` prints
        /// (each under its config key).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub struct Settings {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])*
                pub $name: $ty,
            )*
            /// The config file that was read, if any.
            #[serde(skip)]
            pub config_file: Option<PathBuf>,
        }

        impl Args {
            /// These flags over `file` (the config file's settings; `elsewhere` says where a
            /// value no flag gave came from) over the defaults, each value checked.
            pub(super) fn over(
                &self,
                file: &Args,
                elsewhere: &str,
                config_file: Option<PathBuf>,
            ) -> Result<Settings, SettingsError> {
                $($defaults)*
                $(
                    let flag = <$ty as FromFlag>::from_flag(self.$name.clone());
                    let $name: $ty = Given {
                        key: stringify!($name),
                        from_flag: flag.is_some(),
                        value: flag.or_else(|| file.$name.clone()).unwrap_or_else(|| $default),
                        elsewhere,
                    }
                    .check($rule)?;
                )*
                Ok(Settings { $($name,)* config_file })
            }
        }
    };
}

settings_table! {
    defaults {
        let defaults = Config::default();
        let service = &defaults.files;
        let lsp = &defaults.lsp;
    }

    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/filectx.sock]
    #[arg(long, value_name = "PATH", env = SOCKET_ENV)]
    socket: PathBuf = default_socket() => any;

    /// Log level or tracing filter (overrides RUST_LOG) [default: info]
    #[arg(long, value_name = "FILTER")]
    #[serde(skip_serializing_if = "String::is_empty")]
    log_level: String = String::new() => log_filter;

    /// Most connections (agent sessions) served at once; the next one is refused with error -32009 [default: 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64 = defaults.max_connections as u64 => at_least_one;

    /// Largest JSON-RPC message accepted or sent, in bytes; a bigger request is skipped unread and answered -32007 [default: 64 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_frame_bytes: u64 = DEFAULT_MAX_FRAME_BYTES as u64 => at_least_kib;

    /// Most entries in one JSON-RPC batch (a bigger batch is answered -32010) [default: 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_batch: u64 = defaults.max_batch_len as u64 => at_least_one;

    /// Most requests of one connection served concurrently; beyond it the daemon stops reading that connection until one finishes [default: 32]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_concurrent_requests: u64 = defaults.max_concurrent_requests as u64 => at_least_one;

    /// Most outgoing messages queued for one connection; a client that does not read stalls only itself, and its notifications are dropped [default: 256]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_queued_messages: u64 = defaults.max_queued_messages as u64 => at_least_one;

    /// Most bytes of one batch's response; entries whose responses do not fit are answered -32010 in order (those not yet started are not run) [default: 16 MiB, at most --max-frame-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_batch_response_bytes: u64 = defaults.max_batch_response_bytes as u64 => at_least_kib;

    /// Most bytes of outgoing messages (responses, notifications, stream chunks) queued for one connection; at it the daemon stops reading that connection until its client reads [default: 8 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_queued_bytes: u64 = defaults.max_queued_bytes as u64 => at_least_kib;

    /// Most bytes of outgoing messages queued over all connections; each connection is guaranteed this divided by --max-connections, and when the rest runs low the connections holding the most wait first [default: 256 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_total_queued_bytes: u64 = defaults.max_total_queued_bytes as u64 => at_least_kib;

    /// Seconds a new connection has to complete `initialize` before it is closed (and logged) [default: 10]
    #[arg(long, value_name = "SECS")]
    initialize_timeout: f64 = defaults.initialize_timeout.as_secs_f64() => timeout_secs;

    /// Seconds a frame that has started to arrive may go without a byte before its connection is closed [default: 10]
    #[arg(long, value_name = "SECS")]
    frame_timeout: f64 = defaults.frame_timeout.as_secs_f64() => timeout_secs;

    /// Most bytes of partly received frames over all connections; a frame over 64 KiB waits, unread, until its declared length fits [default: 128 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    max_partial_frame_bytes: u64 = defaults.max_partial_frame_bytes as u64 => at_least_kib;

    /// Largest file an edit loads and largest content a write accepts, in bytes (FS_TOO_LARGE beyond) [default: 256 MiB]
    #[arg(long, value_name = "BYTES")]
    max_edit_bytes: u64 = service.max_edit_bytes => any;

    /// Seconds a write or edit waits for a file's locks (held by another request or another process's flock) before FS_BUSY [default: 10]
    #[arg(long, value_name = "SECS")]
    lock_timeout: f64 = service.lock_patience.as_secs_f64() => seconds;

    /// Do not fsync files and folders before acknowledging writes (faster; a power loss may lose acknowledged writes, though never half-write a file)
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(rename = "fsync", default, with = "negated")]
    no_fsync: bool = !service.fsync => any;

    /// Most files whose versions and line indexes are cached [default: 4096]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_cached_files: u64 = service.max_cached_files as u64 => at_least_one;

    /// Most bytes of line indexes cached [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    max_cache_bytes: u64 = service.max_index_bytes as u64 => any;

    /// Most bytes of large files memory-mapped at once [default: 8 GiB]
    #[arg(long, value_name = "BYTES")]
    max_mapped_bytes: u64 = service.max_mapped_bytes as u64 => any;

    /// Most cached files kept open so that warm reads need no open (each holds a file descriptor; capped at a quarter of the open-file limit) [default: 1024]
    #[arg(long, value_name = "N")]
    max_open_files: u64 = service.max_open_files as u64 => any;

    /// Seconds after which cached state nobody used is released (open files closed, mappings and line indexes dropped, freed memory given back): entries go after one to two of these periods [default: 30]
    #[arg(long, value_name = "SECS")]
    cache_idle: f64 = service.idle_release.as_secs_f64() => seconds;

    /// Seconds to wait for in-flight requests after SIGTERM/SIGINT before exiting anyway [default: 5]
    #[arg(long, value_name = "SECS")]
    shutdown_grace: f64 = defaults.shutdown_grace.as_secs_f64() => seconds;

    /// Exit after this many seconds without any session (for socket activation: systemd starts the daemon again on the next connection) [default: never]
    #[arg(long, value_name = "SECS")]
    idle_exit: f64 = 0.0 => seconds;

    /// A folder session roots may lie in (repeatable); with none given, roots may be anywhere except `/` itself [default: none]
    #[arg(long = "allow-root", value_name = "DIR")]
    allowed_roots: Vec<PathBuf> = defaults.allowed_roots.clone() => absolute;

    /// Glob of paths (relative to their root) whose content no session may read (repeatable) [default: none]
    #[arg(long = "deny-read", value_name = "GLOB")]
    deny_read: Vec<String> = defaults.deny_read.clone() => globs;

    /// Glob of paths (relative to their root) no session may write or edit (repeatable; replaces the default list) [default: **/.git/**]
    #[arg(long = "deny-write", value_name = "GLOB")]
    deny_write: Vec<String> = defaults.deny_write.clone() => globs;

    /// Refuse writes and edits of files with several hard links (they are rewritten in place, so a link outside the roots would see the change) [default: allowed]
    #[arg(long, action = clap::ArgAction::SetTrue)]
    refuse_multi_link_writes: bool = service.refuse_multi_link_writes => any;

    /// Largest file a read or stat hashes, in bytes: reading a bigger file is FS_TOO_LARGE, and stat reports it without a version [default: 64 GiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_hash_bytes: u64 = service.max_hash_bytes => at_least_one;

    /// Most file operations (open, hash, read, write) running at once, shared fairly between sessions; one session never holds them all [default: 4 per core, at least 8]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    file_slots: u64 = defaults.file_slots as u64 => at_least_one;

    /// Most named owners (sub-agents sharing a session, `owner` on tools/call and file/*) per session; a new one past it is refused with FS_INVALID_ARGUMENT [default: 64]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_owners: u64 = defaults.max_owners as u64 => at_least_one;

    /// Most folders one session's initialize may name in `roots` (each is held open as a handle); more is refused with FS_INVALID_ARGUMENT. Roots also share the open-file budget: past its first root a session may take at most half of what is left above the budget's last quarter, else FS_BUSY [default: 64]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_roots: u64 = defaults.max_roots as u64 => at_least_one;

    /// Seconds an ended resumable session (initialize with resumable: true) is kept for a later initialize with its resumeToken [default: 600]
    #[arg(long, value_name = "SECS")]
    resume_grace: f64 = defaults.resume_grace.as_secs_f64() => seconds;

    /// Most ended resumable sessions kept at once, the oldest dropped first (0: none) [default: 64]
    #[arg(long, value_name = "N")]
    max_parked_sessions: u64 = defaults.max_parked_sessions as u64 => any;

    /// Most bytes (estimated) the ended resumable sessions kept may hold, the oldest dropped first [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    max_parked_bytes: u64 = defaults.max_parked_bytes as u64 => any;

    /// Most bytes (estimated: paths twice, plus table slots) one session's records of what its owners read may hold; past it its largest owners forget their least recently used files, which must be read again before they are written [default: 32 MiB, at least 64 KiB]
    #[arg(long, value_name = "BYTES")]
    max_session_observed_bytes: u64 = defaults.max_session_observed_bytes as u64 => at_least_64kib;

    /// Most bytes every session's records of what was read may hold together; past it the session holding the most forgets its least recently used files [default: 256 MiB, at least 64 KiB]
    #[arg(long, value_name = "BYTES")]
    max_observed_bytes: u64 = defaults.max_observed_bytes as u64 => at_least_64kib;

    /// Turn write-intent gates off: gate/register is refused (FS_PERMISSION_DENIED) and writes are never held for a gate [default: gates allowed]
    #[arg(long, action = clap::ArgAction::SetTrue)]
    no_gates: bool = !defaults.gates => any;

    /// Most write intents one gate has in flight; further writes wait their turn, within the gate's timeout [default: 16]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_gate_intents: u64 = defaults.max_gate_intents as u64 => at_least_one;

    /// Which sessions may register write-intent gates: `token`, only one whose gate/register carries the gate token the daemon keeps in <socket>.gate-token (mode 0600; `filectx gate` reads it there, no session can read it through the daemon); `any`, every session. Never a read-only session [default: token]
    #[arg(long, value_name = "WHO")]
    gate_sessions: GateSessions = defaults.gate_sessions => any;

    /// Most bytes of file versions kept (least recently used out first) so that a refused stale write or edit can show what changed since the session's last read; 0 keeps none and shows no diffs [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    max_snapshot_bytes: u64 = service.max_snapshot_bytes as u64 => any;

    /// Largest file version kept for those diffs; a stale refusal of a bigger file shows no diff [default: 1 MiB]
    #[arg(long, value_name = "BYTES")]
    max_snapshot_file_bytes: u64 = service.max_snapshot_file_bytes as u64 => any;

    /// Most bytes of searched folders' file lists kept warm, so that a repeated glob or grep skips the walk, with the trigram filters a repeated grep skips files by (least recently used list out first; a list over it alone is never kept); 0 keeps none [default: 64 MiB]
    #[arg(long, value_name = "BYTES")]
    max_search_cache_bytes: u64 = service.max_search_cache_bytes as u64 => any;

    /// Folder of the search index, where kept listings and their trigram filters are written so that a restarted daemon's first search is warm [default: $XDG_STATE_HOME/filectx/index, else ~/.local/state/filectx/index]
    #[arg(long, value_name = "PATH")]
    search_index_dir: PathBuf = crate::listing::index::default_dir().unwrap_or_default() => absolute_dir;

    /// Most bytes the search index keeps on disk, every root's file together (the least recently written go first; one bigger than this alone is not kept); 0 keeps none, and a restarted daemon walks and reads the searched files again [default: 256 MiB]
    #[arg(long, value_name = "BYTES")]
    max_search_index_bytes: u64 = DEFAULT_MAX_SEARCH_INDEX_BYTES => any;

    /// Most inotify watches the daemon holds at once, the search listings and the file watcher together (listings take at most three quarters): a search needing more walks every time instead of being kept warm, and a read file in a folder that cannot be watched is checked when next used instead of notified. Keep it well below fs.inotify.max_user_watches, which all the user's programs share; 0 holds none [default: a quarter of fs.inotify.max_user_watches, at most 65536]
    #[arg(long, value_name = "N", display_order = 100)]
    max_watches: u64 = service.max_watches as u64 => any;

    /// Most bytes of line text one file/read, fs/readText or fs/streamText chunk returns: lines come whole, a window stops before this, and a single longer line is FS_TOO_LARGE (the read tool cuts long lines instead) [default: --max-frame-bytes / 8, 8 MiB; at least 1024, at most --max-frame-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..), display_order = 101)]
    max_window_bytes: u64 = (max_frame_bytes / 8).max(1024) => |key, n| within(key, n, max_frame_bytes, "must be at least 1024 and at most max_frame_bytes");

    /// Most bytes of text one read tool answer holds (numbered lines and footer), for sessions that do not set readMaxBytes in initialize [default: 51200; at least 1024, at most --max-window-bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..), display_order = 102)]
    read_max_bytes: u64 = defaults.read_max_bytes.min(max_window_bytes) => |key, n| within(key, n, max_window_bytes, "must be at least 1024 and at most max_window_bytes");

    /// Most searches (glob, grep) running at once, apart from the file slots and shared fairly between sessions; one session never holds them all [default: 1 per core, at least 2]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    search_slots: u64 = defaults.search_slots as u64 => at_least_one;

    /// Seconds one search may run; past it, it stops and answers what it found with a footer saying how much it searched [default: 10]
    #[arg(long, value_name = "SECS")]
    search_timeout: f64 = defaults.search_timeout.as_secs_f64() => timeout_secs;

    /// Most memory one search's regular expression may use, its compiled program and DFA caches; a pattern whose program needs more than a quarter of it is refused [default: 16 MiB, at least 1 MiB]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(crate::config::MIN_SEARCH_REGEX_BYTES..))]
    search_regex_bytes: u64 = defaults.search_regex_bytes as u64 => search_regex_bytes;

    /// Record no journal of changes: journal/list, journal/diff and journal/restore are refused (FS_INVALID_ARGUMENT) and undo is impossible [default: journal on]
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(rename = "journal", default, with = "negated")]
    no_journal: bool = false => any;

    /// Folder of the journal of changes [default: $XDG_STATE_HOME/filectx/journal, else ~/.local/state/filectx/journal]
    #[arg(long, value_name = "PATH")]
    journal_dir: PathBuf = crate::journal::default_dir().unwrap_or_default() => absolute_dir;

    /// Most bytes the journal keeps on disk, its log and the contents of versions together (at least 1 MiB); past it the oldest entries go [default: 1 GiB]
    #[arg(long, value_name = "BYTES")]
    journal_max_bytes: u64 = DEFAULT_JOURNAL_MAX_BYTES => at_least_journal;

    /// Seconds a journal entry is kept; older ones go [default: 604800, 7 days]
    #[arg(long, value_name = "SECS")]
    journal_max_age: f64 = DEFAULT_JOURNAL_MAX_AGE => age_secs;

    /// Largest file version whose bytes the journal keeps; a change of a bigger file is recorded without them and cannot be restored [default: 16 MiB]
    #[arg(long, value_name = "BYTES")]
    journal_max_file_bytes: u64 = DEFAULT_JOURNAL_MAX_FILE_BYTES => any;

    /// The language servers of the owner's choosing: [[language_server]] tables in the config file (name, command, args, extensions, root_markers, env, initialization_options, settings, project_code, did_save, language_ids); see docs/diagnostics.md
    #[arg(skip)]
    language_server: Vec<crate::lsp::ServerSpec> = Vec::new() => language_servers;

    /// Use none of the built-in language servers (basedpyright or pyright-langserver, typescript-language-server, rust-analyzer, gopls), only [[language_server]] entries; the built-ins otherwise run when their command is on the daemon's PATH [default: built-ins on]
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(rename = "builtin_language_servers", default, with = "negated")]
    no_builtin_language_servers: bool = false => any;

    /// Seconds a write or edit waits for the diagnostics of what it wrote from a ready language server; past it the answer says they are still running [default: 3]
    #[arg(long, value_name = "SECS")]
    diagnostics_wait: f64 = lsp.wait.as_secs_f64() => timeout_secs;

    /// Seconds a write or edit waits for them from a language server still starting [default: 20]
    #[arg(long, value_name = "SECS")]
    diagnostics_wait_starting: f64 = lsp.wait_starting.as_secs_f64() => timeout_secs;

    /// Seconds more publishes are waited for after the first one following a change, from a server that does not say which version it checked [default: 0.1]
    #[arg(long, value_name = "SECS")]
    diagnostics_settle: f64 = lsp.settle.as_secs_f64() => settle_secs;

    /// Show new warnings too, not only new errors [default: errors only]
    #[arg(long, action = clap::ArgAction::SetTrue)]
    diagnostics_warnings: bool = false => any;

    /// Seconds a language server nobody used runs before it is stopped (documents nobody used are closed after as long) [default: 600]
    #[arg(long, value_name = "SECS")]
    language_server_idle: f64 = lsp.idle.as_secs_f64() => timeout_secs;

    /// Most language servers running at once; past it the least recently used stops [default: 4]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_language_servers: u64 = lsp.max_servers as u64 => at_least_one;

    /// Most bytes of memory the language servers may use together (resident, each server's whole process tree); past it the least recently used stops, and is refused for 30 s [default: 4 GiB]
    #[arg(long, value_name = "BYTES")]
    language_server_memory: u64 = lsp.max_memory => at_least_mib;
}

/// The config file's `fsync`, `journal` and `builtin_language_servers`, which the `--no-*`
/// switches turn off: read into the switch (`Some(true)`: off), and printed back.
mod negated {
    use serde::{Deserialize, Deserializer, Serializer};

    /// A switch's config value, as its flag reads.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
        Ok(Option::<bool>::deserialize(deserializer)?.map(|on| !on))
    }

    /// A switch, as its config key reads.
    pub fn serialize<S: Serializer>(off: &bool, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(!off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys the config file takes, as serde lists them when refusing an unknown one.
    fn file_keys() -> Vec<String> {
        let Err(err) = toml::from_str::<Args>("not_a_setting = 1\n") else {
            panic!("an unknown key was taken")
        };
        let message = err.to_string();
        let (_, listed) = message.split_once("expected one of ").expect("serde lists the keys");
        listed.trim().split(", ").map(|key| key.trim_matches('`').to_owned()).collect()
    }

    /// The config key the help says a flag has: its long name with '_' for '-', but for
    /// --allow-root and three switches.
    fn key_of_flag(long: &str) -> String {
        match long {
            "allow-root" => "allowed_roots".to_owned(),
            "no-fsync" | "no-journal" | "no-builtin-language-servers" => long[3..].replace('-', "_"),
            _ => long.replace('-', "_"),
        }
    }

    #[test]
    fn every_flag_has_the_config_key_the_help_says_and_every_key_a_flag() {
        use clap::CommandFactory;
        let command = Args::command();
        let mut from_flags: Vec<String> = command
            .get_arguments()
            .filter_map(clap::Arg::get_long)
            .filter(|long| !["config", "print-config", "help", "version"].contains(long))
            .map(key_of_flag)
            .collect();
        // The file's only.
        from_flags.push("language_server".to_owned());
        let mut keys = file_keys();
        from_flags.sort_unstable();
        keys.sort_unstable();
        assert_eq!(from_flags, keys);
        for (flag, key) in
            [("--no-fsync", "fsync"), ("--no-journal", "journal"), ("--allow-root", "allowed_roots")]
        {
            assert!(
                AFTER_HELP.contains(&format!("{flag} ({key}"))
                    || AFTER_HELP.contains(&format!("{flag}: {key}"))
            );
        }
    }

    /// The number a help text's `[default: ...]` states, when it states one: `64 MiB`, `0.1`,
    /// `604800, 7 days`; not `4 per core` or `never`.
    fn stated_default(help: &str) -> Option<f64> {
        let (_, after) = help.split_once("[default: ")?;
        let stated = after.split([']', ',', ';']).next()?;
        let mut words = stated.split(' ');
        let number: f64 = words.next()?.parse().ok()?;
        let unit = match words.next() {
            None => 1.0,
            Some("KiB") => 1024.0,
            Some("MiB") => 1024.0 * 1024.0,
            Some("GiB") => 1024.0 * 1024.0 * 1024.0,
            Some(_) => return None,
        };
        words.next().is_none().then_some(number * unit)
    }

    #[test]
    fn the_defaults_the_help_states_are_the_defaults() {
        use clap::CommandFactory;
        let settings =
            Args { config: Some(PathBuf::from("/dev/null")), ..Args::default() }.settings().unwrap();
        let toml::Value::Table(printed) = toml::Value::try_from(&settings).unwrap() else {
            panic!("the settings are not a table")
        };
        let mut checked = 0;
        for arg in Args::command().get_arguments() {
            let (Some(long), Some(help)) = (arg.get_long(), arg.get_help()) else { continue };
            let Some(stated) = stated_default(&help.to_string()) else { continue };
            let key = key_of_flag(long);
            let actual = match printed.get(&key) {
                Some(toml::Value::Integer(n)) => *n as f64,
                Some(toml::Value::Float(x)) => *x,
                other => panic!("--{long} states a number, and {key} is {other:?}"),
            };
            assert_eq!(stated, actual, "--{long}: its help states {stated}, its default is {actual}");
            checked += 1;
        }
        assert!(checked > 40, "only {checked} defaults were read from the help");
    }
}
