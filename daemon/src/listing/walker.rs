//! The walk behind a search's listing, done beneath the root's handle: every folder is opened
//! with `openat(O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)` relative to its parent's descriptor
//! (the root's handle at the top), its entries are read from that descriptor (`getdents`),
//! its files are `fstatat`'d relative to it without following links, and its ignore files
//! are read beneath it (see [`rules`](super::rules)). Nothing is ever resolved by name from
//! `/`, so a folder swapped for a link to outside while the walk is under way is walked as the
//! folder it was, or not at all: nothing outside is ever listed.
//!
//! What is listed is what ripgrep lists (`ignore::WalkBuilder` with hidden files skipped,
//! `.ignore`, `.gitignore` and `.git/info/exclude` honoured also outside a git repository, links
//! not followed, the ignore files of the folders from the root down to the searched one applied
//! and none above the root): a property test checks it against the crate on generated trees.
//!
//! Folders are the units of work, on two threads sharing one stack (last in, first out, so the
//! folders held open are about those on the way down). A folder waiting to be walked holds its
//! parent's handle; past [`MAX_HELD_FOLDERS`] handles, further subfolders are opened beneath the
//! root's handle by their path instead (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, just as
//! confined, one lookup per component). The walk is bounded: files and bytes listed, bytes of
//! one folder's entries, bytes of the folders waiting (past a bound it stops: `truncated`), and
//! the estimated bytes of the ignore rules in force (past it a file gives no rules).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, Mode, RawDir};

use super::listed::{Listed, ns};
use super::rules::{self, Found, GitSeen, RuleBytes, Rules};
use crate::provider::RootDir;

/// Most files one listing holds; a walk that finds more stops there.
pub const MAX_LISTED_FILES: usize = 200_000;
/// Most bytes of paths one listing holds; a walk that reaches it stops there.
pub const MAX_LISTED_BYTES: usize = 32 << 20;
/// Most bytes of one folder's entry names held while it is walked, and of the folders waiting
/// to be walked; past either, the walk stops there (truncated).
const MAX_HELD_BYTES: usize = 16 << 20;
/// Most folder handles one walk keeps open for the subfolders waiting to be walked.
const MAX_HELD_FOLDERS: usize = 64;
/// How many entries pass between two looks at the caller's stop flag (also asked on entering
/// each folder).
const STOP_EVERY: usize = 64;
/// Bytes of the buffer one walk thread reads entries into.
const ENTRY_BUFFER: usize = 32 << 10;

/// What a folder the walk opens is to a warm listing watching it (see [`FolderHook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch<'a> {
    /// A folder the walk reads: its entries and its ignore files.
    Walked,
    /// A folder between the root and the searched one: only its ignore files, its `.git` and
    /// this entry (the next folder on the way) matter.
    OnTheWay(&'a OsStr),
    /// A folder's `.git`, looked into for `info`.
    Git,
    /// A folder's `.git/info`, looked into for `exclude`.
    GitInfo,
}

/// Told of each folder a walk opens, right after opening it and before reading anything in
/// it: the folder's absolute path (for showing and matching events), its open handle (a watch
/// added through it is bound to the very folder read) and what it is to the walk.
pub type FolderHook = Box<dyn Fn(&Path, BorrowedFd<'_>, Watch<'_>) + Send + Sync>;

/// Which files a walk looks up the modification time of, by their path relative to the walked
/// folder (a glob's pattern: only what it shows is sorted by time); the others are listed
/// undated, and dated when first asked.
pub type Dated<'a> = dyn Fn(&Path) -> bool + Sync + 'a;

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// The files, sorted by path.
    pub files: Vec<Listed>,
    /// Whether a bound stopped the walk.
    pub truncated: bool,
    /// Whether the caller's stop flag ended it.
    pub stopped: bool,
    /// Whether an ignore file it read whitelists (`!pattern`): without one, no hidden entry can
    /// be listed, so a listing may overlook hidden names coming and going.
    pub whitelists: bool,
}

/// Threads of one walk: the walk is mostly system calls, so two already gain most of what
/// more would, and a daemon serving many sessions keeps its other cores for them.
fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

/// A folder whose subfolders wait to be walked: its handle (unless too many are held), its
/// path relative to the root, and the rules in force in it.
struct Parent {
    fd: Option<OwnedFd>,
    rel: PathBuf,
    rules: Option<Arc<Rules>>,
    /// The walk's count of held handles, given back when this one goes.
    held: Arc<AtomicUsize>,
}

