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
    files: Arc<Vec<Listed>>,
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
    pub fn get(&self, root: &Root, rel: &Path) -> Option<Arc<Vec<Listed>>> {
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
                        // Copied only while an earlier answer still holds the old list.
                        let files = Arc::make_mut(&mut entry.files);
                        files[i].mtime_ns = ns(meta.mtime(), meta.mtime_nsec());
                        files[i].size = meta.len();
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
    pub fn finish(&self, filling: Filling, root: &Root, files: &Arc<Vec<Listed>>) {
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
                    let Some(oldest) =
                        state.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
                    else {
                        break;
                    };
                    state.remove(&oldest);
                }
                state.bytes += bytes;
                let entry = Entry {
                    id,
                    root: root.clone(),
                    files: files.clone(),
                    touched: HashSet::new(),
                    bytes,
                    used,
                    watcher,
                };
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
        state
            .entries
            .get(&(root.path().to_path_buf(), rel.to_path_buf()))
            .is_none_or(|e| e.touched.contains(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::beneath::RootDir;
    use crate::provider::{Provider, ProviderConfig, Scope};
    use proptest::prelude::*;
    use std::time::{Duration, Instant};

    const DIRS: [&str; 4] = ["", "a", "a/b", "c"];
    const NAMES: [&str; 4] = ["x.rs", "y.txt", ".h", "z.log"];
    const PATTERNS: [&str; 5] = ["*.log\n", "x.rs\n", "b/\n", "", "*.log\n!z.log\n"];
    /// The folders searched.
    const SEARCHED: [&str; 2] = ["", "a"];

    #[derive(Debug, Clone)]
    enum Op {
        Create(usize, usize),
        Modify(usize, usize),
        Delete(usize, usize),
        Rename((usize, usize), (usize, usize)),
        RenameDir(usize, usize),
        Ignore(usize, usize, bool),
        MakeDir(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let file = (0..DIRS.len(), 0..NAMES.len());
        prop_oneof![
            file.clone().prop_map(|(d, n)| Op::Create(d, n)),
            file.clone().prop_map(|(d, n)| Op::Modify(d, n)),
            file.clone().prop_map(|(d, n)| Op::Delete(d, n)),
            (file.clone(), file).prop_map(|(a, b)| Op::Rename(a, b)),
            (1..DIRS.len(), 1..DIRS.len()).prop_map(|(a, b)| Op::RenameDir(a, b)),
            (0..DIRS.len(), 0..PATTERNS.len(), any::<bool>()).prop_map(|(d, p, g)| Op::Ignore(d, p, g)),
            (1..DIRS.len()).prop_map(Op::MakeDir),
        ]
    }

    fn path(root: &Path, dir: usize, name: usize) -> PathBuf {
        root.join(DIRS[dir]).join(NAMES[name])
    }

    /// Applies `op` to the tree (a step that cannot be done, e.g. in a missing folder, is
    /// skipped: the property holds whatever the tree).
    fn apply(root: &Path, op: &Op, n: usize) {
        let _ = match *op {
            Op::Create(d, f) | Op::Modify(d, f) => {
                std::fs::write(path(root, d, f), format!("{n}").repeat(n % 5))
            }
            Op::Delete(d, f) => std::fs::remove_file(path(root, d, f)),
            Op::Rename((d1, f1), (d2, f2)) => std::fs::rename(path(root, d1, f1), path(root, d2, f2)),
            Op::RenameDir(a, b) => std::fs::rename(root.join(DIRS[a]), root.join(DIRS[b])),
            Op::Ignore(d, p, git) => {
                let name = if git { ".gitignore" } else { ".ignore" };
                std::fs::write(root.join(DIRS[d]).join(name), PATTERNS[p])
            }
            Op::MakeDir(d) => std::fs::create_dir_all(root.join(DIRS[d])),
        };
    }

    struct Tree {
        _dir: tempfile::TempDir,
        root: Root,
        warm: Provider,
        cold: Provider,
    }

    fn tree(max_bytes: usize) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        for d in DIRS {
            std::fs::create_dir_all(path.join(d)).unwrap();
            for name in NAMES {
                std::fs::write(path.join(d).join(name), name).unwrap();
            }
        }
        let root = RootDir::new(&path, None).unwrap();
        let config = ProviderConfig { fsync: false, ..Default::default() };
        let warm = Provider::new(ProviderConfig { max_search_cache_bytes: max_bytes, ..config.clone() });
        let cold = Provider::new(ProviderConfig { max_search_cache_bytes: 0, ..config });
        Tree { _dir: dir, root, warm, cold }
    }

    impl Tree {
        fn resolve(&self, rel: &str) -> Option<crate::provider::Resolved> {
            let roots = [self.root.clone()];
            let scope = Scope { roots: &roots, cwd: self.root.path() };
            self.cold.resolve(if rel.is_empty() { "." } else { rel }, scope).ok().filter(|r| r.folder)
        }

        /// Lets the warm provider's watcher catch up with every change made so far to `rel`:
        /// changes a listed file there and waits until that change was handled (events of one
        /// watcher arrive in order).
        fn settle(&self, rel: &str) {
            let flush = Path::new(rel).join("flush.txt");
            std::fs::write(self.root.path().join(&flush), Instant::now().elapsed().as_nanos().to_string())
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !self.warm.listings.settled(&self.root, Path::new(rel), &flush) {
                assert!(
                    Instant::now() < deadline,
                    "the watcher never handled a change of {}",
                    flush.display()
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        /// The warm answer for `rel` equals a cold walk's.
        fn check(&self, rel: &str) {
            let Some(target) = self.resolve(rel) else { return };
            self.settle(rel);
            let warm = self.warm.list_files(&target, &|| false).unwrap();
            let cold = self.cold.list_files(&target, &|| false).unwrap();
            assert_eq!(warm.files, cold.files, "warm and cold listings of {rel:?} differ");
        }
    }

    #[test]
    fn a_repeated_listing_is_warm_and_bounded() {
        let tree = tree(64 << 20);
        let target = tree.resolve("a").unwrap();
        let first = tree.warm.list_files(&target, &|| false).unwrap();
        assert_eq!(tree.warm.cached_listings().0, 1);
        tree.settle("a");
        // A content change keeps the listing, with the new size.
        std::fs::write(tree.root.path().join("a/y.txt"), "longer now").unwrap();
        tree.settle("a");
        let second = tree.warm.list_files(&target, &|| false).unwrap();
        assert_eq!(tree.warm.cached_listings().0, 1, "a content change keeps the listing");
        assert_ne!(first.files, second.files);
        assert_eq!(second.files, tree.cold.list_files(&target, &|| false).unwrap().files);
        // A stopped walk is not kept; forgetting drops.
        tree.warm.forget_listings(&tree.root.path().join("a/new"));
        assert_eq!(tree.warm.cached_listings().0, 0);
        assert!(tree.warm.list_files(&target, &|| true).unwrap().stopped);
        assert_eq!(tree.warm.cached_listings().0, 0);
        tree.warm.list_files(&target, &|| false).unwrap();
        tree.warm.forget_all_listings();
        assert_eq!(tree.warm.cached_listings(), (0, 0));
        // A listing over the cap alone is never kept.
        let small = tree_with_cap(64);
        let target = small.resolve("").unwrap();
        small.warm.list_files(&target, &|| false).unwrap();
        assert_eq!(small.warm.cached_listings(), (0, 0));
    }

    fn tree_with_cap(max_bytes: usize) -> Tree {
        tree(max_bytes)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

        #[test]
        fn warm_listings_equal_cold_walks(ops in proptest::collection::vec(op(), 1..10)) {
            let tree = tree(64 << 20);
            for rel in SEARCHED {
                tree.check(rel);
            }
            for (n, op) in ops.iter().enumerate() {
                apply(tree.root.path(), op, n);
                for rel in SEARCHED {
                    tree.check(rel);
                }
            }
        }
    }
}
