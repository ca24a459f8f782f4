//! The provider layer: resolve paths inside a session's roots, stat, windowed reads with a
//! cached line index, versions as blake3 content hashes, and write/edit as one critical section
//! (in-process path lock + flock + inode re-check + version guard + literal match + atomic
//! replace). It knows nothing about sessions or JSON: callers pass a [`Scope`] and an explicit
//! [`Expectation`].
//!
//! Every method blocks (filesystem calls, hashing, locks): call it from a blocking thread. The
//! exceptions are [`Provider::read_cached`] and [`Provider::read_opened`], which only stat a
//! handle and read from a file they already hold open on a local filesystem, and decline
//! everything else.
//!
//! Freshness is decided by content, never by time: a cached version is used only while the
//! file's stat fingerprint is unchanged *and* the file is older than the racy window at the time
//! it was hashed; otherwise the file is hashed again.

pub mod beneath;
pub mod budget;
mod cache;
mod cache_tests;
mod closer;
mod config;
mod copy;
pub mod crash;
pub mod edit;
mod entry;
mod error;
pub mod index;
mod inplace;
pub mod journaled;
mod journaling;
pub mod leftovers;
pub mod lock;
pub mod mmap;
mod outcome;
pub mod own;
mod prepared;
pub mod private;
mod read;
pub mod resolve;
mod resolve_tests;
pub mod searched;
mod snapshot;
pub mod store;
mod strategies;
pub mod version;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use self::beneath::{Root, RootDir};
use self::budget::{MapBudget, WatchBudget};
use self::cache::Cache;
pub use self::config::{DEFAULT_MAX_WINDOW_BYTES, ProviderConfig};
pub use self::error::ProviderError;
pub(crate) use self::error::io_error;
use self::leftovers::Leftovers;
use self::lock::PathLocks;
pub use self::outcome::{
    Conventions, EditOutcome, Expectation, Kind, Pace, Paced, ReadAt, ReadOutcome, Stat, WriteOutcome,
};
use self::own::OwnWrites;
pub use self::prepared::{ChangeToPrepare, Committed, Prepared};
pub use self::resolve::{Lookup, Opened, Resolved, Scope};
pub use self::snapshot::{Changed, Snapshot, WindowError};
use self::store::ContentStore;
pub use self::version::{Fingerprint, Version};

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
    /// Observed versions' bytes, for the diffs of stale refusals.
    store: ContentStore,
    /// The daemon's share of the user's inotify watches, shared by the search listings and the
    /// watcher (see [`budget`]).
    watches: Arc<WatchBudget>,
    /// The daemon's own writes, for the watcher (see [`own`]).
    own: OwnWrites,
    /// The journal attributed changes are recorded in (see [`journaled`]).
    recorder: std::sync::OnceLock<Arc<dyn journaled::Recorder>>,
    /// Where every change that lands goes besides the journal (see [`journaled::Feed`]).
    feed: std::sync::OnceLock<Arc<dyn journaled::Feed>>,
}

impl Provider {
    /// A provider with an empty cache.
    pub fn new(config: ProviderConfig) -> Self {
        Self::with_descriptors(config, Arc::default())
    }

    /// A provider with an empty cache, whose open files count against `descriptors` (see
    /// [`Provider::shed_open_files`]).
    pub fn with_descriptors(
        config: ProviderConfig,
        descriptors: Arc<crate::descriptors::Descriptors>,
    ) -> Self {
        let watches = WatchBudget::new(config.max_watches);
        Self {
            map_budget: MapBudget::new(config.max_mapped_bytes),
            leftovers: Leftovers::new(config.staging_token.clone()).with_patience(config.lock_patience),
            store: ContentStore::new(config.max_snapshot_bytes, config.max_snapshot_file_bytes),
            watches,
            config,
            cache: Mutex::new(Cache::new(descriptors)),
            locks: PathLocks::default(),
            hashed: AtomicU64::new(0),
            own: OwnWrites::default(),
            recorder: std::sync::OnceLock::new(),
            feed: std::sync::OnceLock::new(),
        }
    }

    /// The daemon's own writes (staged names, told versions), for the watcher.
    pub fn own_writes(&self) -> &OwnWrites {
        &self.own
    }

    /// Bytes of file content hashed to learn versions since the daemon started (reads, stats and
    /// version checks that missed the cache).
    pub fn hashed_bytes(&self) -> u64 {
        self.hashed.load(Ordering::Relaxed)
    }

    /// The daemon's share of the user's inotify watches, for the watcher (which takes one for
    /// each path it watches).
    pub fn watch_budget(&self) -> &Arc<WatchBudget> {
        &self.watches
    }

    /// Watches held now (warm listings and the watcher together) and the cap, for
    /// `daemon/status`.
    pub fn watches(&self) -> (usize, usize) {
        (self.watches.held(), self.watches.cap())
    }

    /// The settings the provider was made with.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The fastest [`Pace`] an edit can ever be made at: [`Pace::Blocking`] when every write is
    /// fsynced (an fsync blocks), else [`Pace::AtOnce`] for the edits that qualify. The runner
    /// asks before it tries an edit right here, so that with fsync on an edit resolves its file
    /// once, on the pool.
    pub fn edit_pace(&self) -> Pace {
        if self.config.fsync { Pace::Blocking } else { Pace::AtOnce }
    }

    /// The store of versions' bytes (filled by the file context with what its sessions saw).
    pub fn store(&self) -> &ContentStore {
        &self.store
    }

    /// Resolves a path inside `scope` (see [`resolve::resolve`]).
    pub fn resolve(&self, raw: &str, scope: Scope<'_>) -> Result<Resolved, ProviderError> {
        resolve::resolve(raw, scope)
    }

    /// Resolves a path inside `scope`, handing back what the fast path opened unlooked at (see
    /// [`resolve::open`]).
    pub fn open(&self, raw: &str, scope: Scope<'_>) -> Result<Lookup, ProviderError> {
        resolve::open(raw, scope)
    }

    /// [`Provider::resolve`], never looking at or beneath a name `fence` refuses (see
    /// [`resolve::resolve_fenced`]).
    pub fn resolve_fenced(
        &self,
        raw: &str,
        scope: Scope<'_>,
        fence: resolve::Fence<'_>,
    ) -> Result<Resolved, ProviderError> {
        resolve::resolve_fenced(raw, scope, fence)
    }

    /// [`Provider::open`] with a fence (see [`resolve::resolve_fenced`]).
    pub fn open_fenced(
        &self,
        raw: &str,
        scope: Scope<'_>,
        fence: resolve::Fence<'_>,
    ) -> Result<Lookup, ProviderError> {
        resolve::open_fenced(raw, scope, fence)
    }
}
