//! The provider's cache: one entry per file version (fingerprint, version, line index, mapping,
//! open file), bounded by count, index bytes, mapped bytes and open files, swept when idle.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use super::entry::{CacheEntry, unchanged};
use super::index::LineEnds;
use super::version;
use super::{Fingerprint, Provider, ProviderConfig};

/// Cache of entries by canonical path, bounded by count, index bytes, mapped bytes and open
/// files (least recently used evicted first); its open files count against the daemon's
/// descriptor budget.
#[derive(Debug, Default)]
pub(super) struct Cache {
    entries: HashMap<PathBuf, (Arc<CacheEntry>, u64)>,
    tick: u64,
    index_bytes: usize,
    mapped_bytes: usize,
    open_files: usize,
    /// `tick` at the last idle sweep: entries not used since were idle for a whole period.
    swept_at: u64,
    /// The daemon's descriptor budget, told how many files are held open.
    descriptors: Arc<crate::descriptors::Descriptors>,
}

impl Cache {
    /// An empty cache whose open files count against `descriptors`.
    pub(super) fn new(descriptors: Arc<crate::descriptors::Descriptors>) -> Self {
        Self { descriptors, ..Self::default() }
    }

    /// An empty cache like this one (same budget), keeping the clock.
    fn emptied(&self) -> Self {
        self.descriptors.set_cached(0);
        Cache {
            tick: self.tick,
            swept_at: self.swept_at,
            descriptors: self.descriptors.clone(),
            ..Cache::default()
        }
    }

    fn set_open(&mut self, open: usize) {
        self.open_files = open;
        self.descriptors.set_cached(open);
    }

    fn get(&mut self, path: &Path) -> Option<Arc<CacheEntry>> {
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
        mut entry: CacheEntry,
        config: &ProviderConfig,
    ) -> (Arc<CacheEntry>, Vec<Arc<CacheEntry>>) {
        let mut released: Vec<Arc<CacheEntry>> = self.remove(&path).into_iter().collect();
        if entry.file.is_some() && (self.open_files >= config.max_open_files || !self.descriptors.may_cache())
        {
            entry.file = None;
        }
        let entry = Arc::new(entry);
        self.tick += 1;
        self.index_bytes += entry.heap_bytes();
        self.mapped_bytes += entry.mapped_bytes();
        self.set_open(self.open_files + usize::from(entry.file.is_some()));
        self.entries.insert(path, (entry.clone(), self.tick));
        released.extend(self.shrink(config));
        (entry, released)
    }

    /// Gives `entry`, cached at `path`, the line ends `ends` of its file (see
    /// [`LineIndex::read_line_ends`](super::index::LineIndex::read_line_ends)), counted with the
    /// indexes' bytes; returns the entries evicted to stay within the budget. Nothing happens
    /// when `path` no longer holds that very entry, or its index has line ends already.
    fn add_ends(
        &mut self,
        path: &Path,
        entry: &Arc<CacheEntry>,
        ends: LineEnds,
        config: &ProviderConfig,
    ) -> Vec<Arc<CacheEntry>> {
        let Some((cached, _)) = self.entries.get(path) else { return Vec::new() };
        let Ok(index) = cached.text.as_ref() else { return Vec::new() };
        if !Arc::ptr_eq(cached, entry) || !index.set_ends(ends) {
            return Vec::new();
        }
        self.index_bytes += index.ends_bytes();
        self.shrink(config)
    }

    /// Evicts the least recently used entries while the cache is over a bound (but for the
    /// most recent entry).
    fn shrink(&mut self, config: &ProviderConfig) -> Vec<Arc<CacheEntry>> {
        let mut released = Vec::new();
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
        released
    }

    /// Takes `path`'s entry out (see [`Cache::insert`] on dropping it).
    pub(super) fn remove(&mut self, path: &Path) -> Option<Arc<CacheEntry>> {
        let (old, _) = self.entries.remove(path)?;
        self.forget_sizes(&old);
        Some(old)
    }

    fn forget_sizes(&mut self, old: &CacheEntry) {
        self.index_bytes -= old.heap_bytes();
        self.mapped_bytes -= old.mapped_bytes();
        self.set_open(self.open_files - usize::from(old.file.is_some()));
    }

