//! The effective settings: each setting's flag over its config-file key over its default, checked
//! once, in one place ([`Args::settings`]); printed by `--print-config` and turned into the
//! runtime [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use filectx_protocol::DEFAULT_MAX_FRAME_BYTES;
use filectx_protocol::socket::default_socket_path;
use serde::Serialize;

use super::args::Args;
use super::error::SettingsError;
use super::file::{config_file, default_config_path};
use crate::config::{Config, GateSessions, MIN_SEARCH_REGEX_BYTES};
use crate::journal::JournalConfig;
use crate::listen::FolderPolicy;

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
    pub gate_sessions: GateSessions,
    /// Bytes of file versions kept for stale refusals' diffs.
    pub max_snapshot_bytes: u64,
    /// Largest file version kept for them, bytes.
    pub max_snapshot_file_bytes: u64,
    /// Bytes of searched folders' file lists kept warm.
    pub max_search_cache_bytes: u64,
    /// The search index's folder (empty: no default could be had, and none was given).
    pub search_index_dir: PathBuf,
    /// Bytes the search index keeps on disk (0: none kept).
    pub max_search_index_bytes: u64,
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
    /// Whether the journal is turned off (`journal = false`).
    #[serde(rename = "journal", serialize_with = "negated_out")]
    pub no_journal: bool,
    /// The journal's folder (empty: no default could be had, and none was given).
    pub journal_dir: PathBuf,
    /// See [`JournalConfig::max_bytes`].
    pub journal_max_bytes: u64,
    /// See [`JournalConfig::max_age`], seconds.
    pub journal_max_age: f64,
    /// See [`JournalConfig::max_file_bytes`].
    pub journal_max_file_bytes: u64,
    /// The owner's language servers.
    pub language_server: Vec<crate::lsp::ServerSpec>,
    /// Whether the built-in language servers are off.
    #[serde(rename = "builtin_language_servers", serialize_with = "negated_out")]
    pub no_builtin_language_servers: bool,
    /// See [`crate::lsp::LspConfig::wait`], seconds.
    pub diagnostics_wait: f64,
    /// See [`crate::lsp::LspConfig::wait_starting`], seconds.
    pub diagnostics_wait_starting: f64,
    /// See [`crate::lsp::LspConfig::settle`], seconds.
    pub diagnostics_settle: f64,
    /// See [`crate::lsp::LspConfig::warnings`].
    pub diagnostics_warnings: bool,
    /// See [`crate::lsp::LspConfig::idle`], seconds.
    pub language_server_idle: f64,
    /// See [`crate::lsp::LspConfig::max_servers`].
    pub max_language_servers: u64,
    /// See [`crate::lsp::LspConfig::max_memory`].
    pub language_server_memory: u64,
    /// The config file that was read, if any.
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
}

/// One setting as given: its config key, its value (the flag's, else the config file's, else
/// the default) and whether the flag gave it, so that a bad value says where it came from.
struct Given<'a, T> {
    key: &'static str,
    value: T,
    from_flag: bool,
    /// Where a value no flag gave came from: the config file, or the default.
    elsewhere: &'a str,
}

impl<T> Given<'_, T> {
    /// The value as `rule` accepts it; its refusal names the key, the value and its origin.
    fn check<U>(
        self,
        rule: impl FnOnce(&'static str, T) -> Result<U, SettingsError>,
    ) -> Result<U, SettingsError> {
        rule(self.key, self.value).map_err(|err| match err {
            SettingsError::Value { key, value, why, .. } => {
                let origin = if self.from_flag {
                    "from the command line".to_owned()
                } else {
                    self.elsewhere.to_owned()
                };
                SettingsError::Value { key, value, origin, why }
            }
            other => other,
        })
    }

    /// The value, which every value of its type fits.
    fn any(self) -> T {
        self.value
    }
}

