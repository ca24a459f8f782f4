//! The watcher: `notify` on the parent folders of every file a session holds an observation of
//! (plus the file itself when it has several hard links), reference-counted. An event drops the
//! provider's cached state for the path at once; then, coalesced over a short interval, every
//! (session, owner) whose recorded version is no longer the file's current one gets
//! `file/didChange` naming the owner — once per recorded version, however many writes follow,
//! until it reads the file again. An owner's own write refreshes only its own record, so a write
//! by one owner of a session tells the session's other owners that observed the file.
//!
//! notify is asked for changes only, never opens or reads (see [`WATCHED_KINDS`]). It is a hint,
//! never the source of truth: freshness is still decided by content on every
//! access. Queue overflow (rescan), watcher errors and running out of watches drop the whole
//! cache and re-check every observed file; they are logged once with what to do.
//!
//! The daemon's own writes cost it little here (see [`crate::provider::own`]): events about the
//! temporary files it staged are dropped on notify's thread (matched by their exact names, which
//! only this daemon can have made), every other event marks its path for the provider's told
//! versions, and a re-check of a path the daemon itself just replaced takes the version it wrote
//! from one `stat` (same inode, size and times, and no event but its own rename since) instead
//! of hashing the file. A file that keeps changing while it is re-checked (a burst of outside
//! writes) is looked at again an interval later, never reported gone. notify's thread gathers paths in one inbox and wakes the processing
//! task only when the inbox was empty: one wake-up per coalescing interval, not one per event.
//!
//! The watcher names no session: a session registers itself as a [`StaleSink`] (what it must
//! offer to be told that a file it observed went stale), and its owners report what they
//! observe through the [`ObservationSink`]s the hub makes for them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use filectx_protocol::FileDidChange;
use notify::event::{AccessKind, AccessMode, EventKind, EventKindMask, ModifyKind, RenameMode};
use notify::{Config, RecommendedWatcher, RecursiveMode, Watcher};

use crate::context::Files;
use crate::context::{ObservationSink, Root, Version};
use crate::journal::Journal;
use crate::provider::own::{OwnWrites, Touch};
use crate::provider::resolve::display;
use crate::provider::{Provider, ProviderError};

/// Changes to one file within this interval yield at most one round of notifications.
pub const COALESCE: Duration = Duration::from_millis(50);

/// What the watcher asks the kernel for: creations, removals, renames, writes, metadata, and
/// the close of a file opened for writing (a write through a mapping shows as nothing else).
/// Not opens, reads or read-only closes: the daemon opens every file it reads, and each such
/// event would wake notify's thread for nothing (a fifth of a first read's CPU).
const WATCHED_KINDS: EventKindMask = EventKindMask::CORE.union(EventKindMask::ACCESS_CLOSE);

/// Distinct paths gathered between notify's thread and the processing task; past this the
/// watcher falls back to a full re-check.
const EVENT_QUEUE: usize = 8192;

/// What notify's thread (and the hub) hand to the processing task, gathered until it runs.
#[derive(Debug, Default)]
struct Pending {
    /// These paths may have changed.
    paths: HashSet<PathBuf>,
    /// Observed paths to check (their check was put off, or they may have changed unseen).
    rechecks: Vec<PathBuf>,
    /// Events were lost or the watcher failed: re-check everything.
    rescan: Option<String>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.rechecks.is_empty() && self.rescan.is_none()
    }
}

/// The processing task's inbox: what is pending, and its wake-up.
#[derive(Debug, Default)]
struct Inbox {
    pending: Mutex<Pending>,
    wake: tokio::sync::Notify,
}

impl Inbox {
    /// Adds to what is pending; wakes the task only when nothing was (it takes everything
    /// pending once its coalescing interval is over).
    fn add(&self, add: impl FnOnce(&mut Pending)) {
        let woken = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let was_empty = pending.is_empty();
            add(&mut pending);
            if pending.paths.len() > EVENT_QUEUE {
                pending.paths = HashSet::new();
                pending.rescan.get_or_insert_with(|| "events were dropped".to_owned());
            }
            was_empty && !pending.is_empty()
        };
        if woken {
            self.wake.notify_one();
        }
    }

    fn take(&self) -> Pending {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What a session offers the watcher, registered with [`WatchHub::register`]: where its files
/// are looked at, what each of its owners recorded, and the way to tell it that a file one of
/// its owners observed is no longer at the recorded version.
pub trait StaleSink: Send + Sync {
    /// The session's roots, beneath which a changed file is looked at (`None` before
    /// `initialize`).
    fn roots(&self) -> Option<Vec<Root>>;

    /// The folder the paths told to the session are shown relative to (empty before
    /// `initialize`).
    fn cwd(&self) -> PathBuf;

    /// What owner `owner` (`None`: the default owner) recorded of `path`.
    fn recorded(&self, owner: Option<&str>, path: &Path) -> Recorded;

    /// Tells the session that a file one of its owners observed changed (`file/didChange`).
    fn stale(&self, change: &FileDidChange);
}

/// What an owner of a registered session recorded of a file, as [`StaleSink::recorded`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// No such owner, or no record of the file: nothing to tell.
    Nothing,
    /// The owner's own write of the file is landing: its record is about to catch up.
    Writing,
    /// The version the owner was last shown, and the file's hard links then.
    Version(Version, u64),
}

