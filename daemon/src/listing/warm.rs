//! Warm listings: the files a walk of a folder found, kept per (root, folder) so that a repeated
//! search skips the walk, kept true by inotify watches on exactly the folders the walk entered.
//!
//! inotify is a hint, never the truth, so invalidation is conservative. Each folder is watched
//! *before* the walk reads its entries or its ignore files, so any change during the walk
//! discards the fresh list. A watch is added through the handle the walk opened the folder with
//! (`/proc/self/fd/N`), so it is bound to the very folder read, never to whatever a name leads
//! to later; and each one is taken from the daemon's share of the user's watches
//! ([`WatchBudget`]): a walk that cannot watch every folder it reads is not kept. Afterwards
//! every event of a watched folder drops the listing (a create, delete or rename in it, a
//! change of an ignore file, the folder itself moved or deleted, a lost event queue), except a
//! content or metadata change of a file the listing holds: that file's size and modification
//! time are re-read (beneath its root) at the next answer. A file renamed onto a listed file's
//! name (an atomic replace, which is how the daemon itself writes) is such a change too, and a
//! hidden name coming or going is none while no ignore file the walk read whitelists. The
//! folders between the root and the searched one are watched too, where only their ignore
//! files, their `.git` and the next folder on the way matter. Ignored and hidden folders are never walked, so a build writing
//! into `target/` drops nothing; a walked folder's `.git` and `.git/info` are watched for
//! `info` and `exclude` alone, the one ignore file kept there, so git writing its own files
//! drops nothing either.
//!
//! Why not `notify` here (the file watcher uses it): each watch it adds is a round trip to its
//! thread (a walk of 2,000 folders paid about 120 ms for them), and before notify 9 its mask
//! always held `IN_OPEN`, so every file a search opened queued an event to the listing's own
//! watcher (a grep of 12,000 files, 12,000 events). Here the walk's threads add their watches
//! with one system call each, and one thread reads the events of every listing: one inotify
//! instance, whose watches are shared when two listings watch the same folder. There are at
//! most [`MAX_LISTINGS`] listings, holding at most the configured bytes (least recently used
//! out first; a listing over the cap alone is never kept: its searches walk cold).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

use super::grams::{CacheBytes, Grams};
use super::listed::{Listed, ns};
use super::walker::{FolderHook, Watch};
use crate::provider::Root;
use crate::provider::budget::WatchBudget;

/// Most listings kept at once.
pub const MAX_LISTINGS: usize = 16;
/// Most files of one listing whose size and time wait to be re-read; past it the listing is
/// dropped instead.
const MAX_TOUCHED: usize = 1024;
/// Most folders one listing watches; a walk that enters more is not kept (its searches walk
/// cold), so a tree of countless empty folders cannot fill the watch table.
const MAX_WATCHED_FOLDERS: usize = 1 << 16;
/// How often the event thread looks whether its listings are gone (it then ends).
const EVENT_POLL: Duration = Duration::from_millis(500);

/// (root, folder relative to it).
type Key = (PathBuf, PathBuf);

/// What a watched folder is to one listing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// A folder the walk entered: every event matters.
    Walked,
    /// A folder between the root and the searched one: only its ignore files, its `.git` and
    /// this entry (the next folder on the way) matter.
    OnTheWay(OsString),
    /// A `.git` folder (for its `info`) or a `.git/info` folder (for its `exclude`): only this
    /// entry matters.
    Only(&'static str),
}

impl Role {
    /// Whether an event about the entry `name` of the folder can change the listing.
    fn cares(&self, name: &OsStr) -> bool {
        match self {
            Self::Walked => true,
            Self::OnTheWay(next) => {
                name == next.as_os_str() || name == ".gitignore" || name == ".ignore" || name == ".git"
            }
            Self::Only(only) => name == *only,
        }
    }
}

/// One inotify watch and the listings (or walks) using it.
struct Watched {
    wd: WatchDescriptor,
    folder: PathBuf,
    users: HashMap<u64, Role>,
}

/// One kept listing.
struct Entry {
    id: u64,
    root: Root,
    files: Arc<Vec<Listed>>,
    /// Listed files changed since listed (relative to the root).
    touched: HashSet<PathBuf>,
    /// Trigram filters of its files, built by the searches that read them.
    grams: Arc<Grams>,
    bytes: usize,
    used: u64,
    /// Whether an ignore file its walk read whitelists: without one, no hidden name can be
    /// listed, so hidden names coming and going (the daemon's own staging files, an editor's
    /// swap files) change nothing.
    whitelists: bool,
}

