//! The daemon's own writes, as the watcher needs to know them, so that it neither wakes for nor
//! hashes what the daemon itself just did:
//!
//! - **Staged names:** the exact paths of the temporary files this daemon created (recently).
//!   An event about one of them is the daemon's own staging, never a real file's: a path is
//!   only ever matched when this process made that very name (`O_EXCL`, with 128 random bits
//!   in it), so a file whose name merely looks like a staging name is never taken for one.
//! - **Told versions:** before each atomic replace (or create) by rename, the path is marked
//!   *expected*; once the rename is done, the stat fingerprint of the inode renamed there and
//!   the version of its bytes are recorded. Any event about the path other than the rename's
//!   own (`IN_MOVED_TO`; reads are no events here) marks it *foreign* from then on. The watcher
//!   then takes the recorded version as the file's current one — without hashing it — only
//!   while the path is not foreign and its fingerprint is still the recorded one.
//!
//! Why events and not time: a cached version is normally trusted on its fingerprint only once
//! the file is older than the racy window (a second write within one timestamp tick can leave
//! size, mtime and ctime unchanged). Here the file is seconds younger than that, but every
//! change through the kernel to the path after the mark (an in-place write, truncate, chmod,
//! delete, a rename away) produces an event about it, and such an event makes the path
//! foreign: a change in the same timestamp tick as the daemon's write is hashed like any
//! other. An event the watcher has not read yet when it checks does not get lost either: it
//! marks the path when it is read, and the check it causes hashes the file. The watcher uses
//! what it was told only for a folder it watches, forgets what it was told about a folder once
//! a watch on it (re)starts, and everything when it lost events, so nothing recorded while
//! events could go unseen is used.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{Fingerprint, Provider, ProviderError, Root, Version, resolve};

/// Staged names remembered at most (the oldest are forgotten first).
const MAX_STAGED: usize = 1024;

/// How long a staged name is recognised: its events follow its creation within moments (the
/// watcher's thread reads them as they come); a name older than this is forgotten.
const STAGED_FOR: Duration = Duration::from_secs(10);

/// Told paths remembered at most; past this everything told is forgotten (the watcher then
/// hashes, as it would without being told).
const MAX_TOLD: usize = 4096;

/// What the daemon told about one path.
#[derive(Debug, Clone, Copy)]
struct Told {
    /// The fingerprint and version its rename left there (`None`: the rename is under way).
    written: Option<(Fingerprint, Version)>,
    /// Whether an event other than the rename's own came since the mark.
    foreign: bool,
}

#[derive(Debug, Default)]
struct Staged {
    /// Paths of staged files → when they were staged.
    paths: HashMap<PathBuf, Instant>,
    /// The same paths, oldest first (an entry may outlive its path's removal from `paths`).
    order: VecDeque<(PathBuf, Instant)>,
}

/// The registry of the daemon's own writes (see the module docs). One per provider.
#[derive(Debug, Default)]
pub struct OwnWrites {
    staged: Mutex<Staged>,
    told: Mutex<HashMap<PathBuf, Told>>,
}

/// What an event does to what the daemon told about its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// A rename onto the path (what the daemon's own replace does): the fingerprint decides.
    RenamedOnto,
    /// Anything else: the path is foreign from now on.
    Other,
}

impl OwnWrites {
    fn staged(&self) -> MutexGuard<'_, Staged> {
        self.staged.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn told(&self) -> MutexGuard<'_, HashMap<PathBuf, Told>> {
        self.told.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers `path` as a temporary file this daemon is about to create.
    pub(super) fn stage(&self, path: PathBuf) {
        let now = Instant::now();
        let mut staged = self.staged();
        while let Some((old, at)) = staged.order.front()
            && (staged.order.len() >= MAX_STAGED || now.duration_since(*at) > STAGED_FOR)
        {
            let (old, at) = (old.clone(), *at);
            staged.order.pop_front();
            if staged.paths.get(&old) == Some(&at) {
                staged.paths.remove(&old);
            }
        }
        staged.paths.insert(path.clone(), now);
        staged.order.push_back((path, now));
    }

