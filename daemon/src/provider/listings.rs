//! Warm listings: the files a walk of a folder found, kept per (root, folder) so that a repeated
//! search skips the walk, each watched by a `notify` watcher of its own.
//!
//! notify is a hint, never the truth, so invalidation is conservative. A listing is kept only
//! while its watch is in place, and the watch is established *before* the walk that fills it:
//! any event during the walk discards the fresh list. Afterwards every event of its watcher
//! drops it (a create, delete or rename anywhere beneath the folder, a change of an ignore file,
//! a change in a folder between the root and the searched one, an overflow or a watcher error),
//! except a content or metadata change of a file the listing holds: that file's size and
//! modification time are re-read (beneath its root) at the next answer. Each listing has its own
//! inotify instance, so the watches of two listings never interfere; there are at most
//! [`MAX_LISTINGS`] of them, and they hold at most the configured bytes (least recently used out
//! first; a listing over the cap alone is never kept: its searches walk cold).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use super::beneath::Root;
use super::walk::{Listed, ns};

/// Most listings kept at once (each holds one inotify instance).
pub const MAX_LISTINGS: usize = 16;
/// Most files of one listing whose size and time wait to be re-read; past it the listing is
/// dropped instead.
const MAX_TOUCHED: usize = 1024;

/// (root, folder relative to it).
type Key = (PathBuf, PathBuf);

/// One kept listing.
struct Entry {
    id: u64,
    root: Root,
    files: Vec<Listed>,
    /// Listed files changed since listed (relative to the root).
    touched: HashSet<PathBuf>,
    bytes: usize,
    used: u64,
    watcher: RecommendedWatcher,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Listings being walked → whether an event arrived meanwhile.
    filling: HashMap<u64, bool>,
    next_id: u64,
    clock: u64,
    bytes: usize,
    /// Watchers of dropped listings, dropped later outside the lock and off notify's thread.
    retired: Vec<RecommendedWatcher>,
}

impl State {
    fn remove(&mut self, key: &Key) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes;
            self.retired.push(entry.watcher);
        }
    }

    /// Drops the listing `id` (kept under `key`), or spoils its walk in progress.
    fn invalidate(&mut self, key: &Key, id: u64) {
        if let Some(dirty) = self.filling.get_mut(&id) {
            *dirty = true;
        }
        if self.entries.get(key).is_some_and(|e| e.id == id) {
            self.remove(key);
        }
    }

    fn event(&mut self, key: &Key, id: u64, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(event) if !event.need_rescan() => event,
            _ => return self.invalidate(key, id),
        };
        match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            EventKind::Access(_) => return,
            EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_)) => {}
            _ => return self.invalidate(key, id),
        }
        // A content or metadata change: harmless to the list when it is of a listed file.
        if self.filling.contains_key(&id) {
            return self.invalidate(key, id);
        }
        let Some(entry) = self.entries.get_mut(key).filter(|e| e.id == id) else { return };
        for path in &event.paths {
            let listed = path
                .strip_prefix(&key.0)
                .ok()
                .filter(|rel| entry.files.binary_search_by(|f| f.rel.as_path().cmp(rel)).is_ok());
            match listed {
                Some(rel) if entry.touched.len() < MAX_TOUCHED => {
                    entry.touched.insert(rel.to_path_buf());
                }
                _ => return self.invalidate(key, id),
            }
        }
    }
}

/// The warm listings (see the module documentation).
pub struct Listings {
    state: Arc<Mutex<State>>,
    max_bytes: usize,
}

impl std::fmt::Debug for Listings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (count, bytes) = self.stats();
        f.debug_struct("Listings").field("count", &count).field("bytes", &bytes).finish()
    }
}

/// A walk being filled: its watcher (already watching) and its id.
pub struct Filling {
    key: Key,
    id: u64,
    watcher: RecommendedWatcher,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one listing costs, in bytes.
fn cost(key: &Key, files: &[Listed]) -> usize {
    key.0.as_os_str().len()
        + key.1.as_os_str().len()
        + std::mem::size_of::<Entry>()
        + files.iter().map(|f| f.rel.as_os_str().len() + std::mem::size_of::<Listed>()).sum::<usize>()
}

impl Listings {
    /// No listings; at most `max_bytes` kept (0: none, every search walks cold).
    pub fn new(max_bytes: usize) -> Self {
        Self { state: Arc::default(), max_bytes }
    }

    /// Listings kept and their bytes.
    pub fn stats(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.entries.len(), state.bytes)
    }

    fn take_retired(&self) -> Vec<RecommendedWatcher> {
        std::mem::take(&mut lock(&self.state).retired)
    }

