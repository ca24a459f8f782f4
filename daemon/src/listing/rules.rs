//! The ignore rules of a walk, as ripgrep applies them: each folder's `.ignore`, `.gitignore`
//! and `.git/info/exclude`, read beneath the folder's own handle and fed line by line to the
//! `ignore` crate's gitignore matcher, so that what a pattern means stays exactly ripgrep's.
//!
//! An ignore file is opened with `O_NOFOLLOW | O_NONBLOCK` beneath the handle of the folder
//! that holds it, and read only when the descriptor shows a regular file of at most
//! [`MAX_IGNORE_FILE_BYTES`] with at most [`MAX_IGNORE_FILE_LINES`] lines. Anything else — a
//! link (to `/dev/zero`, to a file outside the roots or inside them: git does not follow an
//! in-tree `.gitignore` link either), a FIFO, a device, a bigger file — gives no rules at all,
//! never a prefix of its rules (a cut that drops a later `!keep` line would hide what the
//! file means to show). `.git/info/exclude` is read only from a `.git` that is a folder,
//! opened beneath the folder's handle: a `.git` file (a worktree's `gitdir:` line) or a link is
//! never followed.
//!
//! Compiled rules cost far more than their text: measured, about 1.5 KiB a literal line and up
//! to 15 KiB a line with wildcards (globset compiles many of those one regex each), so one
//! 10,000-line file of wildcards took 150 MB and over a second to build. Each rule line is
//! therefore counted at an estimate ([`PLAIN_RULE_COST`] or [`PATTERN_RULE_COST`]) against the
//! walk's [`RuleBytes`] for as long as the rules are in force (the folder, or one beneath it,
//! is being walked): a file whose rules would take the walk past [`MAX_RULE_BYTES`] gives none.
//!
//! Precedence is the `ignore` crate's: for each kind of file the deepest folder with a match
//! decides, and a `.ignore` match beats a `.gitignore` match, which beats an `exclude` match;
//! within one file the last matching line wins (`!x` whitelists). The walk runs with
//! `require_git(false)`, under which the crate never stops git rules at a repository boundary,
//! and neither does this.

use std::ffi::CStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Largest ignore file read; a bigger one gives no rules.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;
/// Most lines of one ignore file; one with more gives no rules.
pub const MAX_IGNORE_FILE_LINES: usize = 10_000;
/// What a rule line without wildcards (a name, a path, `*.ext`) is counted as, compiled.
pub const PLAIN_RULE_COST: usize = 2 << 10;
/// What any other rule line is counted as, compiled.
pub const PATTERN_RULE_COST: usize = 16 << 10;
/// Most estimated bytes of compiled rules one walk holds at once (8,192 plain lines, or 1,024
/// with wildcards).
pub const MAX_RULE_BYTES: usize = 16 << 20;

/// Whether an unusable ignore file was logged at `info` already (later ones go to `debug`).
static TOLD: AtomicBool = AtomicBool::new(false);

/// The rules in force in one folder: its own ignore files' and, through `parent`, those of
/// every folder above it up to the root (never above), deepest first. A folder without ignore
/// files shares its parent's rules.
#[derive(Debug)]
pub struct Rules {
    /// `.ignore`, `.gitignore`, `.git/info/exclude`: first beats last.
    sets: [Gitignore; 3],
    parent: Option<Arc<Rules>>,
    /// Their estimated bytes, held in the walk's [`RuleBytes`] while they are in force.
    _held: Vec<Held>,
}

/// The estimated bytes of compiled rules one walk holds, against [`MAX_RULE_BYTES`], and
/// whether any rule it read whitelists (`!pattern`).
#[derive(Debug, Default)]
pub struct RuleBytes {
    held: AtomicUsize,
    whitelists: std::sync::atomic::AtomicBool,
}

/// Bytes of a walk's [`RuleBytes`] held by one file's rules; given back when dropped.
#[derive(Debug)]
struct Held {
    owner: Arc<RuleBytes>,
    bytes: usize,
}