impl Args {
    /// Merges flags, the config file and the defaults. A bad value is reported with its key and
    /// where it came from.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        let (file, config_file) = config_file(self.config.as_deref())?;
        let elsewhere = match self.config.clone().or_else(default_config_path) {
            Some(path) if path.exists() => format!("from the config file {}", path.display()),
            _ => "the default".to_owned(),
        };
        // A setting: the flag's value, else the file's, else `$default` (or none).
        macro_rules! given {
            ($key:ident) => {
                Given {
                    key: stringify!($key),
                    value: self.$key.clone().or_else(|| file.$key.clone()),
                    from_flag: self.$key.is_some(),
                    elsewhere: &elsewhere,
                }
            };
            ($key:ident, $default:expr) => {
                Given {
                    key: stringify!($key),
                    value: self.$key.clone().or_else(|| file.$key.clone()).unwrap_or_else(|| $default),
                    from_flag: self.$key.is_some(),
                    elsewhere: &elsewhere,
                }
            };
        }
        // A switch: a flag sets it, else the file's value, else `$default`.
        macro_rules! switch {
            ($key:ident, $default:expr) => {
                self.$key.filter(|on| *on).or(file.$key).unwrap_or($default)
            };
        }
        let defaults = Config::default();
        let service = &defaults.files;
        let lsp = &defaults.lsp;
        let max_frame_bytes = given!(max_frame_bytes, DEFAULT_MAX_FRAME_BYTES as u64).check(at_least_kib)?;
        let max_window_bytes =
            given!(max_window_bytes, (max_frame_bytes / 8).max(1024)).check(|key, n| {
                within(key, n, max_frame_bytes, "must be at least 1024 and at most max_frame_bytes")
            })?;
        let read_max_bytes =
            given!(read_max_bytes, defaults.read_max_bytes.min(max_window_bytes)).check(|key, n| {
                within(key, n, max_window_bytes, "must be at least 1024 and at most max_window_bytes")
            })?;
        Ok(Settings {
            socket: given!(socket, default_socket()).any(),
            log_level: given!(log_level)
                .check(|key, filter| filter.map(|f| log_filter(key, f)).transpose())?,
            max_connections: given!(max_connections, defaults.max_connections as u64).check(at_least_one)?,
            max_frame_bytes,
            max_batch: given!(max_batch, defaults.max_batch_len as u64).check(at_least_one)?,
            max_concurrent_requests: given!(max_concurrent_requests, defaults.max_concurrent_requests as u64)
                .check(at_least_one)?,
            max_queued_messages: given!(max_queued_messages, defaults.max_queued_messages as u64)
                .check(at_least_one)?,
            max_batch_response_bytes: given!(
                max_batch_response_bytes,
                defaults.max_batch_response_bytes as u64
            )
            .check(at_least_kib)?,
            max_queued_bytes: given!(max_queued_bytes, defaults.max_queued_bytes as u64)
                .check(at_least_kib)?,
            max_total_queued_bytes: given!(max_total_queued_bytes, defaults.max_total_queued_bytes as u64)
                .check(at_least_kib)?,
            initialize_timeout: given!(initialize_timeout, defaults.initialize_timeout.as_secs_f64())
                .check(timeout_secs)?,
            frame_timeout: given!(frame_timeout, defaults.frame_timeout.as_secs_f64()).check(timeout_secs)?,
            max_partial_frame_bytes: given!(max_partial_frame_bytes, defaults.max_partial_frame_bytes as u64)
                .check(at_least_kib)?,
            max_edit_bytes: given!(max_edit_bytes, service.max_edit_bytes).any(),
            lock_timeout: given!(lock_timeout, service.lock_patience.as_secs_f64()).check(seconds)?,
            fsync: !switch!(no_fsync, !service.fsync),
            max_cached_files: given!(max_cached_files, service.max_cached_files as u64)
                .check(at_least_one)?,
            max_cache_bytes: given!(max_cache_bytes, service.max_index_bytes as u64).any(),
            max_mapped_bytes: given!(max_mapped_bytes, service.max_mapped_bytes as u64).any(),
            max_open_files: given!(max_open_files, service.max_open_files as u64).any(),
            cache_idle: given!(cache_idle, service.idle_release.as_secs_f64()).check(seconds)?,
            shutdown_grace: given!(shutdown_grace, defaults.shutdown_grace.as_secs_f64()).check(seconds)?,
            idle_exit: given!(idle_exit, 0.0).check(seconds)?,
            allowed_roots: given!(allowed_roots, defaults.allowed_roots.clone()).check(absolute)?,
            deny_read: given!(deny_read, defaults.deny_read.clone()).check(globs)?,
            deny_write: given!(deny_write, defaults.deny_write.clone()).check(globs)?,
            refuse_multi_link_writes: switch!(refuse_multi_link_writes, service.refuse_multi_link_writes),
            max_hash_bytes: given!(max_hash_bytes, service.max_hash_bytes).check(at_least_one)?,
            file_slots: given!(file_slots, defaults.file_slots as u64).check(at_least_one)?,
            max_owners: given!(max_owners, defaults.max_owners as u64).check(at_least_one)?,
            max_roots: given!(max_roots, defaults.max_roots as u64).check(at_least_one)?,
            resume_grace: given!(resume_grace, defaults.resume_grace.as_secs_f64()).check(seconds)?,
            max_parked_sessions: given!(max_parked_sessions, defaults.max_parked_sessions as u64).any(),
            max_parked_bytes: given!(max_parked_bytes, defaults.max_parked_bytes as u64).any(),
            max_session_observed_bytes: given!(
                max_session_observed_bytes,
                defaults.max_session_observed_bytes as u64
            )
            .check(at_least_64kib)?,
            max_observed_bytes: given!(max_observed_bytes, defaults.max_observed_bytes as u64)
                .check(at_least_64kib)?,
            no_gates: switch!(no_gates, !defaults.gates),
            max_gate_intents: given!(max_gate_intents, defaults.max_gate_intents as u64)
                .check(at_least_one)?,
            gate_sessions: given!(gate_sessions, defaults.gate_sessions).any(),
            max_snapshot_bytes: given!(max_snapshot_bytes, service.max_snapshot_bytes as u64).any(),
            max_snapshot_file_bytes: given!(max_snapshot_file_bytes, service.max_snapshot_file_bytes as u64)
                .any(),
            max_search_cache_bytes: given!(max_search_cache_bytes, service.max_search_cache_bytes as u64)
                .any(),
            search_index_dir: given!(
                search_index_dir,
                crate::listing::index::default_dir().unwrap_or_default()
            )
            .check(absolute_dir)?,
            max_search_index_bytes: given!(max_search_index_bytes, DEFAULT_MAX_SEARCH_INDEX_BYTES).any(),
            max_watches: given!(max_watches, service.max_watches as u64).any(),
            max_window_bytes,
            read_max_bytes,
            search_slots: given!(search_slots, defaults.search_slots as u64).check(at_least_one)?,
            search_timeout: given!(search_timeout, defaults.search_timeout.as_secs_f64())
                .check(timeout_secs)?,
            search_regex_bytes: given!(search_regex_bytes, defaults.search_regex_bytes as u64)
                .check(search_regex_bytes)?,
            no_journal: switch!(no_journal, false),
            journal_dir: given!(journal_dir, crate::journal::default_dir().unwrap_or_default())
                .check(absolute_dir)?,
            journal_max_bytes: given!(journal_max_bytes, DEFAULT_JOURNAL_MAX_BYTES)
                .check(at_least_journal)?,
            journal_max_age: given!(journal_max_age, DEFAULT_JOURNAL_MAX_AGE).check(age_secs)?,
            journal_max_file_bytes: given!(journal_max_file_bytes, DEFAULT_JOURNAL_MAX_FILE_BYTES).any(),
            language_server: given!(language_server, Vec::new()).check(language_servers)?,
            no_builtin_language_servers: switch!(no_builtin_language_servers, false),
            diagnostics_wait: given!(diagnostics_wait, lsp.wait.as_secs_f64()).check(timeout_secs)?,
            diagnostics_wait_starting: given!(diagnostics_wait_starting, lsp.wait_starting.as_secs_f64())
                .check(timeout_secs)?,
            diagnostics_settle: given!(diagnostics_settle, lsp.settle.as_secs_f64()).check(settle_secs)?,
            diagnostics_warnings: switch!(diagnostics_warnings, false),
            language_server_idle: given!(language_server_idle, lsp.idle.as_secs_f64()).check(timeout_secs)?,
            max_language_servers: given!(max_language_servers, lsp.max_servers as u64).check(at_least_one)?,
            language_server_memory: given!(language_server_memory, lsp.max_memory).check(at_least_mib)?,
            config_file,
        })
    }
}