    /// Whether `path` is a temporary file this daemon staged (recently). `gone`: the event
    /// took the name away (renamed from, deleted), after which the name is no longer the
    /// daemon's.
    pub fn is_staged(&self, path: &Path, gone: bool) -> bool {
        let mut staged = self.staged();
        if staged.paths.is_empty() {
            return false;
        }
        let Some(at) = staged.paths.get(path).copied() else { return false };
        if at.elapsed() > STAGED_FOR {
            staged.paths.remove(path);
            return false;
        }
        if gone {
            staged.paths.remove(path);
        }
        true
    }

    /// Marks `path` as about to be replaced by this daemon's rename (call before renaming).
    pub(super) fn expect(&self, path: &Path) {
        let mut told = self.told();
        if told.len() >= MAX_TOLD && !told.contains_key(path) {
            told.clear();
        }
        told.insert(path.to_owned(), Told { written: None, foreign: false });
    }

    /// Records what this daemon's rename left at `path`: the inode's fingerprint (taken after
    /// the rename) and its version. Nothing is recorded when the mark was dropped meanwhile
    /// (the watcher started watching the folder, or lost events).
    pub(super) fn wrote(&self, path: &Path, fingerprint: Fingerprint, version: Version) {
        if let Some(told) = self.told().get_mut(path) {
            told.written = Some((fingerprint, version));
        }
    }

    /// Drops the mark of `path` (the rename did not happen, or was not one to tell).
    pub(super) fn abandon(&self, path: &Path) {
        self.told().remove(path);
    }

    /// An event about `path` (the watcher's thread, as it reads events).
    pub fn touched(&self, path: &Path, touch: Touch) {
        if touch == Touch::RenamedOnto {
            return;
        }
        let mut told = self.told();
        if told.is_empty() {
            return;
        }
        if let Some(told) = told.get_mut(path) {
            told.foreign = true;
        }
    }

    /// The version this daemon wrote at `path`, when nothing but its own rename touched the
    /// path since and `now` (the path's fingerprint, looked at now) is still the inode it
    /// renamed there; else `None` (and what was told about the path is forgotten).
    pub fn unchanged(&self, path: &Path, now: &Fingerprint) -> Option<Version> {
        let mut told = self.told();
        let entry = told.get(path)?;
        match entry.written {
            Some((fingerprint, version)) if !entry.foreign && fingerprint == *now => Some(version),
            // The rename is still under way: its own events are not the answer yet.
            None if !entry.foreign => None,
            _ => {
                told.remove(path);
                None
            }
        }
    }

    /// Whether anything is told about `path` (a cheap look before stat-ing it).
    pub fn is_told(&self, path: &Path) -> bool {
        let told = self.told();
        !told.is_empty() && told.contains_key(path)
    }

    /// Forgets what was told about `watched` and the files directly in it (the watcher starts
    /// watching it now: events before went unseen).
    pub fn forget_in(&self, watched: &Path) {
        let mut told = self.told();
        if !told.is_empty() {
            told.retain(|path, _| path != watched && path.parent() != Some(watched));
        }
    }

    /// Forgets everything told (the watcher lost events).
    pub fn forget_all(&self) {
        let mut told = self.told();
        told.clear();
        told.shrink_to_fit();
    }

    /// Paths told about (for tests and status).
    pub fn told_len(&self) -> usize {
        self.told().len()
    }
}