struct State {
    entries: HashMap<Key, Entry>,
    /// Listing id → its key (kept listings only).
    keys: HashMap<u64, Key>,
    /// Listings being walked → whether an event arrived meanwhile.
    filling: HashMap<u64, bool>,
    /// Watch descriptor number → the watch.
    watches: HashMap<i32, Watched>,
    /// Listing (or walk) id → the watch descriptor numbers it uses.
    uses: HashMap<u64, Vec<i32>>,
    next_id: u64,
    clock: u64,
    /// Bytes of the listings and their filters, against the cap.
    cache: Arc<CacheBytes>,
    /// The daemon's share of inotify watches, one taken per watch held here.
    budget: Arc<WatchBudget>,
}

impl State {
    /// Stops `id` using its watches; a watch nobody uses any more is removed.
    fn release(&mut self, id: u64, watches: &mut Watches) {
        for number in self.uses.remove(&id).unwrap_or_default() {
            let Some(watched) = self.watches.get_mut(&number) else { continue };
            watched.users.remove(&id);
            if watched.users.is_empty()
                && let Some(watched) = self.watches.remove(&number)
            {
                // Gone already when its folder was deleted: nothing to undo then.
                let _ = watches.remove(watched.wd);
                self.budget.give();
            }
        }
    }

    fn remove(&mut self, key: &Key, watches: &mut Watches) {
        if let Some(entry) = self.entries.remove(key) {
            self.cache.release(entry.bytes);
            entry.grams.retire();
            self.keys.remove(&entry.id);
            self.release(entry.id, watches);
        }
    }

    /// Drops listing `id`, or spoils its walk in progress.
    fn invalidate(&mut self, id: u64, watches: &mut Watches) {
        if let Some(dirty) = self.filling.get_mut(&id) {
            *dirty = true;
            return;
        }
        if let Some(key) = self.keys.get(&id).cloned() {
            self.remove(&key, watches);
        }
    }

    /// Drops every listing and spoils every walk.
    fn invalidate_all(&mut self, watches: &mut Watches) {
        let keys: Vec<Key> = self.entries.keys().cloned().collect();
        for key in keys {
            self.remove(&key, watches);
        }
        for dirty in self.filling.values_mut() {
            *dirty = true;
        }
    }

    /// One inotify event.
    fn event(&mut self, number: i32, mask: EventMask, name: Option<&OsStr>, watches: &mut Watches) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            return self.invalidate_all(watches);
        }
        let Some(watched) = self.watches.get(&number) else {
            // A watch removed meanwhile says so last; any other event may be of a watch a walk
            // has just added and not yet registered: spoil the walks.
            if !mask.contains(EventMask::IGNORED) {
                for dirty in self.filling.values_mut() {
                    *dirty = true;
                }
            }
            return;
        };
        let path = name.map(|name| watched.folder.join(name));
        let content = !mask.intersects(
            EventMask::CREATE
                | EventMask::DELETE
                | EventMask::MOVED_FROM
                | EventMask::MOVED_TO
                | EventMask::DELETE_SELF
                | EventMask::MOVE_SELF
                | EventMask::IGNORED
                | EventMask::UNMOUNT,
        ) && name.is_some();
        // A file renamed onto a name (an atomic replace, the daemon's own writes included): when
        // the name is a listed file, the listing stands and the file is re-read as changed.
        let replaced = mask.contains(EventMask::MOVED_TO) && !mask.contains(EventMask::ISDIR);
        let hidden = name.is_some_and(hidden_unlisted);
        let users: Vec<(u64, Role)> = watched.users.iter().map(|(id, role)| (*id, role.clone())).collect();
        for (id, role) in users {
            if name.is_some_and(|name| !role.cares(name)) {
                continue;
            }
            let kept = !self.filling.contains_key(&id) && role == Role::Walked;
            let entry = self.keys.get(&id).and_then(|key| self.entries.get(key));
            if kept && hidden && entry.is_some_and(|entry| !entry.whitelists) {
                continue;
            }
            if !(content || replaced) || !kept {
                self.invalidate(id, watches);
                continue;
            }
            // A content or metadata change: harmless to the list when it is of a listed file.
            let Some(key) = self.keys.get(&id) else { continue };
            let Some(entry) = self.entries.get_mut(key) else { continue };
            let listed = path.as_deref().and_then(|path| path.strip_prefix(&key.0).ok()).and_then(|rel| {
                let index = entry.files.binary_search_by(|f| (*f.rel).cmp(rel)).ok()?;
                Some((rel, index))
            });
            match listed {
                Some((rel, index)) if entry.touched.len() < MAX_TOUCHED => {
                    entry.grams.forget(index);
                    entry.touched.insert(rel.to_path_buf());
                }
                _ => self.invalidate(id, watches),
            }
        }
    }
}