/// Who holds an observation: a session's owner (`None`: its default owner).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Observer {
    session: Arc<str>,
    owner: Option<Arc<str>>,
}

#[derive(Debug, Default)]
struct State {
    /// Live sessions, by id.
    sessions: HashMap<String, Weak<dyn StaleSink>>,
    /// Canonical path → the observers holding an observation of it.
    observers: HashMap<PathBuf, HashSet<Observer>>,
    /// Watched folder → number of observed paths in it.
    dirs: HashMap<PathBuf, usize>,
    /// Hard-linked files watched themselves → the observers observing them.
    files: HashMap<PathBuf, HashSet<Observer>>,
    /// What notify watches for us now (folders and files).
    active: HashSet<PathBuf>,
    /// Folders whose watch the kernel dropped (the folder was deleted): re-watched when one of
    /// their files is observed again.
    lost: HashSet<PathBuf>,
    /// Path → observer → the recorded version already reported stale.
    notified: HashMap<PathBuf, HashMap<Observer, Version>>,
}

impl State {
    /// Gives back the tables' spare room once they have emptied out (a table keeps its largest
    /// size otherwise: 10,000 files observed once would stay allocated for good).
    fn shrink(&mut self) {
        let roomy = |len: usize, capacity: usize| capacity > 64 && len * 4 < capacity;
        if roomy(self.sessions.len(), self.sessions.capacity()) {
            self.sessions.shrink_to_fit();
        }
        if roomy(self.observers.len(), self.observers.capacity()) {
            self.observers.shrink_to_fit();
        }
        if roomy(self.dirs.len(), self.dirs.capacity()) {
            self.dirs.shrink_to_fit();
        }
        if roomy(self.files.len(), self.files.capacity()) {
            self.files.shrink_to_fit();
        }
        if roomy(self.active.len(), self.active.capacity()) {
            self.active.shrink_to_fit();
        }
        if roomy(self.notified.len(), self.notified.capacity()) {
            self.notified.shrink_to_fit();
        }
    }
}

/// The daemon's watcher and the registry of who observes what.
pub struct WatchHub {
    provider: Arc<Provider>,
    /// The search listings, dropped whole when events were lost.
    listings: Arc<crate::listing::Listings>,
    state: Mutex<State>,
    watcher: Mutex<Option<RecommendedWatcher>>,
    /// The processing task's inbox (notify's thread adds to it too).
    inbox: Arc<Inbox>,
    /// Whether "out of watches" was already logged.
    warned_limit: AtomicBool,
    /// The journal outside changes of observed files are recorded in.
    journal: Option<Arc<Journal>>,
    /// The language servers, told of outside changes to documents they have open.
    lsp: Option<Arc<crate::lsp::Lsp>>,
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHub").field("watched", &self.watched()).finish()
    }
}

impl Drop for WatchHub {
    fn drop(&mut self) {
        // The processing task finds the hub gone and ends.
        self.inbox.wake.notify_one();
    }
}

/// An access that changes nothing (none is asked for, see [`WATCHED_KINDS`]; kept as a guard).
fn is_own_read(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Access(AccessKind::Open(_) | AccessKind::Read | AccessKind::Any | AccessKind::Other)
    ) || matches!(kind, EventKind::Access(AccessKind::Close(mode)) if *mode != AccessMode::Write)
}

