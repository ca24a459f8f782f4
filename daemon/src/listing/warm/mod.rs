//! Warm listings: the files a walk of a folder found, kept per (root, folder) so that a repeated
//! search skips the walk, kept true by inotify watches on exactly the folders the walk entered.
//!
//! inotify is a hint, never the truth. Each folder is watched *before* the walk reads its
//! entries or its ignore files, so any change during the walk discards the fresh list. A watch
//! is added through the handle the walk opened the folder with (`/proc/self/fd/N`), so it is
//! bound to the very folder read, never to whatever a name leads to later; and each one is
//! taken from the daemon's share of the user's watches ([`WatchBudget`]): a walk that cannot
//! watch every folder it reads is not kept.
//!
//! Afterwards the listing follows what happens in the folders it walked, without walking
//! them again (see [`follow`]): an entry that changed, came or went there (or a walked folder
//! itself moved or deleted) is noted, its filter going at once, and looked at at the next
//! answer as a walk would see it then (see [`judge`](super::judge)): a file a walk lists is
//! inserted in order or re-dated, one gone (or no longer a regular file) is removed, an
//! ignored, hidden or linked one changes nothing; a folder gone takes out what was listed
//! beneath it and the watches of its folders, and a folder that came is walked on its own,
//! watched as a walk watches; the filters of the files that stayed move with them into the
//! new list's [`Grams`]. So what an event means is asked of the tree itself, beneath the root:
//! events late, doubled or out of order mislead nothing. A hidden name is not even noted while
//! no ignore file the walk read whitelists (the daemon's own staging files, an editor's swap
//! files). Only what a walk of the whole folder alone can tell drops the listing: a change of
//! an ignore file or a `.git`; the searched folder or one on the way moved or deleted; more
//! than [`MAX_CHANGED`] changes waiting; a new folder too big to walk at once; a listing grown
//! past a walk's bounds or the cache; a lost event queue.
//! The folders between the root and the searched one are watched too, where only their ignore
//! files, their `.git` and the next folder on the way matter. Ignored and hidden folders are
//! never walked, so a build writing into `target/` drops nothing; a walked folder's `.git` and
//! `.git/info` are watched for `info` and `exclude` alone, the one ignore file kept there, so
//! git writing its own files drops nothing either.
//!
//! Why not `notify` here (the file watcher uses it): each watch it adds is a round trip to its
//! thread (a walk of 2,000 folders paid about 120 ms for them), and before notify 9 its mask
//! always held `IN_OPEN`, so every file a search opened queued an event to the listing's own
//! watcher (a grep of 12,000 files, 12,000 events). Here the walk's threads add their watches
//! with one system call each, and one thread reads the events of every listing: one inotify
//! instance, whose watches are shared when two listings watch the same folder. There are at
//! most [`MAX_LISTINGS`] listings, holding at most the configured bytes with their filters;
//! room is made least recently searched first, filters before listings: a new listing, or the
//! filters of a listing being searched, first take the place of the filters of listings
//! searched before it (whose searches then read every file, with the same answers), and only
//! then older listings go. A listing over the cap alone is never kept: its searches walk cold.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

use super::grams::{CacheBytes, Grams};
use super::index::Indexes;
use super::listed::Listed;
use super::walker::{Folder, FolderHook, Watch};
use crate::provider::Root;
use crate::provider::budget::WatchBudget;

/// Most listings kept at once.
pub const MAX_LISTINGS: usize = 16;
/// Most paths of one listing that wait to be looked at again (files changed, names come or
/// gone); past it the listing is dropped instead.
const MAX_CHANGED: usize = 1024;
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
    users: HashMap<u64, User>,
}

/// What a watched folder is to one listing (or walk) using the watch.
struct User {
    role: Role,
    /// The folder's path when this listing's walk opened it: a watch is of the folder itself,
    /// so one shared with a listing walked before the folder was renamed is shown by each
    /// listing at its own path (a listing that sees the rename lets go of the watch, see
    /// [`State::take_in`]).
    folder: PathBuf,
}

/// One kept listing.
struct Entry {
    id: u64,
    root: Root,
    files: Arc<Vec<Listed>>,
    /// Paths in its walked folders (relative to the root) whose entry changed, came or went
    /// since it was listed: looked at again at the next answer (see [`judge`](super::judge)).
    changed: HashSet<PathBuf>,
    /// Trigram filters of its files, built by the searches that read them.
    grams: Arc<Grams>,
    bytes: usize,
    /// The [`listed_bytes`] of its files.
    listed: usize,
    used: u64,
    /// Whether an ignore file its walk read whitelists: without one, no hidden name can be
    /// listed, so hidden names coming and going (the daemon's own staging files, an editor's
    /// swap files) change nothing.
    whitelists: bool,
    /// The folders its walk read and the digest of the rules on its way, as the search index
    /// keeps them (a folder changed since is read again at the next validation).
    records: Records,
}

/// The folders a listing's walk read, and the digest of the rules on its way.
pub type Records = (Arc<Vec<Folder>>, u64);

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
    /// Roots whose kept listings changed since their index was last written or loaded.
    dirty: HashSet<PathBuf>,
    /// Roots whose index is being validated: not written meanwhile (a listing whose filters
    /// are still being looked at would be written without them).
    validating: HashSet<PathBuf>,
}