/// Whether the entry `name` is hidden and no ignore file nor `.git`: only a whitelisting rule
/// could make the walk list it (or anything beneath it).
fn hidden_unlisted(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b".") && !matches!(name, b"." | b".." | b".gitignore" | b".ignore" | b".git")
}

/// The inotify instance shared by all listings, and its event thread.
struct Watcher {
    watches: Watches,
}

/// The warm listings (see the module documentation).
pub struct Listings {
    state: Arc<Mutex<State>>,
    max_bytes: usize,
    /// Started at the first walk that may be kept; `None` inside: inotify is unavailable.
    watcher: OnceLock<Option<Watcher>>,
}

impl std::fmt::Debug for Listings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (count, bytes) = self.stats();
        f.debug_struct("Listings").field("count", &count).field("bytes", &bytes).finish()
    }
}

/// A walk being filled: its id, told of each folder the walk enters
/// ([`Filling::folder_hook`]).
pub struct Filling {
    key: Key,
    id: u64,
    state: Arc<Mutex<State>>,
    watches: Watches,
    /// Set when a folder could not be watched (or too many were): the listing is not kept.
    failed: Arc<AtomicBool>,
    /// Folders watched so far.
    folders: Arc<std::sync::atomic::AtomicUsize>,
}

impl Filling {
    /// What the walk calls for each folder it opens, before it reads anything in it: watches
    /// it through the handle the walk holds, so that any later change in it spoils this
    /// listing. A folder that cannot be watched (none left in the daemon's share, too many for
    /// one listing, or an error) fails the listing: it is not kept.
    pub fn folder_hook(&self) -> FolderHook {
        let (id, state, failed) = (self.id, Arc::clone(&self.state), Arc::clone(&self.failed));
        let (watches, folders) = (self.watches.clone(), Arc::clone(&self.folders));
        Box::new(move |folder: &Path, dir: BorrowedFd<'_>, what: Watch<'_>| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            if folders.fetch_add(1, Ordering::Relaxed) >= MAX_WATCHED_FOLDERS {
                failed.store(true, Ordering::Relaxed);
                return;
            }
            let role = match what {
                Watch::Walked => Role::Walked,
                Watch::OnTheWay(next) => Role::OnTheWay(next.to_owned()),
                Watch::Git => Role::Only("info"),
                Watch::GitInfo => Role::Only("exclude"),
            };
            let mut watches = watches.clone();
            match watch(&state, &mut watches, id, folder, dir, role) {
                Ok(()) => {}
                Err(Unwatched::Budget) => failed.store(true, Ordering::Relaxed),
                Err(Unwatched::Failed(err)) => {
                    tracing::debug!(%err, folder = %folder.display(), "cannot watch a searched folder; its searches walk cold");
                    failed.store(true, Ordering::Relaxed);
                }
            }
        })
    }
}

/// The events a listing needs: entries coming and going, content and metadata changes, the
/// folder itself going. Never opens or reads, so searches reading files queue nothing. The
/// watch is added through `/proc/self/fd/N`, a link that must be followed to the folder the
/// walk holds open (so no `DONT_FOLLOW`; `ONLYDIR` still checks it is a folder).
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// Why a folder is not watched.
#[derive(Debug)]
enum Unwatched {
    /// The daemon holds its share of the user's watches.
    Budget,
    /// inotify refused.
    Failed(std::io::Error),
}

