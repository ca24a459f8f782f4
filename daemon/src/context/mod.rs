//! The file-context layer: what each session has observed, and the policy built on it. A read
//! of any window records (session, file) → version; writing an existing file or editing needs
//! that record to equal the file's current version; the session's own writes refresh it. It
//! knows nothing about JSON; it is the only place that turns an observation into a provider
//! write expectation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use filectx_protocol::FsErrorCode;

pub mod deny;

use self::deny::{Access, Denial, DenyRules};
use crate::provider::{Expectation, Provider, ProviderError, Resolved, Stat};

/// What a path names.
pub use crate::provider::Kind;
/// A file version.
pub use crate::provider::Version;
/// A window of lines, as the layers above see it.
pub use crate::provider::index::Window as Lines;

/// Default cap on the files one session remembers having observed.
pub const DEFAULT_MAX_OBSERVED: usize = 10_000;

/// One session's observed versions, bounded: past the cap the least recently touched records
/// (a sixteenth of them at once) are forgotten, which only means those files must be read
/// again before they are written.
pub struct Observations {
    max: usize,
    inner: Mutex<ObservedMap>,
    /// Paths this session is writing right now (count per path): between the file changing on
    /// disk and the new version being recorded, a staleness check must not take the session's
    /// own write for somebody else's.
    writing: Mutex<HashMap<PathBuf, usize>>,
    /// Told about every record and every forgotten path (the watcher), if anyone listens.
    sink: Option<Arc<dyn ObservationSink>>,
}

impl std::fmt::Debug for Observations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observations").field("max", &self.max).field("len", &self.len()).finish()
    }
}

/// Someone who wants to know which files a session holds observations of (the watcher, so it
/// can watch them and tell the session when they go stale). Called outside any lock of ours.
pub trait ObservationSink: Send + Sync {
    /// The session recorded (or refreshed) its observation of `path`, a file with `links` hard
    /// links (as seen by the read or write that made the record).
    fn observed(&self, path: &Path, links: u64);
    /// The session no longer holds an observation of `path` (evicted, or the session ended).
    fn forgotten(&self, path: &Path);
}

#[derive(Debug, Default)]
struct ObservedMap {
    versions: HashMap<PathBuf, (Version, u64)>,
    tick: u64,
}

impl Observations {
    /// An empty record that holds at most `max` files.
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), inner: Mutex::default(), writing: Mutex::default(), sink: None }
    }

    /// An empty record whose changes are reported to `sink`.
    pub fn with_sink(max: usize, sink: Arc<dyn ObservationSink>) -> Self {
        Self { max: max.max(1), inner: Mutex::default(), writing: Mutex::default(), sink: Some(sink) }
    }

    /// Marks `path` as being written by this session until the guard is dropped (after the new
    /// version is recorded).
    pub fn writing(&self, path: &Path) -> WritingGuard<'_> {
        *self.writing.lock().unwrap_or_else(PoisonError::into_inner).entry(path.to_owned()).or_insert(0) += 1;
        WritingGuard { observations: self, path: path.to_owned() }
    }

    /// Whether this session is writing `path` right now.
    pub fn is_writing(&self, path: &Path) -> bool {
        self.writing.lock().unwrap_or_else(PoisonError::into_inner).contains_key(path)
    }

    /// The recorded version of `path`, without counting as a use (for the watcher).
    pub fn peek(&self, path: &Path) -> Option<Version> {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.versions.get(path).map(|(version, _)| *version)
    }

    /// The recorded version of `path`.
    pub fn get(&self, path: &Path) -> Option<Version> {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.tick += 1;
        let tick = map.tick;
        map.versions.get_mut(path).map(|(version, used)| {
            *used = tick;
            *version
        })
    }

    /// Records that the session has seen (or written) `version` of `path`.
    pub fn record(&self, path: &Path, version: Version, links: u64) {
        let evicted = {
            let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            map.tick += 1;
            let tick = map.tick;
            map.versions.insert(path.to_owned(), (version, tick));
            let mut evicted = Vec::new();
            if map.versions.len() > self.max {
                let count = crate::lru::batch(map.versions.len()).min(map.versions.len() - 1);
                evicted = crate::lru::least_recent(&map.versions, count, |(_, used)| *used);
                for path in &evicted {
                    map.versions.remove(path);
                }
            }
            evicted
        };
        if let Some(sink) = &self.sink {
            sink.observed(path, links);
            for path in &evicted {
                sink.forgotten(path);
            }
        }
    }

    /// Files currently recorded.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).versions.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Marks a path as being written by its session; see [`Observations::writing`].