impl RuleBytes {
    /// Holds `bytes` when they fit.
    fn hold(self: &Arc<Self>, bytes: usize) -> Option<Held> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&total| total <= MAX_RULE_BYTES)
            })
            .ok()?;
        Some(Held { owner: Arc::clone(self), bytes })
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether a rule the walk read whitelists: only then can a hidden entry be listed.
    pub fn whitelists(&self) -> bool {
        self.whitelists.load(Ordering::Acquire)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.owner.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Which ignore files a folder holds (known from its entries, or to be tried).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IgnoreFiles {
    /// `.ignore`.
    pub ignore: bool,
    /// `.gitignore`.
    pub gitignore: bool,
    /// `.git` (a folder, a file or anything else: only a folder is looked into).
    pub git: bool,
}

impl IgnoreFiles {
    /// Every one of them may be there (a folder whose entries are not read).
    pub const ALL: IgnoreFiles = IgnoreFiles { ignore: true, gitignore: true, git: true };

    /// As three bits (`.ignore` 1, `.gitignore` 2, `.git` 4), as the search index keeps it.
    pub fn bits(self) -> u8 {
        u8::from(self.ignore) | u8::from(self.gitignore) << 1 | u8::from(self.git) << 2
    }

    /// What [`bits`](Self::bits) gave.
    pub fn from_bits(bits: u8) -> Self {
        Self { ignore: bits & 1 != 0, gitignore: bits & 2 != 0, git: bits & 4 != 0 }
    }

    /// Notes the entry `name` of a folder.
    pub fn note(&mut self, name: &[u8]) {
        match name {
            b".ignore" => self.ignore = true,
            b".gitignore" => self.gitignore = true,
            b".git" => self.git = true,
            _ => {}
        }
    }
}

/// ripgrep's verdict on the entry `rel` (relative to the root) under `rules`: ignored,
/// whitelisted, or neither (then hidden entries are skipped).
pub fn verdict(rules: Option<&Arc<Rules>>, rel: &Path, is_dir: bool) -> Match<()> {
    let mut found = [Match::None, Match::None, Match::None];
    let mut level = rules;
    while let Some(rules) = level {
        for (slot, set) in found.iter_mut().zip(&rules.sets) {
            if slot.is_none() {
                *slot = set.matched(rel, is_dir).map(|_| ());
            }
        }
        if found.iter().all(|m| !m.is_none()) {
            break;
        }
        level = rules.parent.as_ref();
    }
    let [ignore, gitignore, exclude] = found;
    ignore.or(gitignore).or(exclude)
}

/// The flags every folder of a walk is opened with: readable (to list it), never a link,
/// never blocking.
pub fn folder_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC
}

/// Where a folder's `.git/info/exclude` is looked for: the `.git` and `info` folders, opened
/// beneath the folder's handle; `seen` is told of each before the walk looks into it (a warm
/// listing watches it).
pub trait GitSeen {
    /// `dir` (relative to the root: `rel`) is about to be looked into.
    fn seen(&self, rel: &Path, dir: BorrowedFd<'_>, info: bool);
}

/// The rules in force in the folder `rel` (relative to the root), open as `dir`: those of
/// the ignore files it holds (`found`) on top of `parent`'s, their estimated bytes held in
/// `bytes` (the walk's) while they are in force.
pub fn rules_of(
    dir: BorrowedFd<'_>,
    rel: &Path,
    found: IgnoreFiles,
    parent: Option<Arc<Rules>>,
    bytes: &Arc<RuleBytes>,
    git: &dyn GitSeen,
) -> Option<Arc<Rules>> {
    rules_read(dir, rel, found, parent, bytes, git).0
}

/// [`rules_of`], and a digest of what the folder's own ignore files gave: for each, whether it
/// was there, unusable (and why), or its bytes and whether its rules fitted the walk. Two walks
/// whose digests of a folder are equal read the same rules there (the search index, see
/// [`index`](super::index), re-judges a folder's entries only when it differs).
pub fn rules_read(
    dir: BorrowedFd<'_>,
    rel: &Path,
    found: IgnoreFiles,
    parent: Option<Arc<Rules>>,
    bytes: &Arc<RuleBytes>,
    git: &dyn GitSeen,
) -> (Option<Arc<Rules>>, u64) {
    let mut digest = blake3::Hasher::new();
    let mut held = Vec::new();
    let mut keep = |read: Option<(Gitignore, Held)>| match read {
        Some((set, bytes)) => {
            held.push(bytes);
            set
        }
        None => Gitignore::empty(),
    };
    let mut read = |name: &CStr, dir: BorrowedFd<'_>, shown: &dyn Fn() -> std::path::PathBuf| {
        digest.update(name.to_bytes_with_nul());
        read_rules(dir, name, rel, bytes, shown, &mut digest)
    };
    let ignore = found.ignore.then(|| read(c".ignore", dir, &|| rel.join(".ignore")));
    let ignore = keep(ignore.flatten());
    let gitignore = found.gitignore.then(|| read(c".gitignore", dir, &|| rel.join(".gitignore")));
    let gitignore = keep(gitignore.flatten());
    let exclude = keep(found.git.then(|| exclude(dir, rel, git, &mut read)).flatten());
    if [&ignore, &gitignore, &exclude].iter().any(|set| set.num_whitelists() > 0) {
        bytes.whitelists.store(true, Ordering::Release);
    }
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.finalize().as_bytes()[..8]);
    let digest = u64::from_le_bytes(first);
    if ignore.is_empty() && gitignore.is_empty() && exclude.is_empty() {
        return (parent, digest);
    }
    (Some(Arc::new(Rules { sets: [ignore, gitignore, exclude], parent, _held: held })), digest)
}

