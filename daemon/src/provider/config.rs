//! The provider's settings: locks, caps, durability, cache bounds.

use std::time::Duration;

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
    /// Most bytes of line indexes cached (their dense line ends included).
    pub max_index_bytes: usize,
    /// Most bytes of files mapped at once by cached entries.
    pub max_mapped_bytes: usize,
    /// Files at least this large (on local filesystems) are memory-mapped once per version.
    pub map_threshold: u64,
    /// Most cached entries that keep their file open (so a warm read needs no `open`).
    pub max_open_files: usize,
    /// Cached state unused for one to two of these periods is released (see
    /// [`Provider::sweep_idle`](super::Provider::sweep_idle)).
    pub idle_release: Duration,
    /// Refuse writes and edits of files with several hard links (`FS_PERMISSION_DENIED`):
    /// such a file is rewritten in place, so a link outside the roots would see the change.
    pub refuse_multi_link_writes: bool,
    /// The secret that marks this user's daemons' temporary files (see [`leftovers`](super::leftovers)); `None`
    /// draws a fresh one for this provider alone.
    pub staging_token: Option<String>,
    /// Largest file a read or stat hashes: reading a bigger one is `FS_TOO_LARGE`, and stat
    /// reports it without a version (hashing 64 GiB takes tens of seconds of a slot).
    pub max_hash_bytes: u64,
    /// Most bytes of observed versions kept for stale refusals' diffs (see [`ContentStore`]).
    ///
    /// [`ContentStore`]: super::store::ContentStore
    pub max_snapshot_bytes: usize,
    /// Largest version kept there (and largest file a stale refusal diffs).
    pub max_snapshot_file_bytes: usize,
    /// Most bytes of line text one window holds (`file/read`, `fs/readText`, a stream's chunk):
    /// a window of whole lines stops before it, and a single line longer than it is
    /// `FS_TOO_LARGE`. Every read's own budget is capped at it.
    pub max_window_bytes: u64,
    /// Most bytes of searched folders' file lists kept warm (least recently used out first; a
    /// list over it alone is never kept); 0 keeps none: every search walks.
    pub max_search_cache_bytes: usize,
    /// Most inotify watches the daemon holds at once, warm listings and the file watcher
    /// together (listings up to three quarters of it); see
    /// [`WatchBudget`](super::budget::WatchBudget). 0 holds none: every search walks, and
    /// changes are found when files are next used.
    pub max_watches: usize,
}

/// Default of [`ProviderConfig::max_window_bytes`]: 8 MiB, an eighth of the default frame cap
/// (room for JSON escaping).
pub const DEFAULT_MAX_WINDOW_BYTES: u64 = 8 * 1024 * 1024;

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
            max_snapshot_bytes: 64 * 1024 * 1024,
            max_snapshot_file_bytes: 1024 * 1024,
            max_window_bytes: DEFAULT_MAX_WINDOW_BYTES,
            max_search_cache_bytes: 64 * 1024 * 1024,
            max_watches: super::budget::default_max_watches(),
        }
    }
}