#[derive(Debug)]
pub struct WritingGuard<'a> {
    observations: &'a Observations,
    path: PathBuf,
}

impl Drop for WritingGuard<'_> {
    fn drop(&mut self) {
        let mut writing = self.observations.writing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = writing.get_mut(&self.path) {
            *count -= 1;
            if *count == 0 {
                writing.remove(&self.path);
            }
        }
    }
}

impl Drop for Observations {
    fn drop(&mut self) {
        if let Some(sink) = &self.sink {
            let map = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
            for path in map.versions.keys() {
                sink.forgotten(path);
            }
        }
    }
}

/// A file-context failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// The provider refused or failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The session has no (remaining) record of reading this existing file.
    #[error("{path} has not been read in this session")]
    NotObserved {
        /// The path as shown.
        path: String,
    },
    /// The file changed (or was deleted) since this session read or wrote it.
    #[error("{path} has changed since this session last read it")]
    Stale {
        /// The path as shown.
        path: String,
        /// Its current version; `None` when it was deleted.
        current: Option<Version>,
    },
    /// The session is read-only.
    #[error("this session is read-only; {path} was not changed")]
    ReadOnly {
        /// The path as shown.
        path: String,
    },
    /// A deny rule (the daemon's or the session's) protects the path.
    #[error("{path} is protected: {} matching `{}` are denied by the {}'s rules", if denial.access == Access::Read { "reads" } else { "writes" }, denial.rule, if denial.origin == deny::Origin::Daemon { "daemon" } else { "session" })]
    Denied {
        /// The path as shown.
        path: String,
        /// The rule.
        denial: Denial,
    },
    /// Warm-only mode: the read needs the slow path (never sent; the call is run again).
    #[error("{path} is not warm in the cache")]
    Cold {
        /// The path as shown.
        path: String,
    },
}

impl ContextError {
    /// The wire identifier of this failure.
    pub fn code(&self) -> FsErrorCode {
        match self {
            Self::Provider(e) => e.code(),
            Self::NotObserved { .. } => FsErrorCode::NotObserved,
            Self::Stale { .. } => FsErrorCode::StaleVersion,
            Self::ReadOnly { .. } | Self::Denied { .. } => FsErrorCode::PermissionDenied,
            Self::Cold { .. } => FsErrorCode::Busy,
        }
    }

    /// The path the failure concerns.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::Provider(e) => e.path(),
            Self::NotObserved { path }
            | Self::Stale { path, .. }
            | Self::ReadOnly { path }
            | Self::Denied { path, .. }
            | Self::Cold { path } => Some(path),
        }
    }

    /// Machine-readable details for `error.data`.
    pub fn details(&self) -> serde_json::Map<String, serde_json::Value> {
        match self {
            Self::Provider(e) => e.details(),
            Self::Stale { current, .. } => {
                let mut map = serde_json::Map::new();
                map.insert("currentVersion".into(), current.map(|v| v.to_string()).into());
                map
            }
            Self::Denied { denial, .. } => {
                let mut map = serde_json::Map::new();
                map.insert("rule".into(), denial.rule.clone().into());
                map.insert("access".into(), denial.access.as_str().into());
                map
            }
            _ => serde_json::Map::new(),
        }
    }
}

/// The provider's scope, snapshots and window errors, as the layers above the context see them.
pub use crate::provider::{Changed, Root, RootDir, Scope, Snapshot, WindowError};

/// The daemon's file service as the layers above see it: the one provider, handed out only as
/// a session's [`FileContext`].
#[derive(Debug, Clone)]
pub struct Files {
    provider: Arc<Provider>,
}

impl Files {
    /// The service over `provider`.
    pub fn new(provider: Arc<Provider>) -> Self {
        Self { provider }
    }

