//! The journal: every change the daemon makes to a file, through any layer, and the outside
//! changes its watcher sees in files sessions observed, so that any of them can be undone.
//!
//! It lives in `$XDG_STATE_HOME/filectx/journal` (0700; files 0600): a [`log`] of entries and
//! the [`objects`] they name, each version's bytes kept once. An entry is recorded, and the
//! bytes before the change kept, before the change is renamed into place (the provider calls
//! it as its [`Recorder`], under the file's locks), so a crash at any point leaves no completed
//! change whose content before is lost. Bounded by bytes, age and entries, oldest dropped
//! first; a version over the per-file cap is recorded without its bytes and cannot be
//! restored. One daemon uses a journal at a time (an exclusive `flock` on its `lock` file).
//!
//! Its segments' headers are checked when it is opened, before the daemon serves: a segment of
//! another format version means no journal (the daemon writes without one and says so). It is
//! loaded in the background right after, or at its first use if that comes first: settling a
//! begun change a crash left without its end looks at the file (landed: its version is the one
//! after; otherwise the entry goes). A journal whose load fails records nothing from then on,
//! and says why ([`Journal::off`]): writes never stop because it cannot be loaded.
//!
//! Entry ids are never reused: the log's own seqs could go back after a torn tail, so the ids
//! handed out are reserved ahead in the synced file `ids` (see [`ids`]).

mod files;
mod ids;
mod log;
mod objects;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use filectx_protocol::JournalOperation as Operation;
use filectx_protocol::OUTSIDE_SESSION;

use self::log::{Log, Record, Stored};
use self::objects::Objects;
use crate::provider::Version;
use crate::provider::crash::crash_point;
use crate::provider::journaled::{ChangeKind, ChangeToRecord, Recorder};
use crate::provider::private::Private;

/// Most entries kept, whatever their bytes: each costs about 200 bytes of memory.
pub const MAX_ENTRIES: usize = 100_000;

/// The smallest byte cap a journal takes: room for its log's segments (a sixteenth of the cap
/// each, at least 64 KiB) and the contents of its newest entry (each version at most a quarter
/// of the cap), so that the cap holds whatever is recorded.
pub const MIN_MAX_BYTES: u64 = 1 << 20;

/// Where the journal lives and how much it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    /// Its folder.
    pub dir: PathBuf,
    /// Most bytes of log and contents together; past it the oldest entries go.
    pub max_bytes: u64,
    /// Entries older than this go.
    pub max_age: Duration,
    /// A version over this many bytes is recorded without them (not restorable).
    pub max_file_bytes: u64,
    /// Sync what is recorded before the change lands (the daemon's `fsync`).
    pub fsync: bool,
}

/// The default folder: `$XDG_STATE_HOME/filectx/journal`, else `~/.local/state/filectx/journal`.
pub fn default_dir() -> Option<PathBuf> {
    crate::xdg::state_dir().map(|state| state.join("journal"))
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its sequence number.
    pub seq: u64,
    /// When, in milliseconds since the Unix epoch.
    pub time: u64,
    /// The file, canonical.
    pub path: Arc<Path>,
    /// The session that made it ([`OUTSIDE_SESSION`] for an outside change).
    pub session: Arc<str>,
    /// Its client.
    pub client: Option<Arc<str>>,
    /// Its owner.
    pub owner: Option<Arc<str>>,
    /// What it did.
    pub operation: Operation,
    /// The version before (`None`: no file).
    pub before: Option<Version>,
    /// The version after (`None`: removed).
    pub after: Option<Version>,
    /// Whether the bytes before are kept (or there were none): it can be restored.
    pub restorable: bool,
    /// Whether the bytes after are kept.
    pub after_kept: bool,
    /// The hard links of the file at the version before and after (`None`: not recorded, as
    /// by an older daemon): a version a linked file had may be another name's content.
    pub links: (Option<u64>, Option<u64>),
    /// The permission bits of the file before the change (`None`: unknown, or no file).
    pub mode: Option<u32>,
    /// Whether it landed (a begun change has not yet said).
    landed: bool,
    /// Lines added and removed, once someone asked.
    pub stat: Option<(u64, u64)>,
}

