//! The search index: each root's kept listings and their trigram filters, persisted in a
//! private folder (`$XDG_STATE_HOME/filectx/index/` by default), one file per root, so that the
//! first search after a start is as warm as the last one before it (see [`format`](mod@format) for the
//! bytes, [`section`] for what a validation reads of them).
//!
//! An index is never trusted, only validated, the way git validates its index: a walk beneath
//! the root's handles looks at every folder and file it holds (see
//! [`walker::walk_with`](super::walker::walk_with)); a folder whose stat data and ignore rules
//! are as recorded has the same entries, a file whose stat data are as recorded keeps its
//! filter, anything else is read again; stat data that changed within the racy window of the
//! look that recorded them, or of the index's own write, are never trusted.
//!
//! The folder is 0700 and its files 0600, each made with `O_EXCL` beneath the folder's handle,
//! opened with `O_NOFOLLOW`, and told to [`Private`] (no session reaches them, by name or hard
//! link). A file is replaced whole (a temporary name, synced, renamed over, the folder synced):
//! a kill at any moment leaves the old index or the new one. One that is another user's, of
//! another format version, for another root, truncated or corrupt is discarded with a log line
//! (its root is then walked and indexed anew). The files together stay within the configured
//! bytes: the least recently written go first, and an index bigger than that alone is not
//! written.

pub mod format;
pub mod section;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use self::format::{Image, IndexRefused};
use super::stamp::Stamp;
use crate::provider::crash::crash_point;
use crate::provider::private::Private;

/// Where the indexes are kept, and how many bytes they may take on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    /// The folder (0700), made when missing.
    pub dir: PathBuf,
    /// Most bytes of all index files together.
    pub max_bytes: u64,
    /// Whether files and the folder are synced before and after a rename.
    pub fsync: bool,
}

/// The default folder: `$XDG_STATE_HOME/filectx/index` (else `~/.local/state/filectx/index`).
pub fn default_dir() -> Option<PathBuf> {
    crate::xdg::state_dir().map(|state| state.join("index"))
}

/// Most index files kept (one per root).
const MAX_FILES: usize = 256;
/// The ending of an index file's name.
const SUFFIX: &str = ".idx";
/// How a temporary file's name begins.
const TEMP: &str = ".tmp-";
/// Test builds (`test-hooks`): the racy window in milliseconds, when set (at least 20).
#[cfg(feature = "test-hooks")]
pub const RACY_ENV: &str = "FILECTX_TEST_RACY_MS";

/// What is known of one root's index, for `daemon/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootIndex {
    /// Whether its listings were loaded from the index on disk (and validated), rather than
    /// walked.
    pub loaded: bool,
    /// Files that validation found new, or changed since their filter was built: their
    /// filters are built again, and searches read them meanwhile.
    pub reread: u64,
    /// Bytes of its index file on disk (0: none).
    pub bytes: u64,
    /// Milliseconds its last validation took.
    pub validation_ms: u64,
}

/// Why a root's index could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// It is not one to trust: discarded.
    #[error("{0}")]
    IndexRefused(#[from] IndexRefused),
    /// It could not be read.
    #[error("it cannot be read: {0}")]
    Io(#[from] std::io::Error),
}

/// The index folder and what is known of each root's index.
pub struct Indexes {
    dir: PathBuf,
    fd: OwnedFd,
    max_bytes: u64,
    fsync: bool,
    uid: u32,
    private: Arc<Private>,
    roots: Mutex<HashMap<PathBuf, RootIndex>>,
    /// Held by whoever writes an index (see [`Indexes::hold`]).
    writing: Mutex<()>,
}

impl std::fmt::Debug for Indexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexes").field("dir", &self.dir).field("max_bytes", &self.max_bytes).finish()
    }
}

fn folder_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

