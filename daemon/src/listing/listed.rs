//! One file of a listing as the walk found it, beneath everything else of the listings (the
//! walk, the warm listings and the trigram filters all speak of it).

use std::path::Path;

/// One regular file of a listing (32 bytes and its path: a listing of 100,000 files holds one
/// of these each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Relative to the root (boxed: no spare capacity).
    pub rel: Box<Path>,
    /// Modification time when listed, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Size when listed.
    pub size: u64,
}

/// A file time (seconds and nanoseconds) in nanoseconds since the epoch (saturating: an `i64`
/// of nanoseconds spans the years 1678 to 2262).
pub(super) fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listed_file_is_small() {
        assert_eq!(std::mem::size_of::<super::Listed>(), 32);
        assert_eq!(super::ns(1, 5), 1_000_000_005);
        assert_eq!(super::ns(i64::MAX, 0), i64::MAX);
    }
}
