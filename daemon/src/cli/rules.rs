//! Each setting's check, and how a value that fails one is reported: with its key and where it
//! came from (the command line, the config file, or the default). The settings table
//! (`args.rs`) names a rule per setting; `any` is the rule every value of its type fits.

use std::path::PathBuf;

use filectx_protocol::socket::default_socket_path;

use super::error::SettingsError;
use crate::config::MIN_SEARCH_REGEX_BYTES;

/// One setting as given: its config key, its value (the flag's, else the config file's, else
/// the default) and whether the flag gave it, so that a bad value says where it came from.
pub(super) struct Given<'a, T> {
    pub key: &'static str,
    pub value: T,
    pub from_flag: bool,
    /// Where a value no flag gave came from: the config file, or the default.
    pub elsewhere: &'a str,
}

impl<T> Given<'_, T> {
    /// The value as `rule` accepts it; its refusal names the key, the value and its origin.
    pub fn check<U>(
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
}

/// What a flag says of a setting, given as `Option<Self>`: the value, when the flag was given;
/// for a switch (`bool`, clap's `SetTrue`, which reads `false` when the flag is absent), only
/// that it is on.
pub(super) trait FromFlag: Sized {
    /// The flag's value, when it says anything.
    fn from_flag(flag: Option<Self>) -> Option<Self> {
        flag
    }
}

impl FromFlag for bool {
    fn from_flag(flag: Option<Self>) -> Option<Self> {
        flag.filter(|on| *on)
    }
}

impl FromFlag for u64 {}
impl FromFlag for f64 {}
impl FromFlag for String {}
impl FromFlag for PathBuf {}
impl FromFlag for Vec<PathBuf> {}
impl FromFlag for Vec<String> {}
impl FromFlag for crate::config::GateSessions {}
impl FromFlag for Vec<crate::lsp::ServerSpec> {}

/// The search index's default byte cap: 256 MiB (a 100,000-file tree takes about 20 MiB).
pub(super) const DEFAULT_MAX_SEARCH_INDEX_BYTES: u64 = 256 << 20;

/// The journal's default byte cap: 1 GiB.
pub(super) const DEFAULT_JOURNAL_MAX_BYTES: u64 = 1 << 30;
/// Its default age limit: 7 days, in seconds.
pub(super) const DEFAULT_JOURNAL_MAX_AGE: f64 = 7.0 * 86_400.0;
/// Its default per-file cap: 16 MiB.
pub(super) const DEFAULT_JOURNAL_MAX_FILE_BYTES: u64 = 16 << 20;

pub(super) fn age_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (1.0..=3.2e8).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 1 to 320000000 (about 10 years)")
}

pub(super) fn absolute_dir(key: &'static str, dir: PathBuf) -> Result<PathBuf, SettingsError> {
    if dir.as_os_str().is_empty() || dir.is_absolute() {
        return Ok(dir);
    }
    let value = dir.display().to_string();
    Err(SettingsError::Value { key, value, origin: String::new(), why: "must be an absolute path" })
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

pub(super) fn seconds(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (0.0..=86_400.0).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 0 to 86400")
}

pub(super) fn at_least_one(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1, "must be at least 1")
}

/// A byte budget: at least 1 KiB (a smaller one would only make every message wait).
pub(super) fn at_least_kib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1024, "must be at least 1024")
}

/// The journal's byte cap: at least [`crate::journal::MIN_MAX_BYTES`] (below it the log's
/// segments and the newest entry's contents could not fit, and the cap would not hold).
pub(super) fn at_least_journal(key: &'static str, value: u64) -> Result<u64, SettingsError> {
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
pub(super) fn at_least_64kib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 64 * 1024, "must be at least 65536")
}

/// A window within a larger bound: at least 1 KiB, at most `most`.
pub(super) fn within(
    key: &'static str,
    value: u64,
    most: u64,
    why: &'static str,
) -> Result<u64, SettingsError> {
    checked(key, value, (1024..=most).contains(&value), why)
}

/// A search's regex bound: at least [`MIN_SEARCH_REGEX_BYTES`].
pub(super) fn search_regex_bytes(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= MIN_SEARCH_REGEX_BYTES, "must be at least 1048576 (1 MiB)")
}

/// A short pause in seconds: from 0 to 10.
pub(super) fn settle_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && (0.0..=10.0).contains(&value);
    checked(key, value, fits, "must be a number of seconds from 0 to 10")
}

/// A memory budget: at least 1 MiB.
pub(super) fn at_least_mib(key: &'static str, value: u64) -> Result<u64, SettingsError> {
    checked(key, value, value >= 1 << 20, "must be at least 1048576 (1 MiB)")
}

/// The `[[language_server]]` entries: each named, distinct, with extensions (or naming a built-in
/// to change how it runs).
pub(super) fn language_servers(
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

/// A timeout: more than zero (zero would close every connection at once), at most a day.
pub(super) fn timeout_secs(key: &'static str, value: f64) -> Result<f64, SettingsError> {
    let fits = value.is_finite() && value > 0.0 && value <= 86_400.0;
    checked(key, value, fits, "must be a number of seconds above 0, at most 86400")
}

/// A log filter tracing accepts (empty: none given, so RUST_LOG, else `info`).
pub(super) fn log_filter(key: &'static str, filter: String) -> Result<String, SettingsError> {
    let fits = filter.is_empty() || tracing_subscriber::EnvFilter::try_new(&filter).is_ok();
    checked(key, filter, fits, "must be a level (error, warn, info, debug, trace) or a tracing filter")
}

/// Checks that every pattern of a deny list parses.
pub(super) fn globs(key: &'static str, patterns: Vec<String>) -> Result<Vec<String>, SettingsError> {
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
pub(super) fn absolute(key: &'static str, folders: Vec<PathBuf>) -> Result<Vec<PathBuf>, SettingsError> {
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
pub(super) fn default_socket() -> PathBuf {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    default_socket_path(runtime.as_deref(), rustix::process::geteuid().as_raw())
}

/// The rule of a setting every value of its type fits.
pub(super) fn any<T>(_key: &'static str, value: T) -> Result<T, SettingsError> {
    Ok(value)
}
