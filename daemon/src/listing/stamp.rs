//! What `stat` says of a listed file or a walked folder, as the search index keeps it (see
//! [`index`](super::index)): device, inode, size, modification and change time. Equal stamps
//! taken at two moments mean nothing changed in between that went through the kernel, unless
//! the first was taken within the timestamp granularity of a change ("racily clean", as git
//! calls it): such a stamp is never trusted ([`Stamp::settled`]).

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use rustix::fs::{AtFlags, FileType, Mode};

use super::listed::Listed;
use crate::provider::RootDir;
use crate::provider::version::{RACY_WINDOW_NS, now_ns};

/// How long after its last change a file's stamp is trusted (the provider's racy window: file
/// timestamps come from a coarse clock, a whole second on some filesystems).
pub const RACY_NS: i64 = RACY_WINDOW_NS as i64;

/// How many files [`stamps_of`] looks at between two looks at whether to yield.
const YIELD_EVERY: usize = 512;
/// The longest [`stamps_of`] yields at once.
const MAX_YIELD: std::time::Duration = std::time::Duration::from_millis(100);

/// The racy window in force: [`RACY_NS`], but for tests that change it ([`set_racy_ns`]).
static RACY: AtomicI64 = AtomicI64::new(RACY_NS);

/// Sets the racy window (tests, and test builds of the daemon, shorten it so that what they
/// write is trusted without waiting two seconds; it stays longer than a clock tick).
pub fn set_racy_ns(ns: i64) {
    RACY.store(ns.max(20_000_000), Ordering::Relaxed);
}

/// The racy window in force.
pub fn racy_ns() -> i64 {
    RACY.load(Ordering::Relaxed)
}

/// One file's or folder's stat data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Device.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the epoch (no user can set it: a rewrite that
    /// puts back the size and the modification time still moves it).
    pub ctime_ns: i64,
}

impl Stamp {
    /// The stamp of a `stat` answer.
    pub fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime_ns: super::listed::ns(stat.st_mtime, i64::try_from(stat.st_mtime_nsec).unwrap_or(0)),
            ctime_ns: super::listed::ns(stat.st_ctime, i64::try_from(stat.st_ctime_nsec).unwrap_or(0)),
        }
    }

    /// The stamp of a file's metadata.
    pub fn of_meta(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: super::listed::ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: super::listed::ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the stamp, taken at `taken_ns`, may be trusted: its last change was more than
    /// the racy window ([`racy_ns`]) before (else a change in the same clock tick, after it was
    /// taken, could leave it as it is).
    pub fn settled(&self, taken_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns).saturating_add(racy_ns()) < taken_ns
    }

    /// A 64-bit digest of the stamp, never 0 (what a trigram filter keeps of the stamp of the
    /// bytes it was built from; 0 there means none that can be trusted).
    pub fn digest(&self) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for word in [self.dev, self.ino, self.size, self.mtime_ns as u64, self.ctime_ns as u64] {
            hash = (hash ^ word).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
            hash ^= hash >> 31;
        }
        hash.max(1)
    }
}

/// The stamps of the files `indices` (ascending) of `files` beneath `root`, now (`None`: gone,
/// or no regular file), each `fstatat`'d beneath its folder's handle (each folder opened once
/// for its files side by side), on two threads. While `yielding` is above 0 (searches waiting
/// on such looks of their own), it pauses now and then, a moment at most each time.
pub fn stamps_of(
    root: &RootDir,
    files: &[Listed],
    indices: &[usize],
    yielding: Option<&AtomicUsize>,
) -> Vec<Option<Stamp>> {
    let half = indices.len() / 2;
    let (first, second) = indices.split_at(half);
    if first.len() < 1024 {
        return stamp_run(root, files, indices, yielding);
    }
    std::thread::scope(|scope| {
        let other = scope.spawn(|| stamp_run(root, files, second, yielding));
        let mut stamps = stamp_run(root, files, first, yielding);
        match other.join() {
            Ok(rest) => stamps.extend(rest),
            Err(_) => stamps.extend(std::iter::repeat_n(None, second.len())),
        }
        stamps
    })
}