    /// A session's view: its scope, observations, read-only flag and deny rules.
    pub fn context<'a>(
        &'a self,
        scope: Scope<'a>,
        observed: &'a Observations,
        read_only: bool,
        deny: &'a DenyRules,
    ) -> FileContext<'a> {
        FileContext::new(&self.provider, scope, observed, read_only).with_deny(deny)
    }

    /// Files with cached state.
    pub fn cached_files(&self) -> usize {
        self.provider.cached_files()
    }

    /// Bytes mapped by cached entries.
    pub fn mapped_bytes(&self) -> usize {
        self.provider.mapped_bytes()
    }

    /// Cached files held open.
    pub fn open_files(&self) -> usize {
        self.provider.open_files()
    }

    /// Bytes hashed by reads and stats since the start.
    pub fn hashed_bytes(&self) -> u64 {
        self.provider.hashed_bytes()
    }
}

/// A read window and the version it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadView {
    /// The path as shown.
    pub display: String,
    /// The version read (now recorded for the session).
    pub version: Version,
    /// The lines.
    pub window: Lines,
}

/// A successful write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteView {
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
    /// The path as shown.
    pub display: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Whether every occurrence was to be replaced.
    pub replace_all: bool,
    /// The new version (now recorded for the session).
    pub version: Version,
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

/// One session's view of the files: the provider, seen through the session's roots, options
/// and observations. This is the only handle the tools layer gets.
#[derive(Debug, Clone, Copy)]
pub struct FileContext<'a> {
    /// The daemon's provider.
    provider: &'a Provider,
    /// The session's roots and cwd.
    scope: Scope<'a>,
    /// What the session has observed.
    observed: &'a Observations,
    /// Whether every write is refused.
    read_only: bool,
    /// Paths the session may not read or write.
    deny: &'a DenyRules,
    /// Warm-only mode (see [`FileContext::warm_only`]): set when a read needed the slow path.
    cold: Option<&'a std::cell::Cell<bool>>,
}

impl<'a> FileContext<'a> {
    /// A session's file context.
    pub fn new(
        provider: &'a Provider,
        scope: Scope<'a>,
        observed: &'a Observations,
        read_only: bool,
    ) -> Self {
        static NONE: std::sync::LazyLock<DenyRules> = std::sync::LazyLock::new(DenyRules::default);
        Self { provider, scope, observed, read_only, deny: &NONE, cold: None }
    }

    /// The same context refusing what `deny` names.
    pub fn with_deny(self, deny: &'a DenyRules) -> Self {
        Self { deny, ..self }
    }

