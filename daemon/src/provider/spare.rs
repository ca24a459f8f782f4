//! Spare staging inodes, made off the request's path. Creating a file's inode is the costly part
//! of creating a staging file on some filesystems (ext4 without a journal skips every inode
//! freed in the last half minute, and each replace frees one). So after a replace, one thread
//! makes an `O_TMPFILE` inode in the folder (beneath the handle the replace opened beneath its
//! root): nameless, invisible, gone by itself when closed or when the daemon dies. The next
//! write in that folder takes it, fills it, gives it its mode and owner, and only then links it
//! under a staging name (`linkat`) in the folder's handle it opened beneath the root for itself
//! — the same folder (device and inode checked) — and renames it over the target as always.
//!
//! Bounded: at most [`MAX_SPARES`] spares (one per folder, the oldest dropped first), each an
//! empty inode and one descriptor; a spare not taken within [`SPARE_FOR`] is dropped. Without
//! `O_TMPFILE` on a filesystem, or without a way to link one (`AT_EMPTY_PATH` needs
//! `CAP_DAC_READ_SEARCH`; `/proc/self/fd/N` with `AT_SYMLINK_FOLLOW` needs `/proc`), writes
//! stage as before. The kernel reports a spare's events under `#<ino>` in its folder: the
//! watcher is told that name (see [`own`](super::own)).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::own::OwnWrites;

/// Spares kept at most (one per folder).
pub const MAX_SPARES: usize = 16;

/// How long a spare is kept for its folder's next write; older ones are dropped (well within
/// the time the watcher recognises its name).
pub const SPARE_FOR: Duration = Duration::from_secs(5);

/// How often the spares' thread looks for spares to drop while no folder wants one.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Devices remembered as unable to make spares at most.
const MAX_UNABLE: usize = 64;

/// How a spare is linked: not known yet, `AT_EMPTY_PATH`, or through `/proc/self/fd`.
static LINK_BY: AtomicU8 = AtomicU8::new(LINK_UNKNOWN);
const LINK_UNKNOWN: u8 = 0;
const LINK_EMPTY_PATH: u8 = 1;
const LINK_PROC: u8 = 2;

/// A spare inode: open for writing, nameless.
#[derive(Debug)]
pub(super) struct Spare {
    /// The inode, opened `O_TMPFILE`.
    pub file: File,
    /// The folder it was made in: device and inode.
    folder: (u64, u64),
    /// The name its events carry (`#<ino>` in the folder).
    name: PathBuf,
    made: Instant,
}

/// A folder that wants a spare: its handle (opened beneath a root) and its path.
struct Want {
    dir: OwnedFd,
    path: PathBuf,
}

type Ready = Arc<Mutex<HashMap<PathBuf, Spare>>>;

/// The spares of one provider, and the thread that makes them (started at the first want).
pub struct Spares {
    own: Arc<OwnWrites>,
    ready: Ready,
    wants: OnceLock<Option<SyncSender<Want>>>,
    /// Set when spares cannot be linked here (no capability and no `/proc`).
    off: AtomicBool,
}

impl std::fmt::Debug for Spares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spares").field("ready", &lock(&self.ready).len()).finish()
    }
}

