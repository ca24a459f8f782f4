//! Path resolution inside a session's roots, beneath their directory handles: a path is
//! checked against the roots lexically before anything is looked at (so nothing outside is ever
//! probed), then opened from the root's handle — `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//! when no symlink is in the way, else one component at a time (`O_PATH | O_NOFOLLOW`,
//! `readlinkat`) while the canonical path is tracked. A relative link target continues from the
//! current folder, an absolute one from the root that lexically contains it; `..` is applied to
//! the canonical path and may not climb above every root. Containment is component-wise, never
//! a string prefix, so `/srv/app-evil` is not inside `/srv/app`.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::beneath::{Root, RootDir};
use super::{Fingerprint, ProviderError};

/// Most symlinks followed while resolving one path (Linux's own limit is 40).
const MAX_SYMLINKS: u32 = 40;

/// Longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// Longest path component accepted, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// A path resolved inside one of the session's roots.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Absolute, with no `.`, `..` or symlink among its existing components.
    pub path: PathBuf,
    /// Relative to the cwd when inside it, else absolute: for people and models.
    pub display: String,
    /// Whether something exists at `path` (checked during resolution).
    pub exists: bool,
    /// Whether that is a folder.
    pub folder: bool,
    /// The handle of the root that contains it: every later open of this target starts from
    /// it (its canonical path is `dir.path()`).
    pub dir: Root,
    /// `path` relative to the root (empty for the root itself).
    pub rel: PathBuf,
    /// The regular file resolution found at `path` (from an `fstat` of the handle it opened),
    /// so that the provider's warm read needs no second `stat`; `None` for anything else.
    pub file: Option<Found>,
    /// Whether a write must refuse the file when it has several hard links
    /// ([`ProviderError::Linked`]) instead of rewriting it in place: set by a caller whose rules
    /// hold for names, which a second name would get around. Resolution leaves it unset.
    pub one_name: bool,
    /// Who makes a change of it, for the journal (see [`journaled`](super::journaled)): set by
    /// the layer that knows the session. Resolution leaves it unset (nothing is recorded).
    pub by: Option<super::journaled::Attribution>,
    /// The permission bits a file created here gets (a restore puts back the recorded ones);
    /// `None`: `0666` less the umask. A file replaced keeps its own.
    pub create_mode: Option<u32>,
}

impl PartialEq for Resolved {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.exists == other.exists && self.file == other.file
    }
}

/// A regular file as resolution saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its fingerprint then.
    pub fingerprint: Fingerprint,
    /// Its hard links then.
    pub links: u64,
}

/// The sandbox a path is resolved in.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The roots, with their handles.
    pub roots: &'a [Root],
    /// Canonical cwd (inside a root).
    pub cwd: &'a Path,
}

impl Scope<'_> {
    fn locate<'p>(&self, path: &'p Path) -> Option<(&Root, &'p Path)> {
        locate(self.roots, path)
    }
}

/// The innermost of `roots` containing `path` (absolute, normalised), and `path` relative to it.
pub fn locate<'r, 'p>(roots: &'r [Root], path: &'p Path) -> Option<(&'r Root, &'p Path)> {
    if let [root] = roots {
        return root.relative(path).map(|rel| (root, rel));
    }
    roots
        .iter()
        .filter_map(|root| root.relative(path).map(|rel| (root, rel)))
        .min_by_key(|(_, rel)| rel.components().count())
}

/// How a path shows in texts: relative to `cwd` when inside it, else absolute.
pub fn display(path: &Path, cwd: &Path) -> String {
    if let Some(rel) = super::beneath::plain_tail(path, cwd)
        && !rel.as_os_str().is_empty()
    {
        return String::from_utf8_lossy(rel.as_os_str().as_bytes()).into_owned();
    }
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

fn invalid(raw: &str, why: &str) -> ProviderError {
    ProviderError::InvalidPath { path: shorten(raw), why: why.to_owned() }
}

/// A path as echoed in an error: a huge one is cut (it is the client's own input anyway).
fn shorten(raw: &str) -> String {
    if raw.len() <= 300 {
        return raw.to_owned();
    }
    let mut cut = 200;
    while !raw.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &raw[..cut], raw.len())
}

fn outside(raw: &str) -> ProviderError {
    ProviderError::OutsideRoot { path: shorten(raw) }
}

