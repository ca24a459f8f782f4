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
//! The journal is loaded at its first use, not at start-up: settling a begun change a crash
//! left without its end looks at the file (landed: its version is the one after; otherwise the
//! entry goes).

mod log;
mod objects;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use filectx_protocol::JournalOperation as Operation;
use filectx_protocol::OUTSIDE_SESSION;

use self::log::{Log, Record, Stored};
use self::objects::Objects;
use crate::provider::Version;
use crate::provider::crash::crash_point;
use crate::provider::journaled::{Change, ChangeKind, Recorder};

/// Most entries kept, whatever their bytes: each costs about 200 bytes of memory.
pub const MAX_ENTRIES: usize = 100_000;

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
    /// The exclusive lock on the folder, held while the daemon runs.
    _lock: File,
    state: Mutex<Option<State>>,
}

/// The loaded journal.
#[derive(Debug)]
struct State {
    log: Log,
    objects: Objects,
    entries: VecDeque<Entry>,
    next_seq: u64,
    /// The newest entry of each path, and the version it left.
    last: HashMap<Arc<Path>, (u64, Option<Version>)>,
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
        self.last.insert(entry.path.clone(), (entry.seq, entry.after));
        self.entries.push_back(entry);
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        self.entries.binary_search_by_key(&seq, |e| e.seq).ok()
    }

    /// The newest landed entry of `path` before the one removed, as the path's last.
    fn recompute_last(&mut self, path: &Arc<Path>) {
        match self.entries.iter().rev().find(|e| e.path == *path) {
            Some(entry) => {
                let last = (entry.seq, entry.after);
                self.last.insert(path.clone(), last);
            }
            None => {
                self.last.remove(path);
            }
        }
    }

    /// Drops the oldest entries while over a cap (never the newest one).
    fn enforce(&mut self, config: &JournalConfig) {
        let oldest_kept = now_ms().saturating_sub(config.max_age.as_millis() as u64);
        let mut upto = None;
        while self.entries.len() > 1 {
            let Some(front) = self.entries.front() else { break };
            let over = self.bytes() > config.max_bytes
                || self.entries.len() > MAX_ENTRIES
                || front.time < oldest_kept;
            if !over {
                break;
            }
            let Some(entry) = self.entries.pop_front() else { break };
            self.release(&entry);
            if self.last.get(&entry.path).is_some_and(|(seq, _)| *seq == entry.seq) {
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
    /// Opens the journal in `config.dir` (made 0700 when missing) and locks it for this daemon.
    /// Nothing is read yet.
    pub fn open(config: JournalConfig) -> std::io::Result<Arc<Self>> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&config.dir)?;
        std::fs::set_permissions(&config.dir, std::fs::Permissions::from_mode(0o700))?;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(config.dir.join("lock"))?;
        fs2::FileExt::try_lock_exclusive(&lock).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("{} is in use by another filectxd ({e})", config.dir.display()),
            )
        })?;
        Ok(Arc::new(Self { config, _lock: lock, state: Mutex::new(None) }))
    }

    /// Its settings.
    pub fn config(&self) -> &JournalConfig {
        &self.config
    }

    /// The loaded state (loaded now, at the first use). `None` when it cannot be loaded (logged).
    fn state(&self) -> MutexGuard<'_, Option<State>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.is_none() {
            match self.load() {
                Ok(loaded) => *state = Some(loaded),
                Err(e) => tracing::error!(dir = %self.config.dir.display(), %e, "cannot load the journal"),
            }
        }
        state
    }

    fn load(&self) -> Result<State, log::LogError> {
        let (log, loaded) = Log::load(&self.config.dir, self.config.fsync)?;
        let objects = Objects::open(self.config.dir.join("objects"), self.config.fsync)?;
        let mut state = State {
            log,
            objects,
            entries: VecDeque::new(),
            next_seq: 1,
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
                    let landed = settle(&stored, self.config.max_file_bytes);
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
                "the journal was not closed cleanly (a crash?): its torn tail was dropped and changes \
                 left half-recorded were settled by looking at their files"
            );
        }
        state.enforce(&self.config);
        tracing::info!(entries = state.entries.len(), bytes = state.bytes(), "journal loaded");
        Ok(state)
    }

    /// Entries and bytes.
    pub fn stats(&self) -> JournalStats {
        let state = self.state();
        state.as_ref().map_or_else(JournalStats::default, |s| JournalStats {
            entries: s.entries.iter().filter(|e| e.landed).count() as u64,
            bytes: s.bytes(),
        })
    }

    /// The landed entries `filter` and `visible` (the asking session may read the path) accept,
    /// newest first, at most `limit`; and whether more follow.
    pub fn list(
        &self,
        filter: &Filter<'_>,
        limit: usize,
        visible: impl Fn(&Path) -> bool,
    ) -> (Vec<Entry>, bool) {
        let mut state = self.state();
        let Some(state) = state.as_mut() else { return (Vec::new(), false) };
        state.enforce(&self.config);
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
    }

    /// The newest landed entry of `path` made by `session` as `owner` (`None`: the default
    /// owner), among those `visible` accepts.
    pub fn newest_of(&self, path: &Path, session: &str, owner: Option<&str>) -> Option<Entry> {
        let state = self.state();
        let found =
            state.as_ref()?.entries.iter().rev().find(|e| {
                e.landed && *e.path == *path && *e.session == *session && e.owner.as_deref() == owner
            });
        found.cloned()
    }

    /// The landed entry `seq`.
    pub fn get(&self, seq: u64) -> Option<Entry> {
        let state = self.state();
        let state = state.as_ref()?;
        state.index_of(seq).map(|at| state.entries[at].clone()).filter(|e| e.landed)
    }

    /// Remembers an entry's diff stat.
    pub fn set_stat(&self, seq: u64, stat: (u64, u64)) {
        let mut state = self.state();
        if let Some(state) = state.as_mut()
            && let Some(at) = state.index_of(seq)
        {
            state.entries[at].stat = Some(stat);
        }
    }

    /// The bytes of `version`, when kept (and whole).
    pub fn content(&self, version: &Version) -> std::io::Result<Option<Vec<u8>>> {
        let state = self.state();
        match state.as_ref() {
            Some(state) => state.objects.read(version),
            None => Ok(None),
        }
    }

    /// The bytes of `version`, when kept and at most `max` long.
    pub fn content_within(&self, version: &Version, max: u64) -> std::io::Result<Option<Vec<u8>>> {
        let state = self.state();
        match state.as_ref() {
            Some(state) if state.objects.size(version).is_some_and(|size| size <= max) => {
                state.objects.read(version)
            }
            _ => Ok(None),
        }
    }

    /// The version the newest entry of `path` left (`Some(None)`: it removed the file); `None`
    /// when no entry names the path.
    pub fn last_version(&self, path: &Path) -> Option<Option<Version>> {
        let state = self.state();
        state.as_ref()?.last.get(path).map(|(_, after)| *after)
    }

    /// The version an outside change of `path` is measured from, for a session that last saw
    /// `seen`: what the newest entry of the path left, else `seen`. `None` while a change of the
    /// daemon's own is landing there, or when the newest entry removed the file.
    pub fn outside_base(&self, path: &Path, seen: Version) -> Option<Version> {
        let state = self.state();
        let state = state.as_ref()?;
        if state.landing.contains_key(path) {
            return None;
        }
        match state.last.get(path) {
            Some((_, after)) => *after,
            None => Some(seen),
        }
    }

    /// The seq of the newest entry of `path`.
    pub fn last_seq(&self, path: &Path) -> Option<u64> {
        let state = self.state();
        state.as_ref()?.last.get(path).map(|(seq, _)| *seq)
    }

    /// Records an outside change of `path` from `before` (its bytes) to `after` (`None`:
    /// removed; its bytes when under the cap), unless the newest entry of the path already
    /// left it at `after`. Returns the new entry's seq.
    pub fn outside(
        &self,
        path: &Path,
        before: (Version, &[u8]),
        after: Option<(Version, Option<&[u8]>)>,
    ) -> Option<u64> {
        let max = self.config.max_file_bytes;
        let mut state = self.state();
        let state = state.as_mut()?;
        let after_version = after.map(|(v, _)| v);
        let landing = state.landing.contains_key(path);
        let known = state.last.get(path).is_some_and(|(_, last)| *last == after_version);
        if landing || known || Some(before.0) == after_version {
            return None;
        }
        let before_kept = (before.1.len() as u64 <= max).then_some(before);
        let after_kept = after.and_then(|(v, bytes)| bytes.filter(|b| b.len() as u64 <= max).map(|b| (v, b)));
        let sizes = match state.keep(before_kept, after_kept) {
            Ok(sizes) => sizes,
            Err(e) => {
                tracing::warn!(path = %path.display(), %e, "cannot journal an outside change");
                return None;
            }
        };
        let session = Arc::from(OUTSIDE_SESSION);
        let entry = Entry {
            seq: state.next_seq,
            time: now_ms(),
            path: Arc::from(path),
            session,
            client: None,
            owner: None,
            operation: Operation::Outside,
            before: Some(before.0),
            after: after_version,
            restorable: sizes.0.is_some(),
            after_kept: after_version.is_none() || sizes.1.is_some(),
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
        let seq = entry.seq;
        state.push(entry);
        state.enforce(&self.config);
        Some(seq)
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = state.as_mut()
            && let Err(e) = state.log.flush()
        {
            tracing::warn!(%e, "cannot record the ends of the last journaled changes");
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
        self.config.max_file_bytes
    }

    fn begin(&self, change: &Change<'_>) -> std::io::Result<u64> {
        let mut state = self.state();
        let Some(state) = state.as_mut() else {
            return Err(std::io::Error::other("the journal could not be loaded (see the daemon's log)"));
        };
        let operation = match (change.kind, change.by.restore) {
            (ChangeKind::Delete, _) => Operation::Delete,
            (_, true) => Operation::Restore,
            (ChangeKind::Create, false) => Operation::Create,
            (ChangeKind::Write, false) => Operation::Write,
            (ChangeKind::Edit, false) => Operation::Edit,
        };
        let max = self.config.max_file_bytes;
        let fits = |bytes: &&[u8]| bytes.len() as u64 <= max;
        let before = change.before.zip(change.before_bytes.filter(fits));
        let after = change.after.zip(change.after_bytes.filter(fits));
        let sizes = state.keep(before, after)?;
        crash_point!("journal::kept");
        let author = &change.by.author;
        let (session, client, owner) = (author.session.clone(), author.client.clone(), author.owner.clone());
        let entry = Entry {
            seq: state.next_seq,
            time: now_ms(),
            path: Arc::from(change.path),
            session,
            client,
            owner,
            operation,
            before: change.before,
            after: change.after,
            restorable: change.before.is_none() || sizes.0.is_some(),
            after_kept: change.after.is_none() || sizes.1.is_some(),
            landed: false,
            stat: None,
        };
        if let Err(e) = state.log.append(&Record::Begin(State::stored(&entry, sizes.0, sizes.1)), true) {
            state.release(&entry);
            return Err(e);
        }
        crash_point!("journal::begun");
        state.next_seq += 1;
        let seq = entry.seq;
        *state.landing.entry(entry.path.clone()).or_default() += 1;
        state.push(entry);
        Ok(seq)
    }

    fn end(&self, seq: u64, landed: bool) {
        let mut state = self.state();
        let Some(state) = state.as_mut() else { return };
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
            state.enforce(&self.config);
        } else if let Some(entry) = state.entries.remove(at) {
            state.release(&entry);
            state.recompute_last(&entry.path);
        }
    }
}
