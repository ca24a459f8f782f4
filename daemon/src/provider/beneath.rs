//! Opening files beneath a root's directory handle, never by name from `/`: `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, else a walk one component at
//! a time with `O_NOFOLLOW`. Whatever is swapped in meanwhile (a folder or the file replaced by
//! a symlink to outside), an open either lands on something beneath the root or fails.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::private::Private;

/// Whether `openat2` answered ENOSYS once (an old kernel or a seccomp filter): from then on
/// every open walks component by component.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Times an open is retried when the kernel asks (`EAGAIN`: a rename raced the lookup).
const AGAIN_ATTEMPTS: usize = 8;

/// A session root: its canonical path and a directory handle opened on it. Every file
/// operation of the provider starts from such a handle.
#[derive(Debug)]
pub struct RootDir {
    path: PathBuf,
    alias: Option<PathBuf>,
    fd: OwnedFd,
    /// The device of the folder: a file on another one is under a mount point in the root.
    dev: u64,
    /// Whether the folder is on a local filesystem (see [`super::mmap::mappable`]).
    local: bool,
    /// Its descriptor's share of the daemon's budget, given back when the handle is closed.
    _charge: Option<crate::descriptors::Charge>,
    /// The daemon's private files and folders (see [`super::private`]).
    private: Arc<Private>,
    /// The private folders and files inside this root, relative to it: never reached.
    fences: Box<[PathBuf]>,
}

/// A shared root handle.
pub type Root = Arc<RootDir>;

/// Two handles are the same root when they name the same canonical folder.
impl PartialEq for RootDir {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for RootDir {}

impl RootDir {
    /// Opens the folder at `canonical` (absolute, no symlinks: the caller canonicalised it) as a
    /// root. `given` is the path as the client wrote it (lexically normalised); when it differs,
    /// absolute paths under it are accepted too (a root given through a symlinked folder).
    pub fn new(canonical: &Path, given: Option<&Path>) -> io::Result<Root> {
        Self::charged(canonical, given, None, &Private::none())
    }

    /// [`RootDir::new`], its descriptor paid for by `charge` (kept as long as the handle), the
    /// daemon's `private` files and folders out of its reach.
    pub fn charged(
        canonical: &Path,
        given: Option<&Path>,
        charge: Option<crate::descriptors::Charge>,
        private: &Arc<Private>,
    ) -> io::Result<Root> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        // The canonical path has no symlinks; refusing them here means the handle is the folder
        // that path names now, not something a swap put there after canonicalisation.
        let fd = open_resolving(rustix::fs::CWD, canonical, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS)?;
        let alias = given.map(normalize).filter(|g| g != canonical);
        let dev = rustix::fs::fstat(&fd)?.st_dev;
        let local = super::mmap::mappable(&fd);
        let fences = private.beneath(canonical);
        Ok(Arc::new(Self {
            path: canonical.to_owned(),
            alias,
            fd,
            dev,
            local,
            _charge: charge,
            private: private.clone(),
            fences,
        }))
    }

    /// Whether `rel` (relative to this root, as resolution places it) is, or lies beneath, one
    /// of the daemon's private folders or files.
    pub fn fenced(&self, rel: &Path) -> bool {
        !self.fences.is_empty() && self.fences.iter().any(|fence| rel.starts_with(fence))
    }

    /// Whether the regular file of `meta` (opened beneath this root) may be served: not one
    /// of the daemon's private files under another name (a hard link).
    pub fn admits(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        meta.nlink() < 2 || !self.private.is_private_file(meta)
    }

    /// The device the root folder is on.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// Whether the root folder is on a local filesystem, as [`super::mmap::mappable`] decides
    /// (so is every file on its device).
    pub fn local(&self) -> bool {
        self.local
    }

    /// The canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory handle.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// `path` relative to this root, when `path` (absolute, normalised) lies in it, by its
    /// canonical path or by the path it was given as.
    pub fn relative<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        if let Some(rel) = plain_tail(path, &self.path) {
            return Some(rel);
        }
        path.strip_prefix(&self.path)
            .ok()
            .or_else(|| self.alias.as_deref().and_then(|alias| path.strip_prefix(alias).ok()))
    }

    /// Opens `rel` (a relative path without `.`, `..` or symlinks, as resolution produces it)
    /// beneath this root, following no symlink at all.
    pub fn open(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        open_beneath(&self.fd, rel, flags, mode)
    }

    /// Opens `rel` for reading file contents: non-blocking (a FIFO never holds a thread),
    /// never a controlling terminal.
    pub fn open_read(&self, rel: &Path) -> io::Result<File> {
        self.open(rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, Mode::empty()).map(File::from)
    }

    /// Opens `rel` as an `O_PATH` handle: enough to `fstat` it, opens nothing's content.
    pub fn open_path(&self, rel: &Path) -> io::Result<File> {
        self.open(rel, OFlags::PATH, Mode::empty()).map(File::from)
    }

    /// Opens the folder `rel` for use as the base of `*at` calls (readable, so it can be synced
    /// and listed).
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.open(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
    }
}

/// Opens `rel` beneath `dir`, following no symlink (see [`RootDir::open`]).
pub fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    open_resolving(dir, rel, flags, mode, resolve)
}

fn open_resolving<Fd: AsFd>(
    dir: Fd,
    path: &Path,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        for _ in 0..AGAIN_ATTEMPTS {
            match rustix::fs::openat2(dir.as_fd(), path, flags, mode, resolve) {
                Err(Errno::AGAIN | Errno::INTR) => continue,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                other => return other.map_err(io::Error::from),
            }
        }
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN.into());
        }
    }
    if let Ok(rel) = path.strip_prefix("/") {
        let slash = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        return walk_open(slash.as_fd(), rel, flags, mode);
    }
    walk_open(dir.as_fd(), path, flags, mode)
}