/// Refuses malformed input before anything is looked at.
fn check_shape(raw: &str) -> Result<(), ProviderError> {
    if raw.is_empty() {
        return Err(invalid(raw, "the path is empty"));
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(invalid(
            raw,
            &format!("the path is {} bytes, over the limit of {MAX_PATH_BYTES}", raw.len()),
        ));
    }
    if raw.contains('\0') {
        return Err(invalid(raw, "the path contains a NUL byte"));
    }
    if let Some(long) = raw.split('/').find(|part| part.len() > MAX_NAME_BYTES) {
        return Err(invalid(
            raw,
            &format!("a path component is {} bytes, over the limit of {MAX_NAME_BYTES}", long.len()),
        ));
    }
    Ok(())
}

/// Names a caller fences off (relative to their root): resolution never opens one, nor looks
/// beneath it, and answers [`ProviderError::Fenced`] instead, the same whether or not anything
/// is there. `None`: nothing is fenced.
pub type Fence<'f> = Option<&'f (dyn Fn(&Path) -> bool + Sync)>;

/// Resolves `raw` in `scope`. The path may not exist yet; its nearest existing ancestor decides
/// where it lies. Any path that leaves the roots is `OutsideRoot`, and the error names nothing
/// outside.
pub fn resolve(raw: &str, scope: Scope<'_>) -> Result<Resolved, ProviderError> {
    resolve_fenced(raw, scope, None)
}

/// [`resolve`], never looking at or beneath a name `fence` refuses: every name the path leads
/// through (after symlinks, as the walk places it) is asked before it is opened.
pub fn resolve_fenced(raw: &str, scope: Scope<'_>, fence: Fence<'_>) -> Result<Resolved, ProviderError> {
    match open_fenced(raw, scope, fence)? {
        Lookup::Opened(opened) => {
            let meta = opened.look(raw)?;
            Ok(opened.resolved(&meta))
        }
        Lookup::Resolved(resolved) => Ok(resolved),
    }
}

/// The refusal of `raw`, which reached one of the daemon's private files or folders.
pub(super) fn private(raw: &str) -> ProviderError {
    ProviderError::Private { path: shorten(raw) }
}

/// What [`open`] found: a handle its fast path opened and has not looked at yet, or a whole
/// resolution (the walk's, or a name that does not exist).
#[derive(Debug)]
pub enum Lookup {
    /// Opened beneath the root, not looked at.
    Opened(Opened),
    /// Resolved and looked at.
    Resolved(Resolved),
}

/// A path resolution's fast path opened beneath its root (`openat2(O_PATH, RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS)`) and has not looked at yet. The handle is bound to the inode the name
/// led to when it was opened; one `fstat` of it ([`Opened::look`]) says what that is, whenever
/// it is made. The warm read makes it once, after reading (see
/// [`Provider::read_opened`](super::Provider::read_opened)).
#[derive(Debug)]
pub struct Opened {
    /// As in [`Resolved::path`].
    pub path: PathBuf,
    /// As in [`Resolved::display`].
    pub display: String,
    /// As in [`Resolved::dir`].
    pub dir: Root,
    /// As in [`Resolved::rel`].
    pub rel: PathBuf,
    /// The `O_PATH` handle.
    handle: std::fs::File,
}

impl Opened {
    /// What the handle is now (`fstat`); a failure as resolution reports it for `raw`, and a
    /// hard link to one of the daemon's private files as [`ProviderError::Private`].
    pub fn look(&self, raw: &str) -> Result<std::fs::Metadata, ProviderError> {
        let meta = self.handle.metadata().map_err(|e| fail(raw, e))?;
        if meta.is_file() && !self.dir.admits(&meta) {
            return Err(private(raw));
        }
        Ok(meta)
    }

    /// The resolution, with `meta` (from [`Opened::look`]) as what was found; closes the handle.
    pub fn resolved(self, meta: &std::fs::Metadata) -> Resolved {
        let Self { path, display, dir, rel, handle } = self;
        drop(handle);
        found_at(path, display, dir, rel, Some(meta))
    }
}

/// Resolves `raw` in `scope` as [`resolve`] does, except that a path its fast path opens is
/// handed back opened and not yet looked at ([`Lookup::Opened`]).
pub fn open(raw: &str, scope: Scope<'_>) -> Result<Lookup, ProviderError> {
    open_fenced(raw, scope, None)
}

/// The refusal of a fenced name `rel` reached by `raw`.
fn fenced(raw: &str, rel: &Path) -> ProviderError {
    ProviderError::Fenced { path: shorten(raw), rel: rel.to_path_buf() }
}