/// Which entries [`Journal::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct Filter<'a> {
    /// A file, or a folder (everything beneath it).
    pub path: Option<&'a Path>,
    /// One session's.
    pub session: Option<&'a str>,
    /// One owner's.
    pub owner: Option<&'a str>,
    /// Made at or after this (ms since the epoch).
    pub since: Option<u64>,
    /// Older than this seq (the page before ended there).
    pub before_seq: Option<u64>,
}

/// What a journal holds, for `daemon/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Entries.
    pub entries: u64,
    /// Bytes on disk (log and contents).
    pub bytes: u64,
}

/// The journal.
#[derive(Debug)]
pub struct Journal {
    config: JournalConfig,
    /// The journal's folder (never reached through a link).
    dir: Arc<OwnedFd>,
    /// The exclusive lock on the folder, held while the daemon runs.
    _lock: File,
    /// The daemon's private files, told of every file the journal makes.
    private: Arc<Private>,
    state: Mutex<Slot>,
    /// Why it records nothing, once its load failed.
    off: std::sync::OnceLock<String>,
}

/// Whether the journal is loaded.
#[derive(Debug)]
enum Slot {
    /// Not yet: loaded at the first use.
    Unloaded,
    /// Loaded.
    Loaded(Box<State>),
    /// It could not be loaded ([`Journal::off`] says why): nothing is recorded.
    Off,
}

/// Why a journal cannot be opened: the daemon runs without one.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another daemon uses the folder.
    #[error("{0} is in use by another filectxd")]
    InUse(String),
    /// A segment is of another format version (a newer daemon's): the journal is left as it is.
    #[error("{0}")]
    Format(String),
    /// The byte cap is below [`MIN_MAX_BYTES`].
    #[error("journal_max_bytes {0} is below the least a journal can keep to ({MIN_MAX_BYTES})")]
    TooSmall(u64),
    /// The filesystem failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The loaded journal.
#[derive(Debug)]
struct State {
    log: Log,
    objects: Objects,
    entries: VecDeque<Entry>,
    next_seq: u64,
    /// Entry ids reserved ahead, durably (see [`ids`]).
    ids: ids::Ids,
    /// The newest entry of each path, the version it left and the file's links then.
    last: HashMap<Arc<Path>, (u64, Option<Version>, Option<u64>)>,
    /// Paths with a change begun and not yet ended, and how many.
    landing: HashMap<Arc<Path>, usize>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn path_text(path: &Path) -> (Option<String>, Option<String>) {
    match path.to_str() {
        Some(text) => (Some(text.to_owned()), None),
        None => {
            use std::os::unix::ffi::OsStrExt;
            (None, Some(crate::random::hex_of(path.as_os_str().as_bytes())))
        }
    }
}

fn path_from(stored: &Stored) -> Option<PathBuf> {
    if let Some(path) = &stored.path {
        return Some(PathBuf::from(path));
    }
    let hex = stored.path_hex.as_deref()?;
    let bytes: Option<Vec<u8>> =
        (0..hex.len() / 2).map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes?)))
}

impl State {
    fn bytes(&self) -> u64 {
        self.log.bytes() + self.objects.bytes()
    }

    fn stored(entry: &Entry, before_size: Option<u64>, after_size: Option<u64>) -> Stored {
        let (path, path_hex) = path_text(&entry.path);
        Stored {
            seq: entry.seq,
            time: entry.time,
            path,
            path_hex,
            session: entry.session.to_string(),
            client: entry.client.as_deref().map(str::to_owned),
            owner: entry.owner.as_deref().map(str::to_owned),
            op: entry.operation,
            before: entry.before.map(|v| v.to_string()),
            after: entry.after.map(|v| v.to_string()),
            before_size,
            after_size,
            before_links: entry.links.0,
            after_links: entry.links.1,
            mode: entry.mode,
        }
    }

