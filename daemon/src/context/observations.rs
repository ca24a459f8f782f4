//! `Observations`: one session's bounded record of the file versions it has seen, the paths it is
//! writing right now, and the sink (the watcher) told about every record. Bounded by count
//! (`max_observed_files`) and, through its [`Account`], in bytes (see [`super::ledger`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::Version;
use super::ledger::{Account, observation_bytes};

/// Default cap on the files one session remembers having observed.
pub const DEFAULT_MAX_OBSERVED: usize = 10_000;

/// One session's observed versions, bounded: past the cap the least recently touched records
/// (a sixteenth of them at once) are forgotten, which only means those files must be read
/// again before they are written. What the records hold is counted in bytes in its account,
/// whose session may make it give some back ([`Observations::evict`]).
pub struct Observations {
    max: usize,
    inner: Mutex<ObservedMap>,
    /// Where its bytes are counted, if anywhere.
    account: Option<Arc<Account>>,
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
    /// Path → (version, last use, hard links when recorded).
    versions: HashMap<PathBuf, (Version, u64, u64)>,
    tick: u64,
    /// What the records cost ([`observation_bytes`] of each path).
    bytes: usize,
}

impl ObservedMap {
    /// Forgets `paths`; returns the bytes they held.
    fn remove(&mut self, paths: &[PathBuf]) -> usize {
        let mut freed = 0;
        for path in paths {
            if self.versions.remove(path).is_some() {
                freed += observation_bytes(path);
            }
        }
        self.bytes -= freed;
        // A table keeps its largest size: give the room back once it is mostly empty.
        if self.versions.capacity() > 64 && self.versions.len() * 4 < self.versions.capacity() {
            self.versions.shrink_to_fit();
        }
        freed
    }
}

impl Observations {
    fn build(max: usize, sink: Option<Arc<dyn ObservationSink>>, account: Option<Arc<Account>>) -> Self {
        Self { max: max.max(1), inner: Mutex::default(), account, writing: Mutex::default(), sink }
    }

    /// An empty record that holds at most `max` files.
    pub fn new(max: usize) -> Self {
        Self::build(max, None, None)
    }

    /// An empty record whose changes are reported to `sink`.
    pub fn with_sink(max: usize, sink: Arc<dyn ObservationSink>) -> Self {
        Self::build(max, Some(sink), None)
    }

    /// An empty record whose changes are reported to `sink` (if any) and whose bytes are
    /// counted in `account`.
    pub fn with_account(max: usize, sink: Option<Arc<dyn ObservationSink>>, account: Arc<Account>) -> Self {
        Self::build(max, sink, Some(account))
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

    /// The recorded version of `path` and the file's hard links then, without counting as a
    /// use (for the watcher).
    pub fn peek(&self, path: &Path) -> Option<(Version, u64)> {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.versions.get(path).map(|(version, _, links)| (*version, *links))
    }

    /// The recorded version of `path`.
    pub fn get(&self, path: &Path) -> Option<Version> {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.tick += 1;
        let tick = map.tick;
        map.versions.get_mut(path).map(|(version, used, _)| {
            *used = tick;
            *version
        })
    }

    /// Records that the session has seen (or written) `version` of `path`. Past the count cap
    /// the least recently used records go; past a byte cap of its session (or the daemon), the
    /// largest holders give some back (see [`super::ledger`]): never this record itself.
    pub fn record(&self, path: &Path, version: Version, links: u64) {
        let (evicted, added, freed) = {
            let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            map.tick += 1;
            let tick = map.tick;
            // A file read again keeps its key: no new path, no second hash.
            let mut added = 0;
            match map.versions.get_mut(path) {
                Some(seen) => *seen = (version, tick, links),
                None => {
                    map.versions.insert(path.to_owned(), (version, tick, links));
                    added = observation_bytes(path);
                    map.bytes += added;
                }
            }
            let mut evicted = Vec::new();
            let mut freed = 0;
            if map.versions.len() > self.max {
                let count = crate::lru::batch(map.versions.len()).min(map.versions.len() - 1);
                evicted = crate::lru::least_recent(&map.versions, count, |(_, used, _)| *used);
                freed = map.remove(&evicted);
            }
            (evicted, added, freed)
        };
        if let Some(account) = &self.account {
            account.add(added);
            account.sub(freed);
        }
        if let Some(sink) = &self.sink {
            sink.observed(path, links);
            for path in &evicted {
                sink.forgotten(path);
            }
        }
        if let Some(account) = &self.account
            && added > 0
        {
            account.settle();
        }
    }

    /// Forgets the least recently used records that hold about `bytes` (never the most
    /// recent one), to keep its session within a byte cap; returns the bytes freed.
    pub fn evict(&self, bytes: usize) -> usize {
        let (evicted, freed) = {
            let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if map.versions.len() <= 1 || bytes == 0 {
                return 0;
            }
            let mut oldest: Vec<(u64, &PathBuf)> =
                map.versions.iter().map(|(path, (_, used, _))| (*used, path)).collect();
            oldest.sort_unstable_by_key(|(used, _)| *used);
            let mut taken = 0;
            let mut evicted = Vec::new();
            // The last (most recent) record always stays.
            for (_, path) in &oldest[..oldest.len() - 1] {
                if taken >= bytes {
                    break;
                }
                taken += observation_bytes(path);
                evicted.push((*path).clone());
            }
            let freed = map.remove(&evicted);
            (evicted, freed)
        };
        if let Some(account) = &self.account {
            account.sub(freed);
            account.evicted(evicted.len());
        }
        if let Some(sink) = &self.sink {
            for path in &evicted {
                sink.forgotten(path);
            }
        }
        freed
    }

    /// What the records cost, in bytes (as counted against the byte caps).
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }

    /// Files currently recorded.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).versions.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every recorded path with its hard-link count, for telling a new sink about them all (a
    /// resumed session's watcher registrations).
    pub fn entries(&self) -> Vec<(PathBuf, u64)> {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.versions.iter().map(|(path, (_, _, links))| (path.clone(), *links)).collect()
    }

    /// About how many bytes the record itself holds (paths, versions, table overhead, without
    /// the watcher's registrations), for bounding what ended sessions kept for a resume may
    /// hold.
    pub fn approx_bytes(&self) -> usize {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let per_entry = std::mem::size_of::<(PathBuf, (Version, u64, u64))>() + 16;
        map.versions.keys().map(|path| path.as_os_str().len() + per_entry).sum()
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
        let map = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(account) = &self.account {
            account.sub(map.bytes);
        }
        if let Some(sink) = &self.sink {
            for path in map.versions.keys() {
                sink.forgotten(path);
            }
        }
    }
}