/// [`open`] with a fence (see [`resolve_fenced`]).
pub fn open_fenced(raw: &str, scope: Scope<'_>, fence: Fence<'_>) -> Result<Lookup, ProviderError> {
    check_shape(raw)?;
    let given = Path::new(raw);
    let absolute = if given.is_absolute() { given.to_path_buf() } else { scope.cwd.join(given) };
    let plain = !absolute.components().any(|c| c == Component::ParentDir);
    if plain {
        // Fast path: no `..`, so the lexical path is the canonical one unless a symlink is in
        // the way, which the kernel refuses for us.
        let lexical = super::beneath::normalize(&absolute);
        let (root, rel) = scope.locate(&lexical).ok_or_else(|| outside(raw))?;
        if root.fenced(rel) {
            return Err(private(raw));
        }
        // Without `..` or a symlink the names it leads through are its own prefixes.
        if let Some(fence) = fence
            && let Some(name) = rel.ancestors().filter(|a| !a.as_os_str().is_empty()).find(|a| fence(a))
        {
            return Err(fenced(raw, name));
        }
        match root.open_path(rel) {
            Ok(handle) => {
                let (path, display) = place(scope, root, rel);
                return Ok(Lookup::Opened(Opened {
                    path,
                    display,
                    dir: root.clone(),
                    rel: rel.to_path_buf(),
                    handle,
                }));
            }
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => {}
            Err(e) if super::beneath::swapped(&e) => {}
            Err(e) => return Err(fail(raw, e)),
        }
    }
    walk(raw, &absolute, scope, fence).map(Lookup::Resolved)
}

fn found(meta: &std::fs::Metadata) -> Option<Found> {
    meta.is_file().then(|| Found { fingerprint: Fingerprint::of(meta), links: meta.nlink() })
}

/// The canonical path of `rel` beneath `root`, and how it shows.
fn place(scope: Scope<'_>, root: &Root, rel: &Path) -> (PathBuf, String) {
    let path = if rel.as_os_str().is_empty() { root.path().to_path_buf() } else { root.path().join(rel) };
    let display = display(&path, scope.cwd);
    (path, display)
}

/// The answer for `rel` beneath `root`, with what was found there (`None`: nothing exists).
fn finish(scope: Scope<'_>, root: &Root, rel: PathBuf, meta: Option<&std::fs::Metadata>) -> Resolved {
    let (path, display) = place(scope, root, &rel);
    found_at(path, display, root.clone(), rel, meta)
}

/// The answer for `path` (shown as `display`, `rel` beneath `dir`), with what was found there.
fn found_at(
    path: PathBuf,
    display: String,
    dir: Root,
    rel: PathBuf,
    meta: Option<&std::fs::Metadata>,
) -> Resolved {
    Resolved {
        one_name: false,
        by: None,
        create_mode: None,
        display,
        dir,
        exists: meta.is_some(),
        folder: meta.is_some_and(std::fs::Metadata::is_dir),
        file: meta.and_then(found),
        rel,
        path,
    }
}

/// Maps an OS error met while resolving.
fn fail(raw: &str, source: std::io::Error) -> ProviderError {
    match source.kind() {
        ErrorKind::PermissionDenied => ProviderError::PermissionDenied { path: shorten(raw) },
        ErrorKind::NotADirectory => ProviderError::NotFound {
            path: shorten(raw),
            why: Some("a parent of it is a file, not a folder".into()),
        },
        _ if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            invalid(raw, "too many levels of symbolic links")
        }
        _ if super::beneath::swapped(&source) => {
            ProviderError::Busy { path: shorten(raw), why: "it was replaced while being resolved".into() }
        }
        _ => ProviderError::Io { path: shorten(raw), op: "resolve", source },
    }
}

/// Where the walk stands: a folder inside a root, by canonical path and handle.
struct At {
    root: Root,
    /// Canonical path relative to `root`.
    rel: PathBuf,
    /// Handle of that folder (`O_PATH`).
    fd: OwnedFd,
}

impl At {
    /// The folder `path` (absolute, normalised, inside a root), opened beneath its root.
    fn enter(raw: &str, scope: Scope<'_>, path: &Path) -> Result<Self, ProviderError> {
        let (root, rel) = scope.locate(path).ok_or_else(|| outside(raw))?;
        let fd = root.open(rel, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).map_err(|e| fail(raw, e))?;
        Ok(Self { root: root.clone(), rel: rel.to_path_buf(), fd })
    }

    fn path(&self) -> PathBuf {
        self.root.path().join(&self.rel)
    }
}