impl Drop for Parent {
    fn drop(&mut self) {
        if self.fd.is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A folder waiting to be walked.
struct Unit {
    parent: Arc<Parent>,
    name: OsString,
}

impl Unit {
    /// What it holds, against [`MAX_HELD_BYTES`].
    fn cost(&self) -> usize {
        self.name.len() + std::mem::size_of::<Self>()
    }
}

/// The folders waiting, and how many threads are walking one.
#[derive(Default)]
struct Stack {
    units: Vec<Unit>,
    busy: usize,
}

/// One walk, shared by its threads.
struct Walk<'a> {
    root: &'a RootDir,
    stop: &'a (dyn Fn() -> bool + Sync),
    hook: Option<&'a FolderHook>,
    /// Which files to date (all when `None`), and the bytes of the walked folder's path
    /// before a path relative to it (`rel/`, or nothing at the root).
    dated: Option<&'a Dated<'a>>,
    skip: usize,
    stack: Mutex<Stack>,
    ready: Condvar,
    found: Mutex<Vec<Listed>>,
    files: AtomicUsize,
    bytes: AtomicUsize,
    /// Bytes of the folders waiting.
    waiting: AtomicUsize,
    held: Arc<AtomicUsize>,
    /// Estimated bytes of the compiled ignore rules in force (see [`rules`]).
    rule_bytes: Arc<RuleBytes>,
    truncated: AtomicBool,
    stopped: AtomicBool,
}

/// One entry of the folder being walked: where its name is in [`Scratch::names`], and its type
/// as the folder said (`Unknown` on some filesystems).
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    len: usize,
    kind: FileType,
}

/// What one walk thread reuses from folder to folder.
struct Scratch {
    buffer: Vec<u8>,
    names: Vec<u8>,
    entries: Vec<Entry>,
    path: PathBuf,
    files: Vec<Listed>,
    seen: usize,
}

impl Scratch {
    fn new() -> Self {
        Self {
            buffer: Vec::with_capacity(ENTRY_BUFFER),
            names: Vec::new(),
            entries: Vec::new(),
            path: PathBuf::new(),
            files: Vec::new(),
            seen: 0,
        }
    }
}

/// Walks the folder `rel` (relative, as resolution gives it: no `.`, `..` or links) beneath
/// `root`, on a few threads. `hook` is told of each folder right after it is opened, before
/// anything in it is read. The files `dated` accepts (all when `None`) are `fstatat`'d for
/// their time (see [`Dated`]). Fails only when the folder itself cannot be opened beneath the
/// root (gone, or a link now).
pub fn walk<'a>(
    root: &'a RootDir,
    rel: &Path,
    stop: &'a (dyn Fn() -> bool + Sync),
    hook: Option<&'a FolderHook>,
    dated: Option<&'a Dated<'a>>,
) -> std::io::Result<Walked> {
    let skip = match rel.as_os_str().len() {
        0 => 0,
        len => len + 1,
    };
    let walk = Walk {
        root,
        stop,
        hook,
        dated,
        skip,
        stack: Mutex::default(),
        ready: Condvar::new(),
        found: Mutex::default(),
        files: AtomicUsize::new(0),
        bytes: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
        held: Arc::default(),
        rule_bytes: Arc::default(),
        truncated: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
    };
    let (fd, rules) = walk.open_start(rel)?;
    let mut scratch = Scratch::new();
    let children = walk.folder(fd, rel.to_path_buf(), rules, &mut scratch);
    if !children.is_empty() {
        walk.push(children, false);
        let threads = walk_threads();
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(|| walk.work(Scratch::new()));
            }
            walk.work(Scratch::new());
        });
    }
    walk.keep(&mut scratch);
    let Walk { found, truncated, stopped, rule_bytes, .. } = walk;
    let mut files = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    files.sort_unstable_by(|a, b| path_order(&a.rel, &b.rel));
    Ok(Walked {
        files,
        truncated: truncated.into_inner(),
        stopped: stopped.into_inner(),
        whitelists: rule_bytes.whitelists(),
    })
}