impl Indexes {
    /// Opens (making it 0700 when missing) the folder of `config`; temporary files a killed
    /// daemon left there are removed. Files written are told to `private`.
    pub fn open(config: &IndexConfig, private: Arc<Private>) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt as _;
        // Test builds: a shorter racy window, so that what a test wrote is trusted sooner.
        #[cfg(feature = "test-hooks")]
        if let Some(ms) = std::env::var(RACY_ENV).ok().and_then(|ms| ms.parse::<i64>().ok()) {
            super::stamp::set_racy_ns(ms.saturating_mul(1_000_000));
        }
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&config.dir)?;
        let fd = rustix::fs::open(&config.dir, folder_flags(), Mode::empty())?;
        let uid = rustix::process::geteuid().as_raw();
        let stat = rustix::fs::fstat(&fd)?;
        if stat.st_uid != uid {
            return Err(std::io::Error::other(format!("the folder belongs to uid {}", stat.st_uid)));
        }
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
        let indexes = Self {
            dir: config.dir.clone(),
            fd,
            max_bytes: config.max_bytes,
            fsync: config.fsync,
            uid,
            private,
            roots: Mutex::default(),
            writing: Mutex::new(()),
        };
        for (name, _) in indexes.files()? {
            if name.as_encoded_bytes().starts_with(TEMP.as_bytes()) {
                tracing::debug!(name = %name.to_string_lossy(), "a search index's unfinished write removed");
                let _ = indexes.remove_name(&name);
            }
        }
        Ok(indexes)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The name of `root`'s index file.
    fn name(root: &Path) -> String {
        let digest = blake3::hash(root.as_os_str().as_encoded_bytes());
        format!("{}{SUFFIX}", &digest.to_hex()[..32])
    }

    /// What is known of each root's index.
    pub fn roots(&self) -> Vec<(PathBuf, RootIndex)> {
        let roots = self.roots.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<_> = roots.iter().map(|(root, index)| (root.clone(), index.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Changes what is known of `root`'s index.
    pub fn note(&self, root: &Path, change: impl FnOnce(&mut RootIndex)) {
        let mut roots = self.roots.lock().unwrap_or_else(PoisonError::into_inner);
        if roots.len() < MAX_FILES * 4 || roots.contains_key(root) {
            change(roots.entry(root.to_path_buf()).or_default());
        }
    }

    /// Reads `root`'s index (`None`: there is none), mapped (read when no mapping can be made),
    /// every byte checked and copied out before it is trusted.
    pub fn load(&self, root: &Path) -> Result<Option<(Image, u64)>, Unread> {
        let name = Self::name(root);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let file = match rustix::fs::openat(&self.fd, name.as_str(), flags, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(IndexRefused::Malformed("it is a link").into()),
            Err(err) => return Err(Unread::Io(err.into())),
        };
        let before = rustix::fs::fstat(&file).map_err(std::io::Error::from)?;
        if rustix::fs::FileType::from_raw_mode(before.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(IndexRefused::Malformed("it is not a regular file").into());
        }
        if before.st_uid != self.uid {
            return Err(IndexRefused::Uid(before.st_uid).into());
        }
        let len = u64::try_from(before.st_size).unwrap_or(0);
        if len > self.max_bytes.max(format::HEADER as u64) {
            return Err(IndexRefused::Malformed("it is bigger than the indexes may be").into());
        }
        let written_ns = Stamp::of(&before).mtime_ns;
        let image = match crate::provider::mmap::Mapped::map(&file, len)? {
            Some(mapped) => {
                let image = format::decode(mapped.bytes(), root, self.uid, written_ns);
                // Copied out first, then checked: a torn mapping is never believed.
                if mapped.torn() {
                    return Err(IndexRefused::Malformed("it changed while it was read").into());
                }
                image?
            }
            None => {
                use std::io::Read as _;
                let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
                (&file).take(len).read_to_end(&mut bytes)?;
                format::decode(&bytes, root, self.uid, written_ns)?
            }
        };
        let after = rustix::fs::fstat(&file).map_err(std::io::Error::from)?;
        if Stamp::of(&after) != Stamp::of(&before) {
            return Err(IndexRefused::Malformed("it changed while it was read").into());
        }
        Ok(Some((image, len)))
    }

    /// Serializes the writers of indexes: one writes at a time, from the moment it looks at what
    /// to write until the file is in place (a stop waits for a write under way).
    pub fn hold(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `root`'s index (it could not be trusted: `why`), saying so.
    pub fn discard(&self, root: &Path, why: &Unread) {
        tracing::warn!(root = %root.display(), %why, "a search index discarded; the root is walked and indexed anew");
        let _ = self.remove_name(OsStr::new(&Self::name(root)));
        self.note(root, |index| index.bytes = 0);
    }

    /// Writes `bytes` as `root`'s index, whole or not at all, within the folder's bound: the
    /// least recently written other indexes go to make room; one bigger than the bound alone is
    /// not written (and the old one goes). Returns whether it was written.
    pub fn write(&self, root: &Path, bytes: &[u8]) -> std::io::Result<bool> {
        let name = Self::name(root);
        let len = bytes.len() as u64;
        if len > self.max_bytes {
            tracing::info!(root = %root.display(), bytes = len, max = self.max_bytes, "a search index is bigger than max_search_index_bytes allows: not kept");
            let _ = self.remove_name(OsStr::new(&name));
            self.note(root, |index| index.bytes = 0);
            return Ok(false);
        }
        let mut others: Vec<(std::ffi::OsString, u64, i64)> = self
            .files()?
            .into_iter()
            .filter(|(file, _)| file.as_encoded_bytes().ends_with(SUFFIX.as_bytes()) && *file != *name)
            .map(|(file, stamp)| (file, stamp.size, stamp.mtime_ns))
            .collect();
        others.sort_by_key(|&(_, _, mtime)| std::cmp::Reverse(mtime));
        let mut total: u64 = others.iter().map(|(_, size, _)| size).sum::<u64>() + len;
        while total > self.max_bytes || others.len() >= MAX_FILES {
            let Some((oldest, size, _)) = others.pop() else { break };
            tracing::debug!(name = %oldest.to_string_lossy(), "a search index removed to keep within max_search_index_bytes");
            let _ = self.remove_name(&oldest);
            total -= size;
        }
        self.write_whole(&name, bytes)?;
        self.note(root, |index| index.bytes = len);
        Ok(true)
    }

    /// Writes `bytes` as `name` under a new temporary name (0600, `O_EXCL`), synced, then
    /// renamed over `name` and the folder synced.
    fn write_whole(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let temp = format!("{TEMP}{}", crate::random::hex(8)?);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = (|| -> std::io::Result<()> {
            let mut file =
                File::from(rustix::fs::openat(&self.fd, temp.as_str(), flags, Mode::from_raw_mode(0o600))?);
            let stat = rustix::fs::fstat(&file)?;
            self.private.created(stat.st_dev, stat.st_ino);
            let half = bytes.len() / 2;
            file.write_all(&bytes[..half])?;
            crash_point!("index::half-written");
            file.write_all(&bytes[half..])?;
            if self.fsync {
                file.sync_data()?;
            }
            if let Ok(old) = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                self.private.removed(old.st_dev, old.st_ino);
            }
            rustix::fs::renameat(&self.fd, temp.as_str(), &self.fd, name)?;
            crash_point!("index::renamed");
            if self.fsync {
                rustix::fs::fsync(&self.fd)?;
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = self.remove_name(OsStr::new(&temp));
        }
        written
    }

    /// Removes the file `name` of the folder (a link is removed itself, never followed).
    fn remove_name(&self, name: &OsStr) -> std::io::Result<()> {
        if let Ok(stat) = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            self.private.removed(stat.st_dev, stat.st_ino);
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// The folder's entries (no `.` and `..`) and their stat data, links not followed.
    fn files(&self) -> std::io::Result<Vec<(std::ffi::OsString, Stamp)>> {
        let fd = rustix::fs::openat(&self.fd, c".", folder_flags(), Mode::empty())?;
        let mut dir = rustix::fs::Dir::read_from(&fd)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name).to_owned();
            if let Ok(stat) = rustix::fs::statat(fd.as_fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                out.push((name, Stamp::of(&stat)));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