impl WatchHub {
    /// Starts the watcher and the task that turns its events into invalidations and
    /// notifications. Must be called inside the tokio runtime.
    pub fn start(files: &Files) -> Arc<WatchHub> {
        let provider = files.provider().clone();
        let inbox = Arc::new(Inbox::default());
        let events = inbox.clone();
        let own = provider.clone();
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(event) if event.need_rescan() => {
                events.add(|p| p.rescan = Some("the kernel's event queue overflowed".into()));
            }
            Ok(event) if is_own_read(&event.kind) => {}
            Ok(event) => {
                let paths = others(own.own_writes(), event);
                if !paths.is_empty() {
                    events.add(|p| p.paths.extend(paths));
                }
            }
            Err(err) => events.add(|p| p.rescan = Some(format!("watcher error: {err}"))),
        };
        let watcher = RecommendedWatcher::new(handler, Config::default().with_event_kinds(WATCHED_KINDS));
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(err) => {
                tracing::warn!(%err, "cannot start the file watcher; file/didChange will not be sent (freshness is still checked on every access)");
                None
            }
        };
        let hub = Arc::new(WatchHub {
            provider,
            listings: files.listings().clone(),
            state: Mutex::default(),
            watcher: Mutex::new(watcher),
            inbox: inbox.clone(),
            warned_limit: AtomicBool::new(false),
            journal: files.journal().cloned(),
            lsp: files.lsp().cloned(),
        });
        tokio::spawn(process(Arc::downgrade(&hub), inbox));
        hub
    }

    /// Folders and files watched now.
    pub fn watched(&self) -> u64 {
        self.lock().active.len() as u64
    }

    /// Registers a live session so it can be told about changes.
    pub fn register<S: StaleSink + 'static>(&self, id: &str, session: Weak<S>) {
        let session: Weak<dyn StaleSink> = session;
        self.lock().sessions.insert(id.to_owned(), session);
    }

    /// The observation sink of one session's default owner.
    pub fn sink(self: &Arc<Self>, session_id: &str) -> Arc<dyn ObservationSink> {
        self.owner_sink(session_id, None)
    }

    /// The observation sink of one owner of a session (`None`: its default owner).
    pub fn owner_sink(self: &Arc<Self>, session_id: &str, owner: Option<&str>) -> Arc<dyn ObservationSink> {
        let observer = Observer { session: Arc::from(session_id), owner: owner.map(Arc::from) };
        Arc::new(OwnerSink { hub: Arc::downgrade(self), observer })
    }

    /// Checks `paths` against their observers soon (a resumed session's files: they may have
    /// changed while it was away).
    pub fn recheck(&self, paths: Vec<PathBuf>) {
        if !paths.is_empty() {
            self.inbox.add(|p| p.rechecks.extend(paths));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn watch(&self, path: &Path) {
        let mut watcher = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(watcher) = watcher.as_mut() else { return };
        // Each watch is taken from the daemon's share of the user's watches (which logs, once,
        // when it is used up): past it the path is not watched, and its files are checked when
        // next used, as every file is.
        let budget = self.provider.watch_budget();
        let watched = budget.take_for_watcher().then(|| watcher.watch(path, RecursiveMode::NonRecursive));
        // What the daemon told about its writes there was recorded while their events (and
        // anyone else's) went unseen: forgotten once the watch holds (or failed), so that a
        // rename landing before the watch took hold is never trusted.
        self.provider.own_writes().forget_in(path);
        match watched {
            // Watched already: no new watch.
            Some(Ok(())) if !self.lock().active.insert(path.to_owned()) => budget.give(),
            None | Some(Ok(())) => {}
            Some(Err(err)) => {
                budget.give();
                if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) {
                    if !self.warned_limit.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            path = %path.display(),
                            "out of inotify watches: changes in some folders will not be notified (they are still detected on access); raise the limit with `sysctl fs.inotify.max_user_watches=524288`"
                        );
                    }
                } else {
                    tracing::debug!(path = %path.display(), %err, "cannot watch");
                }
            }
        }
    }

    fn unwatch(&self, path: &Path) {
        let mut watcher = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(watcher) = watcher.as_mut() {
            // Fails when the kernel already dropped the watch (the folder was deleted): fine.
            let _ = watcher.unwatch(path);
        }
        if self.lock().active.remove(path) {
            self.provider.watch_budget().give();
        }
    }

    fn observed(&self, session: &Observer, path: &Path, links: u64) {
        let Some(dir) = path.parent() else { return };
        let (new_dir, rewatch) = {
            let mut state = self.lock();
            // A fresh record of the file clears an earlier stale report.
            if let Some(sessions) = state.notified.get_mut(path) {
                sessions.remove(session);
                if sessions.is_empty() {
                    state.notified.remove(path);
                }
            }
            let known = state.observers.get(path).is_some_and(|s| s.contains(session));
            let mut new_dir = false;
            if !known {
                state.observers.entry(path.to_owned()).or_default().insert(session.clone());
                let count = state.dirs.entry(dir.to_owned()).or_insert(0);
                *count += 1;
                new_dir = *count == 1;
            }
            let rewatch = !state.lost.is_empty() && state.lost.contains(dir) && dir.is_dir();
            if rewatch {
                state.lost.remove(dir);
            }
            (new_dir, rewatch)
        };
        if new_dir || rewatch {
            self.watch(dir);
            // A change between the read and the watch taking hold produced no event: look once.
            let later = self.check(HashSet::from([path.to_owned()]));
            if !later.is_empty() {
                self.inbox.add(|p| p.rechecks.extend(later));
            }
        }
        // A file with several hard links can change through a name in a folder we do not
        // watch: watch the file itself too (checked on every record: a link may appear later).
        if links > 1 {
            let first = {
                let mut state = self.lock();
                let sessions = state.files.entry(path.to_owned()).or_default();
                sessions.insert(session.clone()) && sessions.len() == 1
            };
            if first {
                self.watch(path);
            }
        }
    }

    fn forgotten(&self, session: &Observer, path: &Path) {
        let Some(dir) = path.parent().map(Path::to_path_buf) else { return };
        let (drop_dir, drop_file) = {
            let mut state = self.lock();
            if let Some(sessions) = state.notified.get_mut(path) {
                sessions.remove(session);
                if sessions.is_empty() {
                    state.notified.remove(path);
                }
            }
            let Some(sessions) = state.observers.get_mut(path) else { return };
            if !sessions.remove(session) {
                return;
            }
            if sessions.is_empty() {
                state.observers.remove(path);
            }
            let mut drop_dir = false;
            if let Some(count) = state.dirs.get_mut(&dir) {
                *count -= 1;
                if *count == 0 {
                    state.dirs.remove(&dir);
                    drop_dir = !state.lost.remove(&dir);
                }
            }
            let mut drop_file = false;
            if let Some(sessions) = state.files.get_mut(path)
                && sessions.remove(session)
                && sessions.is_empty()
            {
                state.files.remove(path);
                drop_file = true;
            }
            (drop_dir, drop_file)
        };
        if drop_dir {
            self.unwatch(&dir);
        }
        if drop_file {
            self.unwatch(path);
        }
    }

    /// Which observed paths an event path stands for: the path itself, or every observed file
    /// in it when it is a watched folder (deleted or replaced as a whole).
    fn affected(&self, paths: &[PathBuf], out: &mut HashSet<PathBuf>) {
        let mut rearm = Vec::new();
        {
            let state = self.lock();
            for path in paths {
                if state.observers.contains_key(path) {
                    out.insert(path.clone());
                }
                if state.dirs.contains_key(path) {
                    // An event about a watched folder itself: it may have been deleted (and
                    // re-created), which ends its watch in the kernel and in notify.
                    rearm.push(path.clone());
                    out.extend(
                        state.observers.keys().filter(|p| p.parent() == Some(path.as_path())).cloned(),
                    );
                }
            }
        }
        for dir in rearm {
            self.unwatch(&dir);
            if dir.is_dir() {
                self.watch(&dir);
            } else {
                // Gone for now: watched again when one of its files is read again.
                self.lock().lost.insert(dir);
            }
        }
    }

    /// Re-checks `paths` against every observer's recorded version (blocking: hashes files).
    /// Returns the paths to check again shortly: an observer was writing them itself.
    fn check(&self, paths: HashSet<PathBuf>) -> Vec<PathBuf> {
        let mut later = Vec::new();
        for path in paths {
            let observers: Vec<(Observer, Arc<dyn StaleSink>)> = {
                let state = self.lock();
                let Some(ids) = state.observers.get(&path) else { continue };
                ids.iter()
                    .filter_map(|id| {
                        state.sessions.get(&*id.session).and_then(Weak::upgrade).map(|s| (id.clone(), s))
                    })
                    .collect()
            };
            if observers.is_empty() {
                continue;
            }
            // Looked at beneath a root of a session that observed it (never by name from `/`).
            let Some(roots) = observers.iter().find_map(|(_, s)| s.roots()) else {
                continue;
            };
            // What the daemon told about its own write is used only in a folder watched now
            // (and since before the write: starting a watch forgets what was told there).
            let watched = path.parent().is_some_and(|dir| self.lock().active.contains(dir));
            let current = if watched {
                self.provider.current_version_seen(&path, &roots)
            } else {
                self.provider.current_version_in(&path, &roots)
            };
            let current = match current {
                Ok(version) => version,
                Err(ProviderError::Busy { .. }) => {
                    // Still being written (a burst of outside writes): not gone, and no
                    // version worth telling yet. Look again once the burst has had a moment.
                    later.push(path.clone());
                    continue;
                }
                Err(err) => {
                    tracing::debug!(path = %path.display(), %err, "cannot re-check a changed file");
                    continue;
                }
            };
            if let Some(lsp) = &self.lsp
                && let Some((root, _)) = crate::provider::resolve::locate(&roots, &path)
            {
                lsp.outside(root, &path, current);
            }
            for (id, session) in observers {
                let recorded = match session.recorded(id.owner.as_deref(), &path) {
                    Recorded::Nothing => continue,
                    Recorded::Writing => {
                        // Its own write is landing: the record is about to catch up. Look again.
                        later.push(path.clone());
                        continue;
                    }
                    Recorded::Version(recorded, links) => (recorded, links),
                };
                let (recorded, links) = recorded;
                if Some(recorded) != current {
                    self.journal_outside(&path, &roots, (recorded, links), current);
                }
                if Some(recorded) == current {
                    let mut state = self.lock();
                    if let Some(sessions) = state.notified.get_mut(&path) {
                        sessions.remove(&id);
                    }
                    continue;
                }
                {
                    let mut state = self.lock();
                    let sessions = state.notified.entry(path.clone()).or_default();
                    if sessions.get(&id) == Some(&recorded) {
                        continue;
                    }
                    sessions.insert(id.clone(), recorded);
                }
                let cwd = session.cwd();
                let change = FileDidChange {
                    path: path.display().to_string(),
                    display_path: display(&path, &cwd),
                    version: current.map(|v| v.to_string()),
                    owner: id.owner.as_deref().map(str::to_owned),
                };
                session.stale(&change);
            }
        }
        later.dedup();
        later
    }

    /// Journals the change of `path` to `current` that an observer which last saw `seen` has not
    /// seen, when the daemon holds the bytes it is measured from (the journal's, else the
    /// provider's store) and no change of its own is landing there: an outside change, from a
    /// shell or an editor. The journal records each change once, and none it made itself.
    /// The links of the version before are those the observer saw with it, or those the
    /// journal's newest entry recorded; the version after's are read with it.
    fn journal_outside(&self, path: &Path, roots: &[Root], seen: (Version, u64), current: Option<Version>) {
        let Some(journal) = &self.journal else { return };
        let Some((base, base_links)) = journal.outside_base(path, seen) else { return };
        if Some(base) == current {
            return;
        }
        let kept = journal.content(&base).ok().flatten();
        let Some(before) = kept.or_else(|| self.provider.store().get(&base).map(|c| c.to_vec())) else {
            return;
        };
        let max = usize::try_from(journal.file_cap()).unwrap_or(usize::MAX);
        let after = match current {
            None => None,
            Some(version) => match self.provider.current_bytes_in(path, roots, max) {
                Ok(Some((read, bytes, links))) if read == version => {
                    Some((version, Some(bytes), Some(links)))
                }
                // Over the cap: recorded without its bytes.
                Ok(None) => Some((version, None, None)),
                // It changed again meanwhile: the next look records that.
                Ok(Some(_)) | Err(_) => return,
            },
        };
        let after = after.as_ref().map(|(version, bytes, links)| crate::journal::Side {
            version: *version,
            bytes: bytes.as_deref(),
            links: *links,
        });
        let before = crate::journal::Side { version: base, bytes: Some(&before), links: base_links };
        if let Some(seq) = journal.outside(path, before, after) {
            tracing::debug!(path = %path.display(), seq, "journaled an outside change");
        }
    }

    fn all_observed(&self) -> HashSet<PathBuf> {
        self.lock().observers.keys().cloned().collect()
    }

    /// Forgets a session that ended (its owners' observations were dropped or parked, which
    /// already took their paths out).
    pub fn unregister(&self, session: &str) {
        let mut state = self.lock();
        state.sessions.remove(session);
        state.notified.retain(|_, observers| {
            observers.retain(|observer, _| &*observer.session != session);
            !observers.is_empty()
        });
        state.shrink();
    }
}

