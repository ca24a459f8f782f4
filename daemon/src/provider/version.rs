//! File versions (blake3 content hashes) and stat fingerprints, and the rule that decides when
//! a cached version may be trusted without re-hashing.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A file's version: the blake3 hash of its bytes. It changes whenever the bytes change and
/// only then. On the wire it is an opaque lowercase hex string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version(blake3::Hash);

impl Version {
    /// The version of these bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self(blake3::hash(bytes))
    }

    /// Wraps a finished hash.
    pub fn from_hash(hash: blake3::Hash) -> Self {
        Self(hash)
    }

    /// Parses the wire form; `None` for anything that is not a version this daemon issued.
    pub fn parse(text: &str) -> Option<Self> {
        blake3::Hash::from_hex(text).ok().map(Self)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.to_hex().as_str())
    }
}

/// What `stat` says about a file, enough to notice any change that goes through the kernel:
/// a different inode (replaced by rename), size, or modification/change time. `ctime` cannot be
/// set by users, so restoring `mtime` after a same-size rewrite is still noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// Device of the inode.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl Fingerprint {
    /// The fingerprint of a file's metadata.
    pub fn of(meta: &Metadata) -> Self {
        let ns = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The fingerprint of a `statx` answer (the same as [`Fingerprint::of`] the same file's
    /// metadata: std builds `Metadata` from `statx` too).
    pub fn of_statx(statx: &rustix::fs::Statx) -> Self {
        let ns =
            |t: &rustix::fs::StatxTimestamp| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
        Self {
            dev: rustix::fs::makedev(statx.stx_dev_major, statx.stx_dev_minor),
            ino: statx.stx_ino,
            size: statx.stx_size,
            mtime_ns: ns(&statx.stx_mtime),
            ctime_ns: ns(&statx.stx_ctime),
        }
    }

    /// The later of the two timestamps.
    fn latest_ns(&self) -> i128 {
        self.mtime_ns.max(self.ctime_ns)
    }
}

/// How close to the moment a version was computed a file's timestamp may be before the version
/// is no longer trusted on fingerprint alone. File timestamps come from a coarse clock (a
/// kernel tick, or a whole second on some filesystems), so a second write in the same tick as
/// the one we hashed can leave size, mtime and ctime unchanged. Git calls such entries "racily
/// clean" and re-hashes them; so do we, until the file is older than this when we hash it.
pub const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// Now, in nanoseconds since the epoch (the same clock file timestamps use).
pub fn now_ns() -> i128 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(_) => 0,
    }
}

/// Whether a version computed at `recorded_ns` for a file with fingerprint `fp` may be
/// trusted without re-hashing.
pub fn trusted(fp: &Fingerprint, recorded_ns: i128) -> bool {
    fp.latest_ns().saturating_add(RACY_WINDOW_NS) < recorded_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_follow_content() {
        let v = Version::of(b"hello");
        assert_eq!(Version::parse(&v.to_string()), Some(v));
        assert_ne!(Version::of(b"hello!"), v);
        assert_eq!(Version::parse("not-a-version"), None);
    }

    #[test]
    fn a_statx_fingerprint_is_the_metadata_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "some bytes").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let statx = rustix::fs::statx(
            &file,
            "",
            rustix::fs::AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::BASIC_STATS,
        )
        .unwrap();
        assert_eq!(Fingerprint::of_statx(&statx), Fingerprint::of(&file.metadata().unwrap()));
    }

    #[test]
    fn recent_files_are_not_trusted_on_fingerprint_alone() {
        let fp = |t: i128| Fingerprint { dev: 1, ino: 2, size: 3, mtime_ns: t, ctime_ns: t };
        let now = now_ns();
        assert!(!trusted(&fp(now), now), "hashed in the same tick as the write");
        assert!(!trusted(&fp(now - RACY_WINDOW_NS / 2), now));
        assert!(trusted(&fp(now - 2 * RACY_WINDOW_NS), now));
    }
}
