//! The provider layer: resolve paths inside a session's roots, stat, windowed reads with a
//! cached line index, versions as blake3 content hashes, and write/edit as one critical section
//! (in-process path lock + flock + inode re-check + version guard + literal match + atomic
//! replace). It knows nothing about sessions or JSON: callers pass a [`Scope`] and an explicit
//! [`Expectation`].
//!
//! Every method blocks (filesystem calls, hashing, locks): call it from a blocking thread. The
//! one exception is [`Provider::read_cached`], which only stats a path and reads from a file it
//! already holds open on a local filesystem, and declines everything else.
//!
//! Freshness is decided by content, never by time: a cached version is used only while the
//! file's stat fingerprint is unchanged *and* the file is older than the racy window at the time
//! it was hashed; otherwise the file is hashed again.

pub mod beneath;
pub mod budget;
mod cache_tests;
pub mod edit;
pub mod index;
pub mod leftovers;
pub mod lock;
pub mod mmap;
pub mod resolve;
mod strategies;
pub mod version;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{ErrorKind, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use filectx_protocol::FsErrorCode;

pub use self::beneath::{Root, RootDir};
use self::budget::{MapBudget, Reservation};
use self::index::{LineIndex, NotText, Scanner, Window};
use self::leftovers::{Leftovers, crash_point};
use self::lock::{LockError, PathLocks};
use self::mmap::Mapped;
pub use self::resolve::{Resolved, Scope};
pub use self::version::{Fingerprint, Version};

/// Files up to this size are read into memory in one go on a cache miss (and the window cut
/// from that buffer); bigger ones are streamed through the scanner and windows are read with
/// positional reads.
const SMALL_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Chunk size of the streaming scan.
const SCAN_CHUNK_BYTES: usize = 1024 * 1024;

/// Times a read retries when the file changes under it before giving up with `FS_BUSY`.
const READ_ATTEMPTS: usize = 3;

/// The daemon's effective user and group, asked once: a staged file whose target belongs to
/// someone else is given the target's owner.
static OWNER: std::sync::LazyLock<(u32, u32)> =
    std::sync::LazyLock::new(|| (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()));

/// Provider settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Longest wait for a file's locks before `FS_BUSY`.
    pub lock_patience: Duration,
    /// Largest file an edit loads, and largest content a write accepts (`FS_TOO_LARGE`).
    pub max_edit_bytes: u64,
    /// Whether writes are flushed to disk (file and folder) before they are acknowledged.
    pub fsync: bool,
    /// Most files whose version and line index are cached (least recently used go first).
    pub max_cached_files: usize,
    /// Most bytes of line indexes cached.
    pub max_index_bytes: usize,
    /// Most bytes of files mapped at once by cached entries.
    pub max_mapped_bytes: usize,
    /// Files at least this large (on local filesystems) are memory-mapped once per version.
    pub map_threshold: u64,
    /// Most cached entries that keep their file open (so a warm read needs no `open`).
    pub max_open_files: usize,
    /// Cached state unused for one to two of these periods is released (see
    /// [`Provider::sweep_idle`]).
    pub idle_release: Duration,
    /// Refuse writes and edits of files with several hard links (`FS_PERMISSION_DENIED`):
    /// such a file is rewritten in place, so a link outside the roots would see the change.
    pub refuse_multi_link_writes: bool,
    /// The secret that marks this user's daemons' temporary files (see [`leftovers`]); `None`
    /// draws a fresh one for this provider alone.
    pub staging_token: Option<String>,
    /// Largest file a read or stat hashes: reading a bigger one is `FS_TOO_LARGE`, and stat
    /// reports it without a version (hashing 64 GiB takes tens of seconds of a slot).
    pub max_hash_bytes: u64,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            lock_patience: Duration::from_secs(10),
            max_edit_bytes: 256 * 1024 * 1024,
            fsync: true,
            max_cached_files: 4096,
            max_index_bytes: 64 * 1024 * 1024,
            max_mapped_bytes: 8 * 1024 * 1024 * 1024,
            map_threshold: 4 * 1024 * 1024,
            max_open_files: 1024,
            idle_release: Duration::from_secs(30),
            refuse_multi_link_writes: false,
            staging_token: None,
            max_hash_bytes: 64 * 1024 * 1024 * 1024,
        }
    }
}

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
    /// The file's locks stayed taken (or it kept changing) for longer than the daemon waits.
    #[error("{path} is busy: {why}")]
    Busy {
        /// The path.
        path: String,
        /// What kept it busy.
        why: String,
    },
    /// `old` and `new` of an edit are equal, or `old` is empty.
    #[error("{0}")]
    InvalidEdit(String),
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
    /// The wire identifier of this failure.
    pub fn code(&self) -> FsErrorCode {
        match self {
            Self::InvalidPath { .. } | Self::OffsetPastEnd { .. } | Self::InvalidEdit(_) => {
                FsErrorCode::InvalidArgument
            }
            Self::OutsideRoot { .. } => FsErrorCode::OutsideRoot,
            Self::NotFound { .. } => FsErrorCode::NotFound,
            Self::IsDirectory { .. } => FsErrorCode::IsDirectory,
            Self::NotRegularFile { .. } => FsErrorCode::NotRegularFile,
            Self::Refused { .. } => FsErrorCode::PermissionDenied,
            Self::NotText { .. } => FsErrorCode::NotText,
            Self::TooLarge { .. } => FsErrorCode::TooLarge,
            Self::PermissionDenied { .. } => FsErrorCode::PermissionDenied,
            Self::StaleVersion { .. } => FsErrorCode::StaleVersion,
            Self::NoMatch { .. } => FsErrorCode::NoMatch,
            Self::AmbiguousMatch { .. } => FsErrorCode::AmbiguousMatch,
            Self::AlreadyExists { .. } => FsErrorCode::AlreadyExists,
            Self::Busy { .. } => FsErrorCode::Busy,
            Self::Io { .. } => FsErrorCode::Io,
        }
    }

    /// The path the failure concerns, as the caller should see it.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::InvalidPath { path, .. }
            | Self::OutsideRoot { path, .. }
            | Self::NotFound { path, .. }
            | Self::IsDirectory { path }
            | Self::NotRegularFile { path }
            | Self::Refused { path, .. }
            | Self::NotText { path, .. }
            | Self::TooLarge { path, .. }
            | Self::PermissionDenied { path }
            | Self::OffsetPastEnd { path, .. }
            | Self::StaleVersion { path, .. }
            | Self::NoMatch { path, .. }
            | Self::AmbiguousMatch { path, .. }
            | Self::AlreadyExists { path }
            | Self::Busy { path, .. }
            | Self::Io { path, .. } => Some(path),
            Self::InvalidEdit(_) => None,
        }
    }

    /// Machine-readable details for `error.data` (counts, versions, limits).
    pub fn details(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        match self {
            Self::OffsetPastEnd { offset, total_lines, .. } => {
                map.insert("offset".into(), (*offset).into());
                map.insert("totalLines".into(), (*total_lines).into());
            }
            Self::AmbiguousMatch { matches, .. } => {
                map.insert("matches".into(), (*matches).into());
            }
            Self::StaleVersion { current, .. } => {
                map.insert("currentVersion".into(), current.map(|v| v.to_string()).into());
            }
            Self::TooLarge { size, limit, .. } => {
                map.insert("size".into(), (*size).into());
                map.insert("limit".into(), (*limit).into());
            }
            Self::NoMatch { hint: Some(hint), .. } => {
                map.insert("hint".into(), hint.clone().into());
            }
            _ => {}
        }
        map
    }
}