/// The search index's default byte cap: 256 MiB (a 100,000-file tree takes about 20 MiB).
const DEFAULT_MAX_SEARCH_INDEX_BYTES: u64 = 256 << 20;

/// The journal's default byte cap: 1 GiB.
const DEFAULT_JOURNAL_MAX_BYTES: u64 = 1 << 30;
/// Its default age limit: 7 days, in seconds.
const DEFAULT_JOURNAL_MAX_AGE: f64 = 7.0 * 86_400.0;
/// Its default per-file cap: 16 MiB.
const DEFAULT_JOURNAL_MAX_FILE_BYTES: u64 = 16 << 20;

fn age_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (1.0..=3.2e8).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 1 to 320000000 (about 10 years)")
}

fn absolute_dir(key: &'static str, dir: PathBuf) -> Result<PathBuf, SettingsError> {
    if dir.as_os_str().is_empty() || dir.is_absolute() {
        return Ok(dir);
    }
    let value = dir.display().to_string();
    Err(SettingsError::Value { key, value, origin: String::new(), why: "must be an absolute path" })
}

/// Writes `no_journal` as the config file's `journal` reads.
fn negated_out<S: serde::Serializer>(off: &bool, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bool(!off)
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

/// The journal's byte cap: at least [`crate::journal::MIN_MAX_BYTES`] (below it the log's
/// segments and the newest entry's contents could not fit, and the cap would not hold).
fn at_least_journal(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    let min = crate::journal::MIN_MAX_BYTES;
    checked(
        key,
        value,
        value >= min,
        "must be at least 1048576 (1 MiB): below it the journal's log and its newest change could not stay within it",
    )
}

/// A byte cap of what sessions remember: at least 64 KiB (room for a few records of the longest
/// paths).
fn at_least_64kib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 64 * 1024, "must be at least 65536")
}