impl Provider {
    /// [`Provider::current_version_in`], answered without hashing when the file is still
    /// what this daemon's own rename left there and nothing else touched it since (see the
    /// module docs): one `stat` beneath the root instead of reading and hashing the file.
    pub fn current_version_seen(
        &self,
        path: &Path,
        roots: &[Root],
    ) -> Result<Option<Version>, ProviderError> {
        if self.own.is_told(path)
            && let Some((dir, rel)) = resolve::locate(roots, path)
            && let Ok(meta) = dir.open_path(rel).and_then(|file| file.metadata())
            && meta.is_file()
            && let Some(version) = self.own.unchanged(path, &Fingerprint::of(&meta))
        {
            return Ok(Some(version));
        }
        self.current_version_in(path, roots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(ino: u64, t: i128) -> Fingerprint {
        Fingerprint { dev: 1, ino, size: 10, mtime_ns: t, ctime_ns: t }
    }

    #[test]
    fn a_told_version_holds_only_until_anything_but_the_rename_touches_the_path() {
        let own = OwnWrites::default();
        let path = Path::new("/r/a.txt");
        let v = Version::of(b"written");
        assert_eq!(own.unchanged(path, &fp(7, 1)), None, "nothing told");

        own.expect(path);
        assert_eq!(own.unchanged(path, &fp(7, 1)), None, "the rename is under way");
        own.touched(path, Touch::RenamedOnto);
        own.wrote(path, fp(7, 1), v);
        assert_eq!(own.unchanged(path, &fp(7, 1)), Some(v));
        assert_eq!(own.unchanged(path, &fp(7, 1)), Some(v), "asked again: still told");

        // Same inode, same size, same timestamps (a write within the same tick): the event
        // alone makes it foreign.
        own.touched(path, Touch::Other);
        assert_eq!(own.unchanged(path, &fp(7, 1)), None);
        assert_eq!(own.told_len(), 0, "forgotten once it no longer holds");

        // Another inode renamed there (someone else's rename onto the path).
        own.expect(path);
        own.wrote(path, fp(7, 2), v);
        assert_eq!(own.unchanged(path, &fp(8, 2)), None);
        assert_eq!(own.told_len(), 0);
    }

    #[test]
    fn an_event_between_the_mark_and_the_record_counts() {
        let own = OwnWrites::default();
        let path = Path::new("/r/a.txt");
        own.expect(path);
        own.touched(path, Touch::Other);
        own.wrote(path, fp(7, 1), Version::of(b"x"));
        assert_eq!(own.unchanged(path, &fp(7, 1)), None);
    }

    #[test]
    fn watching_a_folder_anew_or_losing_events_forgets_what_was_told() {
        let own = OwnWrites::default();
        let (a, b) = (Path::new("/r/d/a.txt"), Path::new("/r/e/b.txt"));
        let v = Version::of(b"x");
        for path in [a, b] {
            own.expect(path);
            own.wrote(path, fp(1, 1), v);
        }
        own.forget_in(Path::new("/r/d"));
        assert_eq!(own.unchanged(a, &fp(1, 1)), None);
        assert_eq!(own.unchanged(b, &fp(1, 1)), Some(v));
        // A mark dropped before the record: the record is not kept either.
        own.expect(a);
        own.forget_all();
        own.wrote(a, fp(1, 1), v);
        assert_eq!(own.unchanged(a, &fp(1, 1)), None);
        assert_eq!(own.unchanged(b, &fp(1, 1)), None);
    }

    #[test]
    fn only_names_this_daemon_staged_are_its_own() {
        let own = OwnWrites::default();
        let staged = PathBuf::from("/r/.a.txt.filectx-0123456789abcdef-deadbeef-1-2-00ff.tmp");
        let lookalike = PathBuf::from("/r/.a.txt.filectx-0123456789abcdef-deadbeef-1-2-00fe.tmp");
        assert!(!own.is_staged(&staged, false));
        own.stage(staged.clone());
        assert!(own.is_staged(&staged, false));
        assert!(!own.is_staged(&lookalike, false), "the same pattern is not the same name");
        assert!(!own.is_staged(Path::new("/r/a.txt"), false));
        assert!(own.is_staged(&staged, true), "its rename away is still its own event");
        assert!(!own.is_staged(&staged, false), "after that, the name is anyone's");
        // Bounded: the oldest names go first.
        for n in 0..MAX_STAGED + 10 {
            own.stage(PathBuf::from(format!("/r/.t{n}.tmp")));
        }
        assert!(!own.is_staged(Path::new("/r/.t0.tmp"), false));
        assert!(own.is_staged(Path::new(&format!("/r/.t{}.tmp", MAX_STAGED + 9)), false));
        assert!(own.staged().paths.len() <= MAX_STAGED);
    }
}