/// Reads a whole file with positional reads (independent of its cursor), expecting about
/// `hint` bytes; stops at the real end of file.
fn read_all_at(file: &File, hint: u64) -> std::io::Result<Vec<u8>> {
    // One byte more than expected, so that a file that grew is noticed without a second buffer;
    // only what is read into is ever zeroed (a fixed 1 MiB scratch chunk cost more than reading
    // a small file).
    let mut bytes = vec![0u8; usize::try_from(hint).unwrap_or(0).saturating_add(1)];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len.saturating_mul(2).max(SCAN_CHUNK_BYTES), 0);
        }
        match file.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Maps an OS error on `target` to the provider's vocabulary.
fn io_error(target: &str, op: &'static str, err: std::io::Error) -> ProviderError {
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

/// What must be true of a file for a write to go ahead. Built explicitly by the caller; the
/// file-context layer builds it from a session's observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expectation {
    /// Whatever is there (create or replace).
    Any,
    /// Nothing is there: create only, never clobber.
    Absent,
    /// Exactly this version is there.
    Version(Version),
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

/// Result of [`Provider::stat`].
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
}

/// Result of [`Provider::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The version the window was cut from.
    pub version: Version,
    /// The window.
    pub window: Window,
    /// Hard links the file had when it was opened.
    pub links: u64,
}

/// Result of [`Provider::write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Whether the file was created (else replaced).
    pub created: bool,
    /// The new version.
    pub version: Version,
    /// Hard links the written file has.
    pub links: u64,
}

/// Result of [`Provider::edit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditOutcome {
    /// Occurrences replaced.
    pub replacements: u64,
    /// The new version.
    pub version: Version,
    /// Hard links the edited file has.
    pub links: u64,
}

/// What the provider remembers about one file version.
#[derive(Debug)]
struct Entry {
    fingerprint: Fingerprint,
    version: Version,
    /// When hashing started (nanoseconds since the epoch), for the racy rule.
    recorded_ns: i128,
    text: Result<Arc<LineIndex>, NotText>,
    /// The file mapped once for this version (large files on local filesystems).
    mapping: Option<Arc<Mapped>>,
    /// The file, kept open while the cache's budget of open files allows.
    file: Option<Arc<File>>,
    /// Whether the file is on a local filesystem (see [`mmap::mappable`]).
    local: bool,
}

impl Entry {
    fn heap_bytes(&self) -> usize {
        self.text.as_ref().map(|i| i.heap_bytes()).unwrap_or(0)
    }

    fn mapped_bytes(&self) -> usize {
        self.mapping.as_ref().map(|m| m.len()).unwrap_or(0)
    }

    /// Where windows of this cached version are read from: its mapping, else the file.
    fn body(&self) -> Body {
        match &self.mapping {
            Some(mapped) => Body::Mapped(mapped.clone()),
            None => Body::File,
        }
    }
}

/// Cache of entries by canonical path, bounded by count, index bytes, mapped bytes and open
/// files (least recently used evicted first).
#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<PathBuf, (Arc<Entry>, u64)>,
    tick: u64,
    index_bytes: usize,
    mapped_bytes: usize,
    open_files: usize,
    /// `tick` at the last idle sweep: entries not used since were idle for a whole period.
    swept_at: u64,
}