fn lock(ready: &Ready) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Spare>> {
    ready.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A folder's identity: device and inode.
fn identity(dir: &OwnedFd) -> Option<(u64, u64)> {
    rustix::fs::fstat(dir).ok().map(|stat| (stat.st_dev, stat.st_ino))
}

impl Spares {
    /// No spares yet; spare names are told to `own`.
    pub fn new(own: Arc<OwnWrites>) -> Self {
        Self { own, ready: Ready::default(), wants: OnceLock::new(), off: AtomicBool::new(false) }
    }

    /// Spares ready now.
    #[cfg(test)]
    fn ready(&self) -> usize {
        lock(&self.ready).len()
    }

    /// Asks for a spare in the folder `dir` (at `path`), made soon off the caller's path; the
    /// handle is kept until then. Does nothing when one is ready there or too many are asked.
    pub(super) fn want(&self, dir: OwnedFd, path: &Path) {
        if self.off.load(Ordering::Relaxed) || lock(&self.ready).contains_key(path) {
            return;
        }
        let wants = self.wants.get_or_init(|| {
            let (send, receive) = std::sync::mpsc::sync_channel(MAX_SPARES);
            let (own, ready) = (Arc::clone(&self.own), Arc::clone(&self.ready));
            std::thread::Builder::new()
                .name("filectx-spares".into())
                .spawn(move || make_spares(&receive, &own, &ready))
                .map_err(|err| tracing::debug!(%err, "no thread for spare inodes; writes stage as before"))
                .ok()?;
            Some(send)
        });
        if let Some(wants) = wants {
            // A full queue: this folder goes without (its next write stages as before).
            let _ = wants.try_send(Want { dir, path: path.to_owned() });
        }
    }

    /// The spare for the folder `dir` (at `path`, opened beneath its root by the caller), when
    /// one is ready, fresh, made in that very folder, and its name still the daemon's.
    pub(super) fn take(&self, dir: &OwnedFd, path: &Path) -> Option<Spare> {
        if self.off.load(Ordering::Relaxed) {
            return None;
        }
        let spare = {
            let mut ready = lock(&self.ready);
            if ready.is_empty() {
                return None;
            }
            ready.remove(path)?
        };
        let fits = spare.made.elapsed() < SPARE_FOR
            && identity(dir) == Some(spare.folder)
            && self.own.is_spare(&spare.name, super::own::NameEvent::Other);
        if !fits {
            // Closing it frees an inode: off this path too.
            super::closer::close_later(spare.file);
            return None;
        }
        Some(spare)
    }

    /// Links the filled `file` (a spare's) as `temp` in `dir`. `Err` when it could not be
    /// linked (the caller stages as before); when linking cannot work here at all, no more
    /// spares are made.
    pub(super) fn link(&self, file: &File, dir: &OwnedFd, temp: &str) -> Result<(), Errno> {
        if LINK_BY.load(Ordering::Relaxed) != LINK_PROC {
            match rustix::fs::linkat(file, "", dir, temp, AtFlags::EMPTY_PATH) {
                // No CAP_DAC_READ_SEARCH: the way through /proc from now on.
                Err(Errno::NOENT | Errno::PERM | Errno::ACCESS)
                    if LINK_BY.load(Ordering::Relaxed) == LINK_UNKNOWN =>
                {
                    LINK_BY.store(LINK_PROC, Ordering::Relaxed);
                }
                linked => {
                    if linked.is_ok() {
                        LINK_BY.store(LINK_EMPTY_PATH, Ordering::Relaxed);
                    }
                    return linked;
                }
            }
        }
        let linked = link_by_proc(file, dir, temp);
        if matches!(linked, Err(Errno::NOENT | Errno::PERM | Errno::ACCESS))
            && !Path::new("/proc/self/fd").is_dir()
        {
            tracing::debug!(
                "spare inodes cannot be linked (no /proc, no CAP_DAC_READ_SEARCH); writes stage as before"
            );
            self.off.store(true, Ordering::Relaxed);
        }
        linked
    }
}

/// Links `file` as `temp` in `dir` through its `/proc/self/fd` link.
fn link_by_proc(file: &File, dir: &OwnedFd, temp: &str) -> Result<(), Errno> {
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(rustix::fs::CWD, proc.as_str(), dir, temp, AtFlags::SYMLINK_FOLLOW)
}

/// The spares' thread: makes the spares folders want, drops those kept too long; ends when
/// its provider is gone.
fn make_spares(wants: &Receiver<Want>, own: &OwnWrites, ready: &Ready) {
    let mut unable: HashSet<u64> = HashSet::new();
    loop {
        match wants.recv_timeout(IDLE_CHECK) {
            Ok(want) => {
                if let Some((path, spare)) = make(want, own, &mut unable) {
                    let dropped = {
                        let mut ready = lock(ready);
                        let oldest = (ready.len() >= MAX_SPARES && !ready.contains_key(&path))
                            .then(|| ready.iter().min_by_key(|(_, s)| s.made).map(|(p, _)| p.clone()))
                            .flatten();
                        let oldest = oldest.and_then(|p| ready.remove(&p));
                        (ready.insert(path, spare), oldest)
                    };
                    drop(dropped);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let stale: Vec<Spare> = {
            let mut ready = lock(ready);
            if ready.is_empty() {
                continue;
            }
            let old: Vec<PathBuf> =
                ready.iter().filter(|(_, s)| s.made.elapsed() >= SPARE_FOR).map(|(p, _)| p.clone()).collect();
            old.iter().filter_map(|p| ready.remove(p)).collect()
        };
        drop(stale);
    }
}

/// Makes a spare in the wanted folder: `O_TMPFILE` beneath its handle, its `#<ino>` name told
/// to `own`, then checked absent from the folder (a real file of that name keeps it from being
/// the daemon's).
fn make(want: Want, own: &OwnWrites, unable: &mut HashSet<u64>) -> Option<(PathBuf, Spare)> {
    let folder = identity(&want.dir)?;
    if unable.contains(&folder.0) {
        return None;
    }
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&want.dir, ".", flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => File::from(fd),
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => {
            if unable.len() >= MAX_UNABLE {
                unable.clear();
            }
            unable.insert(folder.0);
            return None;
        }
        Err(_) => return None,
    };
    let Some(name) = claim(&want.dir, &want.path, &file, own) else {
        drop(file);
        return None;
    };
    Some((want.path, Spare { file, folder, name, made: Instant::now() }))
}

/// Tells `own` the name the events of `file` (a spare in `dir`, at `path`) carry, then checks
/// that no real file has it; returns it, or `None` (and untells it) when one has.
fn claim(dir: &OwnedFd, path: &Path, file: &File, own: &OwnWrites) -> Option<PathBuf> {
    let ino = rustix::fs::fstat(file).ok()?.st_ino;
    let hash_name = format!("#{ino}");
    let name = path.join(&hash_name);
    own.stage_spare(name.clone());
    match rustix::fs::statat(dir, hash_name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => Some(name),
        _ => {
            own.unstage_spare(&name);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::own::NameEvent;
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn open_dir(path: &Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap()
    }

    fn wait_ready(spares: &Spares, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while spares.ready() != n {
            assert!(Instant::now() < deadline, "{} spares ready, not {n}", spares.ready());
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_spare_is_made_for_its_folder_only_and_linked_whole() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (base.path().join("a"), base.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let own = Arc::new(OwnWrites::default());
        let spares = Spares::new(Arc::clone(&own));
        spares.want(open_dir(&a), &a);
        wait_ready(&spares, 1);
        assert_eq!(std::fs::read_dir(&a).unwrap().count(), 0, "a spare has no name");

        // Another folder under the same path (the folder was replaced): not taken.
        assert!(spares.take(&open_dir(&b), &a).is_none());
        assert_eq!(spares.ready(), 0, "and dropped");

        spares.want(open_dir(&a), &a);
        wait_ready(&spares, 1);
        let dir = open_dir(&a);
        let mut spare = spares.take(&dir, &a).expect("the spare of this folder");
        let name = spare.name.clone();
        assert!(own.is_staged(&name, NameEvent::Other), "its events are the daemon's");
        spare.file.write_all(b"whole").unwrap();
        rustix::fs::fchmod(&spare.file, Mode::from_raw_mode(0o640)).unwrap();
        spares.link(&spare.file, &dir, "staged").unwrap();
        let meta = std::fs::metadata(a.join("staged")).unwrap();
        assert_eq!(std::fs::read(a.join("staged")).unwrap(), b"whole");
        assert_eq!((meta.permissions().mode() & 0o777, meta.nlink()), (0o640, 1));
        assert_eq!(name, a.join(format!("#{}", meta.ino())));
        // The other way of linking (without the capability) gives the same.
        let mut other = File::from(
            rustix::fs::openat(
                &dir,
                ".",
                OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .unwrap(),
        );
        other.write_all(b"by proc").unwrap();
        link_by_proc(&other, &dir, "by-proc").unwrap();
        assert_eq!(std::fs::read(a.join("by-proc")).unwrap(), b"by proc");
    }

    #[test]
    fn a_real_file_named_like_the_spare_keeps_it_from_being_ours() {
        let base = tempfile::tempdir().unwrap();
        let own = Arc::new(OwnWrites::default());
        let dir = open_dir(base.path());
        let want = Want { dir: open_dir(base.path()), path: base.path().to_owned() };
        let (_, spare) = make(want, &own, &mut HashSet::new()).unwrap();
        let name = spare.name.clone();
        assert!(own.is_spare(&name, NameEvent::Other));
        std::fs::write(&name, "a real file of that name").unwrap();
        assert_eq!(claim(&dir, base.path(), &spare.file, &own), None);
        assert!(!own.is_staged(&name, NameEvent::Other), "its events are reported");
    }

    #[test]
    fn spares_are_bounded_one_per_folder_the_oldest_dropped_first() {
        let base = tempfile::tempdir().unwrap();
        let own = Arc::new(OwnWrites::default());
        let spares = Spares::new(own);
        for n in 0..MAX_SPARES + 3 {
            let dir = base.path().join(format!("d{n}"));
            std::fs::create_dir(&dir).unwrap();
            spares.want(open_dir(&dir), &dir);
            // Let the thread keep up (the queue holds MAX_SPARES).
            let deadline = Instant::now() + Duration::from_secs(5);
            while !lock(&spares.ready).contains_key(&dir) {
                assert!(Instant::now() < deadline, "no spare for {}", dir.display());
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(spares.ready() <= MAX_SPARES);
        }
        assert_eq!(spares.ready(), MAX_SPARES);
        assert!(!lock(&spares.ready).contains_key(&base.path().join("d0")), "the oldest went first");
    }
}
