//! One file of a listing as the walk found it, beneath everything else of the listings (the
//! walk, the warm listings and the trigram filters all speak of it).

use std::path::PathBuf;

/// One regular file of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Relative to the root.
    pub rel: PathBuf,
    /// Modification time when listed, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Size when listed.
    pub size: u64,
}

/// A file time (seconds and nanoseconds) in nanoseconds since the epoch.
pub(super) fn ns(secs: i64, nsec: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsec)
}