/// The fallback of `openat2`: one `openat(O_NOFOLLOW)` per component. A component that is a
/// symlink fails (`ELOOP`, or `ENOTDIR` for a folder position); `..` is refused outright.
fn walk_open(
    dir: std::os::fd::BorrowedFd<'_>,
    path: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::CurDir => None,
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => Some(Err(())),
        })
        .collect::<Result<_, ()>>()
        .map_err(|()| io::Error::from(Errno::XDEV))?;
    let Some((last, folders)) = names.split_last() else {
        return rustix::fs::openat(dir, ".", flags, mode).map_err(io::Error::from);
    };
    let folder_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut current: Option<OwnedFd> = None;
    for name in folders {
        let base = current.as_ref().map_or(dir, |fd| fd.as_fd());
        let next = rustix::fs::openat(base, *name, folder_flags, Mode::empty())?;
        current = Some(next);
    }
    let base = current.as_ref().map_or(dir, |fd| fd.as_fd());
    rustix::fs::openat(base, *last, flags | OFlags::NOFOLLOW, mode).map_err(io::Error::from)
}

/// `path` with `.` removed and `..` applied lexically (absolute in, absolute out).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::with_capacity(path.as_os_str().len() + 1);
    out.push("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// `path.strip_prefix(base)` read off the bytes, when that is plain: `base` ends in a name and
/// `path` is `base` itself (an empty tail) or `base`, a slash and a tail with no empty or `.`
/// component — then the tail is exactly what `strip_prefix` gives, without walking both paths
/// component by component. `None`: ask `strip_prefix`.
pub fn plain_tail<'p>(path: &'p Path, base: &Path) -> Option<&'p Path> {
    let (bytes, prefix) = (path.as_os_str().as_bytes(), base.as_os_str().as_bytes());
    if prefix.is_empty() || prefix.ends_with(b"/") || prefix.ends_with(b".") {
        return None;
    }
    let rest = bytes.strip_prefix(prefix)?;
    if rest.is_empty() {
        return Some(Path::new(""));
    }
    let rest = rest.strip_prefix(b"/")?;
    let plain = !rest.is_empty() && rest.split(|&b| b == b'/').all(|part| !part.is_empty() && part != b".");
    plain.then(|| Path::new(OsStr::from_bytes(rest)))
}

/// Whether an open failed because what it met was not what resolution saw: a symlink where a
/// folder or the file was, or a path that would leave the root.
pub fn swapped(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::XDEV.raw_os_error())
}

/// Whether a name is one path component (no `/`, not `.` or `..`, not empty).
pub fn is_plain_name(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty() && bytes != b"." && bytes != b".." && !bytes.contains(&b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tails_are_what_strip_prefix_gives() {
        let bases = ["/srv/app", "/srv/app/", "/", "/srv/app/.", "/srv/a.b", "srv/app", ""];
        let tails = ["", "x", "x/y.rs", "./x", "x/./y", "x//y", "x/", "x/.", "..", "x/../y", ".hidden", "é"];
        for base in bases {
            for tail in tails {
                for path in [format!("{base}/{tail}"), format!("{base}{tail}"), format!("/other/{tail}")] {
                    let (path, base) = (Path::new(&path), Path::new(base));
                    if let Some(tail) = plain_tail(path, base) {
                        assert_eq!(Ok(tail), path.strip_prefix(base), "{path:?} under {base:?}");
                    }
                }
            }
        }
        assert_eq!(
            plain_tail(Path::new("/srv/app/x/y.rs"), Path::new("/srv/app")),
            Some(Path::new("x/y.rs"))
        );
        assert_eq!(plain_tail(Path::new("/srv/app"), Path::new("/srv/app")), Some(Path::new("")));
    }
    use std::os::unix::fs::symlink;

    #[test]
    fn opens_beneath_and_refuses_symlinks_and_escapes_on_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "in").unwrap();
        std::fs::write(base.join("secret"), "out").unwrap();
        symlink(base.join("secret"), root.join("a/link")).unwrap();
        symlink(&base, root.join("up")).unwrap();
        let handle = RootDir::new(&root, None).unwrap();
        for fallback in [false, true] {
            let open = |rel: &str| {
                if fallback {
                    walk_open(
                        handle.fd().as_fd(),
                        Path::new(rel),
                        OFlags::RDONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                } else {
                    handle.open(Path::new(rel), OFlags::RDONLY, Mode::empty())
                }
            };
            assert!(open("a/b/f").is_ok(), "fallback={fallback}");
            assert!(open("").is_ok(), "the root itself");
            for rel in ["a/link", "up/secret", "../secret", "a/../../secret"] {
                let err = open(rel).unwrap_err();
                assert!(swapped(&err) || err.kind() == io::ErrorKind::NotADirectory, "{rel}: {err}");
            }
        }
        assert_eq!(handle.relative(&root.join("a/b")), Some(Path::new("a/b")));
        assert_eq!(handle.relative(&base.join("rootx")), None);
    }

    #[test]
    fn a_root_given_through_a_symlink_accepts_both_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("real")).unwrap();
        symlink(base.join("real"), base.join("alias")).unwrap();
        let handle = RootDir::new(&base.join("real"), Some(&base.join("alias/."))).unwrap();
        assert_eq!(handle.relative(&base.join("alias/x")), Some(Path::new("x")));
        assert_eq!(handle.relative(&base.join("real/x")), Some(Path::new("x")));
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
