//! What a walk would make of one path now: whether a name that came, went or changed in a
//! folder a kept listing walked is a file the listing holds, so the listing follows creates,
//! deletes and renames without walking again (see [`warm`](super::warm)).
//!
//! The judgment is the walk's own, entry by entry: the path's folder is opened beneath the
//! root's handle (never following a link), the entry is `fstatat`'d there without following
//! it, and a file not listed before is weighed against the ignore rules of every folder from
//! the root down to it, read as a walk reads them ([`rules::rules_of`]). A file the listing
//! holds that is still a regular file stays listed without its rules being read: a change of
//! any ignore file drops the listing instead.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use super::listed::ns;
use super::rules::{self, GitSeen, IgnoreFiles, RuleBytes, Rules};
use crate::provider::RootDir;

/// What a walk would make of a path now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    /// A regular file it lists, modified at this time (nanoseconds since the epoch).
    Listed(i64),
    /// Nothing it lists: absent, a link, a FIFO or a device, hidden or ignored (a file, or a
    /// folder: nothing beneath an ignored folder is listed).
    Unlisted,
    /// A folder it would enter: only a walk can tell what it holds.
    Folder,
    /// Its folder cannot be opened beneath the root now (gone, or swapped meanwhile), or the
    /// entry cannot be looked at: only a walk can tell.
    Unknown,
}

/// Judges paths beneath one root, keeping the rules it read and the last folder it opened for
/// the next path (the changes one answer takes in come sorted, mostly a few in each folder).
/// It holds one folder open at a time, however many folders the paths are in.
pub struct Judge<'a> {
    root: &'a RootDir,
    /// The folder of the last path judged, opened beneath the root (`None` inside: it could not
    /// be).
    folder: Option<(PathBuf, Option<OwnedFd>)>,
    rules: HashMap<PathBuf, Option<Arc<Rules>>>,
    /// The estimated bytes of the rules read, against the bound a walk has.
    rule_bytes: Arc<RuleBytes>,
}

/// A judgment watches nothing: `.git/info` is only read.
struct Unwatched;

impl GitSeen for Unwatched {
    fn seen(&self, _rel: &Path, _dir: BorrowedFd<'_>, _info: bool) {}
}

impl<'a> Judge<'a> {
    /// Judges paths beneath `root`.
    pub fn new(root: &'a RootDir) -> Self {
        Self { root, folder: None, rules: HashMap::new(), rule_bytes: Arc::default() }
    }

    /// What a walk would make of `rel` (relative to the root, in a folder the listing walked)
    /// now; `listed` says whether the listing holds it.
    pub fn judge(&mut self, rel: &Path, listed: bool) -> Now {
        let (Some(folder), Some(name)) = (rel.parent(), rel.file_name()) else { return Now::Unknown };
        if self.root.fenced(rel) {
            // One of the daemon's own folders or files: a walk skips it.
            return Now::Unlisted;
        }
        let Some(fd) = self.folder(folder) else { return Now::Unknown };
        let stat = match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Now::Unlisted,
            Err(_) => return Now::Unknown,
        };
        let mtime_ns = ns(stat.st_mtime, i64::try_from(stat.st_mtime_nsec).unwrap_or(0));
        let is_dir = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile if listed => return Now::Listed(mtime_ns),
            FileType::RegularFile => false,
            FileType::Directory => true,
            // Links are never followed nor listed; FIFOs, sockets and devices are no files.
            _ => return Now::Unlisted,
        };
        let Some(rules) = self.rules_in(folder) else { return Now::Unknown };
        let verdict = rules::verdict(rules.as_ref(), rel, is_dir);
        if verdict.is_ignore() || (verdict.is_none() && name.as_bytes().starts_with(b".")) {
            return Now::Unlisted;
        }
        if is_dir { Now::Folder } else { Now::Listed(mtime_ns) }
    }

    /// The folder `rel`, opened beneath the root (kept until a path in another folder comes).
    fn folder(&mut self, rel: &Path) -> Option<BorrowedFd<'_>> {
        if self.folder.as_ref().is_none_or(|(open, _)| open != rel) {
            let fd = self.root.open(rel, rules::folder_flags(), Mode::empty()).ok();
            self.folder = Some((rel.to_path_buf(), fd));
        }
        self.folder.as_ref()?.1.as_ref().map(AsFd::as_fd)
    }

    /// The rules in force in the folder `rel`: those of every folder from the root down to it,
    /// each read beneath its own handle (the first folder not read yet opened beneath the root,
    /// each one below it beneath its parent's handle). `None` when one cannot be opened.
    fn rules_in(&mut self, rel: &Path) -> Option<Option<Arc<Rules>>> {
        let mut inherited = None;
        let mut parent: Option<OwnedFd> = None;
        let mut ancestors: Vec<&Path> = rel.ancestors().collect();
        ancestors.reverse();
        for here in ancestors {
            if let Some(known) = self.rules.get(here) {
                inherited = known.clone();
                continue;
            }
            let fd = match (parent.take(), here.file_name()) {
                (Some(parent), Some(name)) => {
                    rustix::fs::openat(&parent, name, rules::folder_flags(), Mode::empty()).ok()?
                }
                _ => self.root.open(here, rules::folder_flags(), Mode::empty()).ok()?,
            };
            let rules =
                rules::rules_of(fd.as_fd(), here, IgnoreFiles::ALL, inherited, &self.rule_bytes, &Unwatched);
            self.rules.insert(here.to_path_buf(), rules.clone());
            inherited = rules;
            parent = Some(fd);
        }
        Some(inherited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn judges_a_path_as_the_walk_lists_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("a/target")).unwrap();
        std::fs::create_dir_all(root.join("a/src")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(root.join("a/.ignore"), "target/\n!keep.log\n").unwrap();
        for name in ["a/b/x.rs", "a/b/y.log", "a/keep.log", "a/.hidden", "outside"] {
            std::fs::write(root.join(name), "x").unwrap();
        }
        std::fs::write(base.join("secret.rs"), "s").unwrap();
        symlink(base.join("secret.rs"), root.join("a/link.rs")).unwrap();
        let handle = RootDir::new(&root, None).unwrap();
        let mut judge = Judge::new(&handle);
        let mut now = |rel: &str, listed: bool| judge.judge(Path::new(rel), listed);
        assert!(matches!(now("a/b/x.rs", false), Now::Listed(t) if t > 0));
        assert_eq!(now("a/b/y.log", false), Now::Unlisted, "the root's rule applies below");
        assert!(matches!(now("a/keep.log", false), Now::Listed(_)), "a deeper whitelist wins");
        assert_eq!(now("a/.hidden", false), Now::Unlisted, "hidden");
        assert_eq!(now("a/link.rs", false), Now::Unlisted, "a link is never listed");
        assert_eq!(now("a/link.rs", true), Now::Unlisted, "nor kept once it is one");
        assert_eq!(now("a/gone.rs", true), Now::Unlisted);
        assert_eq!(now("a/target", false), Now::Unlisted, "an ignored folder holds nothing listed");
        assert_eq!(now("a/src", false), Now::Folder);
        assert_eq!(now("missing/x.rs", false), Now::Unknown);
        // A folder swapped for a link is never looked into.
        std::fs::rename(root.join("a/b"), root.join("a/b.real")).unwrap();
        symlink(base.clone(), root.join("a/b")).unwrap();
        let mut judge = Judge::new(&handle);
        assert_eq!(judge.judge(Path::new("a/b/secret.rs"), false), Now::Unknown);
    }
}
