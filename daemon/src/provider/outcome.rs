//! What provider operations take and answer: write expectations, stat, and the outcomes of
//! read, write and edit, and where a write landed.

use super::edit::Region;
use super::index::Window;
use super::resolve::{Opened, Resolved};
use super::{Fingerprint, Version};

/// What must be true of a file for a write to go ahead. Only the file context builds one (from
/// a session's observation, or from what an `fs/*` client named); `daemon/tests/it/tidy.rs`
/// fails when anything else does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation(pub(super) Expect);

/// The kinds of [`Expectation`], as the write path matches on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// Whatever is there (create or replace).
    Any,
    /// Nothing is there: create only, never clobber.
    Absent,
    /// Exactly this version is there.
    Version(Version),
}

impl Expectation {
    /// Whatever is there (create or replace).
    pub(crate) const ANY: Self = Self(Expect::Any);
    /// Nothing is there: create only, never clobber.
    pub(crate) const ABSENT: Self = Self(Expect::Absent);

    /// Exactly `version` is there.
    pub(crate) fn version(version: Version) -> Self {
        Self(Expect::Version(version))
    }
}

/// Whether a write over an existing file keeps that file's conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conventions {
    /// Write the content's bytes exactly as given.
    Exact,
    /// Keep the replaced file's byte-order mark (never doubled) and, when it is CRLF (at least
    /// one `\r\n`, no bare `\n`), write each bare `\n` of the content as `\r\n`. Judged on the
    /// bytes of the version being replaced, inside the write's critical section. A new file is
    /// written exactly.
    Keep,
}

/// What a path names, for stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Directory,
    /// A socket, device or fifo.
    Other,
    /// Nothing.
    Missing,
}

/// Result of [`Provider::stat`](super::Provider::stat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// What is there.
    pub kind: Kind,
    /// Size in bytes.
    pub size: Option<u64>,
    /// Content version (regular text or binary files); `None` for a file over the hash cap
    /// (`max_hash_bytes`).
    pub version: Option<Version>,
    /// Modification time in milliseconds since the epoch.
    pub mtime_ms: Option<i64>,
    /// Permission bits.
    pub mode: Option<u32>,
    /// Hard links (for a file: of the very descriptor its version was taken from); 0 when
    /// missing.
    pub links: u64,
}

/// Result of [`Provider::read`](super::Provider::read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The version the window was cut from.
    pub version: Version,
    /// The window.
    pub window: Window,
    /// Hard links the file had when it was opened.
    pub links: u64,
    /// The version's bytes, when this read loaded them whole anyway (a small file's cold read);
    /// never on the warm path.
    pub bytes: Option<Vec<u8>>,
}

/// How fast a read or edit must answer, as its caller runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Whatever it takes: opens, loads, hashes, lock waits (on a blocking thread).
    Blocking,
    /// Only what is bounded enough for an async worker (each entry says what that is); else
    /// [`Paced::NotAtOnce`], nothing done.
    AtOnce,
}

/// What a read or edit at a [`Pace`] did.
#[derive(Debug)]
pub enum Paced<T> {
    /// Done.
    Done(T),
    /// Not possible at once: nothing was read or written; do it again [`Pace::Blocking`].
    NotAtOnce,
}

/// The file a read read, as resolution found it.
#[derive(Debug)]
pub struct ReadAt {
    /// As in [`Resolved::path`].
    pub path: std::path::PathBuf,
    /// As in [`Resolved::display`].
    pub display: String,
    /// As in [`Resolved::dir`].
    pub dir: super::beneath::Root,
}

/// What the warm path of a read of a name resolution opened found.
#[derive(Debug)]
pub(super) enum OpenedRead {
    /// Read on the warm path; the handle resolution opened comes back with it, to be closed
    /// whenever suits the caller.
    Warm(ReadOutcome, Opened),
    /// Not warm: read `Resolved` as usual (it was looked at once, after the attempt).
    Cold(Resolved),
}

/// Result of [`Provider::write`](super::Provider::write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Whether the file was created (else replaced).
    pub created: bool,
    /// The new version.
    pub version: Version,
    /// Hard links the written file has.
    pub links: u64,
    /// The bytes written, when they differ from the content given (its conventions were kept).
    pub converted: Option<Vec<u8>>,
    /// The journal entry that recorded it (`None`: not journaled).
    pub entry: Option<u64>,
}

/// Result of [`Provider::edit`](super::Provider::edit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// Occurrences replaced.
    pub replacements: u64,
    /// The new version.
    pub version: Version,
    /// Hard links the edited file has.
    pub links: u64,
    /// The bytes written (the new version's).
    pub written: Vec<u8>,
    /// The first edited places of the new version, with context lines (see [`Region`]).
    pub regions: Vec<Region>,
    /// The journal entry that recorded it (`None`: not journaled).
    pub entry: Option<u64>,
}

/// Where a write landed: the file's hard links, and the fingerprint of the inode a rename left
/// at the path (`None` for a write in place, or when the path no longer names that inode).
pub(super) struct Landed {
    /// Whether a new inode was renamed onto the path (else it was written in place).
    pub renamed: bool,
    /// Hard links of the written file.
    pub links: u64,
    /// The renamed inode's fingerprint, looked at after the rename.
    pub fingerprint: Option<Fingerprint>,
    /// The version written, when the journal already hashed it.
    pub version: Option<super::Version>,
    /// The journal entry that recorded the change (`None`: not journaled).
    pub entry: Option<u64>,
}