/// One owner's view of the hub, as its observation sink.
struct OwnerSink {
    hub: Weak<WatchHub>,
    observer: Observer,
}

impl ObservationSink for OwnerSink {
    fn observed(&self, path: &Path, links: u64) {
        if let Some(hub) = self.hub.upgrade() {
            hub.observed(&self.observer, path, links);
        }
    }

    fn forgotten(&self, path: &Path) {
        if let Some(hub) = self.hub.upgrade() {
            hub.forgotten(&self.observer, path);
        }
    }
}

/// The paths of an event that are not the daemon's own staged files, each marked for the
/// provider's told versions (a rename onto a path lets the fingerprint decide; anything else
/// makes the path foreign). Runs on notify's thread.
fn others(own: &OwnWrites, event: notify::Event) -> Vec<PathBuf> {
    let gone =
        matches!(event.kind, EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_));
    let mut paths = event.paths;
    paths.retain(|path| !own.is_staged(path, gone));
    let last = paths.len().saturating_sub(1);
    for (at, path) in paths.iter().enumerate() {
        let touch = match event.kind {
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => Touch::RenamedOnto,
            // (from, to): renamed away from the first, onto the last.
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) if at == last => Touch::RenamedOnto,
            _ => Touch::Other,
        };
        own.touched(path, touch);
    }
    paths
}