/// Reads one ignore file (see [`read_rules`]): its name, the folder holding it, how it is shown.
type ReadOne<'r> =
    dyn FnMut(&CStr, BorrowedFd<'_>, &dyn Fn() -> std::path::PathBuf) -> Option<(Gitignore, Held)> + 'r;

/// The rules of `rel`'s `.git/info/exclude`, when `.git` and `info` are folders.
fn exclude(
    dir: BorrowedFd<'_>,
    rel: &Path,
    seen: &dyn GitSeen,
    read: &mut ReadOne<'_>,
) -> Option<(Gitignore, Held)> {
    let git = rustix::fs::openat(dir, c".git", folder_flags(), Mode::empty()).ok()?;
    let git_rel = rel.join(".git");
    seen.seen(&git_rel, std::os::fd::AsFd::as_fd(&git), false);
    let info = rustix::fs::openat(&git, c"info", folder_flags(), Mode::empty()).ok()?;
    let info_rel = git_rel.join("info");
    seen.seen(&info_rel, std::os::fd::AsFd::as_fd(&info), true);
    read(c"exclude", std::os::fd::AsFd::as_fd(&info), &|| info_rel.join("exclude"))
}

/// The rules of the ignore file `name` in `dir`, matched against paths under the folder `rel`,
/// and their estimated bytes, held in `bytes`; `None` when it is absent, unusable (see the
/// module documentation), holds no rule, or its rules do not fit the walk's bytes. `shown`
/// names it (relative to the root) in the log; `digest` is told what was found.
fn read_rules(
    dir: BorrowedFd<'_>,
    name: &CStr,
    rel: &Path,
    bytes: &Arc<RuleBytes>,
    shown: &dyn Fn() -> std::path::PathBuf,
    digest: &mut blake3::Hasher,
) -> Option<(Gitignore, Held)> {
    let text = match read_bounded(dir, name) {
        Ok(Some(text)) => text,
        Ok(None) => {
            digest.update(b"absent");
            return None;
        }
        Err(why) => {
            digest.update(why.as_bytes());
            unusable(&shown(), why);
            return None;
        }
    };
    digest.update(&(text.len() as u64).to_le_bytes());
    digest.update(&text);
    let Some(cost) = cost(&text) else {
        unusable(&shown(), "has more than 10,000 lines");
        return None;
    };
    if cost == 0 {
        return None;
    }
    let Some(held) = bytes.hold(cost) else {
        digest.update(b"did not fit");
        unusable(&shown(), "holds more rules than one search takes at once (16 MiB of them, compiled)");
        return None;
    };
    // The root's own folder is `.`: the matcher then strips nothing from a path.
    let root = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let mut builder = GitignoreBuilder::new(root);
    for line in lines(&text).flatten() {
        // A bad glob is skipped, as the crate skips it.
        let _ = builder.add_line(None, line);
    }
    // A set that does not build gives no rules, as for the `ignore` crate.
    let set = builder.build().ok().filter(|set| !set.is_empty())?;
    Some((set, held))
}

/// Says (once at `info`, then at `debug`) that an ignore file gives no rules, and why.
fn unusable(shown: &Path, why: &str) {
    let file = shown.display();
    if TOLD.swap(true, Ordering::Relaxed) {
        tracing::debug!(%file, "an ignore file {why}: searches do not apply it");
    } else {
        tracing::info!(
            %file,
            "an ignore file {why}: searches do not apply it (only regular files of at most 1 MiB and 10,000 lines are read, never through a link; later ones are logged at debug)"
        );
    }
}

/// The bytes of the file `name` in `dir` when it is a regular file of at most
/// [`MAX_IGNORE_FILE_BYTES`]; `Ok(None)` when there is none; `Err` says why it is not read.
fn read_bounded(dir: BorrowedFd<'_>, name: &CStr) -> Result<Option<Vec<u8>>, &'static str> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
        Err(Errno::LOOP) => return Err("is a link"),
        Err(_) => return Err("cannot be opened"),
    };
    let file = File::from(fd);
    let meta = file.metadata().map_err(|_| "cannot be examined")?;
    if !meta.is_file() {
        return Err("is not a regular file");
    }
    if meta.len() > MAX_IGNORE_FILE_BYTES {
        return Err("is bigger than 1 MiB");
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_IGNORE_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|_| "cannot be read")?;
    if bytes.len() as u64 > MAX_IGNORE_FILE_BYTES {
        return Err("is bigger than 1 MiB");
    }
    Ok(Some(bytes))
}