    fn entry_of(&mut self, stored: &Stored, landed: bool) -> Option<Entry> {
        let path: Arc<Path> = Arc::from(path_from(stored)?);
        let before = match &stored.before {
            Some(v) => Some(Version::parse(v)?),
            None => None,
        };
        let after = match &stored.after {
            Some(v) => Some(Version::parse(v)?),
            None => None,
        };
        let session = Arc::from(stored.session.as_str());
        let client = stored.client.as_deref().map(Arc::from);
        let owner = stored.owner.as_deref().map(Arc::from);
        Some(Entry {
            seq: stored.seq,
            time: stored.time,
            path,
            session,
            client,
            owner,
            operation: stored.op,
            before,
            after,
            restorable: before.is_none() || stored.before_size.is_some(),
            after_kept: after.is_none() || stored.after_size.is_some(),
            links: (stored.before_links, stored.after_links),
            mode: stored.mode,
            landed,
            stat: None,
        })
    }

    /// Keeps the bytes of a change's versions (those under the cap), counting a reference for
    /// each; the sizes of those kept.
    fn keep(
        &mut self,
        before: Option<(Version, &[u8])>,
        after: Option<(Version, &[u8])>,
    ) -> std::io::Result<(Option<u64>, Option<u64>)> {
        let mut sizes = (None, None);
        if let Some((version, bytes)) = before {
            self.objects.keep(version, bytes)?;
            sizes.0 = Some(bytes.len() as u64);
        }
        if let Some((version, bytes)) = after
            && let Err(e) = self.objects.keep(version, bytes)
        {
            if let Some((version, _)) = before {
                self.objects.release(&version);
            }
            return Err(e);
        }
        sizes.1 = after.map(|(_, bytes)| bytes.len() as u64);
        Ok(sizes)
    }

    fn release(&mut self, entry: &Entry) {
        if entry.restorable
            && let Some(before) = entry.before
        {
            self.objects.release(&before);
        }
        if entry.after_kept
            && let Some(after) = entry.after
        {
            self.objects.release(&after);
        }
    }

    fn push(&mut self, entry: Entry) {
        self.last.insert(entry.path.clone(), (entry.seq, entry.after, entry.links.1));
        self.entries.push_back(entry);
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        self.entries.binary_search_by_key(&seq, |e| e.seq).ok()
    }

    /// The newest landed entry of `path` before the one removed, as the path's last.
    fn recompute_last(&mut self, path: &Arc<Path>) {
        match self.entries.iter().rev().find(|e| e.path == *path) {
            Some(entry) => {
                let last = (entry.seq, entry.after, entry.links.1);
                self.last.insert(path.clone(), last);
            }
            None => {
                self.last.remove(path);
            }
        }
    }

    /// The id of a new entry, reserved durably first (see [`ids`]).
    fn next_id(&mut self, dir: &OwnedFd, fsync: bool, private: &Private) -> std::io::Result<u64> {
        self.ids.reserve(dir, self.next_seq, fsync, private)?;
        Ok(self.next_seq)
    }

    /// Drops the oldest entries while over a cap (never the newest one). The log's bytes are
    /// counted as what dropping its old segments leaves.
    fn enforce(&mut self, config: &JournalConfig) {
        let oldest_kept = now_ms().saturating_sub(config.max_age.as_millis() as u64);
        let mut upto = None;
        while self.entries.len() > 1 {
            let Some(front) = self.entries.front() else { break };
            let log = upto.map_or_else(|| self.log.bytes(), |upto| self.log.bytes_after(upto));
            let over = log + self.objects.bytes() > config.max_bytes
                || self.entries.len() > MAX_ENTRIES
                || front.time < oldest_kept;
            if !over {
                break;
            }
            let Some(entry) = self.entries.pop_front() else { break };
            self.release(&entry);
            if self.last.get(&entry.path).is_some_and(|(seq, ..)| *seq == entry.seq) {
                self.last.remove(&entry.path);
            }
            upto = Some(entry.seq);
        }
        if let Some(upto) = upto {
            if let Err(e) = self.log.append(&Record::Drop { upto }, false) {
                tracing::warn!(%e, "cannot record the journal entries the caps dropped");
            }
            self.log.drop_upto(upto);
        }
    }
}

