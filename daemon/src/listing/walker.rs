//! The walk behind a search's listing, done beneath the root's handle: every folder is opened
//! with `openat(O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)` relative to its parent's descriptor
//! (the root's handle at the top), its entries are read from that descriptor (`getdents`),
//! its files are `fstatat`'d relative to it without following links, and its ignore files
//! are read beneath it (see [`super::rules`]). Nothing is ever resolved by name from
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
//!
//! A walk of a listing kept warm also records each folder it reads ([`Folder`]: its stat data,
//! ignore files and rules), which the search index keeps on disk. A walk given such a listing
//! as it was before ([`Section`]) validates its folders instead of listing anew: a folder whose
//! stat data and rules are as recorded has the same entries, so its files and subfolders are
//! taken from the record without reading it; any other folder is read, its entries judged, and
//! its files matched with the record by name; a change of rules anywhere has every folder
//! beneath it read and judged again. Each file found again is given with its entry in the
//! record, whose stat data the caller compares (see [`index`](super::index)).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, Mode, RawDir};

use super::index::section::Section;
use super::listed::{Listed, ns};
use super::rules::{self, GitSeen, IgnoreFiles, RuleBytes, Rules};
use super::stamp::Stamp;
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
    /// The folders it read, when it was asked to record them (see [`walk_with`]).
    pub folders: Vec<Folder>,
    /// The digest of the rules of the folders on the way from the root to the walked one.
    pub way: u64,
    /// With a listing as it was before: for each file, the index of its entry there (`None`: it
    /// came since).
    pub kept: Vec<Option<u32>>,
}

/// A folder a walk read, as the search index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// Relative to the root.
    pub rel: Box<Path>,
    /// Its stat data when the walk opened it; `None` when it had changed within the racy window
    /// (or could not be looked at): a validation then reads its entries again.
    pub stamp: Option<Stamp>,
    /// Which ignore files its entries held.
    pub found: IgnoreFiles,
    /// The digest of its own ignore files' rules.
    pub rules: u64,
}

/// A file of a listing as it was before, found again by a validation.
struct Kept {
    /// Its place in the listing before.
    rank: u32,
    /// Its entry there.
    entry: u32,
    file: Listed,
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
    /// Whether the rules in force in it differ from the listing's before: its subfolders are
    /// read and judged anew.
    rejudge: bool,
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
    /// The folder in the listing before, when it was there.
    known: Option<u32>,
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
    /// The listing before (a validation), and what was found again of it.
    prior: Option<&'a Section>,
    kept: Mutex<Vec<Kept>>,
    /// Whether folders are recorded, and those recorded.
    record: bool,
    folders: Mutex<Vec<Folder>>,
    /// When the walk began (folders changed within the racy window before it are not trusted).
    began: i64,
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
    kept: Vec<Kept>,
    folders: Vec<Folder>,
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
            kept: Vec::new(),
            folders: Vec::new(),
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
    walk_with(root, rel, stop, hook, dated, (false, None))
}

/// [`walk`], recording each folder read when `record` (see [`Folder`]), and validating
/// `prior`, the listing of `rel` as it was before, when given (see the module documentation).
pub fn walk_with<'a>(
    root: &'a RootDir,
    rel: &Path,
    stop: &'a (dyn Fn() -> bool + Sync),
    hook: Option<&'a FolderHook>,
    dated: Option<&'a Dated<'a>>,
    (record, prior): (bool, Option<&'a Section>),
) -> std::io::Result<Walked> {
    let skip = match rel.as_os_str().len() {
        0 => 0,
        len => len + 1,
    };
    let prior = prior.filter(|prior| prior.rel == rel && !prior.folders.is_empty());
    let walk = Walk {
        root,
        stop,
        hook,
        dated,
        skip,
        stack: Mutex::default(),
        ready: Condvar::new(),
        found: Mutex::default(),
        prior,
        kept: Mutex::default(),
        record: record || prior.is_some(),
        folders: Mutex::default(),
        began: super::stamp::now(),
        files: AtomicUsize::new(0),
        bytes: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
        held: Arc::default(),
        rule_bytes: Arc::default(),
        truncated: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
    };
    let (fd, rules, way) = walk.open_start(rel)?;
    let mut scratch = Scratch::new();
    let known = prior.map(|_| 0);
    let rejudge = prior.is_none_or(|prior| prior.way != way);
    let children = walk.folder(fd, rel.to_path_buf(), (rules, rejudge), known, &mut scratch);
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
    let Walk { found, truncated, stopped, rule_bytes, kept, folders, .. } = walk;
    let mut files = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    files.sort_unstable_by(|a, b| path_order(&a.rel, &b.rel));
    let (files, kept) = match prior {
        Some(prior) => in_order(prior, kept.into_inner().unwrap_or_else(PoisonError::into_inner), files),
        None => (files, Vec::new()),
    };
    Ok(Walked {
        files,
        truncated: truncated.into_inner(),
        stopped: stopped.into_inner(),
        whitelists: rule_bytes.whitelists(),
        folders: folders.into_inner().unwrap_or_else(PoisonError::into_inner),
        way,
        kept,
    })
}