/// Turns watcher signals into invalidations (at once) and notifications (coalesced).
async fn process(hub: Weak<WatchHub>, inbox: Arc<Inbox>) {
    let mut logged_rescan = false;
    loop {
        inbox.wake.notified().await;
        // Gather whatever else arrives within the coalescing interval.
        tokio::time::sleep(COALESCE).await;
        let Some(hub) = hub.upgrade() else { return };
        let Pending { paths: changed, rechecks, rescan } = inbox.take();
        let changed: Vec<PathBuf> = changed.into_iter().collect();
        let mut paths = HashSet::new();
        for path in &changed {
            // Invalidation is never delayed beyond the interval.
            hub.provider.forget(path);
        }
        hub.affected(&changed, &mut paths);
        paths.extend(rechecks);
        if let Some(why) = rescan {
            if !logged_rescan {
                tracing::warn!(%why, "file watcher lost events; re-checking every observed file (raise fs.inotify.max_queued_events if this repeats)");
                logged_rescan = true;
            }
            hub.provider.forget_all();
            hub.listings.forget_all();
            hub.provider.own_writes().forget_all();
            paths = hub.all_observed();
        }
        if paths.is_empty() {
            continue;
        }
        let checker = hub.clone();
        match tokio::task::spawn_blocking(move || checker.check(paths)).await {
            Ok(later) if !later.is_empty() => {
                let inbox = hub.inbox.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(COALESCE).await;
                    inbox.add(|p| p.rechecks.extend(later));
                });
            }
            Ok(_) => {}
            Err(err) => tracing::error!(%err, "re-checking changed files failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events notify hands over within `wait`, until the first one when `first` is set.
    fn received(
        rx: &std::sync::mpsc::Receiver<notify::Event>,
        wait: Duration,
        first: bool,
    ) -> Vec<notify::Event> {
        let until = std::time::Instant::now() + wait;
        let mut got = Vec::new();
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(event) => {
                    got.push(event);
                    if first {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        got
    }

    #[test]
    fn reads_wake_no_watcher_and_writes_do() {
        let dir = tempfile::tempdir().expect("temp folder");
        let folder = std::fs::canonicalize(dir.path()).expect("canonical folder");
        let file = folder.join("a.txt");
        std::fs::write(&file, "one\n").expect("write");
        let (tx, rx) = std::sync::mpsc::channel();
        let handler = move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                let _ = tx.send(event);
            }
        };
        let mut watcher = RecommendedWatcher::new(handler, Config::default().with_event_kinds(WATCHED_KINDS))
            .expect("watcher");
        watcher.watch(&folder, RecursiveMode::NonRecursive).expect("watch");

        // Opening, reading and closing (what every read of the daemon does) is no event at all.
        for _ in 0..3 {
            assert_eq!(std::fs::read(&file).expect("read"), b"one\n");
        }
        let woken = received(&rx, Duration::from_millis(300), false);
        assert!(woken.is_empty(), "reads woke the watcher: {woken:?}");

        // A write is, naming the file.
        std::fs::write(&file, "two\n").expect("write");
        let changed = received(&rx, Duration::from_secs(5), true);
        assert!(changed.iter().any(|e| e.paths.contains(&file)), "no event for a write: {changed:?}");
    }
}