impl Journal {
    /// Opens the journal in `config.dir` (made 0700 when missing), locks it for this daemon and
    /// checks its segments' headers; nothing else is read yet ([`Journal::load`]). `private`
    /// is told of every file it makes.
    pub fn open(config: JournalConfig, private: Arc<Private>) -> Result<Arc<Self>, OpenError> {
        use std::os::unix::fs::MetadataExt as _;
        if config.max_bytes < MIN_MAX_BYTES {
            return Err(OpenError::TooSmall(config.max_bytes));
        }
        let dir = Arc::new(files::open_folder(&config.dir)?);
        let flags = rustix::fs::OFlags::RDWR
            | rustix::fs::OFlags::CREATE
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC;
        let lock = rustix::fs::openat(&*dir, "lock", flags, rustix::fs::Mode::from_raw_mode(0o600))
            .map_err(std::io::Error::from)?;
        let lock = File::from(lock);
        fs2::FileExt::try_lock_exclusive(&lock)
            .map_err(|_| OpenError::InUse(config.dir.display().to_string()))?;
        if let Ok(meta) = lock.metadata() {
            private.created(meta.dev(), meta.ino());
        }
        log::check(&dir, &config.dir).map_err(|e| match e {
            log::LogError::Format { .. } => OpenError::Format(e.to_string()),
            log::LogError::Io(e) => OpenError::Io(e),
        })?;
        let state = Mutex::new(Slot::Unloaded);
        Ok(Arc::new(Self { config, dir, _lock: lock, private, state, off: std::sync::OnceLock::new() }))
    }

    /// Its settings.
    pub fn config(&self) -> &JournalConfig {
        &self.config
    }

    /// The largest version whose bytes are kept: the configured cap, at most a quarter of the
    /// byte cap (so that the newest entry's contents always fit).
    pub fn file_cap(&self) -> u64 {
        self.config.max_file_bytes.min(self.config.max_bytes / 4)
    }

    /// Loads the journal now, if it is not loaded yet (the daemon calls it in the background
    /// at start).
    pub fn load(&self) {
        drop(self.state());
    }

    /// Forgets the loaded state as a killed daemon would: nothing is flushed or closed.
    #[cfg(test)]
    fn crash(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Slot::Unloaded;
    }

    /// Why the journal records nothing: its load failed (logged). `None` while it works (or
    /// is still loading: this never waits for the load).
    pub fn off(&self) -> Option<String> {
        self.off.get().cloned()
    }