    /// Takes out the least recently used entries that hold mappings until the cached mappings
    /// total at most `target` bytes (see [`Cache::insert`] on dropping them).
    pub(super) fn shed_mapped(&mut self, target: usize) -> Vec<Arc<CacheEntry>> {
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

    /// Takes out the `count` least recently used entries that hold their file open (see
    /// [`Cache::insert`] on dropping them).
    fn shed_open(&mut self, count: usize) -> Vec<Arc<CacheEntry>> {
        let open = self.entries.iter().filter(|(_, (entry, _))| entry.file.is_some());
        let oldest = crate::lru::least_recent_of(open, count, |(_, used)| *used);
        oldest.iter().filter_map(|path| self.remove(path)).collect()
    }

    /// Takes out the entries nobody used since the previous sweep (see [`Cache::insert`] on
    /// dropping them).
    fn sweep(&mut self) -> Vec<Arc<CacheEntry>> {
        let idle_before = self.swept_at;
        self.swept_at = self.tick;
        let idle: Vec<PathBuf> = self
            .entries
            .iter()
            .filter(|(_, (_, used))| *used <= idle_before)
            .map(|(p, _)| p.clone())
            .collect();
        let released: Vec<Arc<CacheEntry>> = idle.iter().filter_map(|path| self.remove(path)).collect();
        if self.entries.is_empty() {
            // Give the table's memory back too, not just its entries.
            *self = self.emptied();
        }
        released
    }
}

impl Provider {
    /// Files with cached state.
    pub fn cached_files(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).entries.len()
    }

    /// Bytes of files mapped by cached entries.
    pub fn mapped_bytes(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).mapped_bytes
    }

    pub(super) fn cached(&self, path: &Path, fingerprint: &Fingerprint) -> Option<Arc<CacheEntry>> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = cache.get(path)?;
        let usable = entry.fingerprint == *fingerprint
            && version::trusted(fingerprint, entry.recorded_ns)
            && !entry.mapping.as_ref().is_some_and(|m| m.torn());
        usable.then_some(entry)
    }

    /// The entry cached for `path`, whatever the file is now, when it could be used if the
    /// file still has its fingerprint (trusted, its mapping not torn): the caller checks that.
    pub(super) fn cached_at(&self, path: &Path) -> Option<Arc<CacheEntry>> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = cache.get(path)?;
        let usable = version::trusted(&entry.fingerprint, entry.recorded_ns)
            && !entry.mapping.as_ref().is_some_and(|m| m.torn());
        usable.then_some(entry)
    }

    pub(super) fn remember(&self, path: &Path, entry: CacheEntry) -> Arc<CacheEntry> {
        let (entry, released) = self.cache.lock().unwrap_or_else(PoisonError::into_inner).insert(
            path.to_owned(),
            entry,
            &self.config,
        );
        drop(released);
        entry
    }

    /// Gives a cached `entry` of a small file read warm the line ends of its file (see
    /// [`LineIndex::ends`](super::index::LineIndex::ends)), read through `file`, so its next
    /// windows are cut without a search for their lines' ends: once per cached version, only
    /// when the bytes read agree with the index and the file kept its fingerprint meanwhile;
    /// counted in the cache's index bytes.
    pub(super) fn add_line_ends(&self, path: &Path, entry: &Arc<CacheEntry>, file: &File) {
        let Ok(index) = entry.text.as_ref() else { return };
        if !index.wants_ends() {
            return;
        }
        let Some(ends) = index.read_line_ends(|buf, pos| file.read_at(buf, pos)) else { return };
        if !unchanged(file, &entry.fingerprint) {
            return;
        }
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).add_ends(
            path,
            entry,
            ends,
            &self.config,
        );
        drop(released);
    }

    /// Bytes of the cached indexes, line ends included (what `max_index_bytes` bounds).
    pub fn cached_index_bytes(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).index_bytes
    }

    /// Cached files that keep their file open.
    pub fn open_files(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).open_files
    }

    /// Drops what nobody used since the previous call (closing files, unmapping, freeing
    /// indexes), so an idle daemon shrinks back, and packs the versions' bytes kept since into
    /// large allocations (see [`super::store::ContentStore::pack`]); returns how many entries
    /// went or moved. Called periodically: an entry goes after one to two periods without use.
    pub fn sweep_idle(&self) -> usize {
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).sweep();
        let dropped = released.len();
        drop(released);
        dropped + self.store().pack()
    }

    /// Drops what is cached about `path` (it changed, or the watcher saw it change).
    pub fn forget(&self, path: &Path) {
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).remove(path);
        drop(released);
    }

    /// Drops everything cached (the watcher lost events).
    pub fn forget_all(&self) {
        let released = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let emptied = cache.emptied();
            std::mem::replace(&mut *cache, emptied)
        };
        drop(released);
    }

    /// Closes `count` of the cached files held open (the least recently used), for a
    /// connection or a session that needs their descriptors: their entries go.
    pub fn shed_open_files(&self, count: usize) {
        let released = self.cache.lock().unwrap_or_else(PoisonError::into_inner).shed_open(count);
        drop(released);
    }
}