/// The files of a validation in order: those found again (`kept`) by their place in the
/// listing before, merged with those that came (`new`, sorted); for each, its entry before.
fn in_order(prior: &Section, kept: Vec<Kept>, mut new: Vec<Listed>) -> (Vec<Listed>, Vec<Option<u32>>) {
    let mut slots: Vec<Option<Kept>> = std::iter::repeat_with(|| None).take(prior.len()).collect();
    for found in kept {
        match slots.get_mut(found.rank as usize) {
            Some(slot @ None) => *slot = Some(found),
            // Two files of one place: the record was not what it should be; sorted below.
            _ => new.push(found.file),
        }
    }
    let total = new.len() + slots.iter().flatten().count();
    let (mut files, mut from) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let mut new = new.into_iter().peekable();
    for found in slots.into_iter().flatten() {
        while let Some(came) = new.next_if(|came| path_order(&came.rel, &found.file.rel).is_lt()) {
            files.push(came);
            from.push(None);
        }
        files.push(found.file);
        from.push(Some(found.entry));
    }
    for came in new {
        files.push(came);
        from.push(None);
    }
    // The record's places are checked, not trusted: a listing out of order would mislead the
    // binary searches of the warm listing.
    if !files.windows(2).all(|pair| path_order(&pair[0].rel, &pair[1].rel).is_lt()) {
        let mut paired: Vec<(Listed, Option<u32>)> = files.into_iter().zip(from).collect();
        paired.sort_unstable_by(|a, b| path_order(&a.0.rel, &b.0.rel));
        paired.dedup_by(|a, b| a.0.rel == b.0.rel);
        return paired.into_iter().unzip();
    }
    (files, from)
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
    /// reading the ignore files of each folder on the way; its handle, the rules in force in
    /// it, and the digest of the rules read on the way.
    fn open_start(&self, rel: &Path) -> std::io::Result<(OwnedFd, Option<Arc<Rules>>, u64)> {
        let mut fd = rustix::fs::openat(self.root.fd(), c".", rules::folder_flags(), Mode::empty())?;
        let mut rules = None;
        let mut here = PathBuf::new();
        let mut way = 0u64;
        for component in rel.components() {
            let Component::Normal(name) = component else {
                return Err(rustix::io::Errno::XDEV.into());
            };
            self.tell(&here, fd.as_fd(), Watch::OnTheWay(name));
            let (read, digest) =
                rules::rules_read(fd.as_fd(), &here, IgnoreFiles::ALL, rules, &self.rule_bytes, self);
            rules = read;
            way = way.rotate_left(17) ^ digest;
            fd = rustix::fs::openat(&fd, name, rules::folder_flags(), Mode::empty())?;
            here.push(name);
        }
        Ok((fd, rules, way))
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

    /// Hands the thread's files (and folders) over.
    fn keep(&self, scratch: &mut Scratch) {
        if !scratch.files.is_empty() {
            self.found.lock().unwrap_or_else(PoisonError::into_inner).append(&mut scratch.files);
        }
        if !scratch.kept.is_empty() {
            self.kept.lock().unwrap_or_else(PoisonError::into_inner).append(&mut scratch.kept);
        }
        if !scratch.folders.is_empty() {
            self.folders.lock().unwrap_or_else(PoisonError::into_inner).append(&mut scratch.folders);
        }
    }

    /// Opens and walks one waiting folder: beneath its parent's handle, or beneath the root's
    /// by its path when the parent's was not kept. One that cannot be opened (gone, a link now,
    /// unreadable) is skipped, as ripgrep skips it.
    fn child(&self, unit: Unit, scratch: &mut Scratch) -> Vec<Unit> {
        let Unit { parent, name, known } = unit;
        let rel = parent.rel.join(&name);
        let opened = match &parent.fd {
            Some(fd) => rustix::fs::openat(fd, name.as_os_str(), rules::folder_flags(), Mode::empty())
                .map_err(std::io::Error::from),
            None => self.root.open(&rel, rules::folder_flags(), Mode::empty()),
        };
        let Ok(fd) = opened else { return Vec::new() };
        let rules = (parent.rules.clone(), parent.rejudge);
        drop(parent);
        self.folder(fd, rel, rules, known, scratch)
    }

    /// Walks the folder `rel`, open as `fd`, under `inherited` rules (and whether they differ
    /// from the listing's before): lists its files, returns its subfolders to walk. `known` is
    /// the folder in the listing before, when it was there (see the module documentation).
    fn folder(
        &self,
        fd: OwnedFd,
        rel: PathBuf,
        (inherited, rejudge): (Option<Arc<Rules>>, bool),
        known: Option<u32>,
        scratch: &mut Scratch,
    ) -> Vec<Unit> {
        // Asked on entering each folder too, so a small tree stops as soon as a big one.
        if !self.over() && (self.stop)() {
            self.end(&self.stopped);
            return Vec::new();
        }
        self.tell(&rel, fd.as_fd(), Watch::Walked);
        // Looked at once it is watched: a change from now on is an event.
        let stamp = if self.record { rustix::fs::fstat(&fd).ok().map(|stat| Stamp::of(&stat)) } else { None };
        let before = known.and_then(|id| Some((id, self.prior?.folder(id)?)));
        let same =
            !rejudge && before.is_some_and(|(_, folder)| folder.stamp.is_some() && folder.stamp == stamp);
        let found = match before {
            Some((_, folder)) if same => folder.found,
            _ => match self.entries(fd.as_fd(), scratch) {
                Some(found) => found,
                None => return Vec::new(),
            },
        };
        let (rules, digest) = rules::rules_read(fd.as_fd(), &rel, found, inherited, &self.rule_bytes, self);
        let rejudge = rejudge || before.is_none_or(|(_, folder)| folder.rules != digest);
        if self.record {
            let stamp = stamp.filter(|stamp| stamp.settled(self.began));
            scratch.folders.push(Folder { rel: rel.as_path().into(), stamp, found, rules: digest });
        }
        let known = before.map(|(id, _)| id);
        if same {
            if let (Some(id), false) = (known, rejudge) {
                if self.known_files(&rel, id, scratch).is_none() {
                    return Vec::new();
                }
                return self.known_folders(fd, rel, rules, id);
            }
            // Its rules changed: read it.
            if self.entries(fd.as_fd(), scratch).is_none() {
                return Vec::new();
            }
        }
        let mut subfolders: Vec<(OsString, Option<u32>)> = Vec::new();
        let Scratch { names, entries, path, files, kept, seen, .. } = scratch;
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
            let prior = self.prior.zip(known);
            if is_dir {
                subfolders
                    .push((name.to_owned(), prior.and_then(|(prior, id)| prior.child(id, name.as_bytes()))));
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
            if !self.count(path) {
                return Vec::new();
            }
            let file = Listed::new(path, mtime_ns);
            // A file of the listing before keeps its place there, and its entry.
            let entry = prior.and_then(|(prior, id)| {
                let index = prior.file_named(id, name.as_bytes())?;
                Some((prior.file(index)?.rank, index))
            });
            match entry {
                Some((rank, entry)) => kept.push(Kept { rank, entry, file }),
                None => files.push(file),
            }
        }
        if subfolders.is_empty() || self.over() {
            return Vec::new();
        }
        self.units(fd, rel, (rules, rejudge), subfolders)
    }

    /// Counts one more file at `path` against the walk's bounds; whether it fits (else the walk
    /// ends, truncated).
    fn count(&self, path: &Path) -> bool {
        let cost = path.as_os_str().len() + std::mem::size_of::<Listed>();
        let bytes = self.bytes.fetch_add(cost, Ordering::Relaxed) + cost;
        let count = self.files.fetch_add(1, Ordering::Relaxed) + 1;
        if count > MAX_LISTED_FILES || bytes > MAX_LISTED_BYTES {
            self.end(&self.truncated);
            return false;
        }
        true
    }

    /// The subfolders of the folder `rel` (open as `fd`, under `rules`) waiting to be walked,
    /// each with its folder in the listing before.
    fn units(
        &self,
        fd: OwnedFd,
        rel: PathBuf,
        (rules, rejudge): (Option<Arc<Rules>>, bool),
        subfolders: Vec<(OsString, Option<u32>)>,
    ) -> Vec<Unit> {
        let keep = self.held.fetch_add(1, Ordering::Relaxed) < MAX_HELD_FOLDERS;
        if !keep {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
        let parent =
            Arc::new(Parent { fd: keep.then_some(fd), rel, rules, rejudge, held: Arc::clone(&self.held) });
        subfolders
            .into_iter()
            .map(|(name, known)| Unit { parent: Arc::clone(&parent), name, known })
            .collect()
    }

    /// Lists the files of the folder `rel` as the listing before held them (its folder `id`,
    /// whose entries and rules are as they were), undated; `None` when the walk ended.
    fn known_files(&self, rel: &Path, id: u32, scratch: &mut Scratch) -> Option<()> {
        let prior = self.prior?;
        let Scratch { path, kept, seen, .. } = scratch;
        let (mut count, mut bytes) = (0, 0);
        for entry in prior.files_of(id) {
            if self.check(seen) {
                return None;
            }
            let Some(before) = prior.file(entry) else { continue };
            path.clear();
            path.push(rel);
            path.push(OsStr::from_bytes(prior.file_name(entry)));
            if self.root.fenced(path) {
                continue;
            }
            count += 1;
            bytes += path.as_os_str().len() + std::mem::size_of::<Listed>();
            kept.push(Kept { rank: before.rank, entry, file: Listed::new(path, None) });
        }
        // Counted once for the folder (two threads counting each file fought over the counters).
        let bytes = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let count = self.files.fetch_add(count, Ordering::Relaxed) + count;
        if count > MAX_LISTED_FILES || bytes > MAX_LISTED_BYTES {
            self.end(&self.truncated);
            return None;
        }
        Some(())
    }

    /// The subfolders of the folder `rel` (open as `fd`) as the listing before held them (its
    /// folder `id`, whose entries and rules are as they were).
    fn known_folders(&self, fd: OwnedFd, rel: PathBuf, rules: Option<Arc<Rules>>, id: u32) -> Vec<Unit> {
        let Some(prior) = self.prior else { return Vec::new() };
        let subfolders: Vec<(OsString, Option<u32>)> = prior
            .children(id)
            .map(|child| (OsStr::from_bytes(prior.folder_name(child)).to_owned(), Some(child)))
            .collect();
        if subfolders.is_empty() || self.over() {
            return Vec::new();
        }
        self.units(fd, rel, (rules, false), subfolders)
    }

    /// Reads the entries of the folder `dir` into `scratch` (all but `.` and `..`), noting its
    /// ignore files; `None` when the walk ended meanwhile. An error partway keeps what was read.
    fn entries(&self, dir: BorrowedFd<'_>, scratch: &mut Scratch) -> Option<IgnoreFiles> {
        scratch.names.clear();
        scratch.entries.clear();
        if scratch.names.capacity() > MAX_HELD_BYTES / 16 {
            scratch.names.shrink_to(MAX_HELD_BYTES / 16);
        }
        let mut found = IgnoreFiles::default();
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