    /// The state, loaded now at the first use.
    fn state(&self) -> MutexGuard<'_, Slot> {
        let mut slot = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Slot::Unloaded) {
            *slot = match self.read() {
                Ok(loaded) => Slot::Loaded(Box::new(loaded)),
                Err(e) => {
                    tracing::error!(
                        dir = %self.config.dir.display(),
                        %e,
                        "the journal cannot be loaded: changes are written without it from now on, \
                         and cannot be undone"
                    );
                    let why = format!("the journal in {} cannot be loaded: {e}", self.config.dir.display());
                    let _ = self.off.set(why);
                    Slot::Off
                }
            };
        }
        slot
    }

    /// `f` of the loaded state; `None` when the journal is off.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Option<T> {
        match &mut *self.state() {
            Slot::Loaded(state) => Some(f(state)),
            _ => None,
        }
    }

    fn read(&self) -> Result<State, log::LogError> {
        let segment_bytes = log::segment_bytes(self.config.max_bytes);
        let (log, loaded) = Log::load(
            self.dir.clone(),
            &self.config.dir,
            self.config.fsync,
            segment_bytes,
            self.private.clone(),
        )?;
        let objects = Objects::open(&self.dir, self.config.fsync, self.private.clone())?;
        let ids = ids::Ids::load(&self.dir)?;
        let mut state = State {
            log,
            objects,
            entries: VecDeque::new(),
            next_seq: ids.ceiling().max(1),
            ids,
            last: HashMap::new(),
            landing: HashMap::new(),
        };
        let mut stored_of: HashMap<u64, Stored> = HashMap::new();
        let mut begun: Vec<u64> = Vec::new();
        let mut ended: HashMap<u64, bool> = HashMap::new();
        let mut dropped = 0u64;
        for record in loaded.records {
            match record {
                Record::Begin(stored) => {
                    state.next_seq = state.next_seq.max(stored.seq + 1);
                    begun.push(stored.seq);
                    stored_of.insert(stored.seq, stored);
                }
                Record::Entry(stored) => {
                    state.next_seq = state.next_seq.max(stored.seq + 1);
                    ended.insert(stored.seq, true);
                    begun.push(stored.seq);
                    stored_of.insert(stored.seq, stored);
                }
                Record::End { seq, landed } => {
                    ended.insert(seq, landed);
                }
                Record::Drop { upto } => {
                    dropped = dropped.max(upto);
                    state.next_seq = state.next_seq.max(upto + 1);
                }
            }
        }
        begun.sort_unstable();
        begun.dedup();
        let mut settled = Vec::new();
        for seq in begun.into_iter().filter(|seq| *seq > dropped) {
            let Some(stored) = stored_of.remove(&seq) else { continue };
            let landed = match ended.get(&seq) {
                Some(landed) => *landed,
                None => {
                    let landed = settle(&stored, self.file_cap());
                    settled.push((seq, landed));
                    landed
                }
            };
            if !landed {
                continue;
            }
            let Some(entry) = state.entry_of(&stored, true) else { continue };
            if let (Some(before), Some(size)) = (entry.before, stored.before_size) {
                state.objects.count(before, size);
            }
            if let (Some(after), Some(size)) = (entry.after, stored.after_size) {
                state.objects.count(after, size);
            }
            state.push(entry);
        }
        for (seq, landed) in &settled {
            state.log.append(&Record::End { seq: *seq, landed: *landed }, false)?;
        }
        let swept = state.objects.sweep();
        if loaded.torn_bytes > 0 || loaded.bad_lines > 0 || !settled.is_empty() || swept > 0 {
            tracing::warn!(
                torn_bytes = loaded.torn_bytes,
                bad_lines = loaded.bad_lines,
                settled = settled.len(),
                swept,
                "the journal was not closed cleanly (a crash?): its torn tail was dropped, damaged \
                 lines skipped, and changes left half-recorded settled by looking at their files"
            );
        }
        state.enforce(&self.config);
        tracing::info!(
            entries = state.entries.len(),
            bytes = state.bytes(),
            next_id = state.next_seq,
            strangers = loaded.strangers,
            "journal loaded"
        );
        Ok(state)
    }

    /// Entries and bytes.
    pub fn stats(&self) -> JournalStats {
        self.with(|s| JournalStats {
            entries: s.entries.iter().filter(|e| e.landed).count() as u64,
            bytes: s.bytes(),
        })
        .unwrap_or_default()
    }

    /// The landed entries `filter` and `visible` (the asking session may read the path) accept,
    /// newest first, at most `limit`; and whether more follow.
    pub fn list(
        &self,
        filter: &Filter<'_>,
        limit: usize,
        visible: impl Fn(&Path) -> bool,
    ) -> (Vec<Entry>, bool) {
        let config = &self.config;
        self.with(|state| {
            state.enforce(config);
            let mut out = Vec::new();
            for entry in state.entries.iter().rev() {
                if !entry.landed || filter.before_seq.is_some_and(|seq| entry.seq >= seq) {
                    continue;
                }
                if filter.since.is_some_and(|since| entry.time < since) {
                    break;
                }
                let wanted = filter.path.is_none_or(|p| entry.path.starts_with(p))
                    && filter.session.is_none_or(|s| *entry.session == *s)
                    && filter.owner.is_none_or(|o| entry.owner.as_deref() == Some(o))
                    && visible(&entry.path);
                if !wanted {
                    continue;
                }
                if out.len() == limit {
                    return (out, true);
                }
                out.push(entry.clone());
            }
            (out, false)
        })
        .unwrap_or_default()
    }

    /// The newest landed entry of `path` made by `session` as `owner` (`None`: the default
    /// owner).
    pub fn newest_of(&self, path: &Path, session: &str, owner: Option<&str>) -> Option<Entry> {
        self.with(|state| {
            let found = state.entries.iter().rev().find(|e| {
                e.landed && *e.path == *path && *e.session == *session && e.owner.as_deref() == owner
            });
            found.cloned()
        })?
    }

    /// The landed entry `seq`.
    pub fn get(&self, seq: u64) -> Option<Entry> {
        self.with(|state| state.index_of(seq).map(|at| state.entries[at].clone()).filter(|e| e.landed))?
    }

    /// Remembers an entry's diff stat.
    pub fn set_stat(&self, seq: u64, stat: (u64, u64)) {
        self.with(|state| {
            if let Some(at) = state.index_of(seq) {
                state.entries[at].stat = Some(stat);
            }
        });
    }

    /// The bytes of `version`, when kept (and whole).
    pub fn content(&self, version: &Version) -> std::io::Result<Option<Vec<u8>>> {
        self.with(|state| state.objects.read(version)).unwrap_or(Ok(None))
    }

    /// The bytes of `version`, when kept and at most `max` long.
    pub fn content_within(&self, version: &Version, max: u64) -> std::io::Result<Option<Vec<u8>>> {
        self.with(|state| match state.objects.size(version) {
            Some(size) if size <= max => state.objects.read(version),
            _ => Ok(None),
        })
        .unwrap_or(Ok(None))
    }

    /// The version the newest entry of `path` left (`Some(None)`: it removed the file); `None`
    /// when no entry names the path.
    pub fn last_version(&self, path: &Path) -> Option<Option<Version>> {
        self.with(|state| state.last.get(path).map(|(_, after, _)| *after))?
    }

    /// The version an outside change of `path` is measured from, for a session that last saw
    /// `seen` (a version, and the file's links then), with the file's links at it: what the
    /// newest entry of the path left, else `seen`. `None` while a change of the daemon's own is
    /// landing there, or when the newest entry removed the file.
    pub fn outside_base(&self, path: &Path, seen: (Version, u64)) -> Option<(Version, Option<u64>)> {
        self.with(|state| {
            if state.landing.contains_key(path) {
                return None;
            }
            match state.last.get(path) {
                Some((_, after, links)) => after.map(|after| (after, *links)),
                None => Some((seen.0, Some(seen.1))),
            }
        })?
    }

    /// Records an outside change of `path` from `before` (its bytes, and the file's links then
    /// when known) to `after` (`None`: removed; its bytes when under the cap, and its links),
    /// unless the newest entry of the path already left it at `after`. Returns the new entry's
    /// seq.
    pub fn outside(&self, path: &Path, before: Side<'_>, after: Option<Side<'_>>) -> Option<u64> {
        let max = self.file_cap();
        let (dir, fsync, private) = (&self.dir, self.config.fsync, &self.private);
        let config = &self.config;
        self.with(|state| {
            let after_version = after.map(|side| side.version);
            let landing = state.landing.contains_key(path);
            let known = state.last.get(path).is_some_and(|(_, last, _)| *last == after_version);
            if landing || known || Some(before.version) == after_version {
                return None;
            }
            fn kept(side: Side<'_>, max: u64) -> Option<(Version, &[u8])> {
                side.bytes.filter(|b| b.len() as u64 <= max).map(|b| (side.version, b))
            }
            let sizes = match state.keep(kept(before, max), after.and_then(|side| kept(side, max))) {
                Ok(sizes) => sizes,
                Err(e) => {
                    tracing::warn!(path = %path.display(), %e, "cannot journal an outside change");
                    return None;
                }
            };
            let seq = match state.next_id(dir, fsync, private) {
                Ok(seq) => seq,
                Err(e) => {
                    tracing::warn!(path = %path.display(), %e, "cannot journal an outside change");
                    return None;
                }
            };
            let entry = Entry {
                seq,
                time: now_ms(),
                path: Arc::from(path),
                session: Arc::from(OUTSIDE_SESSION),
                client: None,
                owner: None,
                operation: Operation::Outside,
                before: Some(before.version),
                after: after_version,
                restorable: sizes.0.is_some(),
                after_kept: after_version.is_none() || sizes.1.is_some(),
                links: (before.links, after.and_then(|side| side.links)),
                mode: None,
                landed: true,
                stat: None,
            };
            let record = Record::Entry(State::stored(&entry, sizes.0, sizes.1));
            if let Err(e) = state.log.append(&record, true) {
                tracing::warn!(path = %path.display(), %e, "cannot journal an outside change");
                state.release(&entry);
                return None;
            }
            state.next_seq += 1;
            state.push(entry);
            state.enforce(config);
            Some(seq)
        })?
    }
}