    /// The kept listing of `rel` beneath `root`, its changed files' sizes and times re-read.
    pub fn get(&self, root: &Root, rel: &Path) -> Option<Vec<Listed>> {
        let key = (root.path().to_path_buf(), rel.to_path_buf());
        let found = {
            let mut state = lock(&self.state);
            state.clock += 1;
            let clock = state.clock;
            let mut gone = false;
            let found = state.entries.get_mut(&key).and_then(|entry| {
                entry.used = clock;
                for rel in std::mem::take(&mut entry.touched) {
                    let meta = entry.root.open_path(&rel).and_then(|f| f.metadata());
                    let Ok(meta) = meta.map_err(drop).and_then(|m| if m.is_file() { Ok(m) } else { Err(()) })
                    else {
                        gone = true;
                        return None;
                    };
                    use std::os::unix::fs::MetadataExt;
                    if let Ok(i) = entry.files.binary_search_by(|f| f.rel.cmp(&rel)) {
                        entry.files[i].mtime_ns = ns(meta.mtime(), meta.mtime_nsec());
                        entry.files[i].size = meta.len();
                    }
                }
                Some(entry.files.clone())
            });
            if gone {
                state.remove(&key);
            }
            found
        };
        drop(self.take_retired());
        found
    }

    /// Starts watching `rel` beneath `root` (recursively) and the folders from the root down
    /// to it (each alone), before the walk that fills its listing. `None`: it cannot be kept
    /// (no room, or the watch failed): walk cold.
    pub fn start(&self, root: &Root, rel: &Path) -> Option<Filling> {
        if self.max_bytes == 0 {
            return None;
        }
        let key = (root.path().to_path_buf(), rel.to_path_buf());
        let id = {
            let mut state = lock(&self.state);
            state.next_id += 1;
            let id = state.next_id;
            state.filling.insert(id, false);
            id
        };
        let weak: Weak<Mutex<State>> = Arc::downgrade(&self.state);
        let event_key = key.clone();
        let handler = move |event: notify::Result<notify::Event>| {
            if let Some(state) = weak.upgrade() {
                lock(&state).event(&event_key, id, event);
            }
        };
        let config = notify::Config::default().with_follow_symlinks(false);
        let watched = RecommendedWatcher::new(handler, config).and_then(|mut watcher| {
            let mut folder = root.path().to_path_buf();
            for name in rel.components() {
                watcher.watch(&folder, RecursiveMode::NonRecursive)?;
                folder.push(name);
            }
            watcher.watch(&folder, RecursiveMode::Recursive)?;
            Ok(watcher)
        });
        match watched {
            Ok(watcher) => Some(Filling { key, id, watcher }),
            Err(err) => {
                tracing::debug!(%err, folder = %root.path().join(rel).display(), "cannot watch a searched folder; its searches walk cold");
                lock(&self.state).filling.remove(&id);
                None
            }
        }
    }

    /// Keeps the listing `files` that the walk begun by `filling` found, unless an event
    /// arrived meanwhile or it does not fit.
    pub fn finish(&self, filling: Filling, root: &Root, files: &[Listed]) {
        let Filling { key, id, watcher } = filling;
        let bytes = cost(&key, files);
        {
            let mut state = lock(&self.state);
            let dirty = state.filling.remove(&id).unwrap_or(true);
            if dirty || bytes > self.max_bytes {
                state.retired.push(watcher);
            } else {
                state.remove(&key);
                state.clock += 1;
                let used = state.clock;
                while state.entries.len() >= MAX_LISTINGS || state.bytes + bytes > self.max_bytes {
                    let Some(oldest) = state.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
                    else {
                        break;
                    };
                    state.remove(&oldest);
                }
                state.bytes += bytes;
                let entry =
                    Entry { id, root: root.clone(), files: files.to_vec(), touched: HashSet::new(), bytes, used, watcher };
                state.entries.insert(key, entry);
            }
        }
        drop(self.take_retired());
    }

    /// Drops the walk begun by `filling` (stopped or truncated): nothing is kept.
    pub fn abandon(&self, filling: Filling) {
        lock(&self.state).filling.remove(&filling.id);
        drop(filling);
        drop(self.take_retired());
    }

    /// Drops every listing that `path` may be part of: those of folders containing it, and
    /// those of folders beneath its parent (it may be an ignore file or a folder on their way).
    pub fn forget(&self, path: &Path) {
        let parent = path.parent().unwrap_or(path);
        {
            let mut state = lock(&self.state);
            let keys: Vec<Key> = state
                .entries
                .keys()
                .filter(|(root, rel)| {
                    let folder = root.join(rel);
                    path.starts_with(&folder) || folder.starts_with(parent)
                })
                .cloned()
                .collect();
            for key in keys {
                state.remove(&key);
            }
            for dirty in state.filling.values_mut() {
                *dirty = true;
            }
        }
        drop(self.take_retired());
    }

    /// Drops every listing.
    pub fn forget_all(&self) {
        {
            let mut state = lock(&self.state);
            let keys: Vec<Key> = state.entries.keys().cloned().collect();
            for key in keys {
                state.remove(&key);
            }
            for dirty in state.filling.values_mut() {
                *dirty = true;
            }
        }
        drop(self.take_retired());
    }

    /// Whether every event up to a change of the listed file `file` (relative to `root`) has
    /// been handled for the listing of `rel`: it is gone, or it knows `file` changed.
    #[cfg(test)]
    pub fn settled(&self, root: &Root, rel: &Path, file: &Path) -> bool {
        let state = lock(&self.state);
        state.entries.get(&(root.path().to_path_buf(), rel.to_path_buf())).is_none_or(|e| e.touched.contains(file))
    }
}