impl Cache {
    fn get(&mut self, path: &Path) -> Option<Arc<Entry>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(path).map(|(entry, used)| {
            *used = tick;
            entry.clone()
        })
    }

    /// Caches `entry`; returns it and the entries it replaced or evicted. Callers drop those
    /// after letting go of the cache's lock: dropping the last handle closes a file or unmaps a
    /// mapping, which must not hold up every other read's cache lookup.
    fn insert(
        &mut self,
        path: PathBuf,
        mut entry: Entry,
        config: &ProviderConfig,
    ) -> (Arc<Entry>, Vec<Arc<Entry>>) {
        let mut released: Vec<Arc<Entry>> = self.remove(&path).into_iter().collect();
        if entry.file.is_some() && self.open_files >= config.max_open_files {
            entry.file = None;
        }
        let entry = Arc::new(entry);
        self.tick += 1;
        self.index_bytes += entry.heap_bytes();
        self.mapped_bytes += entry.mapped_bytes();
        self.open_files += usize::from(entry.file.is_some());
        self.entries.insert(path, (entry.clone(), self.tick));
        while self.entries.len() > 1
            && (self.entries.len() > config.max_cached_files.max(1)
                || self.index_bytes > config.max_index_bytes
                || self.mapped_bytes > config.max_mapped_bytes)
        {
            // Keep the entry just inserted: it is the most recently used, so it is never among
            // the batch unless it is the only entry left (excluded by the loop condition).
            let count = crate::lru::batch(self.entries.len()).min(self.entries.len() - 1);
            for path in crate::lru::least_recent(&self.entries, count, |(_, used)| *used) {
                released.extend(self.remove(&path));
            }
        }
        (entry, released)
    }

    /// Takes `path`'s entry out (see [`Cache::insert`] on dropping it).
    fn remove(&mut self, path: &Path) -> Option<Arc<Entry>> {
        let (old, _) = self.entries.remove(path)?;
        self.forget_sizes(&old);
        Some(old)
    }

    fn forget_sizes(&mut self, old: &Entry) {
        self.index_bytes -= old.heap_bytes();
        self.mapped_bytes -= old.mapped_bytes();
        self.open_files -= usize::from(old.file.is_some());
    }

    /// Takes out the least recently used entries that hold mappings until the cached mappings
    /// total at most `target` bytes (see [`Cache::insert`] on dropping them).
    fn shed_mapped(&mut self, target: usize) -> Vec<Arc<Entry>> {
        let mut mapped: Vec<(u64, PathBuf)> = self
            .entries
            .iter()
            .filter(|(_, (entry, _))| entry.mapping.is_some())
            .map(|(path, (_, used))| (*used, path.clone()))
            .collect();
        mapped.sort_unstable();
        let mut released = Vec::new();
        for (_, path) in mapped {
            if self.mapped_bytes <= target {
                break;
            }
            released.extend(self.remove(&path));
        }
        released
    }

    /// Takes out the entries nobody used since the previous sweep (see [`Cache::insert`] on
    /// dropping them).
    fn sweep(&mut self) -> Vec<Arc<Entry>> {
        let idle_before = self.swept_at;
        self.swept_at = self.tick;
        let idle: Vec<PathBuf> = self
            .entries
            .iter()
            .filter(|(_, (_, used))| *used <= idle_before)
            .map(|(p, _)| p.clone())
            .collect();
        let released: Vec<Arc<Entry>> = idle.iter().filter_map(|path| self.remove(path)).collect();
        if self.entries.is_empty() {
            // Give the table's memory back too, not just its entries.
            *self = Cache { tick: self.tick, swept_at: self.swept_at, ..Cache::default() };
        }
        released
    }
}

/// Where a snapshot's bytes come from.
#[derive(Debug)]
enum Body {
    /// Read whole into memory just now: consistent by construction.
    Memory(Vec<u8>),
    /// The version's mapping: check `torn()` and the fingerprint after copying.
    Mapped(Arc<Mapped>),
    /// Positional reads of the open file: check the fingerprint after reading.
    File,
}

/// One version of a text file, pinned for reading windows from it: its index, an open file
/// (which keeps the inode), and where its bytes come from.
#[derive(Debug)]
pub struct Snapshot {
    /// The version every window of this snapshot belongs to.
    pub version: Version,
    /// Hard links the file had when it was opened.
    pub links: u64,
    index: Arc<LineIndex>,
    fingerprint: Fingerprint,
    file: Arc<File>,
    body: Body,
}

/// A snapshot's file changed (or its mapping was torn) while a window was being cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed;

impl Snapshot {
    /// Pins `entry`'s version for reading windows from `body` through `file` (which has
    /// `links` hard links); fails when the version is not text.
    fn pin(entry: &Entry, file: Arc<File>, links: u64, body: Body) -> Result<Self, NotText> {
        let index = entry.text.as_ref().map_err(|why| *why)?.clone();
        Ok(Self { version: entry.version, links, index, fingerprint: entry.fingerprint, file, body })
    }

    /// Lines in the file.
    pub fn total_lines(&self) -> u64 {
        self.index.total_lines()
    }

    /// Cuts lines `offset..offset + limit` out of this version, or reports that the file
    /// changed under it (the window is then discarded, never returned).
    pub fn window(&self, offset: u64, limit: u64) -> Result<Window, WindowError> {
        let window = match &self.body {
            Body::Memory(bytes) => index::window(bytes.as_slice(), &self.index, offset, limit),
            Body::Mapped(mapped) => index::window(mapped.bytes(), &self.index, offset, limit),
            Body::File => index::window(&*self.file, &self.index, offset, limit),
        };
        let window = match window {
            Ok(window) => window,
            Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData) => {
                return Err(WindowError::Changed(Changed));
            }
            Err(e) => return Err(WindowError::Io(e)),
        };
        if let Body::Mapped(mapped) = &self.body
            && mapped.torn()
        {
            return Err(WindowError::Changed(Changed));
        }
        if !matches!(self.body, Body::Memory(_)) && !self.unchanged() {
            return Err(WindowError::Changed(Changed));
        }
        Ok(window)
    }

    /// Whether the open file still has the fingerprint this snapshot was taken at.
    fn unchanged(&self) -> bool {
        self.file.metadata().map(|m| Fingerprint::of(&m) == self.fingerprint).unwrap_or(false)
    }
}

/// Why a window could not be cut from a snapshot.
#[derive(Debug)]
pub enum WindowError {
    /// The file changed under the snapshot.
    Changed(Changed),
    /// Reading failed.
    Io(std::io::Error),
}

/// The provider: one per daemon, shared by every session.
#[derive(Debug)]
pub struct Provider {
    config: ProviderConfig,
    cache: Mutex<Cache>,
    locks: PathLocks,
    leftovers: Leftovers,
    /// Bytes mapped at once, whoever holds the mappings (see [`budget`]).
    map_budget: Arc<MapBudget>,
    /// Bytes hashed by loads since start (reads, stats, version checks), for `daemon/status`.
    hashed: AtomicU64,
}

impl Provider {
    /// A provider with an empty cache.
    pub fn new(config: ProviderConfig) -> Self {
        Self {
            map_budget: MapBudget::new(config.max_mapped_bytes),
            leftovers: Leftovers::new(config.staging_token.clone()),
            config,
            cache: Mutex::default(),
            locks: PathLocks::default(),
            hashed: AtomicU64::new(0),
        }
    }