/// `a.cmp(b)` for paths as the walk makes them (relative, normal: no `.`, no doubled or trailing
/// `/`), by bytes with `/` counting as lower than any other byte: that is the order of their
/// components, without splitting them. Only the first byte that differs is weighed so, the
/// bytes before it found eight at a time: the sort of a 100,000-file walk was a quarter of a
/// first glob while every byte was mapped.
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let key = |byte: u8| if byte == b'/' { 0 } else { byte };
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let at = mismatch(a, b);
    match (a.get(at), b.get(at)) {
        (Some(&x), Some(&y)) => key(x).cmp(&key(y)),
        _ => a.len().cmp(&b.len()),
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn mismatch(a: &[u8], b: &[u8]) -> usize {
    let (words_a, _) = a.as_chunks::<8>();
    let (words_b, _) = b.as_chunks::<8>();
    let mut at = 0;
    for (x, y) in words_a.iter().zip(words_b) {
        let (x, y) = (u64::from_le_bytes(*x), u64::from_le_bytes(*y));
        if x != y {
            // Little-endian: the lowest differing bit is in the first differing byte.
            return at + (x ^ y).trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    at + a[at..].iter().zip(&b[at..]).take_while(|(x, y)| x == y).count()
}

impl GitSeen for Walk<'_> {
    fn seen(&self, rel: &Path, dir: BorrowedFd<'_>, info: bool) {
        self.tell(rel, dir, if info { Watch::GitInfo } else { Watch::Git });
    }
}

impl Walk<'_> {
    fn tell(&self, rel: &Path, dir: BorrowedFd<'_>, what: Watch<'_>) {
        if let Some(hook) = self.hook {
            let path = if rel.as_os_str().is_empty() {
                self.root.path().to_path_buf()
            } else {
                self.root.path().join(rel)
            };
            hook(&path, dir, what);
        }
    }

    /// Opens the searched folder from the root down, one folder at a time beneath the last,
    /// reading the ignore files of each folder on the way; its handle and the rules in force
    /// in it.
    fn open_start(&self, rel: &Path) -> std::io::Result<(OwnedFd, Option<Arc<Rules>>)> {
        let mut fd = rustix::fs::openat(self.root.fd(), c".", rules::folder_flags(), Mode::empty())?;
        let mut rules = None;
        let mut here = PathBuf::new();
        for component in rel.components() {
            let Component::Normal(name) = component else {
                return Err(rustix::io::Errno::XDEV.into());
            };
            self.tell(&here, fd.as_fd(), Watch::OnTheWay(name));
            rules = rules::rules_of(fd.as_fd(), &here, Found::ALL, rules, &self.rule_bytes, self);
            fd = rustix::fs::openat(&fd, name, rules::folder_flags(), Mode::empty())?;
            here.push(name);
        }
        Ok((fd, rules))
    }

    /// Whether the walk is over: a bound was reached, or the caller said stop.
    fn over(&self) -> bool {
        self.truncated.load(Ordering::Relaxed) || self.stopped.load(Ordering::Relaxed)
    }

    /// Counts one entry in `seen` and looks at the caller's stop flag every few entries;
    /// whether the walk is over.
    fn check(&self, seen: &mut usize) -> bool {
        *seen += 1;
        if seen.is_multiple_of(STOP_EVERY) && !self.over() && (self.stop)() {
            self.end(&self.stopped);
        }
        self.over()
    }

    /// Ends the walk for `why` (truncated or stopped), waking the threads that wait.
    fn end(&self, why: &AtomicBool) {
        why.store(true, Ordering::Relaxed);
        let _stack = self.stack.lock().unwrap_or_else(PoisonError::into_inner);
        self.ready.notify_all();
    }

    /// Adds folders to walk; `done` when the calling thread finished one.
    fn push(&self, units: Vec<Unit>, done: bool) {
        let cost: usize = units.iter().map(Unit::cost).sum();
        if self.waiting.fetch_add(cost, Ordering::Relaxed) + cost > MAX_HELD_BYTES {
            self.end(&self.truncated);
        }
        let mut stack = self.stack.lock().unwrap_or_else(PoisonError::into_inner);
        stack.units.extend(units);
        if done {
            stack.busy -= 1;
        }
        self.ready.notify_all();
    }

    /// The next folder to walk; `None` when there is none and none can come (or it is over).
    fn next(&self) -> Option<Unit> {
        let mut stack = self.stack.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.over() {
                return None;
            }
            if let Some(unit) = stack.units.pop() {
                stack.busy += 1;
                self.waiting.fetch_sub(unit.cost(), Ordering::Relaxed);
                return Some(unit);
            }
            if stack.busy == 0 {
                self.ready.notify_all();
                return None;
            }
            stack = self.ready.wait(stack).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// One walk thread: folders until there are none.
    fn work(&self, mut scratch: Scratch) {
        while let Some(unit) = self.next() {
            let children = self.child(unit, &mut scratch);
            self.push(children, true);
        }
        self.keep(&mut scratch);
    }

    /// Hands the thread's files over.
    fn keep(&self, scratch: &mut Scratch) {
        if !scratch.files.is_empty() {
            self.found.lock().unwrap_or_else(PoisonError::into_inner).append(&mut scratch.files);
        }
    }

    /// Opens and walks one waiting folder: beneath its parent's handle, or beneath the root's
    /// by its path when the parent's was not kept. One that cannot be opened (gone, a link now,
    /// unreadable) is skipped, as ripgrep skips it.
    fn child(&self, unit: Unit, scratch: &mut Scratch) -> Vec<Unit> {
        let Unit { parent, name } = unit;
        let rel = parent.rel.join(&name);
        let opened = match &parent.fd {
            Some(fd) => rustix::fs::openat(fd, name.as_os_str(), rules::folder_flags(), Mode::empty())
                .map_err(std::io::Error::from),
            None => self.root.open(&rel, rules::folder_flags(), Mode::empty()),
        };
        let Ok(fd) = opened else { return Vec::new() };
        let rules = parent.rules.clone();
        drop(parent);
        self.folder(fd, rel, rules, scratch)
    }

    /// Walks the folder `rel`, open as `fd`, under `inherited` rules: lists its files, returns
    /// its subfolders to walk.
    fn folder(
        &self,
        fd: OwnedFd,
        rel: PathBuf,
        inherited: Option<Arc<Rules>>,
        scratch: &mut Scratch,
    ) -> Vec<Unit> {
        // Asked on entering each folder too, so a small tree stops as soon as a big one.
        if !self.over() && (self.stop)() {
            self.end(&self.stopped);
            return Vec::new();
        }
        self.tell(&rel, fd.as_fd(), Watch::Walked);
        let Some(found) = self.entries(fd.as_fd(), scratch) else { return Vec::new() };
        let rules = rules::rules_of(fd.as_fd(), &rel, found, inherited, &self.rule_bytes, self);
        let mut subfolders: Vec<OsString> = Vec::new();
        let Scratch { names, entries, path, files, seen, .. } = scratch;
        for entry in entries.iter() {
            if self.check(seen) {
                return Vec::new();
            }
            let name = OsStr::from_bytes(&names[entry.start..entry.start + entry.len]);
            let kind = match entry.kind {
                FileType::Unknown => match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(_) => continue,
                },
                kind => kind,
            };
            if !matches!(kind, FileType::Directory | FileType::RegularFile) {
                // Links are never followed nor listed; FIFOs, sockets and devices are no files.
                continue;
            }
            path.clear();
            path.push(&rel);
            path.push(name);
            if self.root.fenced(path) {
                // One of the daemon's own folders or files: no session's search sees it.
                continue;
            }
            let is_dir = kind == FileType::Directory;
            let verdict = rules::verdict(rules.as_ref(), path, is_dir);
            if verdict.is_ignore() || (verdict.is_none() && name.as_bytes().starts_with(b".")) {
                continue;
            }
            if is_dir {
                subfolders.push(name.to_owned());
                continue;
            }
            // Dated beneath the folder's handle, and then what is listed is what is there now;
            // an undated file is listed as the folder's entry said (every later open of it
            // refuses links and anything but a regular file).
            let wanted = self.dated.is_none_or(|dated| {
                let under = &path.as_os_str().as_bytes()[self.skip.min(path.as_os_str().len())..];
                dated(Path::new(OsStr::from_bytes(under)))
            });
            let mtime_ns = if wanted {
                let Ok(stat) = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    continue;
                }
                Some(ns(stat.st_mtime, i64::try_from(stat.st_mtime_nsec).unwrap_or(0)))
            } else {
                None
            };
            let cost = path.as_os_str().len() + std::mem::size_of::<Listed>();
            let bytes = self.bytes.fetch_add(cost, Ordering::Relaxed) + cost;
            let count = self.files.fetch_add(1, Ordering::Relaxed) + 1;
            if count > MAX_LISTED_FILES || bytes > MAX_LISTED_BYTES {
                self.end(&self.truncated);
                return Vec::new();
            }
            files.push(Listed::new(path, mtime_ns));
        }
        if subfolders.is_empty() || self.over() {
            return Vec::new();
        }
        let keep = self.held.fetch_add(1, Ordering::Relaxed) < MAX_HELD_FOLDERS;
        if !keep {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
        let parent = Arc::new(Parent { fd: keep.then_some(fd), rel, rules, held: Arc::clone(&self.held) });
        subfolders.into_iter().map(|name| Unit { parent: Arc::clone(&parent), name }).collect()
    }

    /// Reads the entries of the folder `dir` into `scratch` (all but `.` and `..`), noting its
    /// ignore files; `None` when the walk ended meanwhile. An error partway keeps what was read.
    fn entries(&self, dir: BorrowedFd<'_>, scratch: &mut Scratch) -> Option<Found> {
        scratch.names.clear();
        scratch.entries.clear();
        if scratch.names.capacity() > MAX_HELD_BYTES / 16 {
            scratch.names.shrink_to(MAX_HELD_BYTES / 16);
        }
        let mut found = Found::default();
        let mut raw = RawDir::new(dir, scratch.buffer.spare_capacity_mut());
        while let Some(entry) = raw.next() {
            let Ok(entry) = entry else { break };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            found.note(name);
            if scratch.names.len() + name.len() > MAX_HELD_BYTES {
                self.end(&self.truncated);
                return None;
            }
            scratch.entries.push(Entry {
                start: scratch.names.len(),
                len: name.len(),
                kind: entry.file_type(),
            });
            scratch.names.extend_from_slice(name);
            if self.check(&mut scratch.seen) {
                return None;
            }
        }
        Some(found)
    }
}

#[cfg(test)]
mod tests;