impl State {
    /// Stops `id` using its watches; a watch nobody uses any more is removed.
    fn release(&mut self, id: u64, watches: &mut Watches) {
        for number in self.uses.remove(&id).unwrap_or_default() {
            self.unuse(id, number, watches);
        }
    }

    /// Stops `id` using the watch `number` (already taken off its uses); removes the watch
    /// when nobody uses it any more.
    fn unuse(&mut self, id: u64, number: i32, watches: &mut Watches) {
        let Some(watched) = self.watches.get_mut(&number) else { return };
        watched.users.remove(&id);
        if watched.users.is_empty()
            && let Some(watched) = self.watches.remove(&number)
        {
            // Gone already when its folder was deleted: nothing to undo then.
            let _ = watches.remove(watched.wd);
            self.budget.give();
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
        let hidden = name.is_some_and(hidden_unlisted);
        let users: Vec<(u64, Role, PathBuf)> = watched
            .users
            .iter()
            .map(|(id, user)| {
                (*id, user.role.clone(), name.map_or_else(|| user.folder.clone(), |n| user.folder.join(n)))
            })
            .collect();
        for (id, role, path) in users {
            if name.is_some_and(|name| !role.cares(name)) {
                continue;
            }
            // Only what happens in a folder a kept listing walked is followed (an entry of it,
            // or the folder itself going); anything else (an event during the walk, a folder on
            // the way) drops it.
            let kept = !self.filling.contains_key(&id) && role == Role::Walked;
            if !(kept && self.follow(id, name, &path, hidden)) {
                self.invalidate(id, watches);
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
    /// The search index on disk, when one is kept (see [`stored`]).
    index: OnceLock<Arc<Indexes>>,
    /// Roots whose index is being loaded and validated.
    validating: Mutex<HashMap<PathBuf, Arc<stored::Validation>>>,
    /// Searches dating the files they show now: a validation comparing every file's stat data
    /// lets them go first.
    pub(super) dating: std::sync::atomic::AtomicUsize,
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
            let mut watches = watches.clone();
            match watch(&state, &mut watches, id, folder, dir, Role::of(what)) {
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
    let wd = add_watch(&guard.budget, watches, dir)?;
    guard.register(id, wd, folder, role);
    Ok(())
}

/// Adds an inotify watch on the folder open as `dir`, taken from `budget` (register it with
/// [`State::register`], under the same hold of the state's lock).
fn add_watch(
    budget: &WatchBudget,
    watches: &mut Watches,
    dir: BorrowedFd<'_>,
) -> Result<WatchDescriptor, Unwatched> {
    if !budget.take_for_listing() {
        return Err(Unwatched::Budget);
    }
    let handle = format!("/proc/self/fd/{}", dir.as_raw_fd());
    watches.add(&handle, mask()).map_err(|err| {
        budget.give();
        Unwatched::Failed(err)
    })
}

impl Role {
    /// What a folder the walk opens is to the listing.
    fn of(what: Watch<'_>) -> Self {
        match what {
            Watch::Walked => Role::Walked,
            Watch::OnTheWay(next) => Role::OnTheWay(next.to_owned()),
            Watch::Git => Role::Only("info"),
            Watch::GitInfo => Role::Only("exclude"),
        }
    }
}

impl State {
    /// Registers the watch `wd` just added (its share taken from the budget) on `folder` for
    /// listing (or walk) `id`.
    fn register(&mut self, id: u64, wd: WatchDescriptor, folder: &Path, role: Role) {
        let number = wd.get_watch_descriptor_id();
        let watched = match self.watches.entry(number) {
            std::collections::hash_map::Entry::Occupied(shared) => {
                // The folder was watched already (by another listing): no new watch was made.
                self.budget.give();
                shared.into_mut()
            }
            std::collections::hash_map::Entry::Vacant(new) => {
                new.insert(Watched { wd, users: HashMap::new() })
            }
        };
        // A walk meets a folder once; should it meet one twice, the first role stays.
        if let std::collections::hash_map::Entry::Vacant(user) = watched.users.entry(id) {
            user.insert(User { role, folder: folder.to_path_buf() });
            self.uses.entry(id).or_default().push(number);
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one listing costs, in bytes: kept as `key`, of `files` files whose [`listed_bytes`]
/// sum to `listed`, watching (and recording) `folders` folders.
fn cost(key: &Key, files: usize, listed: usize, folders: usize) -> usize {
    key.0.as_os_str().len()
        + key.1.as_os_str().len()
        + std::mem::size_of::<Entry>()
        + folders * (std::mem::size_of::<Watched>() + std::mem::size_of::<Folder>() + 64)
        // The slots of its trigram filters (the filters themselves are counted as they come).
        + files * std::mem::size_of::<Option<super::grams::GramFilter>>()
        + listed
}

/// What one listed file holds, as a walk counts it against [`MAX_LISTED_BYTES`](super::MAX_LISTED_BYTES).
fn listed_bytes(file: &Listed) -> usize {
    file.rel.as_os_str().len() + std::mem::size_of::<Listed>()
}

/// Makes room in the full search cache for the filters of the listing `asking` holds: drops the
/// filters of the listing searched least recently of those searched before it, if one has any
/// (its searches then read every file, with the same answers). Whether any were dropped.
fn make_room(state: &Weak<Mutex<State>>, asking: &Grams) -> bool {
    let Some(state) = state.upgrade() else { return false };
    let state = lock(&state);
    let Some(used) =
        state.entries.values().find(|e| std::ptr::eq(Arc::as_ptr(&e.grams), asking)).map(|e| e.used)
    else {
        return false;
    };
    let oldest =
        state.entries.values().filter(|e| e.used < used && e.grams.bytes() > 0).min_by_key(|e| e.used);
    oldest.is_some_and(|entry| entry.grams.drop_filters() > 0)
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
            dirty: HashSet::new(),
            validating: HashSet::new(),
        };
        let cache = Arc::clone(&state.cache);
        let state = Arc::new(Mutex::new(state));
        let weak = Arc::downgrade(&state);
        cache.on_full(Box::new(move |grams| make_room(&weak, grams)));
        Self {
            state,
            max_bytes,
            watcher: OnceLock::new(),
            index: OnceLock::new(),
            validating: Mutex::default(),
            dating: std::sync::atomic::AtomicUsize::new(0),
        }
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

    /// The kept listing of `rel` beneath `root`, with the changes it was told of taken in
    /// (see [`State::take_in`]), and its files' filters.
    pub fn get(&self, root: &Root, rel: &Path) -> Option<(Arc<Vec<Listed>>, Arc<Grams>)> {
        let key = (root.path().to_path_buf(), rel.to_path_buf());
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.clock += 1;
        let entry = state.entries.get_mut(&key)?;
        entry.used = state.clock;
        if !entry.changed.is_empty() {
            let mut watches = self.watcher()?.watches.clone();
            if !state.take_in(&key, &mut watches) {
                state.remove(&key, &mut watches);
                return None;
            }
        }
        let entry = state.entries.get(&key)?;
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

    /// Keeps the listing `files` that the walk begun by `filling` found (recording `records`),
    /// unless an event arrived meanwhile or it does not fit; its (still empty) filters when kept.
    pub fn finish(
        &self,
        filling: Filling,
        root: &Root,
        files: &Arc<Vec<Listed>>,
        whitelists: bool,
        records: Records,
    ) -> Option<Arc<Grams>> {
        let kept = self.keep(filling, root, files, (whitelists, records), |cache| {
            Grams::new(files.len(), Arc::clone(cache))
        });
        if kept.is_some() {
            lock(&self.state).dirty.insert(root.path().to_path_buf());
        }
        kept
    }

    /// Keeps the listing `files` that the walk begun by `filling` found, with the filters
    /// `grams` makes (asked only once it is kept), unless an event arrived meanwhile or it does
    /// not fit; its filters when kept.
    fn keep(
        &self,
        filling: Filling,
        root: &Root,
        files: &Arc<Vec<Listed>>,
        (whitelists, records): (bool, Records),
        grams: impl FnOnce(&Arc<CacheBytes>) -> Grams,
    ) -> Option<Arc<Grams>> {
        let Filling { key, id, mut watches, failed, .. } = filling;
        let mut state = lock(&self.state);
        let dirty = state.filling.remove(&id).unwrap_or(true);
        let folders = state.uses.get(&id).map_or(0, Vec::len);
        let listed = files.iter().map(listed_bytes).sum();
        let bytes = cost(&key, files.len(), listed, folders);
        if dirty || failed.load(Ordering::Relaxed) || bytes > self.max_bytes {
            state.release(id, &mut watches);
            return None;
        }
        state.remove(&key, &mut watches);
        state.clock += 1;
        let used = state.clock;
        // Room is made least recently searched first: the filters of older listings go first
        // (their searches then read every file), then older listings themselves.
        while state.entries.len() >= MAX_LISTINGS || !state.cache.reserve(bytes) {
            if state.entries.len() < MAX_LISTINGS
                && let Some(oldest) =
                    state.entries.values().filter(|e| e.grams.bytes() > 0).min_by_key(|e| e.used)
            {
                oldest.grams.drop_filters();
                continue;
            }
            let Some(oldest) = state.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
            else {
                state.release(id, &mut watches);
                return None;
            };
            state.remove(&oldest, &mut watches);
        }
        state.keys.insert(id, key.clone());
        let grams = Arc::new(grams(&state.cache));
        if let Some(index) = self.index.get() {
            grams.on_built(stored::on_built(&self.state, index, root.path()));
        }
        let entry = Entry {
            id,
            root: root.clone(),
            files: files.clone(),
            changed: HashSet::new(),
            grams: Arc::clone(&grams),
            bytes,
            listed,
            used,
            whitelists,
            records,
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
            .is_none_or(|e| e.changed.contains(file))
    }
}

mod follow;
pub mod stored;
#[cfg(test)]
mod tests;