    /// Files with cached state.
    pub fn cached_files(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).entries.len()
    }

    /// Bytes of files mapped by cached entries.
    pub fn mapped_bytes(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).mapped_bytes
    }

    /// Bytes of file content hashed to learn versions since the daemon started (reads, stats and
    /// version checks that missed the cache).
    pub fn hashed_bytes(&self) -> u64 {
        self.hashed.load(Ordering::Relaxed)
    }

    /// Resolves a path inside `scope` (see [`resolve::resolve`]).
    pub fn resolve(&self, raw: &str, scope: Scope<'_>) -> Result<Resolved, ProviderError> {
        resolve::resolve(raw, scope)
    }

    fn cached(&self, path: &Path, fingerprint: &Fingerprint) -> Option<Arc<Entry>> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = cache.get(path)?;
        let usable = entry.fingerprint == *fingerprint
            && version::trusted(fingerprint, entry.recorded_ns)
            && !entry.mapping.as_ref().is_some_and(|m| m.torn());
        usable.then_some(entry)
    }

    fn remember(&self, path: &Path, entry: Entry) -> Arc<Entry> {
        let (entry, released) = self.cache.lock().unwrap_or_else(PoisonError::into_inner).insert(
            path.to_owned(),
            entry,
            &self.config,
        );
        drop(released);
        entry
    }

    /// Cached files that keep their file open.
    pub fn open_files(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).open_files
    }

    /// Drops what nobody used since the previous call (closing files, unmapping, freeing
    /// indexes), so an idle daemon shrinks back; returns how many entries went. Called
    /// periodically: an entry goes after one to two periods without use.
    pub fn sweep_idle(&self) -> usize {
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).sweep();
        released.len()
    }

    /// Drops what is cached about `path` (it changed, or the watcher saw it change).
    pub fn forget(&self, path: &Path) {
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).remove(path);
        drop(released);
    }

    /// Drops everything cached (the watcher lost events).
    pub fn forget_all(&self) {
        let released = std::mem::take(&mut *self.cache.lock().unwrap_or_else(PoisonError::into_inner));
        drop(released);
    }

    /// The current version of the regular file at a canonical path, opened beneath the root
    /// of `roots` that contains it; `None` when nothing (or no regular file, or a symlink) is
    /// there now. For the watcher, which works on paths it already resolved.
    pub fn current_version_in(&self, path: &Path, roots: &[Root]) -> Result<Option<Version>, ProviderError> {
        let Some((dir, rel)) = resolve::locate(roots, path) else {
            return Ok(None);
        };
        let target = Resolved {
            path: path.to_owned(),
            display: path.display().to_string(),
            exists: true,
            folder: false,
            dir: dir.clone(),
            rel: rel.to_owned(),
            file: None,
        };
        match self.current_version(&target) {
            Ok(version) => Ok(version),
            Err(
                ProviderError::IsDirectory { .. }
                | ProviderError::NotRegularFile { .. }
                | ProviderError::NotFound { .. }
                | ProviderError::Busy { .. },
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens a regular file for reading beneath its root (never following a symlink, never
    /// blocking on a FIFO), with its metadata checked on the descriptor.
    fn open_file(&self, target: &Resolved) -> Result<(File, Metadata), ProviderError> {
        let file = target.dir.open_read(&target.rel).map_err(|e| io_error(&target.display, "open", e))?;
        let meta = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
        regular(target, &meta)?;
        Ok((file, meta))
    }

    /// Hashes and indexes an open file: mapped (large files on local filesystems), read whole
    /// (small files; the bytes are returned), or streamed. `None` when the file changed under
    /// the scan (a torn mapping). The entry keeps `file` open when it is a shared handle.
    ///
    /// For a read (`Need::Text`), a file whose first chunk already shows it is not text is
    /// answered `FS_NOT_TEXT` before anything is hashed: a sparse 8 GiB file would otherwise be
    /// hashed whole (seconds of a file-work slot) just to say it is binary. Whatever needs the
    /// version (`Need::Version`: stat, a write's version check) hashes everything.
    fn load(
        &self,
        target: &Resolved,
        file: &File,
        keep: Option<&Arc<File>>,
        meta: &Metadata,
        need: Need,
    ) -> Result<Option<(Entry, Body)>, ProviderError> {
        let recorded_ns = version::now_ns();
        let fingerprint = Fingerprint::of(meta);
        let io = |e| io_error(&target.display, "read", e);
        let len = meta.len();
        if len > self.config.max_hash_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size: len,
                limit: self.config.max_hash_bytes,
            });
        }
        let local = mmap::mappable(file);
        // Only an entry the warm path may use (trusted: hashed well after the file last
        // changed) is worth a file handle; a racy one is hashed again on its next access anyway.
        let file_kept = keep.filter(|_| version::trusted(&fingerprint, recorded_ns)).cloned();
        if len >= self.config.map_threshold
            && local
            && let Some(reservation) = self.reserve_mapping(len)
            && let Some(mut mapped) =
                Mapped::map(file, len).map_err(|e| io_error(&target.display, "map", e))?
        {
            mapped.hold(reservation);
            mapped.advise_sequential();
            let head = &mapped.bytes()[..mapped.bytes().len().min(SCAN_CHUNK_BYTES)];
            let go_on = refuse_early(target, need, head, len, file, &fingerprint);
            // A torn mapping reads as NUL bytes: only an untorn one may call the file binary.
            if mapped.torn() || !go_on? {
                return Ok(None);
            }
            let scanned = index::scan_parallel_until(mapped.bytes(), &|| mapped.torn());
            self.hashed.fetch_add(len, Ordering::Relaxed);
            let Some((version, text)) = scanned.filter(|_| !mapped.torn()) else {
                return Ok(None);
            };
            let mapped = Arc::new(mapped);
            let entry = Entry {
                fingerprint,
                version,
                recorded_ns,
                text: text.map(Arc::new),
                mapping: Some(mapped.clone()),
                file: file_kept,
                local,
            };
            return Ok(Some((entry, Body::Mapped(mapped))));
        }
        if len <= SMALL_FILE_BYTES {
            let bytes = read_all_at(file, len).map_err(io)?;
            let head = &bytes[..bytes.len().min(SCAN_CHUNK_BYTES)];
            if !refuse_early(target, need, head, bytes.len() as u64, file, &fingerprint)? {
                return Ok(None);
            }
            let (version, text) = index::scan_parallel(&bytes);
            self.hashed.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            let text = text.map(Arc::new);
            let entry =
                Entry { fingerprint, version, recorded_ns, text, mapping: None, file: file_kept, local };
            return Ok(Some((entry, Body::Memory(bytes))));
        }
        let mut scanner = Scanner::new();
        let mut buf = vec![0u8; SCAN_CHUNK_BYTES];
        let mut at = 0u64;
        loop {
            // Positional reads: the scan never depends on (or moves) the file's cursor.
            let n = match file.read_at(&mut buf, at) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            if n == 0 {
                break;
            }
            if at == 0 && !refuse_early(target, need, &buf[..n], len.max(n as u64), file, &fingerprint)? {
                return Ok(None);
            }
            scanner.feed(&buf[..n]);
            self.hashed.fetch_add(n as u64, Ordering::Relaxed);
            at += n as u64;
        }
        let (version, text) = scanner.finish();
        Ok(Some((
            Entry {
                fingerprint,
                version,
                recorded_ns,
                text: text.map(Arc::new),
                mapping: None,
                file: file_kept,
                local,
            },
            Body::File,
        )))
    }

    /// Reserves `len` bytes of the mapped-bytes budget for a new mapping, first unmapping the
    /// least recently used cached mappings when that makes room. `None` when the file does not
    /// fit (bigger than the whole budget, or the rest is held by reads in flight): it is then
    /// read with positional reads, never mapped beyond the cap.
    fn reserve_mapping(&self, len: u64) -> Option<Reservation> {
        let len = usize::try_from(len).ok().filter(|len| *len <= self.map_budget.cap())?;
        if let Some(reservation) = self.map_budget.reserve(len) {
            return Some(reservation);
        }
        let target = self.map_budget.cap() - len;
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).shed_mapped(target);
        // Unmapped here, after the cache's lock is released.
        drop(released);
        self.map_budget.reserve(len)
    }

    /// The cached entry for an open file, or a freshly loaded one (then cached). `None` when
    /// the file changed while it was being loaded.
    fn entry(
        &self,
        target: &Resolved,
        file: &File,
        keep: Option<&Arc<File>>,
        meta: &Metadata,
        need: Need,
    ) -> Result<Option<(Arc<Entry>, Body)>, ProviderError> {
        let fingerprint = Fingerprint::of(meta);
        if let Some(entry) = self.cached(&target.path, &fingerprint) {
            let body = entry.body();
            return Ok(Some((entry, body)));
        }
        let Some((entry, body)) = self.load(target, file, keep, meta, need)? else {
            self.forget(&target.path);
            return Ok(None);
        };
        // The bytes must belong to the inode state we fingerprinted.
        if !unchanged(file, &fingerprint) {
            self.forget(&target.path);
            return Ok(None);
        }
        Ok(Some((self.remember(&target.path, entry), body)))
    }

    /// Pins the current version of the text file at `target` for reading windows.
    pub fn snapshot(&self, target: &Resolved) -> Result<Snapshot, ProviderError> {
        for _ in 0..READ_ATTEMPTS {
            let (file, meta) = match self.open_file(target) {
                Ok(opened) => opened,
                Err(err) => {
                    // Gone (or no longer a file): let go of what we held for it, a mapping
                    // included, so a deleted file's space is freed.
                    self.forget(&target.path);
                    return Err(err);
                }
            };
            let file = Arc::new(file);
            let Some((entry, body)) = self.entry(target, &file, Some(&file), &meta, Need::Text)? else {
                continue;
            };
            return Snapshot::pin(&entry, file, meta.nlink(), body)
                .map_err(|why| ProviderError::NotText { path: target.display.clone(), why });
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being read".into(),
        })
    }

    /// Reads lines `offset..offset + limit` (1-based; `None` means 1) of a text file.
    pub fn read(
        &self,
        target: &Resolved,
        offset: Option<u64>,
        limit: u64,
    ) -> Result<ReadOutcome, ProviderError> {
        if let Some(answer) = self.read_cached(target, offset, limit) {
            return answer;
        }
        for _ in 0..READ_ATTEMPTS {
            let snapshot = self.snapshot(target)?;
            if let Some(outcome) = self.cut(target, &snapshot, offset, limit)? {
                return Ok(outcome);
            }
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being read".into(),
        })
    }

    /// The warm path of [`Provider::read`]: answers only when the file's entry is cached and
    /// trusted for the file's current fingerprint, on a local filesystem, and holds the file
    /// open — then a read is positional reads and an `fstat` (plus a `stat` of the path when
    /// resolution did not just look at it), with no open, load or hash, cheap enough to run on
    /// an async worker. `None` means "take the slow
    /// path" (a miss, a change, or any error: [`Provider::read`] reports those properly).
    pub fn read_cached(
        &self,
        target: &Resolved,
        offset: Option<u64>,
        limit: u64,
    ) -> Option<Result<ReadOutcome, ProviderError>> {
        // Resolution has just looked at the file (on the handle it opened beneath the root).
        let found = target.file?;
        let entry = self.cached(&target.path, &found.fingerprint)?;
        let file = entry.file.clone().filter(|_| entry.local)?;
        let snapshot = Snapshot::pin(&entry, file, found.links, entry.body()).ok()?;
        match self.cut(target, &snapshot, offset, limit) {
            Ok(Some(outcome)) => Some(Ok(outcome)),
            Err(e @ ProviderError::OffsetPastEnd { .. }) => Some(Err(e)),
            Ok(None) | Err(_) => None,
        }
    }

    /// Cuts a window out of a snapshot; `None` when the file changed under it (its cached
    /// state is then dropped).
    fn cut(
        &self,
        target: &Resolved,
        snapshot: &Snapshot,
        offset: Option<u64>,
        limit: u64,
    ) -> Result<Option<ReadOutcome>, ProviderError> {
        let total = snapshot.total_lines();
        let offset = offset.unwrap_or(1);
        if offset == 0 || offset > total.max(1) {
            return Err(ProviderError::OffsetPastEnd {
                path: target.display.clone(),
                offset,
                total_lines: total,
            });
        }
        match snapshot.window(offset, limit) {
            Ok(window) => Ok(Some(ReadOutcome { version: snapshot.version, window, links: snapshot.links })),
            Err(WindowError::Changed(Changed)) => {
                self.forget(&target.path);
                Ok(None)
            }
            Err(WindowError::Io(e)) => Err(io_error(&target.display, "read", e)),
        }
    }

    /// The version of the regular file at `target`, from the cache when it can be trusted.
    fn version_of(&self, target: &Resolved, file: &File, meta: &Metadata) -> Result<Version, ProviderError> {
        let mut meta = meta.clone();
        for _ in 0..READ_ATTEMPTS {
            if let Some((entry, _)) = self.entry(target, file, None, &meta, Need::Version)? {
                return Ok(entry.version);
            }
            // It changed under the scan: look again at what it is now.
            meta = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
        }
        Err(ProviderError::Busy {
            path: target.display.clone(),
            why: "it kept changing while being hashed".into(),
        })
    }

    /// What is at `target`: kind, size, mode, mtime and (for regular files) version.
    pub fn stat(&self, target: &Resolved) -> Result<Stat, ProviderError> {
        let meta = match target.dir.open_path(&target.rel).and_then(|f| f.metadata()) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.forget(&target.path);
                return Ok(Stat {
                    kind: Kind::Missing,
                    size: None,
                    version: None,
                    mtime_ms: None,
                    mode: None,
                });
            }
            Err(e) => return Err(io_error(&target.display, "stat", e)),
        };
        let mtime_ms = Some(meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000);
        let mode = Some(meta.mode() & 0o7777);
        if meta.is_dir() {
            return Ok(Stat { kind: Kind::Directory, size: Some(meta.len()), version: None, mtime_ms, mode });
        }
        if !meta.is_file() {
            return Ok(Stat { kind: Kind::Other, size: None, version: None, mtime_ms, mode });
        }
        let (file, meta) = self.open_file(target)?;
        let version = match self.version_of(target, &file, &meta) {
            Ok(version) => Some(version),
            // Over the hash cap: everything but the version (a read would be FS_TOO_LARGE).
            Err(ProviderError::TooLarge { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(Stat { kind: Kind::File, size: Some(meta.len()), version, mtime_ms, mode })
    }

    /// The current version of the file at `target`; `None` when nothing is there.
    pub fn current_version(&self, target: &Resolved) -> Result<Option<Version>, ProviderError> {
        match self.open_file(target) {
            Ok((file, meta)) => self.version_of(target, &file, &meta).map(Some),
            Err(ProviderError::NotFound { why: None, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn lock_path(&self, target: &Resolved) -> Result<lock::PathGuard<'_>, ProviderError> {
        self.locks.lock(&target.path, self.config.lock_patience).ok_or_else(|| ProviderError::Busy {
            path: target.display.clone(),
            why: format!("another request of this daemon has held it for {:?}", self.config.lock_patience),
        })
    }

    fn lock_file(&self, target: &Resolved) -> Result<lock::LockedFile, ProviderError> {
        match lock::lock_file(&target.dir, &target.rel, self.config.lock_patience) {
            Ok(locked) => {
                regular(target, &locked.meta)?;
                Ok(locked)
            }
            Err(LockError::Busy(waited)) => Err(ProviderError::Busy {
                path: target.display.clone(),
                why: format!("another process has held its lock (flock) for {waited:?}"),
            }),
            Err(LockError::Io(e)) => Err(io_error(&target.display, "lock", e)),
        }
    }

    /// Writes `content` as the whole file, if `expect` holds, atomically.
    pub fn write(
        &self,
        target: &Resolved,
        content: &str,
        expect: Expectation,
    ) -> Result<WriteOutcome, ProviderError> {
        let size = content.len() as u64;
        if size > self.config.max_edit_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size,
                limit: self.config.max_edit_bytes,
            });
        }
        let _guard = self.lock_path(target)?;
        let existing = match target.dir.open_path(&target.rel).and_then(|f| f.metadata()) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&target.display, "stat", e)),
        };
        let created = match existing {
            Some(meta) if meta.is_dir() => {
                return Err(ProviderError::IsDirectory { path: target.display.clone() });
            }
            Some(meta) if !meta.is_file() => {
                return Err(ProviderError::NotRegularFile { path: target.display.clone() });
            }
            Some(_) if expect == Expectation::Absent => {
                return Err(ProviderError::AlreadyExists { path: target.display.clone() });
            }
            Some(_) => {
                let locked = self.lock_file(target)?;
                if let Expectation::Version(expected) = expect {
                    let current = self.version_of(target, &locked.file, &locked.meta)?;
                    if current != expected {
                        return Err(ProviderError::StaleVersion {
                            path: target.display.clone(),
                            current: Some(current),
                        });
                    }
                }
                (false, self.replace(target, &locked, content.as_bytes())?.1)
            }
            None => {
                if let Expectation::Version(_) = expect {
                    return Err(ProviderError::StaleVersion { path: target.display.clone(), current: None });
                }
                match self.create(target, content.as_bytes()) {
                    Ok(links) => (true, links),
                    Err(ProviderError::AlreadyExists { .. }) if expect == Expectation::Any => {
                        // It appeared between our stat and our create: replace it instead.
                        let locked = self.lock_file(target)?;
                        (false, self.replace(target, &locked, content.as_bytes())?.1)
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let (created, links) = created;
        let version = self.remember_written(target, content.as_bytes());
        Ok(WriteOutcome { created, version, links })
    }

    /// Replaces `old` by `new` in the text file at `target`, if it is at `expected`.
    ///
    /// One critical section: path lock, flock, inode re-check, version check (before any
    /// matching, so a stale edit is reported as stale even when `old` no longer matches),
    /// literal match, atomic replace.
    pub fn edit(
        &self,
        target: &Resolved,
        old: &str,
        new: &str,
        replace_all: bool,
        expected: Version,
    ) -> Result<EditOutcome, ProviderError> {
        if old.is_empty() {
            return Err(ProviderError::InvalidEdit("old_string must not be empty".into()));
        }
        if old == new {
            return Err(ProviderError::InvalidEdit(
                "old_string and new_string are identical; nothing to change".into(),
            ));
        }
        let _guard = self.lock_path(target)?;
        let locked = match self.lock_file(target) {
            Ok(locked) => locked,
            Err(ProviderError::NotFound { why: None, .. }) => {
                return Err(ProviderError::StaleVersion { path: target.display.clone(), current: None });
            }
            Err(e) => return Err(e),
        };
        let size = locked.meta.len();
        if size > self.config.max_edit_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size,
                limit: self.config.max_edit_bytes,
            });
        }
        let bytes = read_all_at(&locked.file, size).map_err(|e| io_error(&target.display, "read", e))?;
        // The version first (a stale edit is reported as stale whatever else is wrong), then
        // whether the bytes are text; an edit needs no line index.
        let current = Version::of(&bytes);
        if current != expected {
            return Err(ProviderError::StaleVersion { path: target.display.clone(), current: Some(current) });
        }
        let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()) {
            Some(rest) => (true, rest),
            None => (false, bytes.as_slice()),
        };
        // Text: valid UTF-8 without NUL. One check on the common path; when it fails, the scan's
        // own check names the first offending byte exactly as a read would.
        let body = match std::str::from_utf8(body) {
            Ok(body) if memchr::memchr(0, body.as_bytes()).is_none() => body,
            _ => {
                let why = index::check_text(&bytes).err().unwrap_or(NotText::InvalidUtf8(0));
                return Err(ProviderError::NotText { path: target.display.clone(), why });
            }
        };
        let (replaced, replacements) =
            edit::apply(body, old, new, replace_all).map_err(|miss| match miss {
                edit::Miss::NoMatch { hint } => ProviderError::NoMatch { path: target.display.clone(), hint },
                edit::Miss::Ambiguous(matches) => {
                    ProviderError::AmbiguousMatch { path: target.display.clone(), matches }
                }
            })?;
        let out = if bom {
            let mut out = Vec::with_capacity(replaced.len() + 3);
            out.extend_from_slice(b"\xEF\xBB\xBF");
            out.extend_from_slice(replaced.as_bytes());
            out
        } else {
            replaced.into_bytes()
        };
        crash_point!("provider::edit::matched");
        let (_, links) = self.replace(target, &locked, &out)?;
        let version = self.remember_written(target, &out);
        Ok(EditOutcome { replacements, version, links })
    }

    /// The version of bytes we just wrote. What was cached for the file is dropped: an entry
    /// for a file just written would be racy (within the 2 s window), never trusted, so the next
    /// access hashes and indexes it anyway.
    fn remember_written(&self, target: &Resolved, bytes: &[u8]) -> Version {
        self.forget(&target.path);
        Version::of(bytes)
    }

    /// The folder `target` lives in, opened beneath its root, with the target's own name.
    fn parent_of<'t>(&self, target: &'t Resolved) -> Result<(OwnedFd, &'t OsStr), ProviderError> {
        let name = file_name(target)?;
        let parent = target.rel.parent().unwrap_or(Path::new(""));
        let dir =
            target.dir.open_dir(parent).map_err(|e| io_error(&target.display, "open the folder of", e))?;
        Ok((dir, name))
    }

    fn sync_dir(&self, dir: &OwnedFd, target: &Resolved) -> Result<(), ProviderError> {
        if self.config.fsync {
            rustix::fs::fsync(dir).map_err(|e| io_error(&target.display, "sync the folder of", e.into()))?;
        }
        Ok(())
    }

    /// Writes `bytes` to a new temporary file in `dir` (created exclusively, mode 0600, under
    /// a name nobody can guess) and syncs it; gives it `mode` (and the owner of `like`) on the
    /// descriptor once its content is complete. The caller moves it in place.
    fn stage(
        &self,
        dir: &OwnedFd,
        dir_path: &Path,
        target: &Resolved,
        bytes: &[u8],
        mode: u32,
        like: Option<&Metadata>,
    ) -> Result<(String, File), ProviderError> {
        self.leftovers.clean_once(dir, dir_path);
        let name = target.rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (temp, mut file) = self
            .leftovers
            .create(dir, &name)
            .map_err(|e| io_error(&target.display, "create a temporary file for", e))?;
        crash_point!("provider::stage::created");
        let staged = (|| -> std::io::Result<()> {
            // Tests: a full disk while the temporary file is written (FILECTX_FAILPOINTS).
            #[cfg(feature = "failpoints")]
            fail::fail_point!("provider::stage::write", |_| Err(std::io::Error::from_raw_os_error(
                libc::ENOSPC
            )));
            // Two writes only when a test armed the crash points (one to die between).
            #[cfg(feature = "failpoints")]
            let bytes = if leftovers::armed() {
                let (head, tail) = bytes.split_at(bytes.len() / 2);
                file.write_all(head)?;
                crash_point!("provider::stage::half_written");
                tail
            } else {
                bytes
            };
            file.write_all(bytes)?;
            if self.config.fsync {
                file.sync_data()?;
            }
            if let Some(meta) = like
                && (meta.uid(), meta.gid()) != *OWNER
            {
                // Only root (or the owner, for the group) may do this; keep going if refused.
                let _ = rustix::fs::fchown(
                    &file,
                    Some(rustix::fs::Uid::from_raw(meta.uid())),
                    Some(rustix::fs::Gid::from_raw(meta.gid())),
                );
            }
            // The final mode only now that the content is complete (after fchown, which may
            // clear set-id bits).
            rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(mode & 0o7777))?;
            crash_point!("provider::stage::written");
            Ok(())
        })();
        if let Err(e) = staged {
            let _ = rustix::fs::unlinkat(dir, temp.as_str(), rustix::fs::AtFlags::empty());
            return Err(io_error(&target.display, "write", e));
        }
        Ok((temp, file))
    }

    /// Replaces an existing (locked) file's content: atomically by rename, or in place (under
    /// the locks) when the file has several hard links, so that it stays one file shared by all
    /// of them. Returns (false, the file's hard links).
    fn replace(
        &self,
        target: &Resolved,
        locked: &lock::LockedFile,
        bytes: &[u8],
    ) -> Result<(bool, u64), ProviderError> {
        let meta = &locked.meta;
        if meta.nlink() > 1 {
            if self.config.refuse_multi_link_writes {
                return Err(ProviderError::Refused {
                    path: target.display.clone(),
                    why: format!(
                        "it has {} hard links, and this daemon refuses writes to files with several \
                         (refuse_multi_link_writes)",
                        meta.nlink()
                    ),
                });
            }
            // Opened beneath the root, never through a symlink, and it must be the very inode
            // that was locked and checked.
            let file = target
                .dir
                .open(
                    &target.rel,
                    rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY,
                    rustix::fs::Mode::empty(),
                )
                .map(File::from)
                .map_err(|e| io_error(&target.display, "open", e))?;
            let now = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
            if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
                return Err(ProviderError::Busy {
                    path: target.display.clone(),
                    why: "it was replaced while being written".into(),
                });
            }
            let written = (|| -> std::io::Result<()> {
                file.write_all_at(bytes, 0)?;
                file.set_len(bytes.len() as u64)?;
                if self.config.fsync {
                    file.sync_data()?;
                }
                Ok(())
            })();
            written.map_err(|e| io_error(&target.display, "write", e))?;
            return Ok((false, now.nlink()));
        }
        let (dir, name) = self.parent_of(target)?;
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        let (temp, file) = self.stage(&dir, dir_path, target, bytes, meta.mode(), Some(meta))?;
        if let Err(e) = rustix::fs::renameat(&dir, temp.as_str(), &dir, name) {
            let _ = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
            return Err(io_error(&target.display, "replace", e.into()));
        }
        crash_point!("provider::replace::renamed");
        self.sync_dir(&dir, target)?;
        Ok((false, file.metadata().map(|m| m.nlink()).unwrap_or(1)))
    }

    /// Opens (creating what is missing) the folder `target` is to be created in, one
    /// component at a time beneath the root: a folder swapped for a symlink meanwhile fails.
    fn make_parent<'t>(&self, target: &'t Resolved) -> Result<(OwnedFd, &'t OsStr), ProviderError> {
        let io = |op, e: std::io::Error| io_error(&target.display, op, e);
        let name = file_name(target)?;
        let parent = target.rel.parent().unwrap_or(Path::new(""));
        // The deepest folder of `parent` that exists; the rest is created below it.
        let mut existing = parent;
        let dir = loop {
            match target.dir.open_dir(existing) {
                Ok(dir) => break dir,
                Err(e) if e.kind() == ErrorKind::NotFound && !existing.as_os_str().is_empty() => {
                    existing = existing.parent().unwrap_or(Path::new(""));
                }
                Err(e) => return Err(io("open the folder of", e)),
            }
        };
        let mut dir = dir;
        let rest = parent.strip_prefix(existing).unwrap_or(Path::new(""));
        for component in rest.components() {
            let part = component.as_os_str();
            match rustix::fs::mkdirat(&dir, part, rustix::fs::Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io("create the folder of", e.into())),
            }
            dir = beneath::open_beneath(
                &dir,
                Path::new(part),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .map_err(|e| io("create the folder of", e))?;
        }
        Ok((dir, name))
    }

    /// Creates a new file with `bytes`, never clobbering one that appeared meanwhile; returns
    /// the new file's hard links (1).
    fn create(&self, target: &Resolved, bytes: &[u8]) -> Result<u64, ProviderError> {
        let (dir, name) = self.make_parent(target)?;
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        let mode = 0o666 & !*leftovers::UMASK;
        let (temp, _file) = self.stage(&dir, dir_path, target, bytes, mode, None)?;
        let moved =
            rustix::fs::renameat_with(&dir, temp.as_str(), &dir, name, rustix::fs::RenameFlags::NOREPLACE);
        let result = match moved {
            Ok(()) => {
                crash_point!("provider::create::renamed");
                self.sync_dir(&dir, target)?;
                return Ok(1);
            }
            Err(rustix::io::Errno::EXIST) => {
                Err(ProviderError::AlreadyExists { path: target.display.clone() })
            }
            // Filesystems without RENAME_NOREPLACE: link(2) also refuses to clobber.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::NOTSUP) => {
                match rustix::fs::linkat(&dir, temp.as_str(), &dir, name, rustix::fs::AtFlags::empty()) {
                    Ok(()) => Ok(1),
                    Err(rustix::io::Errno::EXIST) => {
                        Err(ProviderError::AlreadyExists { path: target.display.clone() })
                    }
                    Err(e) => Err(io_error(&target.display, "create", e.into())),
                }
            }
            Err(errno) => Err(io_error(&target.display, "create", errno.into())),
        };
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
        result?;
        self.sync_dir(&dir, target)?;
        Ok(1)
    }
}