/// One side of an outside change: the version, its bytes (when read), the file's hard links
/// (when known).
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// The version.
    pub version: Version,
    /// Its bytes.
    pub bytes: Option<&'a [u8]>,
    /// The file's hard links at that version.
    pub links: Option<u64>,
}

impl Drop for Journal {
    fn drop(&mut self) {
        let mut slot = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Slot::Loaded(state) = &mut *slot {
            if let Err(e) = state.log.flush() {
                tracing::warn!(%e, "cannot record the ends of the last journaled changes");
            }
            let next = state.next_seq;
            state.ids.close(&self.dir, next, self.config.fsync, &self.private);
        }
    }
}

/// Whether a change begun as `stored` and never ended landed, by its file now: at the version
/// after it (or gone, for a removal), it did; at the version before, it did not; otherwise the
/// file changed since, and the entry is kept (it may have landed).
fn settle(stored: &Stored, max_bytes: u64) -> bool {
    let Some(path) = path_from(stored) else { return false };
    let now = match read_regular(&path, max_bytes) {
        Ok(Some(bytes)) => Some(Version::of(&bytes).to_string()),
        Ok(None) => return true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => return true,
    };
    if now == stored.after {
        return true;
    }
    now != stored.before
}

/// The bytes of the regular file at `path`, opened without following a final symlink and
/// without blocking (a FIFO put there never hangs the load); `None` for anything else, or a
/// file over `max_bytes` (it is not either version, which the journal kept under that cap, or it
/// is one not kept: it may have landed).
fn read_regular(path: &Path, max_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > max_bytes {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref().take(max_bytes + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max_bytes).then_some(bytes))
}