/// A window within a larger bound: at least 1 KiB, at most `most`.
fn within(key: &'static str, value: u64, most: u64, why: &'static str) -> Result<u64, SettingsError> {
    checked(key, value, (1024..=most).contains(&value), why)
}

/// A search's regex bound: at least [`MIN_SEARCH_REGEX_BYTES`].
fn search_regex_bytes(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= MIN_SEARCH_REGEX_BYTES, "must be at least 1048576 (1 MiB)")
}

/// A timeout: more than zero (zero would close every connection at once), at most a day.
/// A short pause in seconds: from 0 to 10.
fn settle_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (0.0..=10.0).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 0 to 10")
}

/// A memory budget: at least 1 MiB.
fn at_least_mib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1 << 20, "must be at least 1048576 (1 MiB)")
}

/// The `[[language_server]]` entries: each named, distinct, with extensions (or naming a built-in
/// to change how it runs).
fn language_servers(
    key: &'static str,
    entries: Vec<crate::lsp::ServerSpec>,
) -> Result<Vec<crate::lsp::ServerSpec>, SettingsError> {
    let mut names = std::collections::HashSet::new();
    for entry in &entries {
        let problem = if entry.name.trim().is_empty() {
            Some("an entry has no name".to_owned())
        } else if !names.insert(entry.name.clone()) {
            Some(format!("two entries are named {:?}", entry.name))
        } else if !entry.command.is_empty() && entry.extensions.is_empty() {
            Some(format!("{:?} serves no extensions (extensions = [\".py\"])", entry.name))
        } else if entry.extensions.iter().any(|e| !e.starts_with('.')) {
            Some(format!("{:?}: extensions are written with their dot (\".py\")", entry.name))
        } else {
            None
        };
        if let Some(why) = problem {
            return Err(SettingsError::Entry { key, why });
        }
    }
    Ok(entries)
}