/// The name `target` has in its folder (a root itself has none: it is a folder).
fn file_name(target: &Resolved) -> Result<&OsStr, ProviderError> {
    target
        .rel
        .file_name()
        .filter(|name| beneath::is_plain_name(name))
        .ok_or_else(|| ProviderError::IsDirectory { path: target.display.clone() })
}

/// What a load is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Text to read: a file whose first chunk is not text is refused before it is hashed.
    Text,
    /// The version, whatever the content.
    Version,
}

/// For a read, `FS_NOT_TEXT` when `head` (the first chunk of a file of `len` bytes) already
/// shows the file is not text (a NUL byte, or invalid UTF-8 other than a character cut by the
/// chunk's end); `Ok(false)` when the file changed since `fingerprint` (load it again). A file
/// of one chunk is left to its scan, which checks it anyway.
fn refuse_early(
    target: &Resolved,
    need: Need,
    head: &[u8],
    len: u64,
    file: &File,
    fingerprint: &Fingerprint,
) -> Result<bool, ProviderError> {
    if need == Need::Version || len <= SCAN_CHUNK_BYTES as u64 {
        return Ok(true);
    }
    match index::check_head(head, head.len() as u64 >= len) {
        Ok(()) => Ok(true),
        // Only bytes of the state that was fingerprinted may call the file binary: a file being
        // rewritten in place holds NUL bytes for a moment.
        Err(_) if !unchanged(file, fingerprint) => Ok(false),
        Err(why) => Err(ProviderError::NotText { path: target.display.clone(), why }),
    }
}

/// Whether the open file still has `fingerprint`.
fn unchanged(file: &File, fingerprint: &Fingerprint) -> bool {
    file.metadata().map(|m| Fingerprint::of(&m) == *fingerprint).unwrap_or(false)
}

/// Refuses anything but a regular file, judged on the descriptor's own metadata.
fn regular(target: &Resolved, meta: &Metadata) -> Result<(), ProviderError> {
    if meta.is_dir() {
        return Err(ProviderError::IsDirectory { path: target.display.clone() });
    }
    if !meta.is_file() {
        return Err(ProviderError::NotRegularFile { path: target.display.clone() });
    }
    Ok(())
}