/// The slow path: one component at a time from a root's handle, following symlinks by hand;
/// each name is asked of `fence` where the walk places it, before anything is looked at there.
fn walk(raw: &str, absolute: &Path, scope: Scope<'_>, fence: Fence<'_>) -> Result<Resolved, ProviderError> {
    let mut queue: VecDeque<OsString> = VecDeque::new();
    let mut at = start(raw, absolute, scope, &mut queue)?;
    // Trailing components that do not exist (none of them can be a link or have children).
    let mut missing: Vec<OsString> = Vec::new();
    // What is at the end when it is not a folder: its metadata.
    let mut leaf: Option<std::fs::Metadata> = None;
    let mut links = 0u32;
    while let Some(name) = queue.pop_front() {
        if name.as_bytes() == b"." {
            continue;
        }
        if name.as_bytes() == b".." {
            if leaf.is_some() {
                return Err(invalid(raw, "`..` follows something that is not a folder"));
            }
            if missing.pop().is_some() {
                continue;
            }
            let parent = at.path().parent().map(Path::to_path_buf).ok_or_else(|| outside(raw))?;
            at = At::enter(raw, scope, &parent)?;
            continue;
        }
        let mut next = at.rel.clone();
        next.extend(&missing);
        next.push(&name);
        if at.root.fenced(&next) {
            return Err(private(raw));
        }
        if let Some(fence) = fence
            && fence(&next)
        {
            return Err(fenced(raw, &next));
        }
        if leaf.is_some() {
            return Err(ProviderError::NotFound {
                path: shorten(raw),
                why: Some("a parent of it is a file, not a folder".into()),
            });
        }
        if !missing.is_empty() {
            missing.push(name);
            continue;
        }
        let opened = rustix::fs::openat(
            &at.fd,
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let fd = match opened {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                missing.push(name);
                continue;
            }
            Err(e) => return Err(fail(raw, e.into())),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(|e| fail(raw, e))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(invalid(raw, "too many levels of symbolic links"));
            }
            let target = rustix::fs::readlinkat(&file, "", Vec::new()).map_err(|e| fail(raw, e.into()))?;
            let target = PathBuf::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
            push_front(&mut queue, &target);
            if target.is_absolute() {
                // Continue from the root that lexically contains the target, never from `/`;
                // the components below that root are walked (and checked) from its handle.
                at = enter_root(raw, scope, &target, &mut queue)?;
            }
            continue;
        }
        at.rel.push(&name);
        if kind.is_dir() {
            at.fd = file.into();
        } else {
            leaf = Some(meta);
        }
    }
    let At { root, mut rel, fd } = at;
    let meta = match (missing.is_empty(), leaf) {
        (false, _) => None,
        (true, Some(meta)) if meta.is_file() && !root.admits(&meta) => return Err(private(raw)),
        (true, Some(meta)) => Some(meta),
        // It ends on a folder: the one the walk holds open.
        (true, None) => Some(std::fs::File::from(fd).metadata().map_err(|e| fail(raw, e))?),
    };
    for name in &missing {
        rel.push(name);
    }
    Ok(finish(scope, &root, rel, meta.as_ref()))
}

/// The leading plain components of an absolute link target (up to its first `.` or `..`):
/// the part that can be matched against the roots lexically.
fn absolute_head(target: &Path) -> PathBuf {
    let mut head = PathBuf::from("/");
    for component in target.components() {
        match component {
            Component::Normal(name) => head.push(name),
            Component::RootDir => {}
            _ => break,
        }
    }
    head
}

/// Where a walk starts: the root that lexically contains `absolute`, with the components
/// left to walk queued.
fn start(
    raw: &str,
    absolute: &Path,
    scope: Scope<'_>,
    queue: &mut VecDeque<OsString>,
) -> Result<At, ProviderError> {
    push_front(queue, absolute);
    enter_root(raw, scope, absolute, queue)
}

/// Moves the walk to the root that lexically contains the absolute path whose components are
/// at the front of `queue`, dropping that root's own components from the queue.
fn enter_root(
    raw: &str,
    scope: Scope<'_>,
    absolute: &Path,
    queue: &mut VecDeque<OsString>,
) -> Result<At, ProviderError> {
    let head = absolute_head(absolute);
    let (root, rel) = scope.locate(&head).ok_or_else(|| outside(raw))?;
    let skip = head.components().count() - 1 - rel.components().count();
    for _ in 0..skip {
        queue.pop_front();
    }
    let fd = root
        .open(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| fail(raw, e))?;
    Ok(At { root: root.clone(), rel: PathBuf::new(), fd })
}

/// Puts a path's components at the front of the queue, in order (the root is implied).
fn push_front(queue: &mut VecDeque<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    for part in parts.into_iter().rev() {
        queue.push_front(part);
    }
}

/// Opens a session's root (blocking): canonicalised, then held as a handle.
pub fn open_root(
    canonical: &Path,
    given: &Path,
    charge: Option<crate::descriptors::Charge>,
    private: &std::sync::Arc<super::private::Private>,
) -> std::io::Result<Root> {
    RootDir::charged(canonical, Some(given), charge, private)
}
