//! One file of a listing as the walk found it, beneath everything else of the listings (the
//! walk, the warm listings and the trigram filters all speak of it).

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

/// What [`Listed::mtime_ns`] holds while the file's time has not been looked up.
const UNDATED: i64 = i64::MIN;

/// One regular file of a listing (24 bytes and its path: a listing of 100,000 files holds one
/// of these each).
///
/// Its modification time is looked up when first needed, not by the walk: a first glob of a big
/// tree dates only the files it matches (the rest of the `fstatat`s were 40 % of its walk), and
/// the trigram filters' build dates the others from the descriptor it reads them through.
#[derive(Debug)]
pub struct Listed {
    /// Relative to the root (boxed: no spare capacity).
    pub rel: Box<Path>,
    /// Modification time, nanoseconds since the epoch; [`UNDATED`] until looked up.
    mtime_ns: AtomicI64,
}

impl Listed {
    /// The file at `rel`, modified at `mtime_ns` when that is known.
    pub fn new(rel: &Path, mtime_ns: Option<i64>) -> Self {
        // The one time an `i64` of nanoseconds cannot tell from "unknown" is a year before 1678.
        let mtime_ns = mtime_ns.map_or(UNDATED, |t| t.max(UNDATED + 1));
        Self { rel: rel.into(), mtime_ns: AtomicI64::new(mtime_ns) }
    }

    /// Its modification time, when looked up.
    pub fn mtime_ns(&self) -> Option<i64> {
        Some(self.mtime_ns.load(Ordering::Relaxed)).filter(|&t| t != UNDATED)
    }

    /// Records a time looked up for it, unless one is known already (a lookup that raced with a
    /// change must not undo the newer time the change stored); the time now known.
    pub fn date(&self, mtime_ns: i64) -> i64 {
        let mtime_ns = mtime_ns.max(UNDATED + 1);
        match self.mtime_ns.compare_exchange(UNDATED, mtime_ns, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => mtime_ns,
            Err(known) => known,
        }
    }

    /// Stores the time of a change seen since it was listed.
    pub fn redate(&self, mtime_ns: i64) {
        self.mtime_ns.store(mtime_ns.max(UNDATED + 1), Ordering::Relaxed);
    }
}

impl Clone for Listed {
    fn clone(&self) -> Self {
        Self { rel: self.rel.clone(), mtime_ns: AtomicI64::new(self.mtime_ns.load(Ordering::Relaxed)) }
    }
}

impl PartialEq for Listed {
    fn eq(&self, other: &Self) -> bool {
        self.rel == other.rel && self.mtime_ns() == other.mtime_ns()
    }
}

impl Eq for Listed {}

/// A file time (seconds and nanoseconds) in nanoseconds since the epoch (saturating: an `i64`
/// of nanoseconds spans the years 1678 to 2262).
pub(super) fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// The modification time in `meta`, in nanoseconds since the epoch.
pub fn mtime_of(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt as _;
    ns(meta.mtime(), meta.mtime_nsec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_file_is_small_and_dated_once() {
        assert_eq!(std::mem::size_of::<Listed>(), 24);
        assert_eq!(ns(1, 5), 1_000_000_005);
        assert_eq!(ns(i64::MAX, 0), i64::MAX);
        let file = Listed::new(Path::new("a.rs"), None);
        assert_eq!(file.mtime_ns(), None);
        assert_eq!(file.date(7), 7);
        assert_eq!(file.date(3), 7, "a later lookup does not undo the first");
        file.redate(9);
        assert_eq!(file.mtime_ns(), Some(9));
        assert_eq!(Listed::new(Path::new("old"), Some(i64::MIN)).mtime_ns(), Some(i64::MIN + 1));
        assert_eq!(file.clone(), file);
    }
}
