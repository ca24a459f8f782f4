//! Why `filectxd`'s settings could not be put together: a config file that cannot be read or
//! parsed, or a value out of range (named with its key and where it came from).

use std::path::PathBuf;

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
    /// A table of the config file (a `[[language_server]]` entry) is not usable.
    #[error("{key}: {why}")]
    Entry {
        /// The table's key.
        key: &'static str,
        /// What is wrong.
        why: String,
    },
}
