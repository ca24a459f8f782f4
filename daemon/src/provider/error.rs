//! `ProviderError`: every way a provider operation fails, each naming the path as the caller
//! should see it, and the mapping of OS errors into it.

use std::io::ErrorKind;

use super::Version;
use super::beneath;
use super::edit::NulAt;
use super::index::NotText;

/// A provider failure. Every variant names the path as the caller should see it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The path is malformed (empty, NUL byte, a symlink loop).
    #[error("invalid path {path:?}: {why}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The path leaves every root of the session (what it leads to is never named).
    #[error("{path} is outside the session's roots")]
    OutsideRoot {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("{path} does not exist{}", why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    NotFound {
        /// The path.
        path: String,
        /// Why, when it is not simply absent.
        why: Option<String>,
    },
    /// The path is a folder.
    #[error("{path} is a directory, not a file")]
    IsDirectory {
        /// The path.
        path: String,
    },
    /// The path is a socket, device or fifo.
    #[error("{path} is not a regular file")]
    NotRegularFile {
        /// The path.
        path: String,
    },
    /// The file is binary or not UTF-8.
    #[error("{path} is not a text file: {why}")]
    NotText {
        /// The path.
        path: String,
        /// What was found.
        why: NotText,
    },
    /// The file or content is over the configured cap.
    #[error("{path} is {size} bytes, over the limit of {limit} bytes for this operation")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The OS refused access.
    #[error("permission denied for {path}")]
    PermissionDenied {
        /// The path.
        path: String,
    },
    /// The daemon's own configuration refuses this operation.
    #[error("{path}: {why}")]
    Refused {
        /// The path.
        path: String,
        /// Which rule, and how to change it.
        why: String,
    },
    /// A line is longer than the most one answer may hold (whole lines are never cut unless
    /// the caller asks).
    #[error("line {line} of {path} is {size} bytes, over the limit of {limit} bytes one read may return")]
    LineTooLarge {
        /// The path.
        path: String,
        /// The line's 1-based number.
        line: u64,
        /// Its length in bytes.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The requested first line lies past the end of the file.
    #[error("offset {offset} is past the end of {path}, which has {total_lines} lines")]
    OffsetPastEnd {
        /// The path.
        path: String,
        /// The requested offset.
        offset: u64,
        /// Lines in the file.
        total_lines: u64,
    },
    /// The file is not at the expected version (or not there at all).
    #[error("{path} is not at the expected version{}", match current { Some(v) => format!(" (it is now {v})"), None => " (it no longer exists)".to_owned() })]
    StaleVersion {
        /// The path.
        path: String,
        /// Its current version; `None` when it no longer exists.
        current: Option<Version>,
    },
    /// The text to replace does not occur.
    #[error("the text to replace was not found in {path}")]
    NoMatch {
        /// The path.
        path: String,
        /// What nearly matched, if anything.
        hint: Option<String>,
    },
    /// The text to replace occurs more than once and `replace_all` was not set.
    #[error("the text to replace occurs {matches} times in {path}")]
    AmbiguousMatch {
        /// The path.
        path: String,
        /// How often it occurs.
        matches: u64,
    },
    /// The file exists where none was expected.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The path.
        path: String,
    },
    /// The content to write holds a NUL byte: only text is written.
    #[error("the content for {path} has a NUL byte at {at}; only text can be written")]
    NulInContent {
        /// The path.
        path: String,
        /// Where the first NUL byte is.
        at: NulAt,
    },
    /// The file's locks stayed taken (or it kept changing) for longer than the daemon waits.
    #[error("{path} is busy: {why}")]
    Busy {
        /// The path.
        path: String,
        /// What kept it busy.
        why: String,
    },
    /// Resolution reached a name its caller fences off (the file context's deny rules):
    /// nothing at or beneath it was looked at, so the answer is the same whether it exists.
    #[error("{path} is fenced off")]
    Fenced {
        /// The path as given.
        path: String,
        /// The fenced name, relative to its root.
        rel: std::path::PathBuf,
    },
    /// The path is, or leads through, one of the daemon's own private files or folders (its
    /// journal, tokens, indexes), or names such a file through a hard link: no session reaches
    /// them, whatever its roots.
    #[error("{path} is one of filectxd's own private files")]
    Private {
        /// The path as given.
        path: String,
    },
    /// The file has several hard links, and the caller asked for a file with one name only.
    #[error("{path} has {links} hard links")]
    Linked {
        /// The path.
        path: String,
        /// Its hard links.
        links: u64,
    },
    /// Any other failure of the filesystem.
    #[error("{op} {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// What was being done.
        op: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
}

impl ProviderError {
    /// The path the failure concerns, as the caller should see it.
    pub fn path(&self) -> &str {
        match self {
            Self::InvalidPath { path, .. }
            | Self::OutsideRoot { path, .. }
            | Self::NotFound { path, .. }
            | Self::IsDirectory { path }
            | Self::NotRegularFile { path }
            | Self::Refused { path, .. }
            | Self::NotText { path, .. }
            | Self::TooLarge { path, .. }
            | Self::LineTooLarge { path, .. }
            | Self::PermissionDenied { path }
            | Self::OffsetPastEnd { path, .. }
            | Self::StaleVersion { path, .. }
            | Self::NoMatch { path, .. }
            | Self::AmbiguousMatch { path, .. }
            | Self::AlreadyExists { path }
            | Self::NulInContent { path, .. }
            | Self::Busy { path, .. }
            | Self::Fenced { path, .. }
            | Self::Private { path }
            | Self::Linked { path, .. }
            | Self::Io { path, .. } => path,
        }
    }
}

/// Maps an OS error on `target` to the provider's vocabulary.
pub(crate) fn io_error(target: &str, op: &'static str, err: std::io::Error) -> ProviderError {
    let path = target.to_owned();
    match err.kind() {
        ErrorKind::NotFound => ProviderError::NotFound { path, why: None },
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            ProviderError::PermissionDenied { path }
        }
        ErrorKind::IsADirectory => ProviderError::IsDirectory { path },
        ErrorKind::NotADirectory => {
            ProviderError::NotFound { path, why: Some("a parent of it is a file, not a folder".into()) }
        }
        _ if beneath::swapped(&err) => ProviderError::Busy {
            path,
            why: "it (or a folder above it) was replaced while being opened".into(),
        },
        _ => ProviderError::Io { path, op, source: err },
    }
}