/// The lines of an ignore file as `GitignoreBuilder::add` reads a file: lines end at `\n` (a
/// `\r` before it is dropped), a line that is not UTF-8 is `None` (skipped), a BOM opening the
/// first line is dropped.
fn lines(text: &[u8]) -> impl Iterator<Item = Option<&str>> {
    let mut rest = text;
    let mut first = true;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(end) => {
                let line = &rest[..end];
                (line.strip_suffix(b"\r").unwrap_or(line), &rest[end + 1..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let line = std::str::from_utf8(line)
            .ok()
            .map(|line| if first { line.trim_start_matches('\u{feff}') } else { line });
        first = false;
        Some(line)
    })
}

/// The estimated bytes the rules of an ignore file take compiled; `None` when it has more
/// than [`MAX_IGNORE_FILE_LINES`] lines.
fn cost(text: &[u8]) -> Option<usize> {
    let mut cost = 0;
    for (index, line) in lines(text).enumerate() {
        if index == MAX_IGNORE_FILE_LINES {
            return None;
        }
        cost += line.map_or(0, rule_cost);
    }
    Some(cost)
}

/// What one line is counted as once compiled: nothing for a blank line or a comment,
/// [`PLAIN_RULE_COST`] for a name or path without wildcards or a bare `*.ext`, else
/// [`PATTERN_RULE_COST`].
fn rule_cost(line: &str) -> usize {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return 0;
    }
    let glob = line.trim_start_matches('!').trim_start_matches('/').trim_end_matches('/');
    let wild = |text: &str| text.contains(['*', '?', '[', '{', '\\']);
    let plain_extension = glob.strip_prefix("*.").is_some_and(|ext| !wild(ext) && !ext.contains('/'));
    if !wild(glob) || plain_extension { PLAIN_RULE_COST } else { PATTERN_RULE_COST }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;

    struct Nobody;

    impl GitSeen for Nobody {
        fn seen(&self, _: &Path, _: BorrowedFd<'_>, _: bool) {}
    }

    fn open(path: &Path) -> std::os::fd::OwnedFd {
        rustix::fs::openat(rustix::fs::CWD, path, folder_flags(), Mode::empty()).unwrap()
    }

    /// The verdicts of `paths` under the rules of the folder `dir`.
    fn verdicts(dir: &Path, paths: &[(&str, bool)]) -> Vec<&'static str> {
        let fd = open(dir);
        let rules = rules_of(fd.as_fd(), Path::new(""), IgnoreFiles::ALL, None, &Arc::default(), &Nobody);
        paths
            .iter()
            .map(|(path, is_dir)| match verdict(rules.as_ref(), Path::new(path), *is_dir) {
                Match::None => "none",
                Match::Ignore(()) => "ignore",
                Match::Whitelist(()) => "whitelist",
            })
            .collect()
    }

    #[test]
    fn lines_are_read_as_the_ignore_crate_reads_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let body = b"\xEF\xBB\xBF*.log\r\n\xFF\xFE not utf-8\n[z\nbuild/\n!keep.log\nlast.txt\r";
        std::fs::write(dir.path().join(".gitignore"), body).unwrap();
        let paths = [
            ("a.log", false),
            ("keep.log", false),
            ("build", true),
            ("build", false),
            ("last.txt\r", false),
            ("last.txt", false),
            ("z", false),
        ];
        let ours = verdicts(dir.path(), &paths);
        let (theirs, _) = Gitignore::new(dir.path().join(".gitignore"));
        let theirs: Vec<_> = paths
            .iter()
            .map(|(path, is_dir)| match theirs.matched(dir.path().join(path), *is_dir) {
                Match::None => "none",
                Match::Ignore(_) => "ignore",
                Match::Whitelist(_) => "whitelist",
            })
            .collect();
        assert_eq!(ours, theirs);
        assert_eq!(ours, ["ignore", "whitelist", "ignore", "none", "ignore", "none", "none"]);
    }

    #[test]
    fn only_bounded_regular_files_beneath_the_handle_give_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::write(dir.path().join("outside"), "*.rs\n").unwrap();
        let rs = [("a.rs", false)];
        assert_eq!(verdicts(&root, &rs), ["none"]);
        // A link, in place of each ignore file: no rules.
        for name in [".gitignore", ".ignore", ".git/info/exclude"] {
            symlink(dir.path().join("outside"), root.join(name)).unwrap();
            assert_eq!(verdicts(&root, &rs), ["none"], "{name} as a link");
            std::fs::remove_file(root.join(name)).unwrap();
        }
        // Too big, too many lines: no rules, not even the first ones.
        std::fs::write(root.join(".gitignore"), format!("*.rs\n{}", "#\n".repeat(MAX_IGNORE_FILE_LINES)))
            .unwrap();
        assert_eq!(verdicts(&root, &rs), ["none"], "too many lines");
        let big = format!("*.rs\n{}", "x".repeat(MAX_IGNORE_FILE_BYTES as usize));
        std::fs::write(root.join(".gitignore"), big).unwrap();
        assert_eq!(verdicts(&root, &rs), ["none"], "too big");
        std::fs::write(root.join(".gitignore"), format!("*.rs\n{}", "#\n".repeat(MAX_IGNORE_FILE_LINES - 1)))
            .unwrap();
        assert_eq!(verdicts(&root, &rs), ["ignore"], "at the bound");
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        // A `.git` that is a link or a file is not looked into.
        std::fs::write(root.join(".git/info/exclude"), "*.rs\n").unwrap();
        assert_eq!(verdicts(&root, &rs), ["ignore"], "a real .git folder's exclude");
        std::fs::rename(root.join(".git"), dir.path().join("gitdir")).unwrap();
        symlink(dir.path().join("gitdir"), root.join(".git")).unwrap();
        assert_eq!(verdicts(&root, &rs), ["none"], ".git as a link");
        std::fs::remove_file(root.join(".git")).unwrap();
        std::fs::write(root.join(".git"), format!("gitdir: {}\n", dir.path().join("gitdir").display()))
            .unwrap();
        assert_eq!(verdicts(&root, &rs), ["none"], ".git as a file");
        // A FIFO neither blocks nor gives rules.
        std::fs::remove_file(root.join(".git")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join(".ignore"),
            rustix::fs::FileType::Fifo,
            Mode::from(0o644),
            0,
        )
        .unwrap();
        assert_eq!(verdicts(&root, &rs), ["none"], "a FIFO");
    }

    #[test]
    fn compiled_rules_are_counted_against_the_walk() {
        assert_eq!(
            ["", "# x", "target", "/a/b/", "!keep.txt", "*.rs", "*.r?", "src/*.rs", "**/x", "a[bc]", "*"]
                .map(rule_cost),
            [0, 0, 2048, 2048, 2048, 2048, 16384, 16384, 16384, 16384, 16384]
        );
        let wild = |n: usize| (0..n).map(|i| format!("**/w{i}*\n")).collect::<String>();
        assert_eq!(cost(wild(3).as_bytes()), Some(3 * PATTERN_RULE_COST));
        assert_eq!(cost("#\n".repeat(MAX_IGNORE_FILE_LINES + 1).as_bytes()), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        let bytes = Arc::new(RuleBytes::default());
        let rules_in = |rel: &str, parent: Option<Arc<Rules>>| {
            let fd = open(&dir.path().join(rel));
            rules_of(fd.as_fd(), Path::new(rel), IgnoreFiles::ALL, parent, &bytes, &Nobody)
        };
        // One file over the whole budget gives nothing.
        std::fs::write(dir.path().join(".gitignore"), wild(MAX_RULE_BYTES / PATTERN_RULE_COST + 1)).unwrap();
        assert!(rules_in("", None).is_none());
        assert_eq!(bytes.held(), 0);
        // Two that fit alone but not together: the deeper one gives nothing while the first is
        // in force, and everything comes back once they are done.
        let half = MAX_RULE_BYTES / PATTERN_RULE_COST * 2 / 3;
        std::fs::write(dir.path().join(".gitignore"), wild(half)).unwrap();
        std::fs::write(dir.path().join("a/.gitignore"), wild(half)).unwrap();
        let top = rules_in("", None).unwrap();
        assert_eq!(bytes.held(), half * PATTERN_RULE_COST);
        let below = rules_in("a", Some(Arc::clone(&top))).unwrap();
        assert!(Arc::ptr_eq(&top, &below), "a/.gitignore did not fit: the parent's rules are the folder's");
        drop((top, below));
        assert_eq!(bytes.held(), 0);
        assert!(rules_in("a", None).is_some());
    }
}