    /// The non-recording handle of this context, for the `fs/*` escape hatch: it records
    /// nothing, but obeys the same read-only flag and deny rules.
    pub fn unrecorded(self) -> Unrecorded<'a> {
        Unrecorded { files: self }
    }

    /// The same context in warm-only mode, for running on an async worker: a read answers only
    /// from the provider's warm path ([`Provider::read_cached`]); when it would need to open,
    /// load or hash, it fails with [`ContextError::Cold`] and sets `cold`, and the caller runs
    /// the call again normally on a blocking thread. Nothing is recorded for a cold read.
    pub fn warm_only(self, cold: &'a std::cell::Cell<bool>) -> Self {
        Self { cold: Some(cold), ..self }
    }

    fn resolve(&self, path: &str) -> Result<Resolved, ContextError> {
        Ok(self.provider.resolve(path, self.scope)?)
    }

    /// Resolves `path` and applies the deny rules for `access` (and read-only for writes).
    fn target(&self, path: &str, access: Access) -> Result<Resolved, ContextError> {
        let target = self.resolve(path)?;
        if access == Access::Write && self.read_only {
            return Err(ContextError::ReadOnly { path: target.display });
        }
        if let Err(denial) = self.deny.check(&target.rel, access) {
            return Err(ContextError::Denied { path: target.display, denial });
        }
        Ok(target)
    }

    /// Reads a window and records the file's version for this session.
    pub fn read(&self, path: &str, offset: Option<u64>, limit: u64) -> Result<ReadView, ContextError> {
        let target = self.target(path, Access::Read)?;
        let outcome = match self.cold {
            None => self.provider.read(&target, offset, limit)?,
            Some(cold) => match self.provider.read_cached(&target, offset, limit) {
                Some(outcome) => outcome?,
                None => {
                    cold.set(true);
                    return Err(ContextError::Cold { path: target.display });
                }
            },
        };
        self.observed.record(&target.path, outcome.version, outcome.links);
        Ok(ReadView { display: target.display, version: outcome.version, window: outcome.window })
    }

    /// Writes a whole file: a new file needs nothing; an existing one needs a current
    /// observation. Records the new version for this session only.
    pub fn write(&self, path: &str, content: &str) -> Result<WriteView, ContextError> {
        let target = self.target(path, Access::Write)?;
        let _writing = self.observed.writing(&target.path);
        let expect = if target.exists {
            match self.observed.get(&target.path) {
                Some(version) => Expectation::Version(version),
                None if target.folder => {
                    return Err(ProviderError::IsDirectory { path: target.display }.into());
                }
                None => return Err(ContextError::NotObserved { path: target.display }),
            }
        } else {
            Expectation::Absent
        };
        let outcome = match self.provider.write(&target, content, expect) {
            Ok(outcome) => outcome,
            // Someone created it after we looked: this session has not seen that file.
            Err(ProviderError::AlreadyExists { path }) => return Err(ContextError::NotObserved { path }),
            Err(ProviderError::StaleVersion { path, current }) => {
                return Err(ContextError::Stale { path, current });
            }
            Err(e) => return Err(e.into()),
        };
        self.observed.record(&target.path, outcome.version, outcome.links);
        Ok(WriteView { display: target.display, created: outcome.created, version: outcome.version })
    }

    /// Replaces `old` by `new`; needs a current observation. Records the new version.
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<EditView, ContextError> {
        if old.is_empty() {
            return Err(ProviderError::InvalidEdit("old_string must not be empty".into()).into());
        }
        if old == new {
            return Err(ProviderError::InvalidEdit(
                "old_string and new_string are identical; nothing to change".into(),
            )
            .into());
        }
        let target = self.target(path, Access::Write)?;
        let _writing = self.observed.writing(&target.path);
        let Some(observed) = self.observed.get(&target.path) else {
            if !target.exists {
                return Err(ProviderError::NotFound { path: target.display, why: None }.into());
            }
            if target.folder {
                return Err(ProviderError::IsDirectory { path: target.display }.into());
            }
            return Err(ContextError::NotObserved { path: target.display });
        };
        let outcome = match self.provider.edit(&target, old, new, replace_all, observed) {
            Ok(outcome) => outcome,
            Err(ProviderError::StaleVersion { path, current }) => {
                return Err(ContextError::Stale { path, current });
            }
            Err(e) => return Err(e.into()),
        };
        self.observed.record(&target.path, outcome.version, outcome.links);
        Ok(EditView {
            display: target.display,
            replacements: outcome.replacements,
            replace_all,
            version: outcome.version,
        })
    }

    /// Stat, plus this session's observation of the file.
    pub fn stat(&self, path: &str) -> Result<StatView, ContextError> {
        let target = self.target(path, Access::Read)?;
        let stat = self.provider.stat(&target)?;
        Ok(StatView {
            observed: self.observed.get(&target.path),
            display: target.display,
            kind: stat.kind,
            size: stat.size,
            version: stat.version,
        })
    }

    /// Whether this session is read-only.
    pub fn read_only(&self) -> bool {
        self.read_only
    }
}

/// What `fs/writeText` expects to find, as the client said it (the version still as text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawExpectation<'v> {
    /// Whatever is there.
    Any,
    /// Nothing.
    Absent,
    /// This version.
    Version(&'v str),
}

/// The `fs/*` escape hatch: the provider's operations through the session's roots, read-only
/// flag and deny rules, recording nothing (a later edit still needs a read through the
/// context). See [`FileContext::unrecorded`].
#[derive(Debug, Clone, Copy)]
pub struct Unrecorded<'a> {
    files: FileContext<'a>,
}