/// Watches the folder open as `dir` (shown as `folder`) for listing (or walk) `id`. The watch
/// is added and registered under the state's lock, so a release of the same watch by another
/// listing cannot come in between and leave this one registered on a removed watch.
fn watch(
    state: &Mutex<State>,
    watches: &mut Watches,
    id: u64,
    folder: &Path,
    dir: BorrowedFd<'_>,
    role: Role,
) -> Result<(), Unwatched> {
    let mut guard = lock(state);
    let state = &mut *guard;
    if !state.budget.take_for_listing() {
        return Err(Unwatched::Budget);
    }
    let handle = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let wd = match watches.add(&handle, mask()) {
        Ok(wd) => wd,
        Err(err) => {
            state.budget.give();
            return Err(Unwatched::Failed(err));
        }
    };
    let number = wd.get_watch_descriptor_id();
    let watched = match state.watches.entry(number) {
        std::collections::hash_map::Entry::Occupied(shared) => {
            // The folder was watched already (by another listing): no new watch was made.
            state.budget.give();
            shared.into_mut()
        }
        std::collections::hash_map::Entry::Vacant(new) => {
            new.insert(Watched { wd, folder: folder.to_path_buf(), users: HashMap::new() })
        }
    };
    // A walk meets a folder once; should it meet one twice, the first role stays.
    if let std::collections::hash_map::Entry::Vacant(user) = watched.users.entry(id) {
        user.insert(role);
        state.uses.entry(id).or_default().push(number);
    }
    Ok(())
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one listing costs, in bytes.
fn cost(key: &Key, files: &[Listed], folders: usize) -> usize {
    key.0.as_os_str().len()
        + key.1.as_os_str().len()
        + std::mem::size_of::<Entry>()
        + folders * (std::mem::size_of::<Watched>() + 64)
        // The slots of its trigram filters (the filters themselves are counted as they come).
        + files.len() * std::mem::size_of::<Option<super::grams::GramFilter>>()
        + files.iter().map(|f| f.rel.as_os_str().len() + std::mem::size_of::<Listed>()).sum::<usize>()
}

/// Reads the events of `inotify` for the listings in `state` until they are gone.
fn read_events(mut inotify: Inotify, state: Weak<Mutex<State>>) {
    let mut buffer = vec![0u8; 64 << 10];
    let mut watches = inotify.watches();
    loop {
        let mut fds = [rustix::event::PollFd::new(&inotify, rustix::event::PollFlags::IN)];
        let timeout = rustix::event::Timespec::try_from(EVENT_POLL).unwrap_or_default();
        let ready = rustix::event::poll(&mut fds, Some(&timeout));
        let Some(state) = state.upgrade() else { return };
        if matches!(ready, Ok(0) | Err(rustix::io::Errno::INTR)) {
            continue;
        }
        match inotify.read_events(&mut buffer) {
            Ok(events) => {
                let mut state = lock(&state);
                for event in events {
                    state.event(event.wd.get_watch_descriptor_id(), event.mask, event.name, &mut watches);
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => {
                tracing::warn!(%err, "reading the search listings' events failed; they are no longer kept");
                lock(&state).invalidate_all(&mut watches);
                return;
            }
        }
    }
}

impl Listings {
    /// No listings; at most `max_bytes` kept (0: none, every search walks cold), their watches
    /// taken from `budget`.
    pub fn new(max_bytes: usize, budget: Arc<WatchBudget>) -> Self {
        let state = State {
            entries: HashMap::new(),
            keys: HashMap::new(),
            filling: HashMap::new(),
            watches: HashMap::new(),
            uses: HashMap::new(),
            next_id: 0,
            clock: 0,
            cache: Arc::new(CacheBytes::new(max_bytes)),
            budget,
        };
        Self { state: Arc::new(Mutex::new(state)), max_bytes, watcher: OnceLock::new() }
    }

    /// Listings kept and their bytes (with their filters').
    pub fn stats(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.entries.len(), state.cache.used())
    }

    /// Files the kept listings hold, the bytes of their trigram filters (counted in
    /// [`stats`](Self::stats)' bytes too), and whether filters are being built now.
    pub fn held(&self) -> (usize, usize, bool) {
        let state = lock(&self.state);
        let files = state.entries.values().map(|entry| entry.files.len()).sum();
        let filters = state.entries.values().map(|entry| entry.grams.bytes()).sum();
        (files, filters, super::grams::building())
    }

    /// The shared inotify instance, started on first use.
    fn watcher(&self) -> Option<&Watcher> {
        self.watcher
            .get_or_init(|| {
                let inotify = Inotify::init()
                    .map_err(|err| tracing::warn!(%err, "no inotify: searches walk cold"))
                    .ok()?;
                let watches = inotify.watches();
                let state = Arc::downgrade(&self.state);
                std::thread::Builder::new()
                    .name("filectx-listings".into())
                    .spawn(move || read_events(inotify, state))
                    .map_err(|err| tracing::warn!(%err, "no listing thread: searches walk cold"))
                    .ok()?;
                Some(Watcher { watches })
            })
            .as_ref()
    }

    /// The kept listing of `rel` beneath `root`, its changed files' sizes and times re-read,
    /// and its files' filters.
    pub fn get(&self, root: &Root, rel: &Path) -> Option<(Arc<Vec<Listed>>, Arc<Grams>)> {
        let key = (root.path().to_path_buf(), rel.to_path_buf());
        let mut state = lock(&self.state);
        state.clock += 1;
        let clock = state.clock;
        let entry = state.entries.get_mut(&key)?;
        entry.used = clock;
        let mut gone = false;
        for rel in std::mem::take(&mut entry.touched) {
            let meta = entry.root.open_path(&rel).and_then(|f| f.metadata());
            let Ok(meta) = meta.map_err(drop).and_then(|m| if m.is_file() { Ok(m) } else { Err(()) }) else {
                gone = true;
                break;
            };
            use std::os::unix::fs::MetadataExt;
            if let Ok(i) = entry.files.binary_search_by(|f| (*f.rel).cmp(&rel)) {
                // Copied only while an earlier answer still holds the old list.
                let files = Arc::make_mut(&mut entry.files);
                files[i].mtime_ns = ns(meta.mtime(), meta.mtime_nsec());
                files[i].size = meta.len();
            }
        }
        if gone {
            if let Some(mut watches) = self.watcher().map(|w| w.watches.clone()) {
                state.remove(&key, &mut watches);
            }
            return None;
        }
        Some((entry.files.clone(), entry.grams.clone()))
    }

    /// Starts a walk whose listing may be kept: the walk then watches each folder it opens,
    /// from the root down to `rel` beneath `root` and every folder it reads, through
    /// [`Filling::folder_hook`]. `None`: it cannot be kept (none are kept, or no inotify): walk
    /// cold.
    pub fn start(&self, root: &Root, rel: &Path) -> Option<Filling> {
        if self.max_bytes == 0 {
            return None;
        }
        let watches = self.watcher()?.watches.clone();
        let key = (root.path().to_path_buf(), rel.to_path_buf());
        let id = {
            let mut state = lock(&self.state);
            state.next_id += 1;
            let id = state.next_id;
            state.filling.insert(id, false);
            id
        };
        Some(Filling {
            key,
            id,
            state: Arc::clone(&self.state),
            watches,
            failed: Arc::default(),
            folders: Arc::default(),
        })
    }

    /// Keeps the listing `files` that the walk begun by `filling` found, unless an event
    /// arrived meanwhile or it does not fit; its (still empty) filters when kept.
    pub fn finish(
        &self,
        filling: Filling,
        root: &Root,
        files: &Arc<Vec<Listed>>,
        whitelists: bool,
    ) -> Option<Arc<Grams>> {
        let Filling { key, id, mut watches, failed, .. } = filling;
        let mut state = lock(&self.state);
        let dirty = state.filling.remove(&id).unwrap_or(true);
        let folders = state.uses.get(&id).map_or(0, Vec::len);
        let bytes = cost(&key, files, folders);
        if dirty || failed.load(Ordering::Relaxed) || bytes > self.max_bytes {
            state.release(id, &mut watches);
            return None;
        }
        state.remove(&key, &mut watches);
        state.clock += 1;
        let used = state.clock;
        // Older listings (with their filters) make room, least recently used first.
        while state.entries.len() >= MAX_LISTINGS || !state.cache.reserve(bytes) {
            let Some(oldest) = state.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
            else {
                state.release(id, &mut watches);
                return None;
            };
            state.remove(&oldest, &mut watches);
        }
        state.keys.insert(id, key.clone());
        let grams = Arc::new(Grams::new(files.len(), Arc::clone(&state.cache)));
        let entry = Entry {
            id,
            root: root.clone(),
            files: files.clone(),
            touched: HashSet::new(),
            grams: Arc::clone(&grams),
            bytes,
            used,
            whitelists,
        };
        state.entries.insert(key, entry);
        Some(grams)
    }

    /// Drops the walk begun by `filling` (stopped or truncated): nothing is kept.
    pub fn abandon(&self, filling: Filling) {
        let Filling { id, mut watches, .. } = filling;
        let mut state = lock(&self.state);
        state.filling.remove(&id);
        state.release(id, &mut watches);
    }

    /// Drops every listing that `path` may be part of: those of folders containing it, and
    /// those of folders beneath its parent (it may be an ignore file or a folder on their way).
    pub fn forget(&self, path: &Path) {
        let Some(mut watches) = self.watcher.get().and_then(Option::as_ref).map(|w| w.watches.clone()) else {
            return;
        };
        let parent = path.parent().unwrap_or(path);
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
            state.remove(&key, &mut watches);
        }
        for dirty in state.filling.values_mut() {
            *dirty = true;
        }
    }

    /// Drops every listing.
    pub fn forget_all(&self) {
        let Some(mut watches) = self.watcher.get().and_then(Option::as_ref).map(|w| w.watches.clone()) else {
            return;
        };
        lock(&self.state).invalidate_all(&mut watches);
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
    use crate::provider::{Provider, ProviderConfig, RootDir, Scope};
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
        /// The provider of the cold listings, which resolves the searched folders.
        provider: Provider,
        warm: Arc<Listings>,
        cold: Arc<Listings>,
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
        let warm = Arc::new(Listings::for_provider(&Provider::new(ProviderConfig {
            max_search_cache_bytes: max_bytes,
            ..config.clone()
        })));
        let provider = Provider::new(ProviderConfig { max_search_cache_bytes: 0, ..config });
        let cold = Arc::new(Listings::for_provider(&provider));
        Tree { _dir: dir, root, provider, warm, cold }
    }

    impl Tree {
        fn resolve(&self, rel: &str) -> Option<crate::provider::Resolved> {
            let roots = [self.root.clone()];
            let scope = Scope { roots: &roots, cwd: self.root.path() };
            self.provider.resolve(if rel.is_empty() { "." } else { rel }, scope).ok().filter(|r| r.folder)
        }

        /// Lets the warm provider's watcher catch up with every change made so far to `rel`:
        /// changes a listed file there and waits until that change was handled (events of one
        /// watcher arrive in order). The change is made again every 100 ms while waiting: an
        /// event that came before the listing it would mark existed (the listing, walked after
        /// the change, already shows it) marks nothing, and a later one will.
        fn settle(&self, rel: &str) {
            let flush = Path::new(rel).join("flush.txt");
            let started = Instant::now();
            let deadline = started + Duration::from_secs(10);
            let write = || {
                std::fs::write(self.root.path().join(&flush), started.elapsed().as_nanos().to_string())
                    .unwrap()
            };
            write();
            let mut next_write = started + Duration::from_millis(100);
            while !self.warm.settled(&self.root, Path::new(rel), &flush) {
                let now = Instant::now();
                assert!(now < deadline, "the watcher never handled a change of {}", flush.display());
                if now >= next_write {
                    write();
                    next_write = now + Duration::from_millis(100);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        /// The warm answer for `rel` equals a cold walk's.
        fn check(&self, rel: &str) {
            let Some(target) = self.resolve(rel) else { return };
            self.settle(rel);
            let warm = self.warm.list(&target, &|| false).unwrap();
            let cold = self.cold.list(&target, &|| false).unwrap();
            assert_eq!(warm.files, cold.files, "warm and cold listings of {rel:?} differ");
        }
    }

    #[test]
    fn a_repeated_listing_is_warm_and_bounded() {
        let tree = tree(64 << 20);
        let target = tree.resolve("a").unwrap();
        let first = tree.warm.list(&target, &|| false).unwrap();
        assert_eq!(tree.warm.stats().0, 1);
        tree.settle("a");
        // A content change keeps the listing, with the new size.
        std::fs::write(tree.root.path().join("a/y.txt"), "longer now").unwrap();
        tree.settle("a");
        let second = tree.warm.list(&target, &|| false).unwrap();
        assert_eq!(tree.warm.stats().0, 1, "a content change keeps the listing");
        assert_ne!(first.files, second.files);
        assert_eq!(second.files, tree.cold.list(&target, &|| false).unwrap().files);
        // A stopped walk is not kept; forgetting drops.
        tree.warm.forget(&tree.root.path().join("a/new"));
        assert_eq!(tree.warm.stats().0, 0);
        assert!(tree.warm.list(&target, &|| true).unwrap().stopped);
        assert_eq!(tree.warm.stats().0, 0);
        tree.warm.list(&target, &|| false).unwrap();
        tree.warm.forget_all();
        assert_eq!(tree.warm.stats(), (0, 0));
        // A listing over the cap alone is never kept.
        let small = tree_with_cap(64);
        let target = small.resolve("").unwrap();
        small.warm.list(&target, &|| false).unwrap();
        assert_eq!(small.warm.stats(), (0, 0));
    }

    #[test]
    fn only_changes_that_can_change_the_answer_drop_a_listing() {
        let tree = tree(64 << 20);
        let root = tree.root.path().to_path_buf();
        std::fs::create_dir_all(root.join("a/.git/objects")).unwrap();
        std::fs::create_dir_all(root.join("a/target/debug")).unwrap();
        std::fs::write(root.join("a/.gitignore"), "target/\n").unwrap();
        let target = tree.resolve("a").unwrap();
        // The first settle creates the flush file: list again once it exists.
        tree.settle("a");
        tree.warm.list(&target, &|| false).unwrap();
        tree.settle("a");
        assert_eq!(tree.warm.stats().0, 1);
        // Hidden and ignored folders are not watched; a file beside the searched folder on the
        // way from the root does not matter either.
        std::fs::write(root.join("a/.git/objects/pack"), "x").unwrap();
        std::fs::write(root.join("a/target/debug/build.o"), "x").unwrap();
        std::fs::create_dir(root.join("a/target/debug/deps")).unwrap();
        std::fs::write(root.join("beside.txt"), "x").unwrap();
        std::fs::write(root.join("c/x.rs"), "changed").unwrap();
        tree.settle("a");
        assert_eq!(tree.warm.stats().0, 1, "nothing that can change the listing happened");
        // An ignore file on the way does.
        std::fs::write(root.join(".ignore"), "*.txt\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while tree.warm.stats().0 != 0 {
            assert!(Instant::now() < deadline, "an ignore file on the way kept the listing");
            std::thread::sleep(Duration::from_millis(1));
        }
        let warm = tree.warm.list(&target, &|| false).unwrap();
        assert_eq!(warm.files, tree.cold.list(&target, &|| false).unwrap().files);
        assert!(warm.files.iter().all(|f| f.rel.extension().is_none_or(|e| e != "txt")));
    }

    #[test]
    fn a_change_of_git_info_exclude_drops_a_listing() {
        let tree = tree(64 << 20);
        let root = tree.root.path().to_path_buf();
        std::fs::create_dir_all(root.join("a/.git/info")).unwrap();
        std::fs::write(root.join("a/.git/info/exclude"), "").unwrap();
        std::fs::create_dir_all(root.join("a/b/.git")).unwrap();
        // The warm listing of `a` (checked against a cold walk): how many files end in `ext`.
        let count = |ext: &str| {
            let target = tree.resolve("a").unwrap();
            let warm = tree.warm.list(&target, &|| false).unwrap();
            assert_eq!(warm.files, tree.cold.list(&target, &|| false).unwrap().files);
            warm.files.iter().filter(|f| f.rel.extension().is_some_and(|e| e == ext)).count()
        };
        let kept = || {
            tree.settle("a");
            count("rs");
            tree.settle("a");
            assert_eq!(tree.warm.stats().0, 1);
        };
        let dropped = |what: &str| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while tree.warm.stats().0 != 0 {
                assert!(Instant::now() < deadline, "{what} kept the listing");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        // The searched folder's own `.git/info/exclude`.
        kept();
        let txt = count("txt");
        assert!(txt > 0);
        // Git writing its own files drops nothing.
        std::fs::write(root.join("a/.git/index"), "x").unwrap();
        std::fs::write(root.join("a/.git/info/refs"), "x").unwrap();
        tree.settle("a");
        assert_eq!(tree.warm.stats().0, 1, "git's own files are not ignore files");
        std::fs::write(root.join("a/.git/info/exclude"), "y.txt\n").unwrap();
        dropped("a change of the searched folder's .git/info/exclude");
        assert!(count("txt") < txt);
        // A walked folder's `.git` without `info`: an exclude made there drops the listing too.
        kept();
        let log = count("log");
        assert!(log > 0);
        std::fs::create_dir(root.join("a/b/.git/info")).unwrap();
        std::fs::write(root.join("a/b/.git/info/exclude"), "z.log\n").unwrap();
        dropped("an exclude made in a walked folder's .git");
        assert!(count("log") < log);
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
