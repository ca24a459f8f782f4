//! What a session's file operations answer: the read window, the write, the edit (merged or
//! not) and the stat, each with the version it made or saw.

use crate::provider::edit::Region;
use crate::provider::index::Window;
use crate::provider::{Kind, Version};

/// A read window and the version it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadView {
    /// The path as shown.
    pub display: String,
    /// The version read (now recorded for the session).
    pub version: Version,
    /// The lines.
    pub window: Window,
}

/// A successful write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteView {
    /// The file, canonical.
    pub path: std::path::PathBuf,
    /// The path as shown.
    pub display: String,
    /// Whether the file was created (else replaced).
    pub created: bool,
    /// The new version (now recorded for the session).
    pub version: Version,
}

/// A successful edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditView {
    /// The file, canonical.
    pub path: std::path::PathBuf,
    /// The path as shown.
    pub display: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Whether every occurrence was to be replaced.
    pub replace_all: bool,
    /// The new version (now recorded for the session).
    pub version: Version,
    /// The first edited places of the new version, with context lines.
    pub regions: Vec<Region>,
}

/// A successful edit of a session that merges stale edits (see [`FileContext::edit_merging`](super::FileContext::edit_merging)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedView {
    /// The edit.
    pub edit: EditView,
    /// Set when the edit was applied over an outside change: that change, as a unified diff
    /// from the version last seen to the one edited (bounded as a stale refusal's; empty when
    /// no line differs). It now counts as read, with the edit.
    pub outside: Option<String>,
}

/// Stat plus the session's observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatView {
    /// The path as shown.
    pub display: String,
    /// What is there.
    pub kind: Kind,
    /// Size in bytes.
    pub size: Option<u64>,
    /// Current version (regular files).
    pub version: Option<Version>,
    /// The session's recorded version.
    pub observed: Option<Version>,
}

impl StatView {
    /// Whether a write or edit would pass the freshness check now.
    pub fn fresh(&self) -> bool {
        self.observed.is_some() && self.observed == self.version
    }
}