impl Recorder for Journal {
    fn max_file_bytes(&self) -> u64 {
        self.file_cap()
    }

    fn begin(&self, change: &ChangeToRecord<'_>) -> std::io::Result<Option<u64>> {
        let max = self.file_cap();
        let (dir, fsync, private) = (&self.dir, self.config.fsync, &self.private);
        let begun = self.with(|state| -> std::io::Result<u64> {
            let operation = match (change.kind, change.by.restore) {
                (ChangeKind::Delete, _) => Operation::Delete,
                (_, true) => Operation::Restore,
                (ChangeKind::Create, false) => Operation::Create,
                (ChangeKind::Write, false) => Operation::Write,
                (ChangeKind::Edit, false) => Operation::Edit,
            };
            let fits = |bytes: &&[u8]| bytes.len() as u64 <= max;
            let before = change.before.zip(change.before_bytes.filter(fits));
            let after = change.after.zip(change.after_bytes.filter(fits));
            let seq = state.next_id(dir, fsync, private)?;
            let sizes = state.keep(before, after)?;
            crash_point!("journal::kept");
            let author = &change.by.author;
            let entry = Entry {
                seq,
                time: now_ms(),
                path: Arc::from(change.path),
                session: author.session.clone(),
                client: author.client.clone(),
                owner: author.owner.clone(),
                operation,
                before: change.before,
                after: change.after,
                restorable: change.before.is_none() || sizes.0.is_some(),
                after_kept: change.after.is_none() || sizes.1.is_some(),
                links: (change.before.map(|_| change.links.0), change.after.map(|_| change.links.1)),
                mode: change.mode,
                landed: false,
                stat: None,
            };
            if let Err(e) = state.log.append(&Record::Begin(State::stored(&entry, sizes.0, sizes.1)), true) {
                state.release(&entry);
                return Err(e);
            }
            crash_point!("journal::begun");
            state.next_seq += 1;
            *state.landing.entry(entry.path.clone()).or_default() += 1;
            state.push(entry);
            Ok(seq)
        });
        begun.transpose()
    }

    fn end(&self, seq: u64, landed: bool) {
        let config = &self.config;
        self.with(|state| {
            // Written with the next record: an end a crash loses is settled by the file.
            state.log.defer(&Record::End { seq, landed });
            let Some(at) = state.index_of(seq) else { return };
            let path = state.entries[at].path.clone();
            if let Some(count) = state.landing.get_mut(&path) {
                *count -= 1;
                if *count == 0 {
                    state.landing.remove(&path);
                }
            }
            if landed {
                state.entries[at].landed = true;
                state.enforce(config);
            } else if let Some(entry) = state.entries.remove(at) {
                state.release(&entry);
                state.recompute_last(&entry.path);
            }
        });
    }
}