/// [`stamps_of`] on the calling thread.
fn stamp_run(
    root: &RootDir,
    files: &[Listed],
    indices: &[usize],
    yielding: Option<&AtomicUsize>,
) -> Vec<Option<Stamp>> {
    let mut folders = Folders { open: Vec::new() };
    indices
        .iter()
        .enumerate()
        .map(|(done, &index)| {
            if done % YIELD_EVERY == 0
                && let Some(yielding) = yielding
            {
                let started = std::time::Instant::now();
                while yielding.load(Ordering::Relaxed) > 0 && started.elapsed() < MAX_YIELD {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            // By bytes: the paths of a listing are relative and normal (no `.`, no doubled or
            // trailing `/`), and component-wise path methods were a tenth of this loop.
            let rel = files.get(index)?.rel.as_os_str().as_bytes();
            let (parent, name) = match memchr::memrchr(b'/', rel) {
                Some(at) => (&rel[..at], &rel[at + 1..]),
                None => (&rel[..0], rel),
            };
            let fd = folders.open(root, parent)?;
            let stat = rustix::fs::statat(fd, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW).ok()?;
            (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then(|| Stamp::of(&stat))
        })
        .collect()
}

/// The folders from the root down to the last one a file was looked at in, each open beneath
/// the one above (`O_NOFOLLOW`, as the walk opens them): files in path order reach each
/// folder with one `openat` (a folder that cannot be opened is left out, with what is in it).
struct Folders {
    /// Each folder's path relative to the root (bytes), and its handle.
    open: Vec<(Vec<u8>, Option<OwnedFd>)>,
}

impl Folders {
    /// The folder `rel` (relative to `root`), opened beneath the nearest one open above it.
    fn open(&mut self, root: &RootDir, rel: &[u8]) -> Option<BorrowedFd<'_>> {
        let within = |open: &[u8]| {
            open.is_empty() || (rel.starts_with(open) && (rel.len() == open.len() || rel[open.len()] == b'/'))
        };
        while self.open.last().is_some_and(|(open, _)| !within(open)) {
            self.open.pop();
        }
        if self.open.is_empty() {
            let top = rustix::fs::openat(root.fd(), c".", super::rules::folder_flags(), Mode::empty()).ok();
            self.open.push((Vec::new(), top));
        }
        let done = self.open.last().map_or(0, |(open, _)| open.len());
        let rest = &rel[done..];
        for name in rest.split(|&b| b == b'/').filter(|name| !name.is_empty()) {
            let (above, fd) = self.open.last()?;
            let below = fd.as_ref().and_then(|fd| {
                rustix::fs::openat(fd, OsStr::from_bytes(name), super::rules::folder_flags(), Mode::empty())
                    .ok()
            });
            let mut path = above.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            self.open.push((path, below));
        }
        self.open.last()?.1.as_ref().map(AsFd::as_fd)
    }
}

/// Now, in nanoseconds since the epoch (the clock file timestamps use).
pub fn now() -> i64 {
    i64::try_from(now_ns()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_trusted_only_once_settled_and_its_digest_tells_any_field() {
        let stamp = Stamp { dev: 1, ino: 2, size: 3, mtime_ns: 1_000, ctime_ns: 2_000 };
        assert!(stamp.settled(2_000 + RACY_NS * 2));
        assert!(!stamp.settled(2_000), "changed within the window of the look");
        let digests: Vec<u64> = [
            stamp,
            Stamp { dev: 9, ..stamp },
            Stamp { ino: 9, ..stamp },
            Stamp { size: 9, ..stamp },
            Stamp { mtime_ns: 9, ..stamp },
            Stamp { ctime_ns: 9, ..stamp },
        ]
        .iter()
        .map(Stamp::digest)
        .collect();
        let mut distinct = digests.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), digests.len());
        assert!(digests.iter().all(|&d| d != 0));
        let meta = std::fs::metadata("/").unwrap();
        let stat = rustix::fs::stat("/").unwrap();
        assert_eq!(Stamp::of_meta(&meta), Stamp::of(&stat));
    }
}
