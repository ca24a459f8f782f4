//! The two locks of a write's critical section: an in-process lock per path (so the daemon's
//! own requests queue up instead of all hammering flock), then an advisory `flock` on the file
//! itself (so cooperating processes do not race), re-checked against the path's current inode.
//! Both waits are bounded; running out of patience is `FS_BUSY`. Blocking: call from a blocking
//! thread, never from an async worker.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fs2::FileExt;

use super::beneath::RootDir;

/// One path's in-process lock.
#[derive(Debug, Default)]
struct Slot {
    held: Mutex<bool>,
    released: Condvar,
}

/// In-process locks keyed by canonical path. Entries exist only while someone holds or waits.
#[derive(Debug, Default)]
pub struct PathLocks {
    slots: Mutex<HashMap<PathBuf, Arc<Slot>>>,
}

/// Holds one path's in-process lock until dropped.
#[derive(Debug)]
pub struct PathGuard<'a> {
    locks: &'a PathLocks,
    path: PathBuf,
    slot: Arc<Slot>,
}

impl PathLocks {
    /// Takes the lock of `path`, waiting at most `patience`. `None` when it stayed busy.
    pub fn lock(&self, path: &Path, patience: Duration) -> Option<PathGuard<'_>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.entry(path.to_owned()).or_default().clone()
        };
        let deadline = Instant::now() + patience;
        let mut held = slot.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(held);
                self.forget_if_idle(path, &slot);
                return None;
            }
            held = slot.released.wait_timeout(held, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        *held = true;
        drop(held);
        Some(PathGuard { locks: self, path: path.to_owned(), slot })
    }

    /// Drops the map entry when nobody else holds or waits for it.
    fn forget_if_idle(&self, path: &Path, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's reference plus the caller's: nobody else holds or waits.
        if Arc::strong_count(slot) == 2 {
            slots.remove(path);
        }
    }

    /// Paths with a holder or a waiter (for tests and status).
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no path is locked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PathGuard<'_> {
    fn drop(&mut self) {
        *self.slot.held.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.slot.released.notify_one();
        self.locks.forget_if_idle(&self.path, &self.slot);
    }
}

/// An open file holding an exclusive `flock`, known to be the inode its path names now.
#[derive(Debug)]
pub struct LockedFile {
    /// The open file (read-only); the lock lives as long as it does.
    pub file: File,
    /// Its metadata, taken after locking.
    pub meta: std::fs::Metadata,
}

impl LockedFile {
    /// Lets go of the lock now and closes the file soon, off the caller's path (see
    /// [`closer`](super::closer)): for a file just replaced by rename, whose closing frees it.
    pub fn release_replaced(self) {
        if FileExt::unlock(&self.file).is_ok() {
            super::closer::close_later(self.file);
        }
    }
}

/// Why a file could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Someone else held the lock for longer than the patience.
    Busy(Duration),
    /// Opening, locking or stat-ing failed.
    Io(std::io::Error),
    /// The name leads to one of the daemon's own private files (a hard link): never locked.
    Private,
}

/// Opens `rel` beneath `root` (never through a symlink, never blocking on a FIFO) and takes an
/// exclusive `flock` on it, waiting at most `patience`.
///
/// After locking, the open file must still be the inode `rel` names now: a cooperating writer
/// that replaced the file by rename while we waited leaves us holding a lock on a dead inode, so
/// we let go and try again on the new one (the "flopen" pattern). The caller checks the type
/// on [`LockedFile::meta`] (the descriptor's own).
pub fn lock_file(root: &RootDir, rel: &Path, patience: Duration) -> Result<LockedFile, LockError> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(1);
    loop {
        let file = root.open_read(rel).map_err(LockError::Io)?;
        let meta = file.metadata().map_err(LockError::Io)?;
        if !meta.is_file() {
            // Not ours to lock (a folder, a FIFO): the caller refuses it by its type.
            return Ok(LockedFile { file, meta });
        }
        if !root.admits(&meta) {
            return Err(LockError::Private);
        }
        loop {
            match file.try_lock_exclusive() {
                Ok(()) => break,
                Err(err)
                    if err.kind() == std::io::ErrorKind::WouldBlock
                        || err.raw_os_error() == fs2::lock_contended_error().raw_os_error() =>
                {
                    if started.elapsed() >= patience {
                        return Err(LockError::Busy(started.elapsed()));
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
                Err(err) => return Err(LockError::Io(err)),
            }
        }
        let meta = file.metadata().map_err(LockError::Io)?;
        match root.open_path(rel).and_then(|f| f.metadata()) {
            Ok(now) if now.dev() == meta.dev() && now.ino() == meta.ino() => {
                return Ok(LockedFile { file, meta });
            }
            // Replaced (or removed) while we waited: lock whatever is there now.
            Ok(_) => continue,
            Err(err) => return Err(LockError::Io(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_locks_exclude_and_time_out_and_clean_up() {
        let locks = PathLocks::default();
        let a = Path::new("/x/a");
        let guard = locks.lock(a, Duration::from_millis(10)).unwrap();
        assert!(locks.lock(a, Duration::from_millis(20)).is_none());
        assert!(locks.lock(Path::new("/x/b"), Duration::ZERO).is_some());
        drop(guard);
        assert!(locks.is_empty());
        let guard = locks.lock(a, Duration::ZERO).unwrap();
        let waiter = std::thread::scope(|s| {
            let h = s.spawn(|| locks.lock(a, Duration::from_secs(5)).is_some());
            std::thread::sleep(Duration::from_millis(20));
            drop(guard);
            h.join().unwrap()
        });
        assert!(waiter);
        assert!(locks.is_empty());
    }

    #[test]
    fn flock_is_exclusive_across_open_files_and_follows_renames() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = RootDir::new(&base, None).unwrap();
        let path = base.join("f");
        let rel = Path::new("f");
        std::fs::write(&path, "old").unwrap();
        let held = lock_file(&root, rel, Duration::ZERO).unwrap();
        assert!(matches!(lock_file(&root, rel, Duration::from_millis(30)), Err(LockError::Busy(_))));
        // A writer replaces the file by rename while we hold the old inode's lock: a new
        // locker gets the new inode.
        let tmp = dir.path().join("f.tmp");
        std::fs::write(&tmp, "new").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let fresh = lock_file(&root, rel, Duration::ZERO).unwrap();
        assert_ne!(fresh.meta.ino(), held.meta.ino());
    }
}