fn timeout_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && value > 0.0 && value <= 86_400.0;
    checked(key, value, fits, "must be a number of seconds above 0, at most 86400")
}

/// A log filter tracing accepts.
fn log_filter(key: &'static str, filter: String) -> Result<String, SettingsError> {
    let fits = tracing_subscriber::EnvFilter::try_new(&filter).is_ok();
    checked(key, filter, fits, "must be a level (error, warn, info, debug, trace) or a tracing filter")
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
fn absolute(key: &'static str, folders: Vec<PathBuf>) -> Result<Vec<PathBuf>, SettingsError> {
    match folders.iter().find(|f| !f.is_absolute()) {
        Some(bad) => Err(SettingsError::Value {
            key,
            value: bad.display().to_string(),
            origin: String::new(),
            why: "must be an absolute path",
        }),
        None => Ok(folders),
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
            files: crate::context::ProviderConfig {
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
            lsp: crate::lsp::LspConfig {
                servers: self.language_server.clone(),
                builtins: !self.no_builtin_language_servers,
                wait: Duration::from_secs_f64(self.diagnostics_wait),
                wait_starting: Duration::from_secs_f64(self.diagnostics_wait_starting),
                settle: Duration::from_secs_f64(self.diagnostics_settle),
                idle: Duration::from_secs_f64(self.language_server_idle),
                document_idle: Duration::from_secs_f64(self.language_server_idle),
                max_servers: size(self.max_language_servers),
                max_memory: self.language_server_memory,
                warnings: self.diagnostics_warnings,
                path: std::env::var_os("PATH"),
            },
            journal: Some(self.journal_dir.clone())
                .filter(|dir| !self.no_journal && !dir.as_os_str().is_empty())
                .map(|dir| JournalConfig {
                    dir,
                    max_bytes: self.journal_max_bytes,
                    max_age: Duration::from_secs_f64(self.journal_max_age),
                    max_file_bytes: self.journal_max_file_bytes,
                    fsync: self.fsync,
                }),
            search_index: Some(self.search_index_dir.clone())
                .filter(|dir| self.max_search_index_bytes > 0 && !dir.as_os_str().is_empty())
                .map(|dir| crate::listing::index::IndexConfig {
                    dir,
                    max_bytes: self.max_search_index_bytes,
                    fsync: self.fsync,
                }),
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
        // The library's default runs without a journal; the daemon's keeps one in the default
        // folder.
        let journal = crate::journal::default_dir().map(|dir| JournalConfig {
            dir,
            max_bytes: DEFAULT_JOURNAL_MAX_BYTES,
            max_age: Duration::from_secs_f64(DEFAULT_JOURNAL_MAX_AGE),
            max_file_bytes: DEFAULT_JOURNAL_MAX_FILE_BYTES,
            fsync: true,
        });
        // The library's default runs no language server; the daemon's looks on its PATH.
        let lsp =
            crate::lsp::LspConfig { builtins: true, path: std::env::var_os("PATH"), ..Default::default() };
        let search_index = crate::listing::index::default_dir().map(|dir| {
            crate::listing::index::IndexConfig { dir, max_bytes: DEFAULT_MAX_SEARCH_INDEX_BYTES, fsync: true }
        });
        assert_eq!(settings.config(), Config { journal, lsp, search_index, ..Config::default() });
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
        let args =
            Args { config: Some(path.clone()), deny_write: Some(vec!["*.lock".into()]), ..Args::default() };
        let settings = args.settings().unwrap();
        assert_eq!(settings.allowed_roots, vec![PathBuf::from("/srv")]);
        assert_eq!(
            (settings.deny_read.clone(), settings.deny_write.clone()),
            (vec!["**/*.pem".to_owned()], vec!["*.lock".to_owned()])
        );
        assert!(settings.config().files.refuse_multi_link_writes);
        let err = Args { config: Some(path.clone()), deny_read: Some(vec!["a/[".into()]), ..Args::default() }
            .settings()
            .unwrap_err();
        assert!(err.to_string().contains("deny_read"), "{err}");
        let err = Args { config: Some(path), allowed_roots: Some(vec!["rel".into()]), ..Args::default() }
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