impl Unrecorded<'_> {
    /// Resolves a path (no content is looked at, so no deny rule applies).
    pub fn resolve(&self, path: &str) -> Result<Resolved, ContextError> {
        self.files.resolve(path)
    }

    /// Stat of a path.
    pub fn stat(&self, path: &str) -> Result<(Resolved, Stat), ContextError> {
        let target = self.files.target(path, Access::Read)?;
        let stat = self.files.provider.stat(&target)?;
        Ok((target, stat))
    }

    /// A window, recorded nowhere.
    pub fn read(&self, path: &str, offset: Option<u64>, limit: u64) -> Result<ReadView, ContextError> {
        let target = self.files.target(path, Access::Read)?;
        let outcome = self.files.provider.read(&target, offset, limit)?;
        Ok(ReadView { display: target.display, version: outcome.version, window: outcome.window })
    }

    /// The current version pinned for streaming from line `offset` (which must exist).
    pub fn stream(&self, path: &str, offset: u64) -> Result<Snapshot, ContextError> {
        let target = self.files.target(path, Access::Read)?;
        let snapshot = self.files.provider.snapshot(&target)?;
        let total = snapshot.total_lines();
        if offset == 0 || offset > total.max(1) {
            return Err(
                ProviderError::OffsetPastEnd { path: target.display, offset, total_lines: total }.into()
            );
        }
        Ok(snapshot)
    }

    /// The version a client named, or the stale error it deserves when it is not one this
    /// daemon could have issued (the file cannot be at it).
    fn expected(&self, target: &Resolved, text: &str) -> Result<Version, ContextError> {
        match Version::parse(text) {
            Some(version) => Ok(version),
            None => {
                let current = self.files.provider.current_version(target)?;
                Err(ProviderError::StaleVersion { path: target.display.clone(), current }.into())
            }
        }
    }

    /// A write with the client's own expectation.
    pub fn write(
        &self,
        path: &str,
        content: &str,
        expect: RawExpectation<'_>,
    ) -> Result<WriteView, ContextError> {
        let target = self.files.target(path, Access::Write)?;
        let expect = match expect {
            RawExpectation::Any => Expectation::Any,
            RawExpectation::Absent => Expectation::Absent,
            RawExpectation::Version(text) => Expectation::Version(self.expected(&target, text)?),
        };
        let outcome = self.files.provider.write(&target, content, expect)?;
        Ok(WriteView { display: target.display, created: outcome.created, version: outcome.version })
    }

    /// An edit against the client's own expected version.
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
        expected: &str,
    ) -> Result<EditView, ContextError> {
        let target = self.files.target(path, Access::Write)?;
        let expected = self.expected(&target, expected)?;
        let outcome = self.files.provider.edit(&target, old, new, replace_all, expected)?;
        Ok(EditView {
            display: target.display,
            replacements: outcome.replacements,
            replace_all,
            version: outcome.version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_are_bounded_and_forget_the_least_recent() {
        let obs = Observations::new(2);
        let v = Version::of(b"x");
        obs.record(Path::new("/a"), v, 1);
        obs.record(Path::new("/b"), v, 1);
        assert_eq!(obs.get(Path::new("/a")), Some(v));
        obs.record(Path::new("/c"), v, 1);
        assert_eq!(obs.len(), 2);
        assert_eq!(obs.get(Path::new("/b")), None, "b was touched least recently");
        assert_eq!(obs.get(Path::new("/a")), Some(v));
    }

    fn setup() -> (tempfile::TempDir, PathBuf, Provider) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root, Provider::new(crate::provider::ProviderConfig { fsync: false, ..Default::default() }))
    }

    #[test]
    fn the_policy_in_one_place() {
        let (_dir, root, provider) = setup();
        let roots = [crate::provider::RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        let (a_obs, b_obs) = (Observations::new(10), Observations::new(10));
        let a = FileContext::new(&provider, scope, &a_obs, false);
        let b = FileContext::new(&provider, scope, &b_obs, false);

        assert!(a.write("f.txt", "one\ntwo\n").unwrap().created, "creating needs no read");
        assert_eq!(a.edit("f.txt", "one", "1", false).unwrap().replacements, 1, "own write refreshes");
        assert_eq!(b.edit("f.txt", "two", "2", false).unwrap_err().code(), FsErrorCode::NotObserved);
        assert_eq!(b.write("f.txt", "x").unwrap_err().code(), FsErrorCode::NotObserved);
        b.read("f.txt", Some(2), 1).unwrap();
        b.edit("f.txt", "two", "2", false).unwrap();
        assert_eq!(a.edit("f.txt", "1", "one", false).unwrap_err().code(), FsErrorCode::StaleVersion);
        // Stale is reported before matching.
        assert_eq!(
            a.edit("f.txt", "no such text", "x", false).unwrap_err().code(),
            FsErrorCode::StaleVersion
        );
        assert!(!a.stat("f.txt").unwrap().fresh());
        assert!(b.stat("f.txt").unwrap().fresh());

        let ro = FileContext::new(&provider, scope, &b_obs, true);
        assert_eq!(ro.edit("f.txt", "2", "two", false).unwrap_err().code(), FsErrorCode::PermissionDenied);
        assert_eq!(ro.write("new.txt", "x").unwrap_err().code(), FsErrorCode::PermissionDenied);
        assert!(!root.join("new.txt").exists());
    }
}
